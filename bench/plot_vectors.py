#!/usr/bin/env python3
"""Recall@10 against queries per second (batch) for the nearest-vector methods, as
ann-benchmarks plots them: reads the RESULT lines of bench/vector_bench and
bench/torch_knn_baseline.py (one JSON object per line, the prefix removed) and writes a PNG.

  plot_vectors.py RESULTS.jsonl OUT.png "title"
Exact methods (genie exact, FAISS IndexFlatL2, PyTorch cdist + topk) sit at recall 1.
"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
series = {}
for r in rows:
    name = r["method"]
    recall = r["recall"] if r.get("recall") is not None else 1.0
    series.setdefault(name, []).append((recall, r["batch_qps"], r["params"]))
plt.figure(figsize=(8, 5.5))
for name, pts in sorted(series.items()):
    pts.sort(key=lambda p: p[0])
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    style = "o-" if len(pts) > 1 else "s"
    plt.plot(xs, ys, style, label=name)
plt.yscale("log")
plt.xlabel("recall@10")
plt.ylabel("queries per second (batch of all queries)")
plt.title(sys.argv[3] if len(sys.argv) > 3 else "")
plt.grid(True, which="both", alpha=0.3)
plt.legend(fontsize=8, loc="lower left")
plt.tight_layout()
plt.savefig(sys.argv[2], dpi=110)

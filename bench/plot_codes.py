#!/usr/bin/env python3
"""Recall@10 against queries per second (a batch of 1,024 queries) for binary
codes, one panel per data set of bench/run-ewh-bench: the exact Hamming scans
(genie GPU and CPU engines, recall 1, dashed lines) and Error Weighted
Hashing, one line per parameter set (m functions of h bits, e errors) and
engine through its candidate counts (against the candidate count where every
point has recall 1).  Needs matplotlib.

  plot_codes.py OUT.png TITLE random.jsonl fmnist-binary.jsonl fmnist-simhash.jsonl
"""
import json
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, title, files = sys.argv[1], sys.argv[2], sys.argv[3:]
names = {"random": "4M random 512-bit codes, 10 planted neighbours a query",
         "fmnist-binary": "Fashion-MNIST, 784 bits (pixel > 127)",
         "fmnist-simhash": "Fashion-MNIST, 256-bit SimHash"}
fig, axes = plt.subplots(1, len(files), figsize=(6 * len(files), 5), squeeze=False)
for ax, path in zip(axes[0], files):
    key = re.sub(r"^.*ewh-|\.jsonl$", "", path)
    rows = [json.loads(line) for line in open(path) if line.strip()]
    # where every method finds every neighbour, recall says nothing: plot
    # against the candidate count instead
    by_candidates = min(r["recall"] for r in rows) >= 0.999
    series = {}
    for r in rows:
        if r["params"] == "exact":
            # an exact scan: a horizontal line at its rate
            ax.axhline(r["batch_qps"], linestyle="--", linewidth=1,
                       color="black" if "gpu" in r["method"] else "grey", label=r["method"] + " (recall 1)")
            continue
        label = r["method"] + " " + re.sub(r" candidates=\d+", "", r["params"])
        x = int(re.search(r"candidates=(\d+)", r["params"]).group(1)) if by_candidates else r["recall"]
        series.setdefault(label, []).append((x, r["batch_qps"]))
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, markersize=3,
                linestyle="-" if "gpu" in label else ":")
    ax.set_yscale("log")
    if by_candidates:
        ax.set_xscale("log")
        ax.set_xlabel("EWH candidates re-ranked (recall@10 is 1.000 for every point)")
    else:
        ax.set_xlabel("recall@10")
    ax.set_ylabel("queries per second")
    ax.set_title(names.get(key, key), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="lower left")
fig.suptitle(title)
fig.tight_layout()
fig.savefig(out, dpi=110)

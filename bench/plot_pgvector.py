#!/usr/bin/env python3
"""Recall@10 against statements (queries) a second for bench/pgvector-bench's output:
one panel for single statements, one for batches, a line per method (the first run
in the file).  /usr/bin/python3 has matplotlib (Debian's python3-matplotlib).

  plot_pgvector.py bench/pgvector-2core.txt OUT.png "title"
"""
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

series = {"single": {}, "batch": {}}
seen = set()
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split("|")]
    if parts[0] not in series:
        continue
    kind, method, setting = parts[0], parts[1], parts[2]
    if (kind, method, setting) in seen:
        break  # the second run starts: plot the first
    seen.add((kind, method, setting))
    rate = float(parts[4].split()[0])
    recall = float(parts[-1].split()[1])
    series[kind].setdefault(method.replace(", LATERAL", ""), []).append((recall, rate, setting))
fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=False)
for ax, kind, ylabel in ((axes[0], "single", "statements a second (one per query)"),
                         (axes[1], "batch", "queries a second (all in one statement)")):
    for method, pts in sorted(series[kind].items()):
        pts.sort(key=lambda p: p[0])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if len(pts) > 1 else "s", label=method)
    ax.set_yscale("log")
    ax.set_xlabel("recall@10")
    ax.set_ylabel(ylabel)
    ax.set_title(kind)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(sys.argv[3] if len(sys.argv) > 3 else "")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)

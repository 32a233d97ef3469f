#!/usr/bin/env python3
"""Recall@10 against queries a second for bench/permutation_bench's output (the
first run of each data set in the file): a panel per data set, a line per
(engine, m) over the fractions f, and the exact scans of both engines as
points at recall 1.  /usr/bin/python3 has matplotlib (python3-matplotlib).

  plot_permutation.py bench/permutation-h200.txt OUT.png "title"
"""
import re
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

runs = {}  # data set -> {"exact": {...}, "rows": [...]}
current = None
for line in open(sys.argv[1]):
    m = re.match(r"^(words|fmnist|packages): (\d+) objects", line)
    if m:
        current = m.group(1) if m.group(1) not in runs else None
        if current:
            runs[current] = {"exact": {}, "rows": []}
        continue
    if current is None:
        continue
    m = re.match(r"^exact scan: CPU ([\d.]+) ms/q in a batch .*GPU ([-\d.]+) ms/q", line)
    if m:
        runs[current]["exact"] = {"cpu": float(m.group(1)), "gpu": float(m.group(2))}
        continue
    parts = line.split()
    if len(parts) == 13 and parts[0].isdigit():
        m_, f, cpu_ms, recall, gpu_ms = int(parts[0]), parts[1], float(parts[6]), float(parts[9]), float(parts[11])
        runs[current]["rows"].append((m_, f, cpu_ms, recall, gpu_ms))

names = [n for n in ("words", "packages", "fmnist") if n in runs]
fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 5))
if len(names) == 1:
    axes = [axes]
for ax, name in zip(axes, names):
    r = runs[name]
    for engine, col in (("cpu", 2), ("gpu", 4)):
        for m_ in sorted({row[0] for row in r["rows"]}):
            pts = sorted((row[3], 1000.0 / row[col]) for row in r["rows"] if row[0] == m_ and row[col] > 0)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        linestyle="-" if engine == "gpu" else "--", label=f"permutation, {engine}, m={m_}")
        ms = r["exact"].get(engine, -1)
        if ms > 0:
            ax.plot([1.0], [1000.0 / ms], marker="*", markersize=14, linestyle="none", label=f"exact scan, {engine}")
    ax.set_yscale("log")
    ax.set_xlabel("recall@10")
    ax.set_ylabel("queries a second, a batch")
    ax.set_title(name)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
fig.suptitle(sys.argv[3] if len(sys.argv) > 3 else "")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)

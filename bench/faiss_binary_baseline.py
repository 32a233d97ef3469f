#!/usr/bin/python3
"""FAISS IndexBinaryFlat (exhaustive Hamming search on the CPU, the baseline
of issue 31) on the shape of bench/code_bench.cpp: N random codes of BITS
bits and queries that are stored codes with 1 to 40 bits flipped, k = 10.
Prints the median of RUNS calls for a single query and for a batch, in the
units code_bench prints, and checks FAISS's distances against numpy on a
sample.  faiss.omp_set_num_threads(THREADS) when given (default: every core).
  faiss_binary_baseline.py [N] [BITS] [BATCH] [RUNS] [THREADS]"""
import sys
import time

import faiss
import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
bits = int(sys.argv[2]) if len(sys.argv) > 2 else 512
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 256
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
if len(sys.argv) > 5:
    faiss.omp_set_num_threads(int(sys.argv[5]))
k = 10
rng = np.random.default_rng(20261126)
codes = rng.integers(0, 256, size=(n, bits // 8), dtype=np.uint8)
queries = codes[rng.integers(0, n, size=batch)].copy()
for q in range(batch):
    for bit in rng.integers(0, bits, size=1 + rng.integers(0, 40)):
        queries[q, bit // 8] ^= np.uint8(0x80 >> (bit % 8))
index = faiss.IndexBinaryFlat(bits)
index.add(codes)


def timed(x):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        d, i = index.search(x, k)
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)[len(times) // 2], d


single_ms, _ = timed(queries[:1])
batch_ms, d = timed(queries)
popcount = np.unpackbits(np.bitwise_xor(codes[None, :, :], queries[:3, None, :]), axis=2).sum(axis=2)
want = np.sort(popcount, axis=1)[:, :k]
ok = np.array_equal(want, d[:3])
print(f"== faiss IndexBinaryFlat {faiss.__version__}: {n} codes of {bits} bits, k {k}, median of {runs}, "
      f"{faiss.omp_get_max_threads()} threads")
print(f"faiss        1 {single_ms:12.3f} ms/call {single_ms:12.5f} ms/query {1000 / single_ms:14.0f} queries/s")
print(f"faiss {batch:7d} {batch_ms:12.3f} ms/call {batch_ms / batch:12.5f} ms/query {batch * 1000 / batch_ms:14.0f} queries/s")
print("distances = numpy on a sample" if ok else "DISTANCES DIFFER from numpy")

#!/usr/bin/env python3
"""Writes binary codes of Fashion-MNIST images as a PostgreSQL text COPY file of
(id int4, code bit(n)) rows, for bench/run-code-bench, or with --packed as
packed rows (ceil(n / 8) bytes each, first bit in the high-order bit, the
layout of bit(n)) for bench/ewh_bench: --binary gives 784-bit
codes (pixel > 127), --simhash B gives B-bit SimHash codes (the signs of B
fixed random Gaussian projections of the pixel vector, --seed).  Ids count
from 1.  Needs numpy.

  code_copy.py --idx FILE (--binary | --simhash B) [--limit N] [--seed S] [--packed] OUT
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idx", required=True)
    ap.add_argument("--binary", action="store_true")
    ap.add_argument("--simhash", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--packed", action="store_true")
    ap.add_argument("out")
    a = ap.parse_args()
    with open(a.idx, "rb") as f:
        h = np.frombuffer(f.read(16), dtype=">u4")
        X = np.frombuffer(f.read(), dtype=np.uint8).reshape(int(h[1]), int(h[2]) * int(h[3]))
    if a.limit:
        X = X[:a.limit]
    if a.simhash:
        # the same projections for the table and the queries: the seed fixes them
        P = np.random.default_rng(a.seed).standard_normal((X.shape[1], a.simhash)).astype(np.float32)
        bits = (X.astype(np.float32) @ P) > 0
    else:
        bits = X > 127
    if a.packed:
        with open(a.out, "wb") as f:
            f.write(np.packbits(bits, axis=1).tobytes())
        return
    chars = np.where(bits, ord("1"), ord("0")).astype(np.uint8)
    with open(a.out, "wb") as f:
        for i, row in enumerate(chars, 1):
            f.write(b"%d\t" % i + row.tobytes() + b"\n")


if __name__ == "__main__":
    main()

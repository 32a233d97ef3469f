#!/usr/bin/env python3
"""Writes vectors as a PostgreSQL binary COPY file of (id int4, v real[]) rows, for
bench/run-vector-bench: much faster to load than text.  Sources: an ungzipped idx3-ubyte file
(Fashion-MNIST) or a row-major float32 file (bench/gen_lsh_workload.py --vectors) of --dim
columns, or --random N (uniform vectors, for the latency runs at scale).

  vector_copy.py --idx FILE OUT.copy | --f32 FILE --dim D OUT.copy | --random N --dim D OUT.copy
      [--limit N]   (first N rows only)
Ids count from 1.  Needs numpy.
"""
import argparse
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idx")
    ap.add_argument("--f32")
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("out")
    a = ap.parse_args()
    if a.idx:
        with open(a.idx, "rb") as f:
            h = np.frombuffer(f.read(16), dtype=">u4")
            X = np.frombuffer(f.read(), dtype=np.uint8).reshape(int(h[1]), int(h[2]) * int(h[3]))
    elif a.f32:
        X = np.memmap(a.f32, dtype=np.float32, mode="r").reshape(-1, a.dim)
    else:
        X = None
    n = a.random if X is None else X.shape[0]
    dim = a.dim if X is None else X.shape[1]
    if a.limit:
        n = min(n, a.limit)
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i4"), ("arr_len", ">i4"),
                    ("ndim", ">i4"), ("hasnull", ">i4"), ("elemtype", ">i4"), ("size", ">i4"),
                    ("lbound", ">i4"), ("elems", [("len", ">i4"), ("val", ">f4")], (dim,))])
    rng = np.random.default_rng(a.seed)
    with open(a.out, "wb") as f:
        f.write(b"PGCOPY\n\xff\r\n\x00" + np.array([0, 0], dtype=">i4").tobytes())
        for s in range(0, n, 100000):
            e = min(n, s + 100000)
            r = np.zeros(e - s, dtype=row)
            r["fields"] = 2
            r["id_len"] = 4
            r["id"] = np.arange(s + 1, e + 1)
            r["arr_len"] = 20 + 8 * dim
            r["ndim"] = 1
            r["elemtype"] = 700  # float4
            r["size"] = dim
            r["lbound"] = 1
            r["elems"]["len"] = 4
            r["elems"]["val"] = rng.random((e - s, dim), dtype=np.float32) if X is None else X[s:e]
            r.tofile(f)
        f.write(np.array([-1], dtype=">i2").tobytes())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch baseline for the nearest-vector benchmarks (issue 16): torch.cdist + topk on the GPU.

The same data as bench/vector_bench: Fashion-MNIST (--fmnist DIR with the ungzipped
train/t10k-images-idx3-ubyte) or float32 files (--data data.f32 --queries queries.f32 --dim D,
as bench/gen_lsh_workload.py --vectors writes them).  Prints one RESULT JSON line per
measurement, as vector_bench does: the whole batch (queries in chunks that fit the device), best
of several runs after a warm-up, and one query's median time.  Exactness: on a sample of queries,
how many float32 top-k lists differ from a float64 brute force (near ties misordered), which is
what float32 alone gives without genie's certified re-rank.
"""
import argparse, json, os, time
import numpy as np
import torch


def read_idx(path):
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(16), dtype=">u4")
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(int(h[1]), int(h[2]) * int(h[3])).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fmnist")
    ap.add_argument("--data")
    ap.add_argument("--queries")
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--nq", type=int, default=0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--single", type=int, default=200)
    ap.add_argument("--check", type=int, default=256)
    a = ap.parse_args()
    if a.fmnist:
        X = read_idx(os.path.join(a.fmnist, "train-images-idx3-ubyte"))
        Q = read_idx(os.path.join(a.fmnist, "t10k-images-idx3-ubyte"))
    else:
        X = np.fromfile(a.data, dtype=np.float32).reshape(-1, a.dim)
        Q = np.fromfile(a.queries, dtype=np.float32).reshape(-1, a.dim)
    if a.n:
        X = X[: a.n]
    if a.nq:
        Q = Q[: a.nq]
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    Xd = torch.from_numpy(np.ascontiguousarray(X)).to(dev)
    Qd = torch.from_numpy(np.ascontiguousarray(Q)).to(dev)
    n, nq, k = Xd.shape[0], Qd.shape[0], a.k
    # queries per chunk: the distance matrix within about 4 GB
    chunk = max(1, min(nq, (1 << 30) // max(n, 1)))

    def batch():
        ids = []
        for s in range(0, nq, chunk):
            d = torch.cdist(Qd[s : s + chunk], Xd)
            ids.append(torch.topk(d, k, dim=1, largest=False).indices)
        return torch.cat(ids)

    batch()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        ids = batch()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    singles = []
    for q in range(min(nq, a.single)):
        t0 = time.perf_counter()
        d = torch.cdist(Qd[q : q + 1], Xd)
        i = torch.topk(d, k, dim=1, largest=False).indices
        i.cpu()
        singles.append(time.perf_counter() - t0)
    # float32 against a float64 brute force on a sample
    differ = 0
    m = min(nq, a.check)
    X64 = Xd.double()
    for s in range(0, m, 64):
        q64 = Qd[s : min(m, s + 64)].double()
        d64 = ((q64 * q64).sum(1, keepdim=True) - 2 * q64 @ X64.T + (X64 * X64).sum(1)).clamp_min(0)
        t64 = torch.topk(d64, k, dim=1, largest=False).values
        got = ids[s : min(m, s + 64)]
        # the float32 answer's rows, at their float64 distances: a list is exact when it equals the true top k
        g64 = torch.gather(d64, 1, got).sort(dim=1).values
        differ += int((~torch.isclose(g64, t64, rtol=0, atol=0)).any(dim=1).sum())
    print("RESULT " + json.dumps({
        "method": "torch-cdist-topk", "params": f"float32 chunk={chunk}", "build_s": 0.0,
        "bytes_per_vector": X.shape[1] * 4, "queries": int(nq), "batch_ms": best * 1000,
        "batch_qps": nq / best, "single_ms": float(np.median(singles)) * 1000 if singles else 0.0,
        "recall": None, "float32_lists_not_exact": differ, "checked": m,
        "device": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()

// The ordered selection of a histogrammed distance list, shared by the
// exact Hamming scan (code_scan.cu) and the permutation index's candidates
// (permutation.cu): a block per query walks the query's uint16 distances
// in object id order and keeps those below its k-th distance and the first
// ones at it, in id order, with two block scans per stretch that holds any.
// Distances of excluded objects are kNoDistance (above every bin).
#pragma once
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "genie/codes.hpp"

namespace genie {
namespace gpu {
namespace {

// Writes query q's distance d of object id (kNoDistance when skip) and
// counts it in the query's histogram: the block's (sh, slot g) when
// shared_hist, else the global one.
__device__ __forceinline__ void RecordDistance(uint16_t* __restrict__ dist, int64_t n, int q, int g, int64_t id,
                                               bool skip, uint32_t d, uint32_t* sh, uint32_t* hist, int32_t bins,
                                               bool shared_hist) {
  dist[static_cast<size_t>(q) * n + id] = skip ? kNoDistance : static_cast<uint16_t>(d);
  if (skip) return;
  if (shared_hist)
    atomicAdd(sh + g * bins + d, 1u);
  else
    atomicAdd(hist + static_cast<size_t>(q) * bins + d, 1u);
}

// After a block's objects: its shared histograms of queries q0 .. q0 + nb
// added to the queries' own.
__device__ __forceinline__ void FlushHistograms(const uint32_t* sh, uint32_t* hist, int q0, int nb, int32_t bins,
                                                bool shared_hist) {
  if (!shared_hist) return;
  __syncthreads();
  for (int i = threadIdx.x; i < nb * bins; i += blockDim.x)
    if (sh[i] != 0) atomicAdd(hist + static_cast<size_t>(q0) * bins + i, sh[i]);
}

constexpr int kSelectThreads = 512;
constexpr int kSelectItems = 8;  // consecutive objects a thread takes per stretch

using SelectScan = cub::BlockScan<int32_t, kSelectThreads>;

// A block per query of the group (qmap[block], or the block's own number
// when qmap is NULL): the histogram of its distances (bits + 1 bins), its
// rows (at most kk) in object id order into ids (and dists, unless NULL)
// at q * kk; count[q] receives how many.
__global__ void SelectKernel(const uint16_t* __restrict__ dist, const uint32_t* __restrict__ hist, int32_t n,
                             int32_t bits, int32_t k, int32_t kk, const int32_t* __restrict__ qmap,
                             int32_t* __restrict__ ids, uint16_t* __restrict__ dists,
                             int32_t* __restrict__ count) {
  __shared__ typename SelectScan::TempStorage scan_storage;
  __shared__ int32_t kth_distance, ties_wanted, wanted;
  __shared__ int32_t ties_before, written;
  const int q = qmap != nullptr ? qmap[blockIdx.x] : static_cast<int>(blockIdx.x);
  const uint16_t* d = dist + static_cast<size_t>(q) * n;
  if (threadIdx.x == 0) {
    // as FindKthDistance: the smallest distance with k codes at it or nearer
    const uint32_t* h = hist + static_cast<size_t>(q) * (bits + 1);
    int64_t nearer = 0;
    int32_t kd = bits;
    int64_t at = -1;
    for (int32_t b = 0; b <= bits; ++b) {
      if (nearer + h[b] >= k) {
        kd = b;
        at = k - nearer;
        break;
      }
      nearer += h[b];
    }
    if (at < 0) {  // fewer than k candidates: all of them
      nearer -= h[bits];
      at = h[bits];
    }
    kth_distance = kd;
    ties_wanted = static_cast<int32_t>(at);
    wanted = static_cast<int32_t>(nearer + at);
    ties_before = 0;
    written = 0;
  }
  __syncthreads();
  const int32_t kd = kth_distance;
  for (int64_t base = 0; base < n; base += static_cast<int64_t>(kSelectThreads) * kSelectItems) {
    if (written == wanted) break;  // every row found: the rest holds none
    const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kSelectItems;
    uint16_t v[kSelectItems];
    int32_t nearer = 0, ties = 0;
#pragma unroll
    for (int i = 0; i < kSelectItems; ++i) {
      v[i] = first + i < n ? d[first + i] : kNoDistance;
      nearer += v[i] < kd;
      ties += v[i] == kd;
    }
    if (__syncthreads_or(nearer + ties) == 0) continue;
    // the ties before this thread's, in object id order, decide which are taken
    int32_t tie_rank, tie_total;
    SelectScan(scan_storage).ExclusiveSum(ties, tie_rank, tie_total);
    __syncthreads();
    tie_rank += ties_before;
    const int32_t take_ties = max(0, min(ties, ties_wanted - tie_rank));
    int32_t pos, total;
    SelectScan(scan_storage).ExclusiveSum(nearer + take_ties, pos, total);
    pos += written;
    int32_t taken_ties = 0;
#pragma unroll
    for (int i = 0; i < kSelectItems; ++i) {
      bool take = v[i] < kd;
      if (v[i] == kd && taken_ties < take_ties) {
        take = true;
        ++taken_ties;
      }
      if (take) {
        ids[static_cast<size_t>(q) * kk + pos] = static_cast<int32_t>(first + i);
        if (dists != nullptr) dists[static_cast<size_t>(q) * kk + pos] = v[i];
        ++pos;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      ties_before += tie_total;
      written += total;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) count[q] = written;
}

}  // namespace
}  // namespace gpu
}  // namespace genie

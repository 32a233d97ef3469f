// Kernels of the faithful c-PQ matcher (paper III-C): one block per group of
// <= 2 List Array slices of one query, a global Bitmap Counter, Algorithm 1
// per posting with the Gate and the hash table.  See kernels.hpp for the
// decomposition and the design notes in gpu_engine.cpp for the invariants.
#include "cuda_util.hpp"
#include "gate.cuh"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

// ---- faithful c-PQ: Algorithm 1 per posting ------------------------------

// With weights a count jumps from old to now = old + w; the ZipperArray gets
// every level j in (old, now] with j >= AT (the levels the object reached
// while they were at or above the gate), so that ZA[j] keeps counting the
// objects that reached j and Lemma 3.1 holds.
//
// The insertion test is Algorithm 1's "now >= AT", sharpened with the value
// ZA[now] had just before this object's increment: if k objects had already
// reached level `now`, AT is bound to pass `now`, so the entry would be
// dead on arrival and is not inserted.  This keeps Theorem 3.1: an object
// whose final count c is >= the final AT found ZA[c] < k (else ZA[c] >= k and
// AT > c), so it is in the table; and of the first k increments of
// ZA[AT - 1], each came from an object that was inserted (its top level was
// either >= AT, or AT - 1 with ZA below k), so k objects scoring >= AT - 1
// are in it.  What it buys: when thousands of threads start a query at once
// they all read AT = 1, and without it every one of them would insert.
__device__ __forceinline__ void CpqGate(const QueryParams& p, int32_t q, uint32_t object,
                                        int32_t old, int32_t now, const GateState& g) {
  int32_t* at = g.at + q;
  const int32_t a = LoadVolatile(at);
  if (now < a) return;
  int32_t* za = g.za + p.za_offset;
  int32_t top_before = 0;
  bool completed_level = false;
  for (int32_t j = max(old + 1, a); j <= now; ++j) {
    const int32_t before = atomicAdd(za + j, 1);
    completed_level |= before + 1 >= g.k;
    top_before = before;  // ends as ZA[now] before the increment
  }
  if (top_before < g.k &&
      !HtInsert(g.ht + p.ht_offset, p.ht_mask, object, static_cast<uint32_t>(now), at)) {
    g.overflow[q] = 1;
  }
  if (completed_level) {
    // Order the ZA increments before reading AT and ZA again: without it two
    // threads could each miss the other's update and leave ZA[AT] >= k.
    // (The selection re-checks Lemma 3.1 after the kernel anyway.)
    __threadfence();
    AdvanceAt(at, za, p.max_score, g.k);
  }
}

__global__ void __launch_bounds__(kScanThreads) CpqScanKernel(const int32_t* __restrict__ postings,
                                                              const WorkItem* __restrict__ items,
                                                              const DevSlice* __restrict__ slices,
                                                              GateState g) {
  const WorkItem item = items[blockIdx.x];
  const QueryParams p = g.queries[item.query];
  const uint32_t mask = FieldMask(p.bits);
  const uint32_t per_word = static_cast<uint32_t>(p.per_word);
  uint32_t* bc = g.bc + p.bc_offset;
  constexpr int kUnroll = 4;
  for (int32_t s = item.first_slice; s < item.end_slice; ++s) {
    const DevSlice slice = slices[s];
    const int32_t* list = postings + slice.begin;
    const uint32_t w = static_cast<uint32_t>(slice.weight);
    for (int32_t base = 0; base < slice.length; base += kUnroll * kScanThreads) {
      int32_t obj[kUnroll];
      uint32_t old_word[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t i = base + u * kScanThreads + static_cast<int32_t>(threadIdx.x);
        obj[u] = i < slice.length ? __ldg(list + i) : -1;
      }
      // Issue the Bitmap Counter updates back to back, then look at them.
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (obj[u] >= 0) {
          const uint32_t o = static_cast<uint32_t>(obj[u]);
          const uint32_t word = o / per_word;
          const uint32_t shift = (o - word * per_word) * static_cast<uint32_t>(p.bits);
          old_word[u] = atomicAdd(bc + word, w << shift);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (obj[u] >= 0) {
          const uint32_t o = static_cast<uint32_t>(obj[u]);
          const uint32_t word = o / per_word;
          const uint32_t shift = (o - word * per_word) * static_cast<uint32_t>(p.bits);
          const int32_t old = static_cast<int32_t>((old_word[u] >> shift) & mask);
          CpqGate(p, item.query, o, old, old + static_cast<int32_t>(w), g);
        }
      }
    }
  }
}

}  // namespace

Status LaunchCpqScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                     const DevSlice* slices, const GateState& gate, cudaStream_t stream) {
  if (num_items <= 0) return Status::Ok();
  CpqScanKernel<<<static_cast<unsigned>(num_items), kScanThreads, 0, stream>>>(postings, items,
                                                                             slices, gate);
  GENIE_CUDA_CHECK_LAUNCH("CpqScanKernel");
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

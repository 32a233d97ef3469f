// Kernels shared by the matchers: the kernel-image probe, the
// AuditThreshold initialisation, and the selection tail (hash-table
// collection, ordered tie collection, CUB's segmented sort, emission; for
// the tiled matcher's list mode, all of it in one block a query).
// See kernels.hpp for the decomposition and the design notes in
// gpu_engine.cpp for the invariants they keep.
#include <algorithm>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_util.hpp"
#include "device_util.cuh"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

__global__ void ProbeKernel(int* out) {
  if (out != nullptr) *out = 1;
}

__global__ void InitAtKernel(int32_t* at, int32_t n) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) at[i] = 1;
}

// ---- selection ------------------------------------------------------------------

__device__ __forceinline__ int32_t BcCount(const uint32_t* bc, const QueryParams& p,
                                           uint32_t object) {
  const uint32_t per_word = static_cast<uint32_t>(p.per_word);
  const uint32_t word = object / per_word;
  const uint32_t shift = (object - word * per_word) * static_cast<uint32_t>(p.bits);
  return static_cast<int32_t>((bc[p.bc_offset + word] >> shift) & FieldMask(p.bits));
}

constexpr int kCollectThreads = 256;

// One block per query.  Re-establishes Lemma 3.1 (ZA[AT] < k, ZA[AT-1] >= k)
// now that every update is visible, then scans the hash table once
// (Theorem 3.1) for the candidates.
__global__ void __launch_bounds__(kCollectThreads) HtCollectKernel(GateState g, CandState cs,
                                                                   bool from_bc,
                                                                   bool exact_ties) {
  const int32_t q = blockIdx.x;
  const QueryParams p = g.queries[q];
  __shared__ int32_t s_at;
  __shared__ int32_t s_count;
  if (threadIdx.x == 0) {
    const int32_t* za = g.za + p.za_offset;
    int32_t a = g.at[q];
    while (a <= p.max_score && za[a] >= g.k) ++a;
    g.at[q] = a;
    s_at = a;
    s_count = 0;
    // ZA[a] counts exactly the objects scoring >= a: every one of them
    // reached each level >= a while the gate was at or below it.
    const int32_t at_or_above = za[a];
    const int32_t tie_level = a - 1;
    SelectState st;
    st.tie_level = tie_level;
    st.need_ties = exact_ties && tie_level >= 1 ? max(0, g.k - at_or_above) : 0;
    st.n_above = 0;
    st.collected = 0;
    cs.select[q] = st;
  }
  __syncthreads();
  const int32_t threshold = exact_ties ? max(s_at, 1) : max(s_at - 1, 1);
  const unsigned long long* ht = g.ht + p.ht_offset;
  const uint32_t capacity = p.ht_mask + 1;
  for (uint32_t slot = threadIdx.x; slot < capacity; slot += kCollectThreads) {
    const unsigned long long e = ht[slot];
    const uint32_t key = static_cast<uint32_t>(e);
    if (key == kEmptyKey) continue;
    const int32_t c =
        from_bc ? BcCount(g.bc, p, key) : static_cast<int32_t>(static_cast<uint32_t>(e >> 32));
    if (c >= threshold) {
      const int32_t pos = atomicAdd(&s_count, 1);
      cs.keys[p.cand_offset + pos] = SortKey(c, key);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    cs.select[q].collected = s_count;
    cs.seg_begin[q] = p.cand_offset;
    cs.seg_end[q] = p.cand_offset + s_count;
  }
}

constexpr int kOrderedThreads = 512;
constexpr int kOrderedWords = 8;  // per thread per chunk, two 16-byte loads
using OrderedScan = cub::BlockScan<int32_t, kOrderedThreads>;

// One block per query: walks the counters in object order and collects the
// first need_ties objects whose count equals the tie level (lowest ids
// first, as the reference breaks ties), and, for the count table, every
// object above the tie level.  Stops as soon as it has them all.
__global__ void __launch_bounds__(kOrderedThreads) OrderedCollectKernel(
    const QueryParams* queries, const uint32_t* counters, int32_t n, CandState cs,
    bool collect_above) {
  const int32_t q = blockIdx.x;
  const QueryParams p = queries[q];
  const SelectState st = cs.select[q];
  __shared__ typename OrderedScan::TempStorage scan_tmp;
  __shared__ int32_t s_above;
  __shared__ int32_t s_done;
  const int tid = threadIdx.x;
  const int64_t out_base = p.cand_offset + st.collected;
  const int32_t n_above = collect_above ? st.n_above : 0;
  const int32_t need = st.need_ties;
  if (need <= 0 && n_above <= 0) {
    if (tid == 0) cs.seg_end[q] = out_base;
    return;
  }
  const uint32_t per_word = static_cast<uint32_t>(p.per_word);
  const uint32_t bits = static_cast<uint32_t>(p.bits);
  const uint32_t fmask = FieldMask(p.bits);
  const int32_t level = st.tie_level;
  const int64_t nwords = (static_cast<int64_t>(n) + per_word - 1) / per_word;
  const uint32_t* base = counters + p.bc_offset;  // 16-byte aligned
  if (tid == 0) s_above = 0;
  __syncthreads();
  int32_t taken = 0;  // ties found before the current chunk (block-uniform)
  for (int64_t chunk = 0; chunk < nwords; chunk += kOrderedThreads * kOrderedWords) {
    const int64_t w0 = chunk + static_cast<int64_t>(tid) * kOrderedWords;
    uint32_t words[kOrderedWords];
    if (w0 + kOrderedWords <= nwords) {
      const uint4 a = *reinterpret_cast<const uint4*>(base + w0);
      const uint4 b = *reinterpret_cast<const uint4*>(base + w0 + 4);
      words[0] = a.x; words[1] = a.y; words[2] = a.z; words[3] = a.w;
      words[4] = b.x; words[5] = b.y; words[6] = b.z; words[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < kOrderedWords; ++j) words[j] = w0 + j < nwords ? base[w0 + j] : 0u;
    }
    int32_t my_ties = 0;
#pragma unroll
    for (int j = 0; j < kOrderedWords; ++j) {
      for (uint32_t sub = 0; sub < per_word; ++sub) {
        const int64_t object = (w0 + j) * per_word + sub;
        const int32_t c = static_cast<int32_t>((words[j] >> (sub * bits)) & fmask);
        my_ties += (object < n && c == level);
      }
    }
    int32_t rank = 0, chunk_ties = 0;
    OrderedScan(scan_tmp).ExclusiveSum(my_ties, rank, chunk_ties);
    rank += taken;
#pragma unroll
    for (int j = 0; j < kOrderedWords; ++j) {
      if (words[j] == 0) continue;
      for (uint32_t sub = 0; sub < per_word; ++sub) {
        const int64_t object = (w0 + j) * per_word + sub;
        if (object >= n) break;
        const int32_t c = static_cast<int32_t>((words[j] >> (sub * bits)) & fmask);
        if (c == level) {
          if (rank < need) {
            cs.keys[out_base + n_above + rank] = SortKey(c, static_cast<uint32_t>(object));
          }
          ++rank;
        } else if (collect_above && c > level) {
          const int32_t pos = atomicAdd(&s_above, 1);
          if (pos < n_above) cs.keys[out_base + pos] = SortKey(c, static_cast<uint32_t>(object));
        }
      }
    }
    taken += chunk_ties;
    __syncthreads();
    if (tid == 0) s_done = taken >= need && (!collect_above || s_above >= n_above);
    __syncthreads();
    if (s_done) break;
  }
  if (tid == 0) cs.seg_end[q] = out_base + n_above + min(need, taken);
}

// One warp per query: the sorted candidates, deduplicated, cut to k.
__global__ void EmitKernel(const unsigned long long* sorted, CandState cs, int32_t nq, int32_t k,
                           DevHit* out, int32_t* counts) {
  const int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (q >= nq) return;
  const int64_t begin = cs.seg_begin[q], end = cs.seg_end[q];
  int32_t written = 0;
  unsigned long long prev = ~0ull;
  for (int64_t base = begin; base < end && written < k; base += 32) {
    const int64_t i = base + lane;
    const unsigned long long key = i < end ? sorted[i] : ~0ull;
    unsigned long long up = __shfl_up_sync(kFullMask, key, 1);
    if (lane == 0) up = prev;
    const bool keep = i < end && key != up;
    const unsigned ballot = __ballot_sync(kFullMask, keep);
    const int32_t pos = written + __popc(ballot & ((1u << lane) - 1u));
    if (keep && pos < k) {
      DevHit h;
      h.object = static_cast<int32_t>(static_cast<uint32_t>(key));
      h.score = static_cast<int32_t>(0x7FFFFFFFu - static_cast<uint32_t>(key >> 32));
      out[q * k + pos] = h;
    }
    written += __popc(ballot);
    prev = __shfl_sync(kFullMask, key, 31);
  }
  if (lane == 0) counts[q] = min(written, k);
}

// List mode (TiledParams::list_mode): a query's table holds its tiles' own
// top-k lists, no object twice, `slots` (tiles * k) entries at most.  One
// block sorts them by (score desc, object asc) in shared memory and writes
// the first k: the work of the collection, the segmented sort and the
// emission, in one launch.  The key packs max_score - score above the
// object's obj_bits, and the sort reads only those bits: a tag query
// (about 25 bits) takes 7 radix passes instead of 11 (a lone query's
// selection, 245 small tiles at k 10, about 20 -> 13 us on an H200), and
// the block is as large as the table, not kListSelectSlots (8 to 32 tag
// queries at k 10: 16 to 31 tiles, at most 310 slots, 128 threads; 5.8 us
// for 32 queries).  An empty slot is all ones; no entry's key is, since an
// entry's score is at least 1 (max_score - score < 2^score_bits - 1).
constexpr int kListSelectItems = 4;

template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
    ListSelectKernel(GateState g, int32_t k, int32_t slots, int32_t obj_bits, DevHit* out, int32_t* counts) {
  using Sort = cub::BlockRadixSort<unsigned long long, kThreads, kItems>;
  __shared__ typename Sort::TempStorage sort_tmp;
  __shared__ int32_t s_filled;
  const int32_t q = blockIdx.x;
  const QueryParams p = g.queries[q];
  const unsigned long long* ht = g.ht + p.ht_offset;
  const uint32_t max_score = static_cast<uint32_t>(max(p.max_score, 1));
  const int score_bits = 32 - __clz(max_score);
  if (threadIdx.x == 0) s_filled = 0;
  __syncthreads();
  unsigned long long keys[kItems];
  int32_t filled = 0;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int32_t slot = static_cast<int32_t>(threadIdx.x) * kItems + j;
    keys[j] = ~0ull;
    if (slot < slots) {
      const unsigned long long e = ht[slot];
      const uint32_t key = static_cast<uint32_t>(e);
      if (key != kEmptyKey) {
        const uint32_t score = static_cast<uint32_t>(e >> 32);
        keys[j] = (static_cast<unsigned long long>(max_score - score) << obj_bits) | key;
        ++filled;
      }
    }
  }
  if (filled > 0) atomicAdd(&s_filled, filled);
  Sort(sort_tmp).Sort(keys, 0, obj_bits + score_bits);  // blocked: thread t holds ranks t * items + j
  const int32_t n = min(s_filled, k);  // read after Sort's barriers
  const unsigned long long obj_mask = (1ull << obj_bits) - 1;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int32_t rank = static_cast<int32_t>(threadIdx.x) * kItems + j;
    if (rank < n) {
      DevHit h;
      h.object = static_cast<int32_t>(keys[j] & obj_mask);
      h.score = static_cast<int32_t>(max_score - static_cast<uint32_t>(keys[j] >> obj_bits));
      out[static_cast<int64_t>(q) * k + rank] = h;
    }
  }
  if (threadIdx.x == 0) counts[q] = n;
}

unsigned GridFor(int64_t threads, int block) {
  const int64_t blocks = (threads + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace

Status ProbeKernelImage() {
  cudaFuncAttributes attributes;
  GENIE_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attributes, ProbeKernel));
  return Status::Ok();
}

Status LaunchInitAt(int32_t* at, int32_t n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  InitAtKernel<<<GridFor(n, 256), 256, 0, stream>>>(at, n);
  GENIE_CUDA_CHECK_LAUNCH("InitAtKernel");
  return Status::Ok();
}

Status LaunchHtCollect(const GateState& gate, const CandState& cand, bool from_bc,
                       bool exact_ties, cudaStream_t stream) {
  if (gate.num_queries <= 0) return Status::Ok();
  HtCollectKernel<<<static_cast<unsigned>(gate.num_queries), kCollectThreads, 0, stream>>>(
      gate, cand, from_bc, exact_ties);
  GENIE_CUDA_CHECK_LAUNCH("HtCollectKernel");
  return Status::Ok();
}

Status LaunchOrderedCollect(const QueryParams* queries, const uint32_t* counters,
                            int32_t n_objects, int32_t num_queries, const CandState& cand,
                            bool collect_above, cudaStream_t stream) {
  if (num_queries <= 0) return Status::Ok();
  OrderedCollectKernel<<<static_cast<unsigned>(num_queries), kOrderedThreads, 0, stream>>>(
      queries, counters, n_objects, cand, collect_above);
  GENIE_CUDA_CHECK_LAUNCH("OrderedCollectKernel");
  return Status::Ok();
}

Status SortCandidates(void* temp, std::size_t* temp_bytes, const unsigned long long* keys_in,
                      unsigned long long* keys_out, int64_t num_items, int32_t num_queries,
                      const int64_t* seg_begin, const int64_t* seg_end, cudaStream_t stream) {
  GENIE_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedSort::SortKeys(
      temp, *temp_bytes, keys_in, keys_out, num_items, num_queries, seg_begin, seg_end, stream));
  if (temp != nullptr) GENIE_CUDA_CHECK_LAUNCH("cub::DeviceSegmentedSort::SortKeys");
  return Status::Ok();
}

Status LaunchListSelect(const GateState& gate, int32_t k, int32_t slots, int32_t n_objects, DevHit* out,
                        int32_t* counts, cudaStream_t stream) {
  if (gate.num_queries <= 0) return Status::Ok();
  if (slots < 0 || slots > static_cast<int32_t>(kListSelectSlots)) {
    return Status::Internal("list selection past its slots");
  }
  // bits of the largest object id (at least one)
  const uint32_t last = static_cast<uint32_t>(std::max(n_objects, 2) - 1);
  const int32_t obj_bits = 32 - __builtin_clz(last);
  const unsigned grid = static_cast<unsigned>(gate.num_queries);
  // the smallest block whose kListSelectItems a thread hold every slot
  if (slots <= 128 * kListSelectItems) {
    ListSelectKernel<128, kListSelectItems><<<grid, 128, 0, stream>>>(gate, k, slots, obj_bits, out, counts);
  } else if (slots <= 256 * kListSelectItems) {
    ListSelectKernel<256, kListSelectItems><<<grid, 256, 0, stream>>>(gate, k, slots, obj_bits, out, counts);
  } else if (slots <= 512 * kListSelectItems) {
    ListSelectKernel<512, kListSelectItems><<<grid, 512, 0, stream>>>(gate, k, slots, obj_bits, out, counts);
  } else {
    static_assert(512 * 2 * kListSelectItems == kListSelectSlots, "the largest block holds every slot");
    ListSelectKernel<512, 2 * kListSelectItems><<<grid, 512, 0, stream>>>(gate, k, slots, obj_bits, out,
                                                                        counts);
  }
  GENIE_CUDA_CHECK_LAUNCH("ListSelectKernel");
  return Status::Ok();
}

Status LaunchEmit(const unsigned long long* sorted, const CandState& cand, int32_t num_queries,
                  int32_t k, DevHit* out, int32_t* counts, cudaStream_t stream) {
  if (num_queries <= 0) return Status::Ok();
  constexpr int kThreads = 256;
  EmitKernel<<<GridFor(static_cast<int64_t>(num_queries) * 32, kThreads), kThreads, 0, stream>>>(
      sorted, cand, num_queries, k, out, counts);
  GENIE_CUDA_CHECK_LAUNCH("EmitKernel");
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

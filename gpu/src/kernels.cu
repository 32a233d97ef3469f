// Kernels of the GPU engine.  See kernels.hpp for the decomposition and
// DESIGN notes in gpu_engine.cpp for the invariants they keep.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ int32_t LoadVolatile(const int32_t* p) {
  return *reinterpret_cast<const volatile int32_t*>(p);
}

__device__ __forceinline__ unsigned long long LoadVolatile(const unsigned long long* p) {
  return *reinterpret_cast<const volatile unsigned long long*>(p);
}

__device__ __forceinline__ uint32_t FieldMask(int32_t bits) {
  return bits >= 32 ? 0xFFFFFFFFu : ((1u << bits) - 1u);
}

// Sort key: ascending order is score descending, then object ascending.
__device__ __forceinline__ unsigned long long SortKey(int32_t score, uint32_t object) {
  return (static_cast<unsigned long long>(0x7FFFFFFFu - static_cast<uint32_t>(score)) << 32) |
         object;
}

__device__ __forceinline__ uint32_t HashKey(uint32_t k) {
  k ^= k >> 16;
  k *= 0x85EBCA6Bu;
  k ^= k >> 13;
  k *= 0xC2B2AE35u;
  k ^= k >> 16;
  return k;
}

__device__ __forceinline__ unsigned long long PackEntry(uint32_t key, uint32_t value) {
  return (static_cast<unsigned long long>(value) << 32) | key;
}

// The hash table with the modified Robin Hood scheme (paper III-C2).  The
// age of an entry is its probe distance from its home slot.  Probing from the
// key's home slot, an insertion takes a slot that is empty, holds the same
// key (keeping the larger count), or holds an entry whose count is below
// AT - 1: such an entry can no longer be a top-k candidate (Theorem 3.1), so
// it is overwritten regardless of its age.  Otherwise, as in Robin Hood
// hashing, an entry younger than the one being inserted is evicted and its
// insertion continues from the next slot.  Lock-free: every change is one
// 64-bit CAS; a lost race re-examines the slot.  A key may end up twice (a
// racing eviction, or an update finding a stale slot before the key's older
// entry); the final selection deduplicates.  Returns false when no slot was
// found within `capacity` probes: the caller flags the query and the host
// recomputes it exactly.
__device__ bool HtInsert(unsigned long long* table, uint32_t mask, uint32_t key, uint32_t value,
                         const int32_t* at) {
  uint32_t slot = HashKey(key) & mask;
  uint32_t dist = 0;
  for (uint32_t probes = 0; probes <= mask;) {
    const unsigned long long entry = LoadVolatile(table + slot);
    const uint32_t entry_key = static_cast<uint32_t>(entry);
    const uint32_t entry_value = static_cast<uint32_t>(entry >> 32);
    bool take = false, evict = false;
    uint32_t entry_dist = 0;
    if (entry_key == kEmptyKey) {
      take = true;
    } else if (entry_key == key) {
      if (entry_value >= value) return true;
      take = true;
    } else {
      const int32_t threshold = LoadVolatile(at) - 1;
      if (static_cast<int64_t>(entry_value) < threshold) {
        take = true;  // expired: below AT - 1
      } else {
        entry_dist = (slot - HashKey(entry_key)) & mask;
        evict = entry_dist < dist;
      }
    }
    if (take || evict) {
      const unsigned long long prev = atomicCAS(table + slot, entry, PackEntry(key, value));
      if (prev != entry) continue;  // lost a race: look at this slot again
      if (take) return true;
      // Carry the evicted (younger) entry on, unless it has expired meanwhile.
      if (static_cast<int64_t>(entry_value) < LoadVolatile(at) - 1) return true;
      key = entry_key;
      value = entry_value;
      dist = entry_dist;
    }
    slot = (slot + 1) & mask;
    ++dist;
    ++probes;
  }
  return false;
}

// Algorithm 1, lines 6-7: while ZA[AT] >= k, AT += 1.  atomicMax keeps AT
// monotone under concurrent advances.
__device__ __forceinline__ void AdvanceAt(int32_t* at, const int32_t* za, int32_t max_score,
                                          int32_t k) {
  int32_t a = LoadVolatile(at);
  while (a <= max_score && LoadVolatile(za + a) >= k) {
    atomicMax(at, a + 1);
    ++a;
  }
}

// Counts equal bins of a warp together: one shared atomic per distinct bin.
// Every lane of the warp must call it (pred false for lanes with nothing).
__device__ __forceinline__ void WarpAggregatedInc(int32_t* hist, uint32_t bin, bool pred) {
  const unsigned active = __ballot_sync(kFullMask, pred);
  if (pred) {
    const unsigned peers = __match_any_sync(active, bin);
    if ((threadIdx.x & 31) == static_cast<unsigned>(__ffs(peers) - 1)) {
      atomicAdd(hist + bin, __popc(peers));
    }
  }
}

__global__ void ProbeKernel(int* out) {
  if (out != nullptr) *out = 1;
}

__global__ void InitAtKernel(int32_t* at, int32_t n) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) at[i] = 1;
}

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

// ---- count table ------------------------------------------------------------

__global__ void __launch_bounds__(kScanThreads) CountScanKernel(
    const int32_t* __restrict__ postings, const WorkItem* __restrict__ items,
    const DevSlice* __restrict__ slices, const QueryParams* __restrict__ queries,
    uint32_t* table) {
  const WorkItem item = items[blockIdx.x];
  uint32_t* counters = table + queries[item.query].bc_offset;
  constexpr int kUnroll = 4;
  for (int32_t s = item.first_slice; s < item.end_slice; ++s) {
    const DevSlice slice = slices[s];
    const int32_t* list = postings + slice.begin;
    const uint32_t w = static_cast<uint32_t>(slice.weight);
    for (int32_t base = 0; base < slice.length; base += kUnroll * kScanThreads) {
      int32_t obj[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t i = base + u * kScanThreads + static_cast<int32_t>(threadIdx.x);
        obj[u] = i < slice.length ? __ldg(list + i) : -1;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (obj[u] >= 0) atomicAdd(counters + obj[u], w);
      }
    }
  }
}

// ---- tiled c-PQ ---------------------------------------------------------------

__global__ void TileBoundsKernel(const int32_t* __restrict__ postings,
                                 const int64_t* __restrict__ span_begin,
                                 const int32_t* __restrict__ span_length, int32_t num_spans,
                                 int32_t num_tiles, int32_t tile_objects, uint32_t* bounds) {
  const int64_t total = static_cast<int64_t>(num_spans) * (num_tiles + 1);
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t sp = idx / (num_tiles + 1);
    const int64_t t = idx - sp * (num_tiles + 1);
    const int64_t target = t * tile_objects;
    const int32_t* list = postings + span_begin[sp];
    int32_t lo = 0, hi = span_length[sp];
    while (lo < hi) {  // first position whose object is >= target
      const int32_t mid = lo + ((hi - lo) >> 1);
      if (static_cast<int64_t>(list[mid]) < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    bounds[idx] = static_cast<uint32_t>(lo);
  }
}

constexpr int kTiledWarps = kTiledThreads / 32;
constexpr int kSegChunk = 256;
constexpr int kHistItems = 8;  // kTiledThreads * kHistItems >= kCpqMaxScore + 1
static_assert(kTiledThreads * kHistItems >= kCpqMaxScore + 1, "histogram scan too small");
using TiledScan = cub::BlockScan<int32_t, kTiledThreads>;

std::size_t TiledDynamicBytes(int32_t tile_words, int32_t hist_bins) {
  return static_cast<std::size_t>(tile_words) * 4 + static_cast<std::size_t>(hist_bins) * 4;
}

// One block per (tile, query): blockIdx.x = tile * num_queries + query, so the
// grid sweeps the tiles in order and, after the first tile, the Gate of
// every query already holds a high AuditThreshold.
__global__ void __launch_bounds__(kTiledThreads) TiledKernel(TiledParams tp, GateState g) {
  extern __shared__ uint32_t dynamic_smem[];
  uint32_t* sbc = dynamic_smem;                                          // the tile's Bitmap Counter
  int32_t* hist = reinterpret_cast<int32_t*>(dynamic_smem + tp.tile_words);  // then suffix sums
  // Segment metadata, kSegChunk segments at a time (kept small so that three
  // blocks with 64 KiB tiles fit an SM's 228 KiB).
  __shared__ int64_t s_lo[kSegChunk];
  __shared__ int32_t s_pre[kSegChunk];
  __shared__ int32_t s_w[kSegChunk];
  __shared__ typename TiledScan::TempStorage scan_tmp;
  __shared__ int32_t s_warp_ties[kTiledWarps];
  __shared__ int32_t s_level;
  __shared__ int32_t s_overflow;

  const int32_t nq = g.num_queries;
  const int32_t tile = static_cast<int32_t>(blockIdx.x / nq);
  const int32_t q = static_cast<int32_t>(blockIdx.x - static_cast<unsigned>(tile) * nq);
  const QueryParams p = g.queries[q];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int32_t tile_base = tile * tp.tile_objects;
  const uint32_t bits = static_cast<uint32_t>(tp.bits);
  const uint32_t per_word = static_cast<uint32_t>(tp.per_word);
  const uint32_t fmask = FieldMask(tp.bits);
  const int32_t k = g.k;

  for (int32_t i = tid; i < tp.tile_words; i += kTiledThreads) sbc[i] = 0;
  for (int32_t i = tid; i <= p.max_score + 1; i += kTiledThreads) hist[i] = 0;
  if (tid == 0) s_overflow = 0;
  __syncthreads();

  // ---- count: scan the tile's part of every list of the query -------------
  const int64_t seg_first = tp.seg_offsets[q], seg_last = tp.seg_offsets[q + 1];
  int64_t total = 0;
  for (int64_t chunk = seg_first; chunk < seg_last; chunk += kSegChunk) {
    const int32_t count = static_cast<int32_t>(seg_last - chunk < kSegChunk ? seg_last - chunk : kSegChunk);
    int32_t len = 0;
    if (tid < count) {
      const int64_t sp = chunk + tid;
      const uint32_t* b = tp.bounds + sp * (tp.num_tiles + 1) + tile;
      const uint32_t lo = b[0], hi = b[1];
      s_lo[tid] = tp.seg_begin[sp] + lo;
      s_w[tid] = tp.seg_weight[chunk + tid];
      len = static_cast<int32_t>(hi - lo);
    }
    int32_t pre = 0, chunk_total = 0;
    TiledScan(scan_tmp).ExclusiveSum(len, pre, chunk_total);
    if (tid < kSegChunk) s_pre[tid] = pre;
    __syncthreads();
    // The chunk's postings are split evenly over the warps; a warp walks
    // the segments its share covers, its lanes reading consecutive postings.
    const int32_t share = (chunk_total + kTiledWarps - 1) / kTiledWarps;
    int32_t pos = warp * share;
    const int32_t stop_all = min(chunk_total, pos + share);
    if (pos < stop_all) {
      int32_t lo_i = 0, hi_i = count - 1;
      while (lo_i < hi_i) {  // last segment starting at or before pos
        const int32_t mid = (lo_i + hi_i + 1) >> 1;
        if (s_pre[mid] <= pos) {
          lo_i = mid;
        } else {
          hi_i = mid - 1;
        }
      }
      int32_t s = lo_i;
      while (pos < stop_all) {
        const int32_t seg_end = s + 1 < count ? s_pre[s + 1] : chunk_total;
        const int32_t stop = min(stop_all, seg_end);
        const int32_t* src = tp.postings + s_lo[s] + (pos - s_pre[s]);
        const uint32_t w = static_cast<uint32_t>(s_w[s]);
        const int32_t n_here = stop - pos;
        constexpr int kUnroll = 4;
        for (int32_t i = lane; i < n_here; i += 32 * kUnroll) {
          int32_t v[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int32_t idx = i + 32 * u;
            v[u] = idx < n_here ? __ldg(src + idx) : -1;
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            if (v[u] >= 0) {
              const uint32_t local = static_cast<uint32_t>(v[u] - tile_base);
              const uint32_t word = local / per_word;
              const uint32_t shift = (local - word * per_word) * bits;
              atomicAdd(sbc + word, w << shift);
            }
          }
        }
        pos = stop;
        ++s;
      }
    }
    total += chunk_total;
    __syncthreads();  // s_lo/s_pre/s_w and scan_tmp are reused by the next chunk
  }
  if (total == 0) return;  // no object of this tile scores for this query

  // ---- the Gate: Algorithm 1 with each object's final tile count -----------
  // thr = max(AT - 1, 1): objects below AT - 1 can never be top-k.
  const int32_t at0 = LoadVolatile(g.at + q);
  const int32_t thr = max(at0 - 1, 1);
  const int32_t region = tp.tile_words / kTiledWarps;  // words per warp, in object order
  const int32_t wbase = warp * region;

  // Histogram of the counts >= thr.
  for (int32_t it = 0; it < region; it += 32) {
    const uint32_t word = sbc[wbase + it + lane];
    if (__ballot_sync(kFullMask, word != 0) == 0) continue;
    for (uint32_t sub = 0; sub < per_word; ++sub) {
      const int32_t c = static_cast<int32_t>((word >> (sub * bits)) & fmask);
      WarpAggregatedInc(hist, static_cast<uint32_t>(c), c >= thr);
    }
  }
  __syncthreads();

  // Suffix sums S(c) = #objects with count >= c, for c in [0, max_score].
  {
    int32_t vals[kHistItems];
#pragma unroll
    for (int j = 0; j < kHistItems; ++j) {
      const int32_t c = p.max_score - (tid * kHistItems + j);
      vals[j] = c >= 0 ? hist[c] : 0;
    }
    TiledScan(scan_tmp).InclusiveSum(vals, vals);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kHistItems; ++j) {
      const int32_t c = p.max_score - (tid * kHistItems + j);
      if (c >= 0) hist[c] = vals[j];
    }
    // hist[max_score + 1] stays 0: no count exceeds max_score.
  }
  if (tid == 0) s_level = thr;
  __syncthreads();

  // The tile's own top-k by (count desc, object asc), restricted to counts
  // >= thr: everything above level L, and the lowest-id ties at L.  Objects
  // outside it are beaten by k objects of this very tile.
  const int32_t s_thr = hist[thr];
  if (s_thr > k) {
    for (int32_t c = thr + tid; c <= p.max_score; c += kTiledThreads) {
      if (hist[c] >= k && hist[c + 1] < k) s_level = c;
    }
    __syncthreads();
  }
  const int32_t level = s_level;
  const int32_t above = hist[level + 1];
  const int32_t ties = hist[level] - above;
  const int32_t need = s_thr > k ? k - above : ties;
  const bool ordered = need < ties;
  const int32_t inserted = above + min(need, ties);

  int32_t running = 0;  // ties before this warp's current position
  if (ordered) {
    int32_t mine = 0;
    for (int32_t it = 0; it < region; it += 32) {
      const uint32_t word = sbc[wbase + it + lane];
      for (uint32_t sub = 0; sub < per_word; ++sub) {
        mine += static_cast<int32_t>((word >> (sub * bits)) & fmask) == level;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mine += __shfl_xor_sync(kFullMask, mine, off);
    if (lane == 0) s_warp_ties[warp] = mine;
    __syncthreads();
    for (int w = 0; w < warp; ++w) running += s_warp_ties[w];
  }
  bool overflow = false;
  unsigned long long* ht = g.ht + p.ht_offset;
  for (int32_t it = 0; it < region; it += 32) {
    const int32_t widx = wbase + it + lane;
    const uint32_t word = sbc[widx];
    int32_t my_ties = 0;
    if (ordered) {
      for (uint32_t sub = 0; sub < per_word; ++sub) {
        my_ties += static_cast<int32_t>((word >> (sub * bits)) & fmask) == level;
      }
    }
    int32_t incl = my_ties;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int32_t v = __shfl_up_sync(kFullMask, incl, off);
      if (lane >= off) incl += v;
    }
    int32_t rank = running + incl - my_ties;
    running += __shfl_sync(kFullMask, incl, 31);
    if (word == 0) continue;
    for (uint32_t sub = 0; sub < per_word; ++sub) {
      const int32_t c = static_cast<int32_t>((word >> (sub * bits)) & fmask);
      if (c < level) continue;
      if (c == level) {
        const bool take = !ordered || rank < need;
        ++rank;
        if (!take) continue;
      }
      const uint32_t object = static_cast<uint32_t>(tile_base) + widx * per_word + sub;
      if (!HtInsert(ht, p.ht_mask, object, static_cast<uint32_t>(c), g.at + q)) overflow = true;
    }
  }
  if (overflow) atomicExch(&s_overflow, 1);

  // ZA[j] += number of inserted objects whose count reached j, for j >= AT.
  int32_t* za = g.za + p.za_offset;
  for (int32_t j = at0 + tid; j <= p.max_score; j += kTiledThreads) {
    const int32_t add = j > level ? hist[j] : inserted;
    if (add > 0) atomicAdd(za + j, add);
  }
  __syncthreads();
  if (tid == 0) {
    if (s_overflow) g.overflow[q] = 1;
    __threadfence();
    AdvanceAt(g.at + q, za, p.max_score, k);
  }
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

constexpr int kSelectThreads = 512;
constexpr int kDigitBits = 12;
constexpr int kDigitBins = 1 << kDigitBits;
constexpr int kDigitItems = kDigitBins / kSelectThreads;
using SelectScan = cub::BlockScan<int32_t, kSelectThreads>;

// Count table: the k-th largest count among the counts >= 1, by radix
// selection on 12-bit digits (one pass when max_score < 4096).
__global__ void __launch_bounds__(kSelectThreads) CountSelectKernel(const QueryParams* queries,
                                                                    const uint32_t* table,
                                                                    int32_t n, int32_t k,
                                                                    CandState cs) {
  const int32_t q = blockIdx.x;
  const QueryParams p = queries[q];
  const uint32_t* counters = table + p.bc_offset;
  __shared__ int32_t hist[kDigitBins + 1];
  __shared__ typename SelectScan::TempStorage scan_tmp;
  __shared__ int32_t s_pos, s_one, s_digit;
  const int tid = threadIdx.x, lane = tid & 31;

  const int32_t bits_total = 32 - __clz(max(p.max_score, 1));
  const int digits = (bits_total + kDigitBits - 1) / kDigitBits;
  uint32_t prefix = 0;
  int32_t remaining = k, above = 0;
  for (int d = digits - 1; d >= 0; --d) {
    const int shift = d * kDigitBits;
    for (int i = tid; i <= kDigitBins; i += kSelectThreads) hist[i] = 0;
    if (tid == 0) s_pos = s_one = 0;
    __syncthreads();
    for (int32_t base = 0; base < n; base += kSelectThreads) {
      const int32_t i = base + tid;
      const uint32_t v = i < n ? counters[i] : 0u;
      const bool high_match =
          shift + kDigitBits >= 32 || (v >> (shift + kDigitBits)) == (prefix >> (shift + kDigitBits));
      WarpAggregatedInc(hist, (v >> shift) & (kDigitBins - 1), v >= 1 && high_match);
      if (d == digits - 1) {
        const unsigned pos_bal = __ballot_sync(kFullMask, v >= 1);
        const unsigned one_bal = __ballot_sync(kFullMask, v == 1);
        if (lane == 0 && pos_bal != 0) {
          atomicAdd(&s_pos, __popc(pos_bal));
          atomicAdd(&s_one, __popc(one_bal));
        }
      }
    }
    __syncthreads();
    if (d == digits - 1 && s_pos <= k) {  // at most k objects score: take them all
      remaining = s_one;
      above = s_pos - s_one;
      prefix = 1;
      break;
    }
    int32_t vals[kDigitItems];
#pragma unroll
    for (int j = 0; j < kDigitItems; ++j) vals[j] = hist[kDigitBins - 1 - (tid * kDigitItems + j)];
    SelectScan(scan_tmp).InclusiveSum(vals, vals);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kDigitItems; ++j) hist[kDigitBins - 1 - (tid * kDigitItems + j)] = vals[j];
    __syncthreads();
    for (int b = tid; b < kDigitBins; b += kSelectThreads) {
      if (hist[b] >= remaining && hist[b + 1] < remaining) s_digit = b;
    }
    __syncthreads();
    const int32_t digit = s_digit;
    const int32_t higher = hist[digit + 1];
    above += higher;
    remaining -= higher;
    prefix |= static_cast<uint32_t>(digit) << shift;
    __syncthreads();
  }
  if (tid == 0) {
    SelectState st;
    st.tie_level = static_cast<int32_t>(prefix);
    st.need_ties = remaining;
    st.n_above = above;
    st.collected = 0;
    cs.select[q] = st;
    cs.seg_begin[q] = p.cand_offset;
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

Status LaunchCpqScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                     const DevSlice* slices, const GateState& gate, cudaStream_t stream) {
  if (num_items <= 0) return Status::Ok();
  CpqScanKernel<<<static_cast<unsigned>(num_items), kScanThreads, 0, stream>>>(postings, items,
                                                                             slices, gate);
  GENIE_CUDA_CHECK_LAUNCH("CpqScanKernel");
  return Status::Ok();
}

Status LaunchCountScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                       const DevSlice* slices, const QueryParams* queries, uint32_t* table,
                       cudaStream_t stream) {
  if (num_items <= 0) return Status::Ok();
  CountScanKernel<<<static_cast<unsigned>(num_items), kScanThreads, 0, stream>>>(
      postings, items, slices, queries, table);
  GENIE_CUDA_CHECK_LAUNCH("CountScanKernel");
  return Status::Ok();
}

Status LaunchTileBounds(const int32_t* postings, const int64_t* span_begin,
                        const int32_t* span_length, int32_t num_spans, int32_t num_tiles,
                        int32_t tile_objects, uint32_t* bounds, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(num_spans) * (num_tiles + 1);
  if (total <= 0) return Status::Ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 1 << 20));
  TileBoundsKernel<<<grid, 256, 0, stream>>>(postings, span_begin, span_length, num_spans,
                                             num_tiles, tile_objects, bounds);
  GENIE_CUDA_CHECK_LAUNCH("TileBoundsKernel");
  return Status::Ok();
}

std::size_t TiledSharedBytes(int32_t tile_words, int32_t hist_bins) {
  cudaFuncAttributes attributes{};
  (void)cudaFuncGetAttributes(&attributes, TiledKernel);
  (void)cudaGetLastError();
  return TiledDynamicBytes(tile_words, hist_bins) + attributes.sharedSizeBytes;
}

Status LaunchTiled(const TiledParams& params, const GateState& gate, cudaStream_t stream) {
  const int64_t blocks = static_cast<int64_t>(params.num_tiles) * gate.num_queries;
  if (blocks <= 0) return Status::Ok();
  if (blocks > 0x7FFFFFFF) return Status::Internal("tiled grid too large");
  const std::size_t dynamic_bytes = TiledDynamicBytes(params.tile_words, params.hist_bins);
  GENIE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      TiledKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic_bytes)));
  TiledKernel<<<static_cast<unsigned>(blocks), kTiledThreads, dynamic_bytes, stream>>>(params,
                                                                                      gate);
  GENIE_CUDA_CHECK_LAUNCH("TiledKernel");
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

Status LaunchCountSelect(const QueryParams* queries, const uint32_t* table, int32_t n_objects,
                         int32_t k, int32_t num_queries, const CandState& cand,
                         cudaStream_t stream) {
  if (num_queries <= 0) return Status::Ok();
  CountSelectKernel<<<static_cast<unsigned>(num_queries), kSelectThreads, 0, stream>>>(
      queries, table, n_objects, k, cand);
  GENIE_CUDA_CHECK_LAUNCH("CountSelectKernel");
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

// Kernels of the tiled c-PQ matcher: one block per (object tile, query), the
// tile's Bitmap Counter in shared memory, then the tile's final counts fed
// through the global Gate and hash table.  See kernels.hpp for the
// decomposition and the design notes in gpu_engine.cpp for the invariants.
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "cuda_util.hpp"
#include "gate.cuh"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

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

// Packed postings (genie/packed_postings.hpp): the same bounds, found through the
// pack directory (the tile's pack tile), then a binary search of the low 16
// bits inside it when the kernel tile is smaller than the pack tile.
__global__ void PackedTileBoundsKernel(const uint16_t* __restrict__ packed,
                                       const uint32_t* __restrict__ pack_dir, int32_t pack_tiles,
                                       const int64_t* __restrict__ span_begin,
                                       const int32_t* __restrict__ span_length,
                                       const int64_t* __restrict__ span_list,
                                       const int64_t* __restrict__ list_begin, int32_t num_spans,
                                       int32_t num_tiles, int32_t tile_objects, uint32_t* bounds) {
  const int64_t total = static_cast<int64_t>(num_spans) * (num_tiles + 1);
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t sp = idx / (num_tiles + 1);
    const int64_t t = idx - sp * (num_tiles + 1);
    const int64_t target = t * tile_objects;
    const int64_t begin = span_begin[sp], end = begin + span_length[sp];
    int64_t pos;
    if (target >= (static_cast<int64_t>(pack_tiles) << 16)) {
      pos = end;
    } else {
      const int64_t pt = target >> 16;
      const uint32_t* row = pack_dir + span_list[sp] * (pack_tiles + 1);
      const int64_t base = list_begin[sp];
      // [lo, hi): the span's postings in pack tile pt, sorted by low bits.
      int64_t lo = max(begin, base + row[pt]);
      int64_t hi = min(end, base + row[pt + 1]);
      if (lo >= hi || (target & 0xFFFF) == 0) {
        // No posting of the span in pack tile pt, or the tile starts with
        // the pack tile: the directory has the answer.
        pos = min(max(base + static_cast<int64_t>(row[pt]), begin), end);
      } else {
        const uint32_t low = static_cast<uint32_t>(target & 0xFFFF);
        while (lo < hi) {  // first position whose low bits are >= low
          const int64_t mid = lo + ((hi - lo) >> 1);
          if (static_cast<uint32_t>(packed[mid]) < low) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        pos = lo;
      }
    }
    bounds[idx] = static_cast<uint32_t>(pos - begin);
  }
}

// The tile's Bitmap Counter as the count loop sees it: counters of
// 2^bits_shift bits, 2^word_shift to a word (the tiled matcher's counter
// widths are powers of two, so a counter is found by shifts and masks).
struct TileCounter {
  uint32_t* sbc;
  int32_t id_base;  // the id of the tile's first object, as the postings hold ids
  uint32_t word_shift;
  uint32_t sub_mask;
  uint32_t bits_shift;
  __device__ __forceinline__ void Add(int32_t id, uint32_t w) const {
    const uint32_t local = static_cast<uint32_t>(id - id_base);
    atomicAdd(sbc + (local >> word_shift), w << ((local & sub_mask) << bits_shift));
  }
};

// One warp counts postings [first, first + n) of the 4-byte List Array, 16
// bytes a lane a load once `first` is aligned (a scalar head and tail).
// Vector loads cut the instructions per posting: the loop is issue-bound,
// not bandwidth-bound (Nsight Compute: 85% issue slots busy, 47% DRAM).
__device__ __forceinline__ void CountRun(const int32_t* __restrict__ postings, int64_t first,
                                         int32_t n, uint32_t w, const TileCounter& c, int lane) {
  const int32_t* src = postings + first;
  const int32_t head = min(n, static_cast<int32_t>((4 - (first & 3)) & 3));
  if (lane < head) c.Add(__ldg(src + lane), w);
  const int4* vec = reinterpret_cast<const int4*>(src + head);
  const int32_t nvec = (n - head) >> 2;
  int32_t j = lane;
  for (; j + 32 < nvec; j += 64) {  // two loads in flight a lane
    const int4 a = __ldg(vec + j), b = __ldg(vec + j + 32);
    c.Add(a.x, w); c.Add(a.y, w); c.Add(a.z, w); c.Add(a.w, w);
    c.Add(b.x, w); c.Add(b.y, w); c.Add(b.z, w); c.Add(b.w, w);
  }
  if (j < nvec) {
    const int4 a = __ldg(vec + j);
    c.Add(a.x, w); c.Add(a.y, w); c.Add(a.z, w); c.Add(a.w, w);
  }
  const int32_t done = head + nvec * 4;
  if (lane < n - done) c.Add(__ldg(src + done + lane), w);
}

// The same over packed ids (genie/packed_postings.hpp): 8 ids a 16-byte load.
__device__ __forceinline__ void CountRun(const uint16_t* __restrict__ packed, int64_t first,
                                         int32_t n, uint32_t w, const TileCounter& c, int lane) {
  const uint16_t* src = packed + first;
  const int32_t head = min(n, static_cast<int32_t>((8 - (first & 7)) & 7));
  if (lane < head) c.Add(__ldg(src + lane), w);
  const uint4* vec = reinterpret_cast<const uint4*>(src + head);
  const int32_t nvec = (n - head) >> 3;
  auto add8 = [&](const uint4& v) {
    c.Add(static_cast<int32_t>(v.x & 0xFFFFu), w); c.Add(static_cast<int32_t>(v.x >> 16), w);
    c.Add(static_cast<int32_t>(v.y & 0xFFFFu), w); c.Add(static_cast<int32_t>(v.y >> 16), w);
    c.Add(static_cast<int32_t>(v.z & 0xFFFFu), w); c.Add(static_cast<int32_t>(v.z >> 16), w);
    c.Add(static_cast<int32_t>(v.w & 0xFFFFu), w); c.Add(static_cast<int32_t>(v.w >> 16), w);
  };
  int32_t j = lane;
  for (; j + 32 < nvec; j += 64) {
    const uint4 a = __ldg(vec + j), b = __ldg(vec + j + 32);
    add8(a);
    add8(b);
  }
  if (j < nvec) add8(__ldg(vec + j));
  const int32_t done = head + nvec * 8;
  if (lane < n - done) c.Add(__ldg(src + done + lane), w);
}

// Words of 8-bit counters (the tiled matcher's for scores up to 255: LSH's
// 237 tables) are compared four counters at a time.
constexpr uint32_t kEveryByte = 0x01010101u;

// A word of 4-bit counters as two words of 8-bit ones: the even counters
// (bytes' low halves) and the odd ones, so that the byte-wise compares
// serve both widths.
constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// How many counters of a word (8- or 4-bit) are at least t (1 <= t <= 255).
// (Any bits but 8 reads as 4: the callers pass only these widths.)
__device__ __forceinline__ int32_t CountAtLeast(uint32_t word, uint32_t t, uint32_t bits) {
  const uint32_t tt = t * kEveryByte;
  if (bits == 8) return __popc(__vcmpgeu4(word, tt)) >> 3;
  return (__popc(__vcmpgeu4(word & kLowNibbles, tt)) + __popc(__vcmpgeu4((word >> 4) & kLowNibbles, tt))) >> 3;
}

// Whether a word of 8- or 4-bit counters holds one >= t: four byte
// compares in one instruction (two for 4-bit counters).
__device__ __forceinline__ bool HoldsAtLeast(uint32_t word, uint32_t t, uint32_t bits) {
  const uint32_t tt = t * kEveryByte;
  if (bits == 8) return __vcmpgeu4(word, tt) != 0;
  return (__vcmpgeu4(word & kLowNibbles, tt) | __vcmpgeu4((word >> 4) & kLowNibbles, tt)) != 0;
}

// The counters of a word equal to level.
__device__ __forceinline__ int32_t TiesIn(uint32_t word, int32_t level, uint32_t bits, uint32_t per_word,
                                          uint32_t fmask) {
  const uint32_t ll = static_cast<uint32_t>(level) * kEveryByte;
  if (bits == 8) return __popc(__vcmpeq4(word, ll)) >> 3;
  if (bits == 4) {
    return (__popc(__vcmpeq4(word & kLowNibbles, ll)) + __popc(__vcmpeq4((word >> 4) & kLowNibbles, ll))) >> 3;
  }
  int32_t ties = 0;
  for (uint32_t sub = 0; sub < per_word; ++sub) {
    ties += static_cast<int32_t>((word >> (sub * bits)) & fmask) == level;
  }
  return ties;
}

// List mode: the slots [from, k) of a tile's k that it left unwritten get
// the empty entry, so that its query's table needs no clearing before the
// kernel (a cudaMemsetAsync a call).
__device__ __forceinline__ void EmptyListSlots(unsigned long long* slots, int32_t from, int32_t k, int tid) {
  for (int32_t i = from + tid; i < k; i += kTiledThreads) slots[i] = ~0ull;
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
template <bool kPacked>
__global__ void __launch_bounds__(kTiledThreads, 3) TiledKernel(TiledParams tp, GateState g) {
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
  __shared__ int32_t s_slot;  // list mode: entries this tile has written
  __shared__ uint32_t s_probe[4];  // list mode, 8-bit counters: the tile's top count, then 3 tallies
  __shared__ int32_t s_part[2][kTiledWarps];  // list mode, counted levels: each warp's tally
  __shared__ uint32_t s_part_top[kTiledWarps];

  const int32_t nq = g.num_queries;
  const int32_t tile = static_cast<int32_t>(blockIdx.x / nq);
  const int32_t q = static_cast<int32_t>(blockIdx.x - static_cast<unsigned>(tile) * nq);
  const QueryParams p = g.queries[q];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int32_t tile_base = tile * tp.tile_objects;
  // Packed: ids are the low 16 bits, and the tile lies inside one pack tile.
  TileCounter counter;
  counter.sbc = sbc;
  counter.id_base = kPacked ? (tile_base & 0xFFFF) : tile_base;
  counter.bits_shift = static_cast<uint32_t>(__ffs(tp.bits) - 1);
  counter.word_shift = 5u - counter.bits_shift;
  counter.sub_mask = static_cast<uint32_t>(tp.per_word) - 1u;
  const uint32_t bits = static_cast<uint32_t>(tp.bits);
  const uint32_t per_word = static_cast<uint32_t>(tp.per_word);
  const uint32_t fmask = FieldMask(tp.bits);
  const int32_t k = g.k;

  for (int32_t i = tid; i < tp.tile_words; i += kTiledThreads) sbc[i] = 0;
  for (int32_t i = tid; i <= p.max_score + 1; i += kTiledThreads) hist[i] = 0;
  if (tid == 0) {
    s_overflow = 0;
    s_slot = 0;
  }
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
        const int64_t first = s_lo[s] + (pos - s_pre[s]);
        const uint32_t w = static_cast<uint32_t>(s_w[s]);
        if (kPacked) {
          CountRun(tp.packed, first, stop - pos, w, counter, lane);
        } else {
          CountRun(tp.postings, first, stop - pos, w, counter, lane);
        }
        pos = stop;
        ++s;
      }
    }
    total += chunk_total;
    __syncthreads();  // s_lo/s_pre/s_w and scan_tmp are reused by the next chunk
  }
  unsigned long long* ht = g.ht + p.ht_offset;
  if (total == 0) {  // no object of this tile scores for this query
    if (tp.list_mode != 0) EmptyListSlots(ht + static_cast<int64_t>(tile) * g.k, 0, g.k, tid);
    return;
  }

  // ---- the Gate: Algorithm 1 with each object's final tile count -----------
  // thr = max(AT - 1, 1): objects below AT - 1 can never be top-k.
  const bool list = tp.list_mode != 0;
  const int32_t at0 = list ? 1 : LoadVolatile(g.at + q);
  int32_t thr = max(at0 - 1, 1);
  const int32_t region = tp.tile_words / kTiledWarps;  // words per warp, in object order
  const int32_t wbase = warp * region;

  // List mode has no AT: every object counted would go through the
  // histogram (an LSH tile's are nearly all >= 1, and the histogram was
  // half the kernel's instructions).  In a dense tile (at least a posting
  // an object) with 8-bit counters, thr rises to the largest of top/2,
  // top/4 and top/8 (top: the tile's highest count) that at least k objects
  // of this very tile reach: an object below it is beaten by k of them, so
  // it is not the tile's top-k.  Two passes of byte-wise max and compares
  // over the counters, no atomics; then the histogram and the entries skip
  // a warp's words with no counter at or above their threshold.  A sparse
  // tile (tag queries) skips these probes (with the histogram after them
  // they cost tag batches 5-13%, bench/tiled-select-h200.txt): its level is
  // found by counting instead (by_counts, below).
  const bool dense = list && bits == 8 && total >= tp.tile_objects;
  if (dense) {
    if (tid < 4) s_probe[tid] = 0;
    __syncthreads();
    uint32_t top = 0;
    for (int32_t it = 0; it < region; it += 32) top = __vmaxu4(top, sbc[wbase + it + lane]);
    top = max(max(top & 0xFFu, (top >> 8) & 0xFFu), max((top >> 16) & 0xFFu, top >> 24));
    top = __reduce_max_sync(kFullMask, top);
    if (lane == 0) atomicMax(&s_probe[0], top);
    __syncthreads();
    top = s_probe[0];
    const uint32_t t1 = max(top >> 1, 1u), t2 = max(top >> 2, 1u), t3 = max(top >> 3, 1u);
    uint32_t c1 = 0, c2 = 0, c3 = 0;  // set bits: 8 a counter at or above
    for (int32_t it = 0; it < region; it += 32) {
      const uint32_t word = sbc[wbase + it + lane];
      c1 += __popc(__vcmpgeu4(word, t1 * kEveryByte));
      c2 += __popc(__vcmpgeu4(word, t2 * kEveryByte));
      c3 += __popc(__vcmpgeu4(word, t3 * kEveryByte));
    }
    c1 = __reduce_add_sync(kFullMask, c1);
    c2 = __reduce_add_sync(kFullMask, c2);
    c3 = __reduce_add_sync(kFullMask, c3);
    if (lane == 0) {
      atomicAdd(&s_probe[1], c1 >> 3);
      atomicAdd(&s_probe[2], c2 >> 3);
      atomicAdd(&s_probe[3], c3 >> 3);
    }
    __syncthreads();
    const uint32_t want = static_cast<uint32_t>(k);
    thr = static_cast<int32_t>(s_probe[1] >= want ? t1 : s_probe[2] >= want ? t2 : s_probe[3] >= want ? t3 : 1u);
  }

  // The tile's own top-k by (count desc, object asc), restricted to counts
  // >= thr: everything above level L, and the lowest-id ties at L.  Objects
  // outside it are beaten by k objects of this very tile.
  int32_t level, above, ties, s_thr;
  // A sparse tile in list mode with 8- or 4-bit counters (tag queries):
  // L by counting, not by a histogram.  The histogram fed every counter
  // >= 1 (two thirds of a tag tile's words hold one) through a warp's
  // match and a shared atomic, most of the kernel's instructions for 32
  // tag queries (Nsight Compute: 78% of the cycles issuing); here a pass
  // counts the counters >= t of four words' bytes at a time, and L is found
  // by halving [1, top]: at most 4 passes for 4-bit counters, 8 for 8-bit.
  const bool by_counts = list && !dense && (bits == 8 || bits == 4);
  if (by_counts) {
    uint32_t top = 0;
    int32_t nonzero = 0;
    for (int32_t i = tid; i < tp.tile_words; i += kTiledThreads) {
      const uint32_t word = sbc[i];
      top = __vmaxu4(top, bits == 8 ? word : __vmaxu4(word & kLowNibbles, (word >> 4) & kLowNibbles));
      nonzero += CountAtLeast(word, 1, bits);
    }
    top = max(max(top & 0xFFu, (top >> 8) & 0xFFu), max((top >> 16) & 0xFFu, top >> 24));
    top = __reduce_max_sync(kFullMask, top);
    nonzero = __reduce_add_sync(kFullMask, static_cast<uint32_t>(nonzero));
    if (lane == 0) {
      s_part_top[warp] = top;
      s_part[0][warp] = nonzero;
    }
    __syncthreads();
    top = 0;
    s_thr = 0;
    for (int w = 0; w < kTiledWarps; ++w) {
      top = max(top, s_part_top[w]);
      s_thr += s_part[0][w];
    }
    // S(c): the tile's objects counting at least c; when s_thr > k the
    // search keeps S(lo) >= k > S(hi).
    int32_t lo = 1, s_lo = s_thr, hi = static_cast<int32_t>(top) + 1, s_hi = 0;
    if (s_thr > k) {
      // (uniform: every thread computes the same S, so the barriers are met
      // by all; the tallies alternate buffers, a pass's barrier separating
      // the reads of one from the writes two passes on)
      for (int buf = 1; hi - lo > 1; buf ^= 1) {
        const int32_t mid = (lo + hi) >> 1;
        int32_t at_least = 0;
        for (int32_t i = tid; i < tp.tile_words; i += kTiledThreads) {
          at_least += CountAtLeast(sbc[i], static_cast<uint32_t>(mid), bits);
        }
        at_least = static_cast<int32_t>(__reduce_add_sync(kFullMask, static_cast<uint32_t>(at_least)));
        if (lane == 0) s_part[buf][warp] = at_least;
        __syncthreads();
        int32_t sum = 0;
        for (int w = 0; w < kTiledWarps; ++w) sum += s_part[buf][w];
        if (sum >= k) {
          lo = mid;
          s_lo = sum;
        } else {
          hi = mid;
          s_hi = sum;
        }
      }
      level = lo;
      above = s_hi;  // hi = lo + 1
      ties = s_lo - s_hi;
    } else {
      // every counted object is taken (need = ties, not ordered): only the
      // sum above + ties, S(1), is used
      level = 1;
      above = 0;
      ties = s_thr;
    }
  } else {
    // Histogram of the counts >= thr.
    for (int32_t it = 0; it < region; it += 32) {
      const uint32_t word = sbc[wbase + it + lane];
      if (__ballot_sync(kFullMask, dense ? HoldsAtLeast(word, static_cast<uint32_t>(thr), 8) : word != 0) == 0) {
        continue;
      }
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

    s_thr = hist[thr];
    if (s_thr > k) {
      for (int32_t c = thr + tid; c <= p.max_score; c += kTiledThreads) {
        if (hist[c] >= k && hist[c + 1] < k) s_level = c;
      }
      __syncthreads();
    }
    level = s_level;
    above = hist[level + 1];
    ties = hist[level] - above;
  }
  const int32_t need = s_thr > k ? k - above : ties;
  const bool ordered = need < ties;
  const int32_t inserted = above + min(need, ties);

  int32_t running = 0;  // ties before this warp's current position
  if (ordered) {
    int32_t mine = 0;
    for (int32_t it = 0; it < region; it += 32) {
      mine += TiesIn(sbc[wbase + it + lane], level, bits, per_word, fmask);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mine += __shfl_xor_sync(kFullMask, mine, off);
    if (lane == 0) s_warp_ties[warp] = mine;
    __syncthreads();
    for (int w = 0; w < warp; ++w) running += s_warp_ties[w];
  }
  bool overflow = false;
  for (int32_t it = 0; it < region; it += 32) {
    const int32_t widx = wbase + it + lane;
    const uint32_t word = sbc[widx];
    // dense or counted: no counter of the warp's words reaches level, so no entry and no tie
    if ((dense || by_counts) &&
        __ballot_sync(kFullMask, HoldsAtLeast(word, static_cast<uint32_t>(level), bits)) == 0) {
      continue;
    }
    const int32_t my_ties = ordered ? TiesIn(word, level, bits, per_word, fmask) : 0;
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
      if (list) {
        // at most k entries a tile (`inserted`): the query's table holds tiles * k
        ht[static_cast<int64_t>(tile) * k + atomicAdd(&s_slot, 1)] = PackEntry(object, static_cast<uint32_t>(c));
      } else if (!HtInsert(ht, p.ht_mask, object, static_cast<uint32_t>(c), g.at + q)) {
        overflow = true;
      }
    }
  }
  if (list) {  // nothing to gate: the collection takes every entry
    __syncthreads();  // s_slot is final
    EmptyListSlots(ht + static_cast<int64_t>(tile) * k, s_slot, k, tid);
    return;
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

}  // namespace

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

Status LaunchPackedTileBounds(const uint16_t* packed, const uint32_t* pack_dir, int32_t pack_tiles,
                              const int64_t* span_begin, const int32_t* span_length,
                              const int64_t* span_list, const int64_t* list_begin,
                              int32_t num_spans, int32_t num_tiles, int32_t tile_objects,
                              uint32_t* bounds, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(num_spans) * (num_tiles + 1);
  if (total <= 0) return Status::Ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 1 << 20));
  PackedTileBoundsKernel<<<grid, 256, 0, stream>>>(packed, pack_dir, pack_tiles, span_begin,
                                                   span_length, span_list, list_begin, num_spans,
                                                   num_tiles, tile_objects, bounds);
  GENIE_CUDA_CHECK_LAUNCH("PackedTileBoundsKernel");
  return Status::Ok();
}

std::size_t TiledSharedBytes(int32_t tile_words, int32_t hist_bins) {
  cudaFuncAttributes attributes{};
  (void)cudaFuncGetAttributes(&attributes, TiledKernel<false>);
  (void)cudaGetLastError();
  return TiledDynamicBytes(tile_words, hist_bins) + attributes.sharedSizeBytes;
}

// cudaFuncSetAttribute for the kernel's dynamic shared memory (per device
// and variant), only ever raised: a launch may ask for less than the
// attribute allows, and engines of several indexes on one device launch
// from several threads at once (the genie service's batches side by side),
// so a lower setting of one must never fail another's larger launch.  The
// attribute is set only when it grows: it costs microseconds a launch.
template <bool kPacked>
Status SetTiledSharedBytes(std::size_t dynamic_bytes) {
  static std::atomic<int> set[64][2];
  static std::mutex raising;
  int device = 0;
  GENIE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const int bytes = static_cast<int>(dynamic_bytes);
  if (device < 0 || device >= 64) {
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(TiledKernel<kPacked>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return Status::Ok();
  }
  std::atomic<int>& allowed = set[device][kPacked ? 1 : 0];
  if (allowed.load() >= bytes) return Status::Ok();
  std::lock_guard<std::mutex> lock(raising);
  if (allowed.load() >= bytes) return Status::Ok();
  GENIE_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(TiledKernel<kPacked>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  allowed.store(bytes);
  return Status::Ok();
}

Status LaunchTiled(const TiledParams& params, const GateState& gate, cudaStream_t stream) {
  const int64_t blocks = static_cast<int64_t>(params.num_tiles) * gate.num_queries;
  if (blocks <= 0) return Status::Ok();
  if (blocks > 0x7FFFFFFF) return Status::Internal("tiled grid too large");
  const std::size_t dynamic_bytes = TiledDynamicBytes(params.tile_words, params.hist_bins);
  if (params.packed != nullptr) {
    GENIE_RETURN_IF_ERROR(SetTiledSharedBytes<true>(dynamic_bytes));
    TiledKernel<true><<<static_cast<unsigned>(blocks), kTiledThreads, dynamic_bytes, stream>>>(
        params, gate);
  } else {
    GENIE_RETURN_IF_ERROR(SetTiledSharedBytes<false>(dynamic_bytes));
    TiledKernel<false><<<static_cast<unsigned>(blocks), kTiledThreads, dynamic_bytes, stream>>>(
        params, gate);
  }
  GENIE_CUDA_CHECK_LAUNCH("TiledKernel");
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

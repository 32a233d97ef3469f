// Kernels of the count table (the paper's GPU-SPQ): a 32-bit counter per
// object per query, atomicAdd per posting, radix selection of the k-th
// count.  See kernels.hpp for the decomposition.
#include <cub/block/block_scan.cuh>

#include "cuda_util.hpp"
#include "device_util.cuh"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

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

constexpr int kSelectThreads = 512;
constexpr int kDigitBits = 12;
constexpr int kDigitBins = 1 << kDigitBits;
constexpr int kDigitItems = kDigitBins / kSelectThreads;
using SelectScan = cub::BlockScan<int32_t, kSelectThreads>;

// Adds the block's counters [begin, end) to hist by their digit at shift,
// those whose higher digits equal prefix's (and that are >= 1); with
// count_positive, also counts the counters >= 1 into *s_pos and those == 1
// into *s_one.  Every thread of the block calls it.
__device__ __forceinline__ void AddDigitHistogram(const uint32_t* counters, int32_t begin, int32_t end, int shift,
                                                  uint32_t prefix, bool count_positive, int32_t* hist,
                                                  int32_t* s_pos, int32_t* s_one) {
  for (int32_t base = begin; base < end; base += kSelectThreads) {
    const int32_t i = base + static_cast<int32_t>(threadIdx.x);
    const uint32_t v = i < end ? counters[i] : 0u;
    const bool high_match =
        shift + kDigitBits >= 32 || (v >> (shift + kDigitBits)) == (prefix >> (shift + kDigitBits));
    WarpAggregatedInc(hist, (v >> shift) & (kDigitBins - 1), v >= 1 && high_match);
    if (count_positive) {
      const unsigned pos_bal = __ballot_sync(kFullMask, v >= 1);
      const unsigned one_bal = __ballot_sync(kFullMask, v == 1);
      if ((threadIdx.x & 31) == 0 && pos_bal != 0) {
        atomicAdd(s_pos, __popc(pos_bal));
        atomicAdd(s_one, __popc(one_bal));
      }
    }
  }
}

// A count-table query's selection: its tie level, the ties (lowest ids
// first) and the counts above it to collect from its segment at cand_offset.
__device__ __forceinline__ void SetSelection(CandState cs, int32_t q, int64_t cand_offset, uint32_t tie_level,
                                             int32_t need_ties, int32_t n_above) {
  SelectState st;
  st.tie_level = static_cast<int32_t>(tie_level);
  st.need_ties = need_ties;
  st.n_above = n_above;
  st.collected = 0;
  cs.select[q] = st;
  cs.seg_begin[q] = cand_offset;
}

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
  const int tid = threadIdx.x;

  const int32_t bits_total = 32 - __clz(max(p.max_score, 1));
  const int digits = (bits_total + kDigitBits - 1) / kDigitBits;
  uint32_t prefix = 0;
  int32_t remaining = k, above = 0;
  for (int d = digits - 1; d >= 0; --d) {
    const int shift = d * kDigitBits;
    for (int i = tid; i <= kDigitBins; i += kSelectThreads) hist[i] = 0;
    if (tid == 0) s_pos = s_one = 0;
    __syncthreads();
    AddDigitHistogram(counters, 0, n, shift, prefix, d == digits - 1, hist, &s_pos, &s_one);
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
  if (tid == 0) SetSelection(cs, q, p.cand_offset, prefix, remaining, above);
}


// ---- the same selection and collection spread over blocks (small groups) ----
//
// One block a query reads all n counters of its query on one SM: for a lone
// query over 126,000 objects that took 0.18 ms, where the count itself took
// 0.02 (bench/documents.md).  Here each query's counters are cut into
// gridDim.x slices: the digit histograms are summed in global memory and a
// block a query picks the digit from them (CountPickKernel, the same steps
// as CountSelectKernel's); then each slice counts its ties at the k-th
// count, and writes its ties and the counts above with the ties' ranks
// taken from the slices before it, so that the ties kept are the lowest
// ids, as CountSelectKernel + OrderedCollectKernel keep them.

// Per query in the scratch (int32 each, zeroed by the caller): the digit
// histogram, the counters >= 1 and == 1 (the top digit's pass), the prefix
// so far, the counters above it, a done flag, the above cursor, then per
// slice its ties.
struct SpreadScratch {
  int32_t* hist;         // [q][kDigitBins]
  int32_t* positive;     // [q][2]: counters >= 1, counters == 1
  int32_t* progress;     // [q][3]: prefix, above, done
  int32_t* above_next;   // [q]: the next slot for a counter above the tie level
  int32_t* slice_ties;   // [q][slices]
};

SpreadScratch SpreadLayout(int32_t* base, int32_t num_queries) {
  SpreadScratch s;
  s.hist = base;
  s.positive = s.hist + static_cast<int64_t>(num_queries) * kDigitBins;
  s.progress = s.positive + static_cast<int64_t>(num_queries) * 2;
  s.above_next = s.progress + static_cast<int64_t>(num_queries) * 3;
  s.slice_ties = s.above_next + num_queries;
  return s;
}

__device__ __forceinline__ int32_t CountDigits(int32_t max_score) {
  const int32_t bits_total = 32 - __clz(max(max_score, 1));
  return (bits_total + kDigitBits - 1) / kDigitBits;
}

__device__ __forceinline__ void SliceOf(int32_t n, int32_t slice, int32_t slices, int32_t* begin, int32_t* end) {
  const int64_t per = (static_cast<int64_t>(n) + slices - 1) / slices;
  *begin = static_cast<int32_t>(min(static_cast<int64_t>(n), per * slice));
  *end = static_cast<int32_t>(min(static_cast<int64_t>(n), per * (slice + 1)));
}

// Grid (slices, queries): the histogram of one digit pass (pass 0 the top
// digit) of the slice's counters that match the prefix picked so far.
__global__ void __launch_bounds__(kSelectThreads) CountSpreadHistKernel(const QueryParams* queries,
                                                                        const uint32_t* table, int32_t n,
                                                                        int32_t pass, SpreadScratch sc) {
  const int32_t q = blockIdx.y;
  const QueryParams p = queries[q];
  const int32_t digits = CountDigits(p.max_score);
  if (pass >= digits || sc.progress[q * 3 + 2] != 0) return;
  const int shift = (digits - 1 - pass) * kDigitBits;
  const uint32_t prefix = static_cast<uint32_t>(sc.progress[q * 3]);
  const uint32_t* counters = table + p.bc_offset;
  __shared__ int32_t hist[kDigitBins];
  __shared__ int32_t s_pos, s_one;
  const int tid = threadIdx.x;
  for (int i = tid; i < kDigitBins; i += kSelectThreads) hist[i] = 0;
  if (tid == 0) s_pos = s_one = 0;
  __syncthreads();
  int32_t begin, end;
  SliceOf(n, blockIdx.x, gridDim.x, &begin, &end);
  AddDigitHistogram(counters, begin, end, shift, prefix, pass == 0, hist, &s_pos, &s_one);
  __syncthreads();
  int32_t* out = sc.hist + static_cast<int64_t>(q) * kDigitBins;
  for (int i = tid; i < kDigitBins; i += kSelectThreads) {
    if (hist[i] != 0) atomicAdd(out + i, hist[i]);
  }
  if (tid == 0 && pass == 0 && s_pos != 0) {
    atomicAdd(sc.positive + q * 2, s_pos);
    atomicAdd(sc.positive + q * 2 + 1, s_one);
  }
}

// A block per query: the digit of this pass from the summed histogram (as
// CountSelectKernel picks it); after the last digit, or when at most k
// counters are positive, the query's SelectState.  The histogram is zeroed
// for the next pass.
__global__ void __launch_bounds__(kSelectThreads) CountPickKernel(const QueryParams* queries, int32_t k,
                                                                  int32_t pass, SpreadScratch sc, CandState cs) {
  const int32_t q = blockIdx.x;
  const QueryParams p = queries[q];
  const int32_t digits = CountDigits(p.max_score);
  int32_t* progress = sc.progress + q * 3;
  if (pass >= digits || progress[2] != 0) return;
  __shared__ int32_t hist[kDigitBins + 1];
  __shared__ typename SelectScan::TempStorage scan_tmp;
  __shared__ int32_t s_digit;
  const int tid = threadIdx.x;
  const int d = digits - 1 - pass;
  uint32_t prefix = static_cast<uint32_t>(progress[0]);
  int32_t above = progress[1];
  int32_t need = 0;  // ties wanted, once done
  bool done = false;
  if (pass == 0 && sc.positive[q * 2] <= k) {  // at most k objects score: take them all
    const int32_t pos = sc.positive[q * 2], one = sc.positive[q * 2 + 1];
    prefix = 1;
    above = pos - one;
    need = one;
    done = true;
  } else {
    int32_t* global_hist = sc.hist + static_cast<int64_t>(q) * kDigitBins;
    int32_t vals[kDigitItems];
#pragma unroll
    for (int j = 0; j < kDigitItems; ++j) {
      const int b = kDigitBins - 1 - (tid * kDigitItems + j);
      vals[j] = global_hist[b];
      global_hist[b] = 0;
    }
    SelectScan(scan_tmp).InclusiveSum(vals, vals);
#pragma unroll
    for (int j = 0; j < kDigitItems; ++j) hist[kDigitBins - 1 - (tid * kDigitItems + j)] = vals[j];
    if (tid == 0) hist[kDigitBins] = 0;
    __syncthreads();
    const int32_t remaining = k - above;
    for (int b = tid; b < kDigitBins; b += kSelectThreads) {
      if (hist[b] >= remaining && hist[b + 1] < remaining) s_digit = b;
    }
    __syncthreads();
    const int32_t digit = s_digit;
    above += hist[digit + 1];
    prefix |= static_cast<uint32_t>(digit) << (d * kDigitBits);
    need = k - above;
    done = d == 0;
  }
  if (tid == 0) {
    progress[0] = static_cast<int32_t>(prefix);
    progress[1] = above;
    progress[2] = done ? 1 : 0;
    if (done) SetSelection(cs, q, p.cand_offset, prefix, need, above);
  }
}

// Grid (slices, queries): the slice's counters at the tie level.
__global__ void __launch_bounds__(kSelectThreads) CountSliceTiesKernel(const QueryParams* queries,
                                                                       const uint32_t* table, int32_t n,
                                                                       SpreadScratch sc, CandState cs) {
  const int32_t q = blockIdx.y;
  const uint32_t* counters = table + queries[q].bc_offset;
  const uint32_t level = static_cast<uint32_t>(cs.select[q].tie_level);
  __shared__ int32_t s_ties;
  if (threadIdx.x == 0) s_ties = 0;
  __syncthreads();
  int32_t begin, end;
  SliceOf(n, blockIdx.x, gridDim.x, &begin, &end);
  int32_t mine = 0;
  for (int32_t i = begin + static_cast<int32_t>(threadIdx.x); i < end; i += kSelectThreads)
    mine += counters[i] == level;
  mine = __reduce_add_sync(kFullMask, mine);
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicAdd(&s_ties, mine);
  __syncthreads();
  if (threadIdx.x == 0) sc.slice_ties[static_cast<int64_t>(q) * gridDim.x + blockIdx.x] = s_ties;
}

// Grid (slices, queries): the slice's counters above the tie level, and
// its ties whose rank among all the query's ties (in id order) is below
// need_ties; slice 0 also sets the query's segment end.
__global__ void __launch_bounds__(kSelectThreads) CountSliceCollectKernel(const QueryParams* queries,
                                                                          const uint32_t* table, int32_t n,
                                                                          SpreadScratch sc, CandState cs) {
  const int32_t q = blockIdx.y;
  const QueryParams p = queries[q];
  const SelectState st = cs.select[q];
  const uint32_t* counters = table + p.bc_offset;
  const int32_t* ties = sc.slice_ties + static_cast<int64_t>(q) * gridDim.x;
  __shared__ typename SelectScan::TempStorage scan_tmp;
  __shared__ int32_t s_before, s_total;
  const int tid = threadIdx.x;
  if (tid == 0) s_before = s_total = 0;
  __syncthreads();
  int32_t before = 0, total = 0;
  for (int32_t b = tid; b < static_cast<int32_t>(gridDim.x); b += kSelectThreads) {
    before += b < static_cast<int32_t>(blockIdx.x) ? ties[b] : 0;
    total += ties[b];
  }
  before = __reduce_add_sync(kFullMask, before);
  total = __reduce_add_sync(kFullMask, total);
  if ((tid & 31) == 0) {
    atomicAdd(&s_before, before);
    atomicAdd(&s_total, total);
  }
  __syncthreads();
  const int64_t out_base = p.cand_offset + st.collected;
  if (blockIdx.x == 0 && tid == 0) cs.seg_end[q] = out_base + st.n_above + min(st.need_ties, s_total);
  int32_t rank_base = s_before;
  if (rank_base >= st.need_ties && st.n_above == 0) return;
  const uint32_t level = static_cast<uint32_t>(st.tie_level);
  int32_t begin, end;
  SliceOf(n, blockIdx.x, gridDim.x, &begin, &end);
  for (int32_t base = begin; base < end; base += kSelectThreads) {
    const int32_t i = base + tid;
    const uint32_t v = i < end ? counters[i] : 0u;
    const int32_t tie = i < end && v == level;
    int32_t rank = 0, chunk_ties = 0;
    SelectScan(scan_tmp).ExclusiveSum(tie, rank, chunk_ties);
    rank += rank_base;
    if (tie && rank < st.need_ties) cs.keys[out_base + st.n_above + rank] = SortKey(static_cast<int32_t>(v), i);
    // the counts above: a slot each, one global atomic a warp (all of the
    // query's slices share the cursor)
    const bool is_above = i < end && v > level;
    const unsigned above_bal = __ballot_sync(kFullMask, is_above);
    int32_t warp_first = 0;
    if ((tid & 31) == 0 && above_bal != 0) warp_first = atomicAdd(sc.above_next + q, __popc(above_bal));
    warp_first = __shfl_sync(kFullMask, warp_first, 0);
    if (is_above) {
      const int32_t pos = warp_first + __popc(above_bal & ((1u << (tid & 31)) - 1u));
      if (pos < st.n_above) cs.keys[out_base + pos] = SortKey(static_cast<int32_t>(v), i);
    }
    rank_base += chunk_ties;
    __syncthreads();  // scan_tmp is used again
  }
}

}  // namespace

Status LaunchCountScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                       const DevSlice* slices, const QueryParams* queries, uint32_t* table,
                       cudaStream_t stream) {
  if (num_items <= 0) return Status::Ok();
  CountScanKernel<<<static_cast<unsigned>(num_items), kScanThreads, 0, stream>>>(
      postings, items, slices, queries, table);
  GENIE_CUDA_CHECK_LAUNCH("CountScanKernel");
  return Status::Ok();
}

std::size_t CountSpreadScratchInts(int32_t num_queries, int32_t slices) {
  return static_cast<std::size_t>(num_queries) * (kDigitBins + 2 + 3 + 1 + static_cast<std::size_t>(slices));
}

Status LaunchCountSelectSpread(const QueryParams* queries, const uint32_t* table, int32_t n_objects, int32_t k,
                               int32_t num_queries, int32_t digits, int32_t slices, int32_t* scratch,
                               const CandState& cand, cudaStream_t stream) {
  if (num_queries <= 0) return Status::Ok();
  const SpreadScratch sc = SpreadLayout(scratch, num_queries);
  const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>(num_queries));
  for (int32_t pass = 0; pass < digits; ++pass) {
    CountSpreadHistKernel<<<grid, kSelectThreads, 0, stream>>>(queries, table, n_objects, pass, sc);
    GENIE_CUDA_CHECK_LAUNCH("CountSpreadHistKernel");
    CountPickKernel<<<static_cast<unsigned>(num_queries), kSelectThreads, 0, stream>>>(queries, k, pass, sc, cand);
    GENIE_CUDA_CHECK_LAUNCH("CountPickKernel");
  }
  CountSliceTiesKernel<<<grid, kSelectThreads, 0, stream>>>(queries, table, n_objects, sc, cand);
  GENIE_CUDA_CHECK_LAUNCH("CountSliceTiesKernel");
  CountSliceCollectKernel<<<grid, kSelectThreads, 0, stream>>>(queries, table, n_objects, sc, cand);
  GENIE_CUDA_CHECK_LAUNCH("CountSliceCollectKernel");
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

}  // namespace gpu
}  // namespace genie

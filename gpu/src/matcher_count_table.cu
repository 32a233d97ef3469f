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

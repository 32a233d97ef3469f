// The k-th smallest value of each row of a matrix of non-negative floats,
// by a radix select over their bit patterns (which order as the values do):
// passes of 11, 11 and 10 bits, each counting the values that share the
// prefix found so far.  The exact vector scan (vector_scan.cu) takes a
// bound on each query's k-th smallest upper bound from it: it gathers
// every vector whose lower bound is within that, so any value at least the
// k-th serves, the closer the fewer candidates.
//   KthKernel       a block a row, two passes: the upper edge of the bin
//                   of 22 bits that holds the k-th value, at most 2^-13
//                   relative above it (each pass reads the whole matrix:
//                   a third, for the k-th value itself, was 0.54 ms of a
//                   10,000-query scan of Fashion-MNIST on an H200, for a
//                   few fewer candidates);
//   KthSplitKernel  fewer than kSplitSelectQueries rows: many blocks a row
//                   (one block a row left the other multiprocessors idle),
//                   a launch a pass, the same two passes and upper edge
//                   (a third pass cost a launch, about 7 us on an H200).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "cuda_util.hpp"
#include "vector_select.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kSelectThreads = 512;
constexpr int kBins = 2048;  // 11 bits a pass
constexpr int32_t kSplitSelectQueries = 32;
constexpr int kSplitThreads = 256;
constexpr int kSplitPerThread = 4;  // values a thread reads in a pass (until kSplitMaxBlocks)
constexpr int kSplitMaxBlocks = 256;
constexpr uint32_t kNoBin = 0xFFFFFFFFu;
constexpr int kSelectPasses = 2;

// The largest value of the 22-bit bin prefix (its low 10 bits all ones),
// or +inf for the bin of +inf, whose edge would be a NaN: the answer of
// both selections.
__device__ __forceinline__ float BinUpperEdge(uint32_t prefix) {
  return prefix >= 0x7F800000u ? INFINITY : __uint_as_float(prefix | 0x3FFu);
}

// kth[q] = the upper edge of the 22-bit bin that holds the k-th smallest
// of row q of d32 (n_rows values >= 0 or +inf, whose bit patterns order as
// the values do); +inf when k > n_rows.
__global__ void __launch_bounds__(kSelectThreads)
KthKernel(const float* __restrict__ d32, int32_t n_rows, int32_t k, float* __restrict__ kth) {
  __shared__ int32_t hist[kBins];
  __shared__ uint32_t s_prefix;
  __shared__ int32_t s_rem;
  const int tid = static_cast<int>(threadIdx.x);
  const float* row = d32 + static_cast<int64_t>(blockIdx.x) * n_rows;
  if (k > n_rows) {
    if (tid == 0) kth[blockIdx.x] = INFINITY;
    return;
  }
  if (tid == 0) {
    s_prefix = 0;
    s_rem = k;
  }
  uint32_t prefix = 0, mask = 0;
  const int shifts[kSelectPasses] = {21, 10};
  for (int pass = 0; pass < kSelectPasses; ++pass) {
    for (int b = tid; b < kBins; b += kSelectThreads) hist[b] = 0;
    __syncthreads();
    const int shift = shifts[pass];
    const uint32_t bin_mask = (1u << 11) - 1u;
    for (int64_t i = tid; i < n_rows; i += kSelectThreads) {
      const uint32_t u = __float_as_uint(row[i]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & bin_mask], 1);
    }
    __syncthreads();
    if (tid < 32) {
      // warp 0: the bin where the count reaches s_rem
      constexpr int kPer = kBins / 32;
      const int lane = tid;
      int sum = 0;
      for (int b = lane * kPer; b < (lane + 1) * kPer; ++b) sum += hist[b];
      int incl = sum;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(0xFFFFFFFFu, incl, off);
        if (lane >= off) incl += t;
      }
      const int excl = incl - sum;
      const int rem = s_rem;
      const unsigned hit = __ballot_sync(0xFFFFFFFFu, excl < rem && rem <= incl);
      if (lane == __ffs(hit) - 1) {
        int cum = excl;
        for (int b = lane * kPer; b < (lane + 1) * kPer; ++b) {
          if (cum + hist[b] >= rem) {
            s_rem = rem - cum;
            s_prefix = prefix | (static_cast<uint32_t>(b) << shift);
            break;
          }
          cum += hist[b];
        }
      }
    }
    __syncthreads();
    prefix = s_prefix;
    mask |= bin_mask << shift;
  }
  if (tid == 0) kth[blockIdx.x] = BinUpperEdge(prefix);
}

// KthKernel's select over several blocks a query (a grid of blocks x
// queries), one launch a pass: each block counts its share of the row into
// shared bins and adds them to the query's bins in global memory; the last
// block of the query to finish (a ticket) finds the bin where the count
// reaches the rank, zeroes the bins and the ticket for the next pass, and
// keeps the prefix and the rank left in state; the last pass writes the
// bin's upper edge.  hist and state start zeroed.
struct KthState {
  uint32_t prefix;
  uint32_t mask;
  int32_t rem;
  uint32_t arrived;
};

__global__ void __launch_bounds__(kSplitThreads)
KthSplitKernel(const float* __restrict__ d32, int32_t n_rows, int32_t k, int pass, int32_t* __restrict__ hist,
               KthState* __restrict__ state, float* __restrict__ kth) {
  __shared__ int32_t bins[kBins];
  __shared__ bool last;
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t q = static_cast<int32_t>(blockIdx.y);
  if (k > n_rows) {
    if (pass == 0 && blockIdx.x == 0 && tid == 0) kth[q] = INFINITY;
    return;
  }
  KthState* st = state + q;
  // The state as the pass before left it, read before this block's ticket:
  // the last block rewrites it, while slower threads of its own may still
  // be about to read it.
  const uint32_t prefix = pass == 0 ? 0u : st->prefix;
  const uint32_t mask = pass == 0 ? 0u : st->mask;
  const int rem = pass == 0 ? k : st->rem;
  const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
  const uint32_t bin_mask = (1u << (pass == 2 ? 10 : 11)) - 1u;
  for (int b = tid; b < kBins; b += kSplitThreads) bins[b] = 0;
  __syncthreads();
  const float* row = d32 + static_cast<int64_t>(q) * n_rows;
  // Most values of a pass share a few bins (the first pass: the exponent),
  // so a warp's lanes with the same bin add once, together: shared-memory
  // atomics on one address serialize.  (The loop's bound is the block's, so
  // every lane of a warp takes part in each match.)
  // A thread's kSplitPerThread values are loaded before any is counted, so
  // their reads overlap.
  const int lane = tid & 31;
  constexpr int64_t kChunk = int64_t{kSplitThreads} * kSplitPerThread;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk; base < n_rows;
       base += static_cast<int64_t>(gridDim.x) * kChunk) {
    uint32_t u[kSplitPerThread];
#pragma unroll
    for (int v = 0; v < kSplitPerThread; ++v) {
      const int64_t i = base + v * kSplitThreads + tid;
      u[v] = i < n_rows ? __float_as_uint(row[i]) : 0u;
    }
#pragma unroll
    for (int v = 0; v < kSplitPerThread; ++v) {
      const bool in = base + v * kSplitThreads + tid < n_rows && (u[v] & mask) == prefix;
      const uint32_t bin = in ? (u[v] >> shift) & bin_mask : kNoBin;
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
      if (bin != kNoBin && lane == __ffs(peers) - 1) atomicAdd(&bins[bin], __popc(peers));
    }
  }
  __syncthreads();
  int32_t* qhist = hist + static_cast<int64_t>(q) * kBins;
  for (int b = tid; b < kBins; b += kSplitThreads)
    if (bins[b] != 0) atomicAdd(&qhist[b], bins[b]);
  __threadfence();  // this block's counts before its ticket
  __syncthreads();
  if (tid == 0) last = atomicAdd(&st->arrived, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every block's counts are in.  Each thread takes 8 consecutive bins
  // (read past L1, which may hold none of them, and zeroed for the next
  // pass), the block scans the sums, and the thread whose bins hold the
  // rank finds the bin.
  constexpr int kPer = kBins / kSplitThreads;
  int own[kPer];
  int sum = 0;
#pragma unroll
  for (int b = 0; b < kPer; ++b) {
    own[b] = __ldcg(&qhist[tid * kPer + b]);
    sum += own[b];
  }
#pragma unroll
  for (int b = 0; b < kPer; ++b) qhist[tid * kPer + b] = 0;
  __shared__ int warp_sums[kSplitThreads / 32];
  int incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int t = __shfl_up_sync(0xFFFFFFFFu, incl, off);
    if (lane >= off) incl += t;
  }
  if (lane == 31) warp_sums[tid >> 5] = incl;
  __syncthreads();
  for (int w = 0; w < (tid >> 5); ++w) incl += warp_sums[w];
  const int excl = incl - sum;
  if (excl < rem && rem <= incl) {
    int cum = excl;
    for (int b = 0; b < kPer; ++b) {
      if (cum + own[b] >= rem) {
        const uint32_t next = prefix | (static_cast<uint32_t>(tid * kPer + b) << shift);
        st->prefix = next;
        st->mask = mask | (bin_mask << shift);
        st->rem = rem - cum;
        if (pass == kSelectPasses - 1) kth[q] = BinUpperEdge(next);  // the last pass
        break;
      }
      cum += own[b];
    }
  }
  if (tid == 0) st->arrived = 0;
}

}  // namespace

Status LaunchKthSelect(const float* d32, int32_t gn, int32_t n_rows, int32_t k, float* kth, cudaStream_t stream) {
  if (gn >= kSplitSelectQueries) {
    KthKernel<<<static_cast<unsigned>(gn), kSelectThreads, 0, stream>>>(d32, n_rows, k, kth);
    GENIE_CUDA_CHECK_LAUNCH("KthKernel");
    return Status::Ok();
  }
  // bins and states, zeroed; freed (kept for reuse) when the search ends
  DeviceMemory scratch;
  const std::size_t hist_bytes = sizeof(int32_t) * kBins * static_cast<std::size_t>(gn);
  GENIE_RETURN_IF_ERROR(scratch.Allocate(hist_bytes + sizeof(KthState) * static_cast<std::size_t>(gn),
                                         "vector scan selection"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.get(), 0, scratch.bytes(), stream));
  int32_t* hist = static_cast<int32_t*>(scratch.get());
  KthState* state = reinterpret_cast<KthState*>(static_cast<unsigned char*>(scratch.get()) + hist_bytes);
  constexpr int64_t kPerBlock = int64_t{kSplitThreads} * kSplitPerThread;
  const unsigned blocks = static_cast<unsigned>(
      std::clamp<int64_t>((static_cast<int64_t>(n_rows) + kPerBlock - 1) / kPerBlock, 1, kSplitMaxBlocks));
  for (int pass = 0; pass < kSelectPasses; ++pass) {
    KthSplitKernel<<<dim3(blocks, static_cast<unsigned>(gn)), kSplitThreads, 0, stream>>>(d32, n_rows, k, pass,
                                                                                         hist, state, kth);
    GENIE_CUDA_CHECK_LAUNCH("KthSplitKernel");
  }
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

// Device helpers shared by the GPU engine's kernel files (internal to
// gpu/src; included only by .cu files).  Everything here is inline and has
// internal linkage, as when the kernels shared one translation unit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

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

// A candidate's sort key: ascending order is score descending, then object
// ascending (the order of hits).
__device__ __forceinline__ unsigned long long SortKey(int32_t score, uint32_t object) {
  return (static_cast<unsigned long long>(0x7FFFFFFFu - static_cast<uint32_t>(score)) << 32) |
         object;
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

}  // namespace
}  // namespace gpu
}  // namespace genie

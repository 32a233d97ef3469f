// gpu/src: device helpers of the exact vector scan's distance tiles, shared
// by the tiles of every chip (vector_distance.cu) and Hopper's warpgroup
// tiles (vector_distance_sm90.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cfloat>
#include <cstdint>

#include "vector_distance.hpp"

namespace genie {
namespace gpu {

// U of query q and vector r from their float32 dot product: +inf for an
// excluded vector, and when the sum overflowed or is NaN (always a candidate).
__device__ __forceinline__ float Upper(float dot, Norms qn, int64_t q, Norms xn, int64_t r, ErrorTerms terms,
                                       const uint8_t* excluded) {
  if (excluded != nullptr && excluded[r]) return INFINITY;
  const float s32 = fmaf(-2.0f, dot, qn.squared[q] + xn.squared[r]);
  const float upper = s32 + ErrorBound(terms, qn.length[q], xn.length[r]);
  // tested before fmaxf, which would turn a NaN into 0 (and so lower the
  // k-th bound below the other vectors' distances)
  return upper <= FLT_MAX ? fmaxf(upper, 0.0f) : INFINITY;
}

// cp.async of 16 bytes from global to shared memory; zero-fills (reads
// nothing) when !valid.  Sm_80 and later, as the tensor cores' TF32.
__device__ __forceinline__ void CopyAsync16(float* dst, const float* src, bool valid) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// v rounded to TF32 (its 10 stored fraction bits, to nearest, ties away
// from zero): add half of the 13 dropped bits' unit, then clear them.  Two
// integer operations; |v - tf32(v)| <= 2^-11 |v|, and for v within
// [2^-32, 2^32] (the tiles' range) the carry can neither reach the
// exponent's top nor make an infinity.
__device__ __forceinline__ uint32_t RoundTf32(float v) {
  return (__float_as_uint(v) + 0x1000u) & 0xFFFFE000u;
}

}  // namespace gpu
}  // namespace genie

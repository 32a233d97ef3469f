// gpu/src: the float32 upper bounds U on the squared distances of a group
// of queries to the vectors of a part, and the error bound e that turns a
// float32 distance into U = s32 + e and L = s32 - e (the exact vector scan,
// vector_scan.cu; why it is exact: genie/vectors.hpp and vector_distance.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

// Queries and vectors of the large distance tiles; parts of a streamed set
// and groups of queries are cut to whole tiles.
constexpr int kDistanceTile = 128;

// The norms a bound needs: |v|^2 and |v| of each query and vector.
struct Norms {
  const float* squared;
  const float* length;
};

// e(q, x) = coef (|q| + |x|)^2 + slack: coef covers the relative rounding
// of the products and sums, slack the absolute loss of results below
// float32's normal range.  Which terms hold depends on the kernel that
// computed s32, and the gather must use the same (GroupTerms).
struct ErrorTerms {
  float coef = 0;
  float slack = 0;
};

// float32 fused multiply-adds on the CUDA cores, any summation order.
ErrorTerms Float32Terms(int32_t dim);
// Values rounded to TF32, multiplied on the tensor cores (one product a
// pair, see vector_distance.cu): valid only for values that are 0 or of
// magnitude in [2^-32, 2^32] (then no rounded value, product or partial
// sum leaves float32's normal range, which the terms assume).
ErrorTerms Tf32Terms(int32_t dimp);

__host__ __device__ __forceinline__ bool OutsideTf32Range(float v) {
  constexpr uint32_t kLow = 0x2F800000u;   // 2^-32
  constexpr uint32_t kHigh = 0x4F800000u;  // 2^32
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  bits &= 0x7FFFFFFFu;  // magnitudes order as their bit patterns; NaN and inf are above kHigh
  return bits != 0 && bits - kLow > kHigh - kLow;
}

__device__ __forceinline__ float ErrorBound(ErrorTerms terms, float q_len, float x_len) {
  const float sum = q_len + x_len;
  return fmaf(terms.coef * sum, sum, terms.slack);
}

// The error terms of a group's U: the tensor cores' when their tiles could
// take them (tf32_possible) and no query value ruled them out (the device
// flag *outside, set by LaunchNorms; NULL when the host checked the
// queries), float32's otherwise.  The kernels read the flag themselves:
// the host never waits for it.
struct GroupTerms {
  ErrorTerms float32;
  ErrorTerms tf32;
  bool tf32_possible = false;
  const int* outside = nullptr;
  bool warpgroup = false;  // the TF32 products were Hopper's warpgroup tiles' (for tests)
  __device__ ErrorTerms get() const { return tf32_possible && (outside == nullptr || *outside == 0) ? tf32 : float32; }
};

// |v|^2 and |v| of count vectors of dim floats (stride apart), summed in
// float64 and rounded to float: the error terms cover the rounding.  With
// tf32_safe, also whether no value is OutsideTf32Range.
void HostNorms(const float* v, int64_t count, int32_t dim, int64_t stride, std::vector<float>* squared,
               std::vector<float>* length, bool* tf32_safe = nullptr);

// The same norms of count padded vectors or queries (dimp floats apart) on
// the device, the bits equal HostNorms', and *outside (zeroed by the
// caller) set to 1 when a value is OutsideTf32Range; queued on stream.
Status LaunchNorms(const float* vectors, int32_t count, int32_t dim, int32_t dimp, float* squared, float* length,
                   int* outside, cudaStream_t stream);

// Every U of a group of gn queries (padded to dimp, as the vectors) against
// n_rows vectors into d32 (gn rows of n_rows), +inf for the excluded, queued
// on stream; *used gets the terms the gather must use.  Groups of more than
// 8 queries take the tensor-core tiles when set_tf32_safe and the queries
// allow: queries_safe (checked on the host), or their device flag
// query_outside (NULL: none), with which the float32 tiles are launched
// beside and one of the two returns at once.
// Large groups, more than kMidQueries, take Hopper's warpgroup tiles where WarpgroupTilesUsable()
// and warpgroup_queries holds the same queries rounded by RoundQueriesTf32
// (NULL: the warp tiles, as on other chips and in tests that compare them).
constexpr int32_t kMidQueries = 64;
Status LaunchDistances(const float* queries, Norms qn, int32_t gn, const float* rows, Norms xn, int32_t n_rows,
                       int32_t dimp, int32_t dim, bool set_tf32_safe, const int* query_outside, bool queries_safe,
                       const uint8_t* excluded, float* d32, cudaStream_t stream, GroupTerms* used,
                       const float* warpgroup_queries = nullptr);

// Hopper's warpgroup tiles (vector_distance_sm90.cu, built where nvcc
// knows sm_90a: GENIE_WITH_SM90A): whether the current device runs them
// (compute capability 9.0, asked once a device), its operand of queries
// (count values, a multiple of 4, rounded to nearest TF32 into out: once a
// scan, not once a launch), and the TF32 U of a group on them, as
// LaunchDistances' tensor-core tiles with the same terms.
#if GENIE_WITH_SM90A
bool WarpgroupTilesUsable();
Status RoundQueriesTf32(const float* queries, int64_t count, float* out, cudaStream_t stream);
Status LaunchWarpgroupTiles(const float* rounded_queries, Norms qn, int32_t gn, const float* rows, Norms xn,
                            int32_t n_rows, int32_t dimp, ErrorTerms terms, const uint8_t* excluded, float* d32,
                            const int* outside, cudaStream_t stream);
#else
inline bool WarpgroupTilesUsable() { return false; }
inline Status RoundQueriesTf32(const float*, int64_t, float*, cudaStream_t) {
  return Status::Internal("this build has no warpgroup tiles");
}
#endif

}  // namespace gpu
}  // namespace genie

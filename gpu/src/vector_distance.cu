// The float32 upper bounds of the exact vector scan (vector_scan.cu): for
// each (query, vector) pair of a group and a part, U = s32 + e, where s32 is
// the squared distance in the expanded form |q|^2 + |x|^2 - 2 q.x computed
// in float32 (a matrix product: one multiply-add an element, twice the rate
// of summing (q_i - x_i)^2) and e(q, x) = coef (|q| + |x|)^2 + slack bounds
// its error; the gather takes L = s32 - e, and the re-rank computes the
// candidates' distances to the bit.  e must hold for the arithmetic of the
// kernel that computed s32:
//
// float32 on the CUDA cores (Float32Terms).  |s32 - s| <= (dim + 16)
// 2^-23 (|q| + |x|)^2 + (dim + 4) 2^-140: the dot product's gamma_dim |q||x|
// twice, the norms' and the two last operations' roundings, with margin
// (and since (|q| + |x|)^2 >= 4 |q||x|); the second term for underflow.  It
// holds for any order of the sums.  Three kernels:
//   SmallDistanceKernel        at most 8 queries, a warp a vector, each
//                              vector read once (memory speed);
//   DistanceKernel<32, 4, 4>   groups of 9 to kMidQueries queries, and
//   DistanceKernel<128, 8, 8>  larger groups, whose values the tensor
//                              cores' tiles do not take.
//
// TF32 on the tensor cores (Tf32Terms, Tf32DistanceKernel: groups of
// more than 8 queries).  Each value v is rounded to t = tf32(v), its 10
// stored fraction bits to nearest (RoundTf32): |v - t| <= 2^-11 |v|, and a
// product of two is exact in float32 (11 x 11 bits), so |q_i x_i - t(q_i)
// t(x_i)| <= (2^-10 + 2^-22) |q_i x_i|, and the dot product's rounding of
// its values loses at most (2^-10 + 2^-22) sum |q_i x_i| <= (2^-10 +
// 2^-22) |q||x|.  The tensor cores add a block of products to the float32
// accumulator by aligning them to the largest and truncating (Fasi et al.
// 2021 for V100 and A100; Khattak and Mikaitis 2025 for H100 and B200): a
// block of B products loses at most (B + 2) 2^-23 of the absolute sum it
// adds to, and a block of zeros (the stages' padding beyond dimp) nothing,
// so the ceil(dimp / 8) instructions of a dot product (blocks of 4 or 8)
// lose at most 1.5 (dimp + 4) 2^-23 sum |q_i x_i|.  Twice the two (s32
// holds -2 q.x), with the norms' and the last operations' roundings, is
// below (2^-11 + 2^-23) (|q| + |x|)^2 + (0.75 dimp + 41) 2^-23 (|q| +
// |x|)^2 (as 4 |q||x| <= (|q| + |x|)^2).  coef is (4096 + 8 dimp + 64)
// 2^-23: the rounding's part as it is (it is exact arithmetic: values of
// 1 + 2^-11 times powers of two, all ties, meet it), the rest 2 (dimp 4)
// to 10 (dimp 784) times the papers' bound, in case an accumulator is
// narrower than they measured (tests find
// |s32 - s| within 0.21 of e at dim 784 and 0.97 at dim 8 on such ties,
// below 0.41 on other data).  For Fashion-MNIST's nearest 10 that is
// about 20 candidates a query (19.8 by the exact distances' U and L, 15.2
// when each product was split into three TF32 products, whose rounding
// part was near 2^-20, at three times the products).
// With every value 0 or of magnitude in [2^-32, 2^32] (not
// OutsideTf32Range: the set's values checked where their norms are
// computed, on the device for a resident set; the queries' likewise, a few
// on the host, many on the device, whose flag for the whole batch the
// kernels read; else the float32 tiles) no rounded value or product leaves
// float32's normal range, and rounding cannot carry into an infinity; a
// partial sum that cancels below it may be flushed, at most 2^-126 a step:
// slack is (3 dimp + 8) 2^-120.
// gpu/tests/vector_bounds_test.cpp measures |s32 - s| / e for every kernel
// on data of every shape.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_vector_scan.hpp"
#include "vector_distance.hpp"
#include "vector_tiles.cuh"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kTileK = 8;  // dimensions staged at a time (two stages in flight)
// Groups of at most kSmallQueries queries whose rows fit kSmallSharedBytes
// of shared memory take SmallDistanceKernel (a warp a vector).
constexpr int kSmallQueries = 8;
constexpr int kSmallThreads = 256;
constexpr std::size_t kSmallSharedBytes = 48 * 1024;
constexpr int64_t kSmallMaxBlocks = 4096;
// Groups of up to kMidQueries queries (vector_distance.hpp) that
// SmallDistanceKernel does not take get tiles of kMidTileQ queries.
constexpr int kMidTileQ = 32;
// The tensor-core tiles: up to kDistanceTile queries x kDistanceTile
// vectors a block, kTf32K dimensions a stage, kTf32Stages stages in flight (cp.async), each staged
// row kTf32Stride floats apart (16 + 4: a warp's fragment reads then fall
// on 32 distinct banks).
constexpr int kTf32K = 16;
constexpr int kTf32Stride = kTf32K + 4;
constexpr int kTf32Stages = 3;

// Every U of a tile of TQ queries x kDistanceTile vectors a block, PQ x PR pairs a
// thread, the dimensions staged through shared memory kTileK at a time, the
// next stage loading while the current one is multiplied.  A thread's
// queries are PQ / 4 runs of 4, spaced 4 TQ / PQ apart (and its vectors
// likewise), so that a warp's float4 reads of a stage fall on distinct
// banks or on one (a broadcast).  <128, 8, 8> serves large groups;
// <32, 4, 4> groups of up to kMidQueries, for which 128-query tiles
// computed 2 to 14 times the products used (0.37 ms for 64 Fashion-MNIST
// queries on an H200).
template <int TQ, int PQ, int PR>
__global__ void __launch_bounds__(kThreads)
DistanceKernel(const float* __restrict__ queries, Norms qn, int32_t nq, const float* __restrict__ rows, Norms xn,
               int32_t n_rows, int32_t dimp, ErrorTerms terms, const uint8_t* __restrict__ excluded,
               float* __restrict__ out, const int* only_if_outside) {
  // beside Tf32DistanceKernel: the queries' flag says which of the two runs
  if (only_if_outside != nullptr && *only_if_outside == 0) return;
  static_assert(TQ / PQ * (kDistanceTile / PR) == kThreads, "a thread for each PQ x PR pairs of the tile");
  static_assert(TQ <= kThreads / 2 && kDistanceTile == kThreads / 2, "a stage loads a row's 8 dimensions with two threads");
  constexpr int kQSpan = 4 * TQ / PQ, kRSpan = 4 * kDistanceTile / PR;  // between a thread's runs of 4
  // Two stages of kTileK dimensions: the next is loaded into registers
  // while the current is multiplied, so one barrier a stage suffices.
  __shared__ __align__(16) float qs[2][kTileK][TQ];
  __shared__ __align__(16) float xs[2][kTileK][kDistanceTile];
  const int tid = static_cast<int>(threadIdx.x);
  const int tq = tid / (kDistanceTile / PR), tr = tid % (kDistanceTile / PR);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * TQ;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kDistanceTile;
  // Loading a stage: row li of each tile (of the queries' only for the
  // first 2 TQ threads), dimensions lk .. lk + 3 of it.
  const int li = tid / 2, lk = (tid % 2) * 4;
  const bool q_loader = li < TQ;
  const bool q_in = q_loader && q0 + li < nq, r_in = r0 + li < n_rows;
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  auto load = [&](int k0, float4* qv, float4* xv) {
    const bool k_in = k0 + lk < dimp;
    *qv = q_in && k_in ? *reinterpret_cast<const float4*>(queries + (q0 + li) * dimp + k0 + lk) : zero;
    *xv = r_in && k_in ? *reinterpret_cast<const float4*>(rows + (r0 + li) * dimp + k0 + lk) : zero;
  };
  auto store = [&](int buf, const float4& qv, const float4& xv) {
    if (q_loader) {
      qs[buf][lk][li] = qv.x;
      qs[buf][lk + 1][li] = qv.y;
      qs[buf][lk + 2][li] = qv.z;
      qs[buf][lk + 3][li] = qv.w;
    }
    xs[buf][lk][li] = xv.x;
    xs[buf][lk + 1][li] = xv.y;
    xs[buf][lk + 2][li] = xv.z;
    xs[buf][lk + 3][li] = xv.w;
  };
  float acc[PQ][PR];
#pragma unroll
  for (int i = 0; i < PQ; ++i)
#pragma unroll
    for (int j = 0; j < PR; ++j) acc[i][j] = 0.0f;

  float4 qv, xv;
  load(0, &qv, &xv);
  store(0, qv, xv);
  __syncthreads();
  int buf = 0;
  for (int k0 = 0; k0 < dimp; k0 += kTileK) {
    const bool more = k0 + kTileK < dimp;
    if (more) load(k0 + kTileK, &qv, &xv);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[PQ], b[PR];
#pragma unroll
      for (int g = 0; g < PQ / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&qs[buf][kk][g * kQSpan + tq * 4]);
        a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < PR / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&xs[buf][kk][g * kRSpan + tr * 4]);
        b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < PQ; ++i)
#pragma unroll
        for (int j = 0; j < PR; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) {
      // buf ^ 1 was last read before the previous barrier
      store(buf ^ 1, qv, xv);
      __syncthreads();
      buf ^= 1;
    }
  }
#pragma unroll
  for (int i = 0; i < PQ; ++i) {
    const int64_t q = q0 + (i / 4) * kQSpan + tq * 4 + i % 4;
    if (q >= nq) continue;
#pragma unroll
    for (int j = 0; j < PR; ++j) {
      const int64_t r = r0 + (j / 4) * kRSpan + tr * 4 + j % 4;
      if (r >= n_rows) continue;
      out[q * n_rows + r] = Upper(acc[i][j], qn, q, xn, r, terms, excluded);
    }
  }
}

// Every U of a group of at most NQ queries (a single statement's, a few
// sessions'): the tile kernel computes a 128 x 128 tile of products to use
// nq rows of it, 128 times the work for one query.  Here a warp takes one
// vector at a time and reads it once (float4 across the lanes), multiplies
// it with each query (held in shared memory) and sums across the warp: one
// pass over the vectors, at memory speed.  The products are summed in
// another order than the tile kernel's, which the error bound allows (it
// holds for any order); the re-rank makes the answer exact either way.
template <int NQ>
__global__ void __launch_bounds__(kSmallThreads)
SmallDistanceKernel(const float* __restrict__ queries, Norms qn, int32_t nq, const float* __restrict__ rows,
                    Norms xn, int32_t n_rows, int32_t dimp, ErrorTerms terms,
                    const uint8_t* __restrict__ excluded, float* __restrict__ out) {
  extern __shared__ float4 qsh[];  // nq rows of dimp / 4 float4
  const int d4 = dimp / 4;
  for (int i = static_cast<int>(threadIdx.x); i < nq * d4; i += static_cast<int>(blockDim.x))
    qsh[i] = reinterpret_cast<const float4*>(queries)[i];
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5); r < n_rows;
       r += static_cast<int64_t>(gridDim.x) * warps) {
    const float4* x = reinterpret_cast<const float4*>(rows + r * dimp);
    float acc[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) acc[q] = 0.0f;
    for (int i = lane; i < d4; i += 32) {
      const float4 xv = x[i];
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        if (q >= nq) break;
        const float4 qv = qsh[q * d4 + i];
        acc[q] = fmaf(qv.x, xv.x, acc[q]);
        acc[q] = fmaf(qv.y, xv.y, acc[q]);
        acc[q] = fmaf(qv.z, xv.z, acc[q]);
        acc[q] = fmaf(qv.w, xv.w, acc[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[q] += __shfl_xor_sync(0xFFFFFFFFu, acc[q], off);
    if (lane != 0) continue;
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
      if (q >= nq) break;
      out[static_cast<int64_t>(q) * n_rows + r] = Upper(acc[q], qn, q, xn, r, terms, excluded);
    }
  }
}


// c += a b for a 16 x 8 (row-major) by 8 x 8 (column-major) TF32 product:
// a warp's lanes hold a (rows g and g + 8, columns t and t + 4), b (rows t
// and t + 4, column g) and c (rows g and g + 8, columns 2t and 2t + 1),
// g = lane / 4, t = lane % 4.
__device__ __forceinline__ void MmaTf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Every U of a tile of TQ queries x kDistanceTile vectors a block, on the
// tensor cores with each value rounded to TF32 (see the top).  Eight
// warps, WQ along the queries and 8 / WQ along the vectors, each MI x NI
// products of 16 x 8 (one instruction each a step of 8 dimensions): <128, 2> for large groups (64 x 32 a warp), <64, 2> and
// <32, 1> for groups of 33 to 64 and of 9 to 32 queries (32 x 32 and 32 x
// 16 a warp), where a 128-query tile computed 2 to 14 times the products
// used.  Stages of kTf32K dimensions of the tile's queries and vectors
// arrive by cp.async, kTf32Stages in flight, so the loads overlap the
// products.  Until 2026-12-02 each product was split into three TF32
// products (big and small halves of each value; e 1.65 times smaller at
// dim 784): with Nsight Compute on an H200 the tensor pipe was 52%
// busy at two blocks a multiprocessor, and one product a pair made 10,000
// Fashion-MNIST queries' whole scan 1.29x faster for 20 candidates a query
// instead of 15 (bench/tf32-vectors-h200.txt).  On compute capability
// 9.0 large groups take Hopper's warpgroup tiles instead
// (vector_distance_sm90.cu, twice as fast there).  outside: the queries' range flag (NULL:
// the host checked them).
template <int TQ, int WQ>
__global__ void __launch_bounds__(kThreads)
Tf32DistanceKernel(const float* __restrict__ queries, Norms qn, int32_t nq, const float* __restrict__ rows,
                        Norms xn, int32_t n_rows, int32_t dimp, ErrorTerms terms,
                        const uint8_t* __restrict__ excluded, float* __restrict__ out, const int* outside) {
  constexpr int kWR = kThreads / 32 / WQ;          // warps along the vectors
  constexpr int MI = TQ / WQ / 16, NI = kDistanceTile / kWR / 8;
  static_assert(MI >= 1 && NI >= 1 && TQ % (16 * WQ) == 0, "whole 16 x 8 products a warp");
  constexpr int kStageFloats = (TQ + kDistanceTile) * kTf32Stride;
  if (outside != nullptr && *outside != 0) return;  // a query value beyond the range: DistanceKernel's
  extern __shared__ __align__(16) float staged[];  // [kTf32Stages][TQ query rows, then the vectors'][kTf32Stride]
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wq = (warp / kWR) * (MI * 16), wr = (warp % kWR) * (NI * 8);  // the warp's queries and vectors
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * TQ;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kDistanceTile;
  const int stages = (dimp + kTf32K - 1) / kTf32K;
  // A stage: 16-byte piece c of the tile's rows (the queries', then the
  // vectors'), row c / (kTf32K / 4), dimensions k0 + 4 (c % (kTf32K / 4))
  // .. + 3; zeros beyond the queries, the vectors and dimp (a multiple of 4).
  auto load = [&](int stage, int k0) {
    float* base = staged + stage * kStageFloats;
#pragma unroll
    for (int c = tid; c < (TQ + kDistanceTile) * kTf32K / 4; c += kThreads) {
      const int row = c / (kTf32K / 4), col = c % (kTf32K / 4) * 4;
      const bool k_in = k0 + col < dimp;
      if (row < TQ) {
        const bool in = k_in && q0 + row < nq;
        CopyAsync16(base + row * kTf32Stride + col, in ? queries + (q0 + row) * dimp + k0 + col : queries, in);
      } else {
        const bool in = k_in && r0 + (row - TQ) < n_rows;
        CopyAsync16(base + row * kTf32Stride + col, in ? rows + (r0 + row - TQ) * dimp + k0 + col : rows, in);
      }
    }
  };
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  load(0, 0);
  CommitCopies();
  if (stages > 1) load(1, kTf32K);
  CommitCopies();
  for (int s = 0; s < stages; ++s) {
    WaitCopies<1>();  // this thread's copies of stage s have landed ...
    __syncthreads();  // ... and every thread's; stage s - 1's buffer is free
    if (s + 2 < stages) load((s + 2) % kTf32Stages, (s + 2) * kTf32K);
    CommitCopies();  // (an empty group at the end keeps the count uniform)
    const float* qs = staged + (s % kTf32Stages) * kStageFloats;
    const float* xs = qs + TQ * kTf32Stride;
#pragma unroll
    for (int kk = 0; kk < kTf32K; kk += 8) {
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const float* p = qs + (wq + i * 16 + g) * kTf32Stride + kk + t;
        a[i][0] = RoundTf32(p[0]);
        a[i][1] = RoundTf32(p[8 * kTf32Stride]);
        a[i][2] = RoundTf32(p[4]);
        a[i][3] = RoundTf32(p[8 * kTf32Stride + 4]);
      }
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const float* p = xs + (wr + j * 8 + g) * kTf32Stride + kk + t;
        b[j][0] = RoundTf32(p[0]);
        b[j][1] = RoundTf32(p[4]);
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) MmaTf32(acc[i][j], a[i], b[j]);
    }
  }
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t q = q0 + wq + i * 16 + g + 8 * h;
      if (q >= nq) continue;
#pragma unroll
      for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t r = r0 + wr + j * 8 + 2 * t + c;
          if (r < n_rows) out[q * n_rows + r] = Upper(acc[i][j][2 * h + c], qn, q, xn, r, terms, excluded);
        }
    }
}

// Launches Tf32DistanceKernel<TQ, WQ> over gn queries.
template <int TQ, int WQ>
Status LaunchTf32Tiles(const float* queries, Norms qn, int32_t gn, const float* rows, Norms xn, int32_t n_rows,
                        int32_t dimp, ErrorTerms terms, const uint8_t* excluded, float* d32, const int* outside,
                        cudaStream_t stream) {
  constexpr std::size_t kShared = sizeof(float) * kTf32Stages * (TQ + kDistanceTile) * kTf32Stride;
  // over the 48 KB a kernel gets unasked (per device; setting it again is cheap)
  GENIE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(Tf32DistanceKernel<TQ, WQ>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kShared)));
  const dim3 grid(GridBlocks(n_rows, kDistanceTile), GridBlocks(gn, TQ));
  Tf32DistanceKernel<TQ, WQ><<<grid, kThreads, kShared, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp, terms,
                                                                      excluded, d32, outside);
  GENIE_CUDA_CHECK_LAUNCH("Tf32DistanceKernel");
  return Status::Ok();
}

}  // namespace

ErrorTerms Float32Terms(int32_t dim) {
  return ErrorTerms{static_cast<float>((dim + 16.0) * 0x1p-23), static_cast<float>((dim + 4.0) * 0x1p-140)};
}

ErrorTerms Tf32Terms(int32_t dimp) {
  return ErrorTerms{static_cast<float>((4096.0 + 8.0 * dimp + 64.0) * 0x1p-23),
                    static_cast<float>((3.0 * dimp + 8.0) * 0x1p-120)};
}

// The norms of padded vectors or queries on the device, a lane each:
// |v|^2 summed in double in element order with every operation rounded on its
// own (no fused multiply-add), so the bits equal HostNorms'.
// A warp takes 32 vectors and reads them 32 dimensions at a time, each
// vector's 128 bytes by the whole warp, the 32 loads of a step issued
// together and the next step's loaded while this one's are summed; each
// lane then sums its vector's squares in order from shared memory, as
// HostNorms does: the same float64 sum, so the same bits.  (A thread a
// vector reading its own row waited for memory at every element: 62-66 us
// for 1,024 to 10,000 Fashion-MNIST queries, 137 us for the 60,000 rows.)
constexpr int kNormsWarps = 4;
__global__ void __launch_bounds__(32 * kNormsWarps)
    NormsKernel(const float* __restrict__ v, int32_t count, int32_t dim, int32_t stride, float* __restrict__ squared,
                float* __restrict__ length, int* outside) {
  __shared__ float tile[kNormsWarps][32][33];  // [vector][dimension], + 1: a lane's row on its own bank
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kNormsWarps + warp) * 32;
  if (first >= count) return;
  const int rows = static_cast<int>(std::min<int64_t>(32, count - first));
  const float* column = v + first * stride + lane;  // this lane's dimension of the warp's first vector
  float next[32];
  auto load = [&](int32_t j0) {
    const bool in = j0 + lane < dim;
#pragma unroll
    for (int r = 0; r < 32; ++r) next[r] = in && r < rows ? column[static_cast<int64_t>(r) * stride + j0] : 0.0f;
  };
  double sum = 0;
  bool beyond = false;
  load(0);
  for (int32_t j0 = 0; j0 < dim; j0 += 32) {
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      tile[warp][r][lane] = next[r];
      beyond |= OutsideTf32Range(next[r]);  // (false for a padded place's 0)
    }
    __syncwarp();
    if (j0 + 32 < dim) load(j0 + 32);
    const int width = std::min(32, dim - j0);
    if (lane < rows) {
      for (int j = 0; j < width; ++j) {
        const double x = static_cast<double>(tile[warp][lane][j]);
        sum = __dadd_rn(sum, __dmul_rn(x, x));
      }
    }
    __syncwarp();
  }
  if (lane < rows) {
    squared[first + lane] = static_cast<float>(sum);
    length[first + lane] = static_cast<float>(sqrt(sum));
  }
  if (__any_sync(0xffffffffu, beyond) && lane == 0) *outside = 1;
}

Status LaunchNorms(const float* vectors, int32_t count, int32_t dim, int32_t dimp, float* squared, float* length,
                   int* outside, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  NormsKernel<<<GridBlocks(count, 32 * kNormsWarps), 32 * kNormsWarps, 0, stream>>>(vectors, count, dim, dimp, squared,
                                                                                    length, outside);
  GENIE_CUDA_CHECK_LAUNCH("NormsKernel");
  return Status::Ok();
}

Status LaunchDistances(const float* queries, Norms qn, int32_t gn, const float* rows, Norms xn, int32_t n_rows,
                       int32_t dimp, int32_t dim, bool set_tf32_safe, const int* query_outside, bool queries_safe,
                       const uint8_t* excluded, float* d32, cudaStream_t stream, GroupTerms* used,
                       const float* warpgroup_queries) {
  const ErrorTerms terms = Float32Terms(dim);
  *used = GroupTerms{terms, Tf32Terms(dimp), false, nullptr};
  const std::size_t shared = sizeof(float) * static_cast<std::size_t>(gn) * static_cast<std::size_t>(dimp);
  if (gn <= kSmallQueries && shared <= kSmallSharedBytes) {
    const unsigned blocks = static_cast<unsigned>(
        std::min<int64_t>(GridBlocks(n_rows, kSmallThreads / 32), kSmallMaxBlocks));
    if (gn == 1) {
      SmallDistanceKernel<1><<<blocks, kSmallThreads, shared, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp,
                                                                        terms, excluded, d32);
    } else if (gn <= 2) {
      SmallDistanceKernel<2><<<blocks, kSmallThreads, shared, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp,
                                                                        terms, excluded, d32);
    } else if (gn <= 4) {
      SmallDistanceKernel<4><<<blocks, kSmallThreads, shared, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp,
                                                                        terms, excluded, d32);
    } else {
      SmallDistanceKernel<kSmallQueries><<<blocks, kSmallThreads, shared, stream>>>(queries, qn, gn, rows, xn, n_rows,
                                                                                    dimp, terms, excluded, d32);
    }
    GENIE_CUDA_CHECK_LAUNCH("SmallDistanceKernel");
    return Status::Ok();
  }
  // the tensor cores' tiles where the set's and the queries' values allow
  // them: known on the host (queries_safe), or read by the kernels from
  // the queries' device flag, with the float32 tiles launched beside
  const bool large = gn > kMidQueries;
  const bool tf32 = set_tf32_safe && (query_outside != nullptr || queries_safe);
  if (tf32) {
    used->tf32_possible = true;
    used->outside = query_outside;
    used->warpgroup = large && warpgroup_queries != nullptr && WarpgroupTilesUsable();
    const Status launched =
#if GENIE_WITH_SM90A
        used->warpgroup ? LaunchWarpgroupTiles(warpgroup_queries, qn, gn, rows, xn, n_rows, dimp, used->tf32, excluded, d32,
                                               query_outside, stream) :
#endif
        large ? LaunchTf32Tiles<kDistanceTile, 2>(queries, qn, gn, rows, xn, n_rows, dimp, used->tf32, excluded, d32,
                                                   query_outside, stream)
        : gn > kMidTileQ ? LaunchTf32Tiles<2 * kMidTileQ, 2>(queries, qn, gn, rows, xn, n_rows, dimp, used->tf32,
                                                               excluded, d32, query_outside, stream)
                         : LaunchTf32Tiles<kMidTileQ, 1>(queries, qn, gn, rows, xn, n_rows, dimp, used->tf32,
                                                          excluded, d32, query_outside, stream);
    GENIE_RETURN_IF_ERROR(launched);
    if (query_outside == nullptr) return Status::Ok();
  }
  const int* only_if_outside = tf32 ? query_outside : nullptr;
  const dim3 grid(GridBlocks(n_rows, kDistanceTile), GridBlocks(gn, large ? kDistanceTile : kMidTileQ));
  if (large) {
    DistanceKernel<kDistanceTile, 8, 8><<<grid, kThreads, 0, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp, terms,
                                                                       excluded, d32, only_if_outside);
  } else {
    DistanceKernel<kMidTileQ, 4, 4><<<grid, kThreads, 0, stream>>>(queries, qn, gn, rows, xn, n_rows, dimp, terms,
                                                                   excluded, d32, only_if_outside);
  }
  GENIE_CUDA_CHECK_LAUNCH("DistanceKernel");
  return Status::Ok();
}

void HostNorms(const float* v, int64_t count, int32_t dim, int64_t stride, std::vector<float>* squared,
               std::vector<float>* length, bool* tf32_safe) {
  squared->resize(static_cast<std::size_t>(count));
  length->resize(static_cast<std::size_t>(count));
  bool beyond = false;
  for (int64_t i = 0; i < count; ++i) {
    const float* row = v + i * stride;
    double sum = 0;
    for (int32_t j = 0; j < dim; ++j) {
      sum += static_cast<double>(row[j]) * row[j];
      beyond |= OutsideTf32Range(row[j]);
    }
    (*squared)[static_cast<std::size_t>(i)] = static_cast<float>(sum);
    (*length)[static_cast<std::size_t>(i)] = static_cast<float>(std::sqrt(sum));
  }
  if (tf32_safe != nullptr) *tf32_safe = !beyond;
}

}  // namespace gpu

Status GpuVectorUpperBounds(const VectorSet& set, const float* queries, int32_t n_queries, int32_t device_ordinal,
                            bool tf32, GpuVectorBounds* out, bool warpgroup) {
  if (out == nullptr || (queries == nullptr && n_queries > 0) || n_queries < 0)
    return Status::InvalidArgument("GpuVectorUpperBounds: bad arguments");
  try {
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    gpu::DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_ordinal));
    const int32_t dim = set.dim, dimp = (set.dim + 3) / 4 * 4, n = set.size();
    auto padded = [&](const float* v, int32_t count) {
      std::vector<float> p(static_cast<std::size_t>(count) * dimp + 1, 0.0f);
      for (int32_t i = 0; i < count; ++i)
        std::copy_n(v + static_cast<std::size_t>(i) * dim, dim, p.data() + static_cast<std::size_t>(i) * dimp);
      return p;
    };
    // as a scan does: the set's norms and range on the host, the queries'
    // on the device
    const std::vector<float> hq = padded(queries, n_queries), hx = padded(set.values.data(), n);
    std::vector<float> x_sq, x_len;
    bool set_safe = false;
    gpu::HostNorms(set.values.data(), n, dim, dim, &x_sq, &x_len, &set_safe);
    x_sq.push_back(0);
    x_len.push_back(0);
    gpu::DeviceArray<float> dq, dx, dq_sq, dq_len, dx_sq, dx_len, d32;
    gpu::DeviceArray<int> outside;
    GENIE_RETURN_IF_ERROR(gpu::Upload(hq.data(), hq.size(), &dq, "bound test queries"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(hx.data(), hx.size(), &dx, "bound test vectors"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(x_sq.data(), x_sq.size(), &dx_sq, "bound test norms"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(x_len.data(), x_len.size(), &dx_len, "bound test norms"));
    GENIE_RETURN_IF_ERROR(dq_sq.Allocate(static_cast<std::size_t>(n_queries) + 1, "bound test norms"));
    GENIE_RETURN_IF_ERROR(dq_len.Allocate(static_cast<std::size_t>(n_queries) + 1, "bound test norms"));
    const int zero = 0;
    GENIE_RETURN_IF_ERROR(gpu::Upload(&zero, 1, &outside, "bound test flag"));
    GENIE_RETURN_IF_ERROR(
        gpu::LaunchNorms(dq.get(), n_queries, dim, dimp, dq_sq.get(), dq_len.get(), outside.get(), nullptr));
    const std::size_t cells = static_cast<std::size_t>(n_queries) * static_cast<std::size_t>(n);
    GENIE_RETURN_IF_ERROR(d32.Allocate(std::max<std::size_t>(cells, 1), "bound test distances"));
    gpu::GroupTerms terms{gpu::Float32Terms(dim), gpu::Tf32Terms(dimp), false, nullptr};
    // the scan's operand of rounded queries, where the warpgroup tiles are asked for and run
    gpu::DeviceArray<float> rounded;
    if (cells > 0) {
      if (warpgroup && gpu::WarpgroupTilesUsable()) {
        const int64_t values = static_cast<int64_t>(n_queries) * dimp;
        GENIE_RETURN_IF_ERROR(rounded.Allocate(static_cast<std::size_t>(values), "bound test TF32 queries"));
        GENIE_RETURN_IF_ERROR(gpu::RoundQueriesTf32(dq.get(), values, rounded.get(), nullptr));
      }
      GENIE_RETURN_IF_ERROR(gpu::LaunchDistances(dq.get(), gpu::Norms{dq_sq.get(), dq_len.get()}, n_queries,
                                                 dx.get(), gpu::Norms{dx_sq.get(), dx_len.get()}, n, dimp, dim,
                                                 tf32 && set_safe, outside.get(), false, nullptr, d32.get(),
                                                 nullptr, &terms, rounded.get()));
    }
    GENIE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    int query_outside = 0;
    std::vector<float> q_len(static_cast<std::size_t>(n_queries) + 1), q_sq(q_len.size());
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(&query_outside, outside.get(), sizeof(int), cudaMemcpyDeviceToHost));
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(q_len.data(), dq_len.get(), sizeof(float) * q_len.size(), cudaMemcpyDeviceToHost));
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(q_sq.data(), dq_sq.get(), sizeof(float) * q_sq.size(), cudaMemcpyDeviceToHost));
    out->query_squared.assign(q_sq.begin(), q_sq.begin() + n_queries);
    out->query_length.assign(q_len.begin(), q_len.begin() + n_queries);
    out->query_outside = query_outside != 0;
    out->tf32 = terms.tf32_possible && query_outside == 0;  // (the flag as the kernels read it)
    out->warpgroup = out->tf32 && terms.warpgroup;
    const gpu::ErrorTerms used = out->tf32 ? terms.tf32 : terms.float32;
    out->upper.assign(cells, 0.0f);
    if (cells > 0)
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->upper.data(), d32.get(), sizeof(float) * cells,
                                            cudaMemcpyDeviceToHost));
    out->error.assign(cells, 0.0f);
    for (int32_t q = 0; q < n_queries; ++q)
      for (int32_t r = 0; r < n; ++r) {
        const float sum = q_len[static_cast<std::size_t>(q)] + x_len[static_cast<std::size_t>(r)];
        out->error[static_cast<std::size_t>(q) * n + r] = std::fmaf(used.coef * sum, sum, used.slack);
      }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory in GpuVectorUpperBounds");
  }
}

}  // namespace genie

// Hopper's warpgroup tiles for the exact vector scan's TF32 upper bounds
// (see vector_distance.cu for the bounds and why they hold).  Built for
// sm_90a only (the wgmma instructions exist on compute capability 9.0 and
// nowhere else); vector_distance.cu launches them for large groups when
// WarpgroupTilesUsable().
//
// Why: the warp-level tiles (Tf32DistanceKernel, mma.sync) reached about
// 92 TFLOP/s on an H200, a third of what that instruction allows and a
// fifth of the chip's TF32 rate, and were 1.2 ms of a 1,024-query call's
// 2.4-2.9 ms over Fashion-MNIST.  Here a block is two warpgroups; each
// multiplies 64 vectors by the block's 128 queries with
// wgmma.mma_async.m64n128k8, 8 dimensions an instruction:
//   - the vectors are the A operand, read from shared memory into
//     registers and rounded to TF32 on the way (RoundTf32, as the warp
//     tiles do: to nearest, so the bound's rounding part holds);
//   - the queries are the B operand, which wgmma reads from shared memory
//     itself: they are rounded once a group (RoundQueriesTf32) and
//     staged in the 128-byte swizzled layout its descriptors name;
//   - stages of 32 dimensions arrive by cp.async, kWgStages in flight;
//     a stage's products are waited for before the next stage's fragments
//     are read (two blocks a multiprocessor fill each other's waits).
// Tried and not kept (bench/warpgroup-tiles-h200.txt): one stage's
// products left running while the next stage's fragments were read into
// other registers, which ptxas serialises anyway (warning C7513; 1.00x to
// 1.03x), and the vectors rounded in place in shared memory as a second
// descriptor operand with a stage left running, whose first version gave
// wrong distances to half of 10,000 Fashion-MNIST queries (found by the
// comparison with the CPU engine; not pursued).
// A block's tensor-core additions are blocks of 8 products, as
// mma.m16n8k8's, so the accumulator part of the bound (Tf32Terms) is the
// same; gpu/tests/vector_bounds_test.cpp measures both tiles against it.
// The grid runs a vector tile's query tiles one after another, so that
// the vectors are read from memory about once and the queries stay in L2.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda_util.hpp"
#include "vector_distance.hpp"
#include "vector_tiles.cuh"

namespace genie {
namespace gpu {
namespace {

constexpr int kWgThreads = 256;                 // two warpgroups
constexpr int kWgVectors = 128;                 // 64 a warpgroup (wgmma's M)
constexpr int kWgQueries = kDistanceTile;       // wgmma's N
constexpr int kWgK = 32;                        // dimensions a stage: a query's row is 128 bytes
constexpr int kWgStages = 3;
constexpr int kWgVectorStride = kWgK + 4;       // floats between staged vector rows: fragment reads on 32 banks
constexpr int kQueryTileBytes = kWgQueries * kWgK * 4;
constexpr int kVectorTileBytes = kWgVectors * kWgVectorStride * 4;
constexpr int kStageBytes = kQueryTileBytes + kVectorTileBytes;
static_assert(kStageBytes % 1024 == 0, "each stage's query tile on a 1024-byte boundary (the swizzle's period)");
constexpr std::size_t kWgShared = kWgStages * kStageBytes + 1024;  // + room to align the first stage

__global__ void RoundQueriesKernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t count4) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = in[i];
    out[i] = make_float4(__uint_as_float(RoundTf32(v.x)), __uint_as_float(RoundTf32(v.y)),
                         __uint_as_float(RoundTf32(v.z)), __uint_as_float(RoundTf32(v.w)));
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The shared-memory descriptor of a K-major operand in the 128-byte
// swizzle: rows of 128 bytes, 8-row groups 1024 bytes apart (the stride
// offset), the leading offset unused within a swizzled row (1, as is
// customary); the start advances 32 bytes a k-step of 8 dimensions.
__device__ __forceinline__ uint64_t SwizzledDescriptor(uint32_t shared_address) {
  return static_cast<uint64_t>((shared_address & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (uint64_t{1} << 62);
}

// d += a b: a is this thread's part of a 64 x 8 TF32 tile (rows g and g +
// 8 of its warp's 16, columns t and t + 4, as mma.m16n8k8's), b the 8 x 128
// tile that descriptor names; d rows as a, columns 8 j + 2 t and + 1.
__device__ __forceinline__ void Wgmma64x128(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#endif

// Every U of a tile of kWgQueries queries x kWgVectors vectors a block
// (block b: query tile b % q_tiles of vector tile b / q_tiles); queries
// already rounded to TF32, rows as they are.  outside: the queries' range
// flag (NULL: the host checked them).
__global__ void __launch_bounds__(kWgThreads, 2)
WarpgroupDistanceKernel(const float* __restrict__ queries, Norms qn, int32_t nq, int32_t q_tiles,
                    const float* __restrict__ rows, Norms xn, int32_t n_rows, int32_t dimp, ErrorTerms terms,
                    const uint8_t* __restrict__ excluded, float* __restrict__ out, const int* outside) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (outside != nullptr && *outside != 0) return;  // a query value beyond the range: DistanceKernel's
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const uint32_t raw_address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));
  unsigned char* shared = shared_raw + ((1024u - (raw_address & 1023u)) & 1023u);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int wg = tid >> 7, warp = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x % static_cast<unsigned>(q_tiles)) * kWgQueries;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x / static_cast<unsigned>(q_tiles)) * kWgVectors;
  const int stages = (dimp + kWgK - 1) / kWgK;
  // A stage: this thread copies 16-byte piece tid % 8 of rows tid / 8 + 32 i
  // (i < 4) of the queries' tile (swizzled: piece p of row n at p ^ (n %
  // 8)) and of the vectors'; zeros beyond the queries, the vectors and
  // dimp (a multiple of 4), which add nothing.
  constexpr int kRowsApart = kWgThreads / (kWgK / 4);
  const int first_row = tid / (kWgK / 4), piece = tid % (kWgK / 4);
  const float* q_src = queries + (q0 + first_row) * dimp + piece * 4;
  const float* v_src = rows + (r0 + first_row) * dimp + piece * 4;
  const int64_t src_apart = static_cast<int64_t>(kRowsApart) * dimp;
  const int q_rows = static_cast<int>(min(nq - q0, static_cast<int64_t>(kWgQueries))) - first_row;  // this thread's rows < these
  const int v_rows = static_cast<int>(min(n_rows - r0, static_cast<int64_t>(kWgVectors))) - first_row;
  const int q_dst = first_row * kWgK + ((piece ^ (first_row & 7)) * 4);  // (rows 32 apart: the same swizzle)
  const int v_dst = first_row * kWgVectorStride + piece * 4;
  auto load = [&](int slot, int k0) {
    float* qtile = reinterpret_cast<float*>(shared + slot * kStageBytes);
    float* vtile = qtile + kQueryTileBytes / 4;
    const bool k_in = k0 + piece * 4 < dimp;
#pragma unroll
    for (int i = 0; i < kWgQueries / kRowsApart; ++i) {
      const bool in = k_in && kRowsApart * i < q_rows;
      CopyAsync16(qtile + q_dst + i * kRowsApart * kWgK, in ? q_src + i * src_apart + k0 : queries, in);
    }
#pragma unroll
    for (int i = 0; i < kWgVectors / kRowsApart; ++i) {
      const bool in = k_in && kRowsApart * i < v_rows;
      CopyAsync16(vtile + v_dst + i * kRowsApart * kWgVectorStride, in ? v_src + i * src_apart + k0 : rows, in);
    }
  };
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  load(0, 0);
  CommitCopies();
  if (stages > 1) load(1, kWgK);
  CommitCopies();
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    WaitCopies<1>();  // this thread's copies of stage s have landed ...
    // ... and are visible to the tensor cores' reads (the async proxy)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // every thread's; stage s - 1's products are done, its slot free
    if (s + 2 < stages) load((s + 2) % kWgStages, (s + 2) * kWgK);
    CommitCopies();  // (an empty group at the end keeps the count uniform)
    const unsigned char* stage = shared + (s % kWgStages) * kStageBytes;
    const float* v = reinterpret_cast<const float*>(stage + kQueryTileBytes) +
                     (wg * 64 + warp * 16 + g) * kWgVectorStride + t;
    uint32_t a[kWgK / 8][4];
#pragma unroll
    for (int kk = 0; kk < kWgK / 8; ++kk) {
      a[kk][0] = RoundTf32(v[kk * 8]);
      a[kk][1] = RoundTf32(v[8 * kWgVectorStride + kk * 8]);
      a[kk][2] = RoundTf32(v[kk * 8 + 4]);
      a[kk][3] = RoundTf32(v[8 * kWgVectorStride + kk * 8 + 4]);
    }
    const uint64_t b = SwizzledDescriptor(static_cast<uint32_t>(__cvta_generic_to_shared(stage)));
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kWgK / 8; ++kk) Wgmma64x128(d, a[kk], b + static_cast<uint64_t>(kk * 32 / 16));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  const int64_t r_base = r0 + wg * 64 + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t r = r_base + 8 * (c >> 1), q = q0 + 8 * j + 2 * t + (c & 1);
      if (q < nq && r < n_rows) out[q * n_rows + r] = Upper(d[j * 4 + c], qn, q, xn, r, terms, excluded);
    }
#endif
}

}  // namespace

bool WarpgroupTilesUsable() {
  // asked once a device: a scan asks for every group
  constexpr int kDevices = 64;
  static std::atomic<int8_t> known[kDevices];  // 0 not yet asked, 1 usable, 2 not
  int device = -1, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool cached = device >= 0 && device < kDevices;
  if (cached && known[device].load(std::memory_order_relaxed) != 0) return known[device].load() == 1;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // not remembered: it may answer next time
  }
  const bool usable = major == 9 && minor == 0;  // sm_90a code runs there only
  if (cached) known[device].store(usable ? 1 : 2);
  return usable;
}

Status RoundQueriesTf32(const float* queries, int64_t count, float* out, cudaStream_t stream) {
  if (count % 4 != 0) return Status::Internal("RoundQueriesTf32: a count that is not a multiple of 4");
  const int64_t count4 = count / 4;
  if (count4 == 0) return Status::Ok();
  RoundQueriesKernel<<<static_cast<unsigned>(std::min<int64_t>(GridBlocks(count4, 256), 4096)), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(queries), reinterpret_cast<float4*>(out), count4);
  GENIE_CUDA_CHECK_LAUNCH("RoundQueriesKernel");
  return Status::Ok();
}

Status LaunchWarpgroupTiles(const float* rounded_queries, Norms qn, int32_t gn, const float* rows, Norms xn,
                            int32_t n_rows, int32_t dimp, ErrorTerms terms, const uint8_t* excluded, float* d32,
                            const int* outside, cudaStream_t stream) {
  GENIE_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(WarpgroupDistanceKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kWgShared)));
  const int32_t q_tiles = static_cast<int32_t>(GridBlocks(gn, kWgQueries));
  const int64_t blocks = static_cast<int64_t>(q_tiles) * GridBlocks(n_rows, kWgVectors);
  WarpgroupDistanceKernel<<<static_cast<unsigned>(blocks), kWgThreads, kWgShared, stream>>>(
      rounded_queries, qn, gn, q_tiles, rows, xn, n_rows, dimp, terms, excluded, d32, outside);
  GENIE_CUDA_CHECK_LAUNCH("WarpgroupDistanceKernel");
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

// The permutation index's rows on the GPU (see genie/gpu_permutation.hpp):
// every object's distance to each permutant, then each object's ranks.
//
//   VectorDistanceKernel  a thread per (object, permutant), consecutive
//                         threads one object's permutants, so a warp reads
//                         each element of its object once (a broadcast) and
//                         the permutants from the cache; the squared
//                         differences summed in double in element order,
//                         each operation rounded on its own (__dsub_rn,
//                         __dmul_rn, __dadd_rn), the CPU's bits;
//   StringDistanceKernel  the same pairs by kernel::CappedDistance (Myers up
//                         to 64 code points, banded DP beyond over a row of
//                         the piece's workspace);
//   RankKernel            a thread per object: the rank of each permutant
//                         by (distance, permutant) into the object's row.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_permutation.hpp"
#include "genie/levenshtein_kernel.hpp"
#include "genie/myers_pattern.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kDefaultBudget = 256ull << 20;

__global__ void VectorDistanceKernel(const float* __restrict__ objects, int32_t count, int32_t dim,
                                     const float* __restrict__ permutants, int32_t m,
                                     double* __restrict__ dist) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= static_cast<int64_t>(count) * m) return;
  const int64_t i = pair / m;
  const int32_t j = static_cast<int32_t>(pair % m);
  const float* v = objects + i * dim;
  const float* p = permutants + static_cast<int64_t>(j) * dim;
  double s = 0;
  for (int32_t e = 0; e < dim; ++e) {
    const double x = __dsub_rn(static_cast<double>(v[e]), static_cast<double>(p[e]));
    s = __dadd_rn(s, __dmul_rn(x, x));
  }
  dist[pair] = s;
}

__global__ void StringDistanceKernel(const uint32_t* __restrict__ cps, const int64_t* __restrict__ offsets,
                                     int32_t first, int32_t count, const uint32_t* __restrict__ pcps,
                                     const int64_t* __restrict__ poffsets, const kernel::MyersPattern* __restrict__ patterns,
                                     const uint8_t* __restrict__ prepared, int32_t m, int32_t* __restrict__ workspace,
                                     int64_t row_cells, double* __restrict__ dist) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= static_cast<int64_t>(count) * m) return;
  const int64_t i = first + pair / m;
  const int32_t j = static_cast<int32_t>(pair % m);
  const int32_t la = static_cast<int32_t>(offsets[i + 1] - offsets[i]);
  const int32_t lb = static_cast<int32_t>(poffsets[j + 1] - poffsets[j]);
  const uint32_t* a = cps + offsets[i];
  int32_t d;
  if (prepared[j]) {
    // the permutant's pattern against the object: no cap (the distance is at most the longer length)
    d = kernel::PatternDistance(patterns[j], [a](int32_t x) { return a[x]; }, la, la > lb ? la : lb);
  } else {
    d = kernel::CappedDistance(a, la, pcps + poffsets[j], lb, -1, workspace + pair * row_cells);
  }
  dist[pair] = d;
}

// rows: count rows of stride bytes from dist (count x m)
__global__ void RankKernel(const double* __restrict__ dist, int32_t count, int32_t m, int32_t stride,
                           uint8_t* __restrict__ rows) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const double* d = dist + i * m;
  uint8_t* row = rows + i * stride;
  for (int32_t j = 0; j < m; ++j) {
    const double dj = d[j];
    int32_t rank = 0;
    for (int32_t o = 0; o < m; ++o) {
      const double x = d[o];
      rank += x < dj || (x == dj && o < j);
    }
    row[j] = static_cast<uint8_t>(rank);
  }
  for (int32_t j = m; j < stride; ++j) row[j] = 0;
}

// What both kinds share: pieces of objects, their distances by launch(first, count,
// dist), ranked and copied into rows.
template <typename Launch>
Status RowsInPieces(int32_t n, int32_t m, uint64_t per_object_bytes, uint64_t budget, const PermutationRows& rows,
                    const CancelCheck& cancel, const Launch& launch) {
  const uint64_t per_object = per_object_bytes + static_cast<uint64_t>(m) * 8 + static_cast<uint64_t>(rows.stride);
  const int32_t piece = static_cast<int32_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(static_cast<uint64_t>(std::max(n, 1)), budget / per_object)));
  DeviceArray<double> d_dist;
  DeviceArray<uint8_t> d_rows;
  GENIE_RETURN_IF_ERROR(d_dist.Allocate(static_cast<std::size_t>(piece) * m, "permutant distances"));
  GENIE_RETURN_IF_ERROR(d_rows.Allocate(static_cast<std::size_t>(piece) * rows.stride, "permutation rows"));
  for (int32_t first = 0; first < n; first += piece) {
    if (cancel.requested()) return Status::Cancelled();
    const int32_t count = std::min(piece, n - first);
    GENIE_RETURN_IF_ERROR(launch(first, count, d_dist.get()));
    RankKernel<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads>>>(d_dist.get(), count, m,
                                                                                     rows.stride, d_rows.get());
    GENIE_CUDA_CHECK_LAUNCH("RankKernel");
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(rows.row(first), d_rows.get(),
                                          static_cast<std::size_t>(count) * rows.stride, cudaMemcpyDeviceToHost));
  }
  return Status::Ok();
}

unsigned Blocks(int64_t threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

}  // namespace
}  // namespace gpu

Status GpuVectorPermutations(const VectorSet& objects, const VectorSet& permutants, int32_t device_ordinal,
                             uint64_t memory_budget_bytes, const PermutationRows& rows, const CancelCheck& cancel) {
  try {
    GENIE_RETURN_IF_ERROR(CheckPermutationRows(rows));
    if (permutants.n != rows.m || objects.dim != permutants.dim || rows.n < objects.n)
      return Status::InvalidArgument("the permutants do not match the rows or the vectors");
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    gpu::DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_ordinal));
    gpu::DeviceArray<float> d_perm, d_objects;
    GENIE_RETURN_IF_ERROR(gpu::Upload(permutants.values.data(), permutants.values.size(), &d_perm, "permutants"));
    const uint64_t budget = memory_budget_bytes > 0 ? memory_budget_bytes : gpu::kDefaultBudget;
    const uint64_t row_bytes = static_cast<uint64_t>(objects.dim) * 4;
    const int32_t m = rows.m, dim = objects.dim;
    // the objects travel with their piece
    int32_t capacity = 0;
    return gpu::RowsInPieces(objects.n, m, row_bytes, budget, rows, cancel,
                             [&](int32_t first, int32_t count, double* dist) -> Status {
                               if (count > capacity) {
                                 GENIE_RETURN_IF_ERROR(d_objects.Allocate(static_cast<std::size_t>(count) * dim, "vectors"));
                                 capacity = count;
                               }
                               GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_objects.get(), objects.row(first),
                                                                     static_cast<std::size_t>(count) * row_bytes,
                                                                     cudaMemcpyHostToDevice));
                               gpu::VectorDistanceKernel<<<gpu::Blocks(static_cast<int64_t>(count) * m), gpu::kThreads>>>(
                                   d_objects.get(), count, dim, d_perm.get(), m, dist);
                               GENIE_CUDA_CHECK_LAUNCH("VectorDistanceKernel");
                               return Status::Ok();
                             });
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory computing permutation rows on the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU permutation rows failed: ") + e.what());
  }
}

Status GpuStringPermutations(const CodePointStrings& objects, const CodePointStrings& permutants,
                             int32_t device_ordinal, uint64_t memory_budget_bytes, const PermutationRows& rows,
                             const CancelCheck& cancel) {
  try {
    GENIE_RETURN_IF_ERROR(CheckPermutationRows(rows));
    if (permutants.size() != rows.m || rows.n < objects.size())
      return Status::InvalidArgument("the permutants do not match the rows");
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    gpu::DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_ordinal));
    gpu::DeviceArray<uint32_t> d_cps, d_pcps;
    gpu::DeviceArray<int64_t> d_offsets, d_poffsets;
    GENIE_RETURN_IF_ERROR(gpu::Upload(objects.code_points.data(), objects.code_points.size(), &d_cps, "strings"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(objects.offsets.data(), objects.offsets.size(), &d_offsets, "string offsets"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(permutants.code_points.data(), permutants.code_points.size(), &d_pcps, "permutants"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(permutants.offsets.data(), permutants.offsets.size(), &d_poffsets,
                                      "permutant offsets"));
    // each permutant of at most kPatternMaxLength code points prepared once
    // (bit-parallel Myers in blocks); the longer ones take the banded DP,
    // whose row needs min(|a|, |b|) + 1 cells
    std::vector<kernel::MyersPattern> patterns(static_cast<std::size_t>(permutants.size()));
    std::vector<uint8_t> prepared(static_cast<std::size_t>(permutants.size()), 0);
    int64_t longest_object = 0, longest_unprepared = 0;
    for (int32_t j = 0; j < permutants.size(); ++j) {
      const int64_t length = permutants.offsets[j + 1] - permutants.offsets[j];
      if (length <= kernel::kPatternMaxLength) {
        kernel::PreparePattern(permutants.code_points.data() + permutants.offsets[j], static_cast<int32_t>(length),
                               &patterns[static_cast<std::size_t>(j)]);
        prepared[static_cast<std::size_t>(j)] = 1;
      } else {
        longest_unprepared = std::max(longest_unprepared, length);
      }
    }
    for (int32_t i = 0; i < objects.size(); ++i)
      longest_object = std::max<int64_t>(longest_object, objects.offsets[i + 1] - objects.offsets[i]);
    const int64_t shorter = std::min(longest_object, longest_unprepared);
    const int64_t row_cells = shorter > kernel::kMyersMaxLength ? shorter + 1 : 0;
    gpu::DeviceArray<kernel::MyersPattern> d_patterns;
    gpu::DeviceArray<uint8_t> d_prepared;
    GENIE_RETURN_IF_ERROR(gpu::Upload(patterns.data(), patterns.size(), &d_patterns, "permutant patterns"));
    GENIE_RETURN_IF_ERROR(gpu::Upload(prepared.data(), prepared.size(), &d_prepared, "permutant patterns"));
    const int32_t m = rows.m;
    const uint64_t budget = memory_budget_bytes > 0 ? memory_budget_bytes : gpu::kDefaultBudget;
    gpu::DeviceArray<int32_t> d_workspace;
    int64_t capacity = -1;
    return gpu::RowsInPieces(objects.size(), m, static_cast<uint64_t>(m) * row_cells * 4, budget, rows, cancel,
                             [&](int32_t first, int32_t count, double* dist) -> Status {
                               const int64_t cells = static_cast<int64_t>(count) * m * row_cells;
                               if (cells > capacity) {
                                 GENIE_RETURN_IF_ERROR(d_workspace.Allocate(static_cast<std::size_t>(std::max<int64_t>(cells, 1)),
                                                                            "edit distance rows"));
                                 capacity = cells;
                               }
                               gpu::StringDistanceKernel<<<gpu::Blocks(static_cast<int64_t>(count) * m), gpu::kThreads>>>(
                                   d_cps.get(), d_offsets.get(), first, count, d_pcps.get(), d_poffsets.get(),
                                   d_patterns.get(), d_prepared.get(), m, d_workspace.get(), row_cells, dist);
                               GENIE_CUDA_CHECK_LAUNCH("StringDistanceKernel");
                               return Status::Ok();
                             });
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory computing permutation rows on the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU permutation rows failed: ") + e.what());
  }
}

}  // namespace genie

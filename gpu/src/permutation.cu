// The permutation index's candidates on the GPU (see
// genie/gpu_permutation.hpp and genie/permutation.hpp).
//
// Device layout: the rows, stride bytes each (a multiple of 16), resident
// for the life of the copy.  Per group of queries:
//   FootruleKernel  a block of up to kQueryBlock queries (their rows in
//                   shared memory) against a stretch of objects, a thread
//                   an object: the footrule of each (query, object) as sums
//                   of byte differences (__vsadu4), one uint16 per pair
//                   (kNoDistance for an excluded object), counted in the
//                   block's histogram of each query in shared memory, added
//                   to the query's at the end.  Footrules crowd around their
//                   mean, so counting straight into global memory would
//                   serialise on a few bins: the block takes as many queries
//                   as their histograms fit kSharedHistogramBytes (one at
//                   m = 128, whose 8,193 bins take 32 KB);
//   SelectKernel    (histogram_select.cuh) a block per query: the objects
//                   below its cut and the first ones at it, in id order.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_permutation.hpp"
#include "histogram_select.cuh"

namespace genie {
namespace gpu {
namespace {

constexpr int kFootruleThreads = 256;
constexpr int kQueryBlock = 8;
constexpr int kObjectsPerBlock = 4096;
constexpr int kSharedHistogramBytes = 32 << 10;
constexpr uint64_t kDefaultGroupBytes = 256ull << 20;

// grid: (object blocks, query blocks).  foot: gn x n, hist: gn x bins, zeroed.
__global__ void FootruleKernel(const uint4* __restrict__ rows, int32_t n, int32_t vecs,
                               const uint4* __restrict__ queries, int32_t gn, int qb,
                               const uint8_t* __restrict__ excluded, uint16_t* __restrict__ foot,
                               uint32_t* __restrict__ hist, int32_t bins) {
  constexpr bool shared_hist = true;
  extern __shared__ uint4 shared_rows[];
  uint32_t* sh = reinterpret_cast<uint32_t*>(shared_rows + qb * vecs);
  const int q0 = blockIdx.y * qb;
  const int nb = min(qb, gn - q0);
  for (int i = threadIdx.x; i < nb * vecs; i += blockDim.x)
    shared_rows[i] = queries[static_cast<size_t>(q0) * vecs + i];
  if (shared_hist)
    for (int i = threadIdx.x; i < nb * bins; i += blockDim.x) sh[i] = 0;
  __syncthreads();

  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kObjectsPerBlock;
  const int64_t end = min(static_cast<int64_t>(n), begin + kObjectsPerBlock);
  for (int64_t id = begin + threadIdx.x; id < end; id += blockDim.x) {
    const bool skip = excluded != nullptr && excluded[id] != 0;
    uint32_t d[kQueryBlock];
#pragma unroll
    for (int g = 0; g < kQueryBlock; ++g) d[g] = 0;
    if (!skip) {
      const uint4* row = rows + static_cast<size_t>(id) * vecs;
      for (int32_t v = 0; v < vecs; ++v) {
        const uint4 x = row[v];
#pragma unroll
        for (int g = 0; g < kQueryBlock; ++g) {
          if (g < nb) {
            const uint4 y = shared_rows[g * vecs + v];
            d[g] += __vsadu4(x.x, y.x) + __vsadu4(x.y, y.y) + __vsadu4(x.z, y.z) + __vsadu4(x.w, y.w);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kQueryBlock; ++g) {
      if (g >= nb) break;
      RecordDistance(foot, n, q0 + g, g, id, skip, d[g], sh, hist, bins, shared_hist);
    }
  }
  FlushHistograms(sh, hist, q0, nb, bins, shared_hist);
}

class GpuPermutationRowsImpl final : public GpuPermutationRows {
 public:
  Status Init(const PermutationRows& rows, int32_t device_ordinal) {
    GENIE_RETURN_IF_ERROR(CheckPermutationRows(rows));
    device_ = device_ordinal;
    m_ = rows.m;
    stride_ = rows.stride;
    n_ = rows.n;
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    return Upload(rows.data, static_cast<std::size_t>(n_) * stride_, &rows_, "permutation rows");
  }

  Status Select(const PermutationRows& queries, Span<uint8_t> excluded, int32_t candidates,
                uint64_t memory_budget_bytes, PermutationCandidates* out,
                const CancelCheck& cancel) override {
    if (out == nullptr) return Status::InvalidArgument("GpuPermutationRows::Select: NULL output");
    try {
      return DoSelect(queries, excluded, candidates, memory_budget_bytes, out, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory selecting permutation candidates");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("GPU permutation selection failed: ") + e.what());
    }
  }

  int32_t device() const override { return device_; }
  std::size_t device_bytes() const override { return rows_.bytes(); }

 private:
  Status DoSelect(const PermutationRows& queries, Span<uint8_t> excluded, int32_t candidates,
                  uint64_t memory_budget_bytes, PermutationCandidates* out, const CancelCheck& cancel) {
    GENIE_RETURN_IF_ERROR(CheckPermutationRows(queries));
    if (queries.m != m_) return Status::InvalidArgument("the queries' permutants differ from the index's");
    if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(n_))
      return Status::InvalidArgument("excluded must have one entry per object");
    if (candidates < 1) return Status::InvalidArgument("candidates must be at least 1");
    const int32_t nq = queries.n;
    out->offsets.assign(1, 0);
    out->objects.clear();
    if (nq == 0) return Status::Ok();
    if (n_ == 0) {
      out->offsets.assign(static_cast<std::size_t>(nq) + 1, 0);
      return Status::Ok();
    }
    const int32_t kk = std::min(candidates, n_);
    const int32_t bits = MaxFootrule(m_);
    const int32_t bins = bits + 1;
    const int32_t vecs = stride_ / 16;
    const uint64_t budget = memory_budget_bytes > 0 ? memory_budget_bytes : kDefaultGroupBytes;
    const uint64_t per_query = static_cast<uint64_t>(n_) * 2 + static_cast<uint64_t>(bins) * 4 +
                               static_cast<uint64_t>(kk) * 4 + static_cast<uint64_t>(stride_) + 8;
    // (a grid's y dimension: at most 65,535 blocks of queries)
    const uint64_t most = std::min<uint64_t>(static_cast<uint64_t>(nq), budget / per_query);
    const int32_t qb_most = std::max(1, std::min(kQueryBlock, kSharedHistogramBytes / (bins * 4)));
    const int32_t group = static_cast<int32_t>(
        std::max<uint64_t>(1, std::min<uint64_t>(most, 65535ull * static_cast<uint64_t>(qb_most))));
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    DeviceBlockScope blocks;  // the small buffers are reused
    DeviceArray<uint8_t> d_queries, d_excluded;
    DeviceArray<uint16_t> d_foot;
    DeviceArray<uint32_t> d_hist;
    DeviceArray<int32_t> d_ids, d_count;
    GENIE_RETURN_IF_ERROR(Upload(queries.data, static_cast<std::size_t>(nq) * stride_, &d_queries,
                                 "permutation query rows"));
    if (!excluded.empty())
      GENIE_RETURN_IF_ERROR(Upload(excluded.data(), excluded.size(), &d_excluded, "permutation excluded flags"));
    GENIE_RETURN_IF_ERROR(d_foot.Allocate(static_cast<std::size_t>(group) * n_, "permutation footrules"));
    GENIE_RETURN_IF_ERROR(d_hist.Allocate(static_cast<std::size_t>(group) * bins, "permutation histograms"));
    GENIE_RETURN_IF_ERROR(d_ids.Allocate(static_cast<std::size_t>(group) * kk, "permutation candidates"));
    GENIE_RETURN_IF_ERROR(d_count.Allocate(static_cast<std::size_t>(group), "permutation candidate counts"));
    // the queries of a block: as many as their histograms fit in shared memory
    const int qb = qb_most;
    const std::size_t shared_bytes = static_cast<std::size_t>(qb) * (stride_ + static_cast<std::size_t>(bins) * 4);
    std::vector<int32_t> ids, counts;
    for (int32_t g0 = 0; g0 < nq; g0 += group) {
      if (cancel.requested()) return Status::Cancelled();
      const int32_t gn = std::min(group, nq - g0);
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_hist.get(), 0, static_cast<std::size_t>(gn) * bins * 4));
      const dim3 grid(static_cast<unsigned>((n_ + kObjectsPerBlock - 1) / kObjectsPerBlock),
                      static_cast<unsigned>((gn + qb - 1) / qb));
      FootruleKernel<<<grid, kFootruleThreads, shared_bytes>>>(
          reinterpret_cast<const uint4*>(rows_.get()), n_, vecs,
          reinterpret_cast<const uint4*>(d_queries.get() + static_cast<std::size_t>(g0) * stride_), gn, qb,
          excluded.empty() ? nullptr : d_excluded.get(), d_foot.get(), d_hist.get(), bins);
      GENIE_CUDA_CHECK_LAUNCH("FootruleKernel");
      SelectKernel<<<static_cast<unsigned>(gn), kSelectThreads>>>(d_foot.get(), d_hist.get(), n_, bits, kk, kk,
                                                                  nullptr, d_ids.get(), nullptr, d_count.get());
      GENIE_CUDA_CHECK_LAUNCH("SelectKernel");
      counts.resize(static_cast<std::size_t>(gn));
      ids.resize(static_cast<std::size_t>(gn) * kk);
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(counts.data(), d_count.get(), counts.size() * 4, cudaMemcpyDeviceToHost));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(ids.data(), d_ids.get(), ids.size() * 4, cudaMemcpyDeviceToHost));
      for (int32_t q = 0; q < gn; ++q) {
        const int32_t c = counts[static_cast<std::size_t>(q)];
        if (c < 0 || c > kk) return Status::Internal("GPU permutation selection: a query outgrew its candidates");
        const int32_t* first = ids.data() + static_cast<std::size_t>(q) * kk;
        out->objects.insert(out->objects.end(), first, first + c);
        out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
      }
    }
    return Status::Ok();
  }

  int32_t device_ = 0;
  int32_t m_ = 0;
  int32_t stride_ = 0;
  int32_t n_ = 0;
  DeviceArray<uint8_t> rows_;
};

}  // namespace
}  // namespace gpu

Status GpuPermutationRows::Create(const PermutationRows& rows, int32_t device_ordinal,
                                  std::unique_ptr<GpuPermutationRows>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuPermutationRows::Create: NULL output");
  try {
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    auto impl = std::make_unique<gpu::GpuPermutationRowsImpl>();
    GENIE_RETURN_IF_ERROR(impl->Init(rows, device_ordinal));
    *out = std::move(impl);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory copying permutation rows to the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU permutation rows failed: ") + e.what());
  }
}

}  // namespace genie

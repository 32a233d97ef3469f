// Range search of vectors on the GPU (genie/cluster_list.hpp, seed 004):
// the host plans which members each query reads (RangePlan: its centres'
// distances computed on the CPU, superclusters and clusters discarded, as
// the paper's CPU threads do), and the device reads them.
//
//   RangeKernel  one block per chunk of at most kChunkMembers members of one
//                query; a warp per member: its lanes sum (q_i - x_i)^2 in
//                float32 over strided dimensions (coalesced reads of the
//                row), a shuffle tree adds the lanes.  Whatever the order,
//                the float32 sum s32 of dim squares is within e s + a of the
//                true s, e = (dim + 8) 2^-23 (more than twice the (dim + 2)
//                2^-24 of any order of summation), a = (dim + 1) 2^-148 for
//                underflow (the CPU's bound, genie/vectors.hpp); a member
//                with s32 above radius^2 (1 + e)^2 + a cannot be within the
//                radius.  The others (few: about the answers) get their
//                L2Distance in element order, each operation
//                rounded on its own (the host's bits), and are kept when
//                within the radius: a warp gathers up to 32 of them and
//                its lanes compute one each.
//
// Answers go to a buffer through one atomic counter; a buffer too small is
// grown to the count and the group run again.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_vector_scan.hpp"
#include "range_search.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kRangeThreads = 256;  // 8 warps
constexpr int32_t kChunkMembers = 1024;
// chunks launched between polls of cancel: 8M members, a few ms at 784 dimensions
constexpr int64_t kChunksPerLaunch = 1 << 13;

struct Chunk {
  int64_t begin;   // into the members, or the first object when not listed
  int32_t query;
  int32_t count;
  int32_t listed;  // 1: begin indexes the members
  int32_t pad;
};

struct Hit {
  int32_t query;
  int32_t object;
  double distance;
};

// The exact distance of object o to q, in element order, each operation
// rounded on its own (the host's L2Distance, to the bit); kept when within
// radius.
__device__ __forceinline__ void KeepIfWithin(const float* __restrict__ rows, int32_t dimp, int32_t dim,
                                             const float* __restrict__ q, int32_t query, int32_t o, double radius,
                                             Hit* __restrict__ out, unsigned long long* __restrict__ count,
                                             unsigned long long capacity) {
  const float* x = rows + static_cast<int64_t>(o) * dimp;
  double sum = 0.0;
  for (int32_t t = 0; t < dim; ++t) {
    const double d = __dsub_rn(static_cast<double>(q[t]), static_cast<double>(x[t]));
    sum = __dadd_rn(sum, __dmul_rn(d, d));
  }
  const double distance = __dsqrt_rn(sum);
  if (distance <= radius) {
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) out[slot] = Hit{query, o, distance};
  }
}

__global__ void __launch_bounds__(kRangeThreads)
RangeKernel(const float* __restrict__ rows, int32_t dimp, int32_t dim, const float* __restrict__ queries,
            const Chunk* __restrict__ chunks, const int32_t* __restrict__ members, float threshold,
            double radius, Hit* __restrict__ out, unsigned long long* __restrict__ count,
            unsigned long long capacity) {
  // each warp's candidates, up to 32, whose exact distances its lanes then
  // compute one each (a sequential sum is one lane's work)
  __shared__ int32_t pending[kRangeThreads / 32][32];
  const Chunk chunk = chunks[blockIdx.x];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const float* q = queries + static_cast<int64_t>(chunk.query) * dimp;
  int n_pending = 0;  // the same in every lane of the warp
  for (int32_t i = warp; i < chunk.count; i += kRangeThreads / 32) {
    const int64_t at = chunk.begin + i;
    const int32_t o = chunk.listed ? members[at] : static_cast<int32_t>(at);
    const float* x = rows + static_cast<int64_t>(o) * dimp;
    float acc = 0.0f;
    for (int32_t t = lane; t < dim; t += 32) {
      const float d = q[t] - x[t];
      acc = fmaf(d, d, acc);
    }
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    acc = __shfl_sync(0xffffffffu, acc, 0);
    // (an overflow to infinity proves nothing: the exact distance decides)
    if (acc <= threshold || isinf(acc)) {
      if (lane == 0) pending[warp][n_pending] = o;
      if (++n_pending == 32) {
        __syncwarp();
        KeepIfWithin(rows, dimp, dim, q, chunk.query, pending[warp][lane], radius, out, count, capacity);
        __syncwarp();
        n_pending = 0;
      }
    }
  }
  __syncwarp();
  if (lane < n_pending)
    KeepIfWithin(rows, dimp, dim, q, chunk.query, pending[warp][lane], radius, out, count, capacity);
}

class GpuClusterMembersImpl final : public GpuClusterMembers {
 public:
  Status Init(Span<int32_t> members, int32_t device_ordinal) {
    device_ = device_ordinal;
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    const int32_t none = 0;  // an empty list still gets a buffer
    return Upload(members.empty() ? &none : members.data(), std::max<std::size_t>(members.size(), 1),
                  &members_, "cluster list members");
  }
  int32_t device() const override { return device_; }
  const int32_t* data() const override { return members_.get(); }
  std::size_t device_bytes() const override { return members_.bytes(); }

 private:
  int32_t device_ = 0;
  DeviceArray<int32_t> members_;
};

// The smallest float at least x (infinity beyond the floats).
float FloatAtLeast(double x) {
  if (!(x < static_cast<double>(std::numeric_limits<float>::max()))) return INFINITY;
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, INFINITY);
  return f;
}

}  // namespace

Status RangeOnDevice(const float* rows, int32_t dimp, int32_t dim, const float* queries, int32_t n_queries,
                     double radius, const RangePlan& plan, const int32_t* members,
                     std::vector<RangeCandidate>* out, const CancelCheck& cancel) {
  out->clear();
  if (n_queries == 0 || plan.items.empty()) return Status::Ok();
  DeviceBlockScope blocks;
  std::vector<Chunk> chunks;
  for (const RangeItem& item : plan.items) {
    if (item.listed && members == nullptr) return Status::InvalidArgument("listed range items without members");
    for (int64_t at = 0; at < item.count; at += kChunkMembers)
      chunks.push_back(Chunk{item.begin + at, item.query,
                             static_cast<int32_t>(std::min<int64_t>(kChunkMembers, item.count - at)),
                             item.listed ? 1 : 0, 0});
  }
  DeviceArray<float> d_queries;
  GENIE_RETURN_IF_ERROR(d_queries.Allocate(static_cast<std::size_t>(n_queries) * dimp, "range queries"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemset(d_queries.get(), 0, d_queries.bytes()));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(d_queries.get(), static_cast<std::size_t>(dimp) * sizeof(float), queries,
                                          static_cast<std::size_t>(dim) * sizeof(float),
                                          static_cast<std::size_t>(dim) * sizeof(float),
                                          static_cast<std::size_t>(n_queries), cudaMemcpyHostToDevice));
  DeviceArray<Chunk> d_chunks;
  GENIE_RETURN_IF_ERROR(Upload(chunks.data(), chunks.size(), &d_chunks, "range chunks"));
  const double e = (static_cast<double>(dim) + 8.0) * 0x1p-23;
  const double a = (static_cast<double>(dim) + 1.0) * 0x1p-148;
  const float threshold = FloatAtLeast(radius * radius * (1.0 + e) * (1.0 + e) + a);
  DeviceArray<unsigned long long> d_count;
  GENIE_RETURN_IF_ERROR(d_count.Allocate(1, "range count"));
  DeviceArray<Hit> d_hits;
  std::size_t capacity = 1 << 16;
  GENIE_RETURN_IF_ERROR(d_hits.Allocate(capacity, "range answers"));
  std::vector<Hit> hits;
  for (int64_t c0 = 0; c0 < static_cast<int64_t>(chunks.size()); c0 += kChunksPerLaunch) {
    if (cancel.requested()) return Status::Cancelled();
    const int64_t n = std::min<int64_t>(kChunksPerLaunch, static_cast<int64_t>(chunks.size()) - c0);
    bool stored = false;
    for (int attempt = 0; attempt < 2 && !stored; ++attempt) {
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemset(d_count.get(), 0, d_count.bytes()));
      RangeKernel<<<static_cast<unsigned>(n), kRangeThreads>>>(rows, dimp, dim, d_queries.get(), d_chunks.get() + c0,
                                                               members, threshold, radius, d_hits.get(),
                                                               d_count.get(), capacity);
      GENIE_CUDA_CHECK_LAUNCH("RangeKernel");
      unsigned long long found = 0;
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(&found, d_count.get(), sizeof(found), cudaMemcpyDeviceToHost));
      if (found <= capacity) {
        const std::size_t before = hits.size();
        hits.resize(before + found);
        if (found > 0)
          GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(hits.data() + before, d_hits.get(), sizeof(Hit) * found,
                                                cudaMemcpyDeviceToHost));
        stored = true;
        break;
      }
      // too many answers for the buffer: grow it to the count and run the group again
      capacity = static_cast<std::size_t>(found);
      GENIE_RETURN_IF_ERROR(d_hits.Allocate(capacity, "range answers"));
    }
    if (!stored) return Status::Internal("the GPU range search's count changed between two runs");
  }
  out->reserve(hits.size());
  for (const Hit& h : hits) out->push_back(RangeCandidate{h.query, h.object, h.distance});
  return Status::Ok();
}

Status CreateClusterMembers(Span<int32_t> members, int32_t device_ordinal,
                            std::unique_ptr<GpuClusterMembers>* out) {
  try {
    auto impl = std::make_unique<GpuClusterMembersImpl>();
    GENIE_RETURN_IF_ERROR(impl->Init(members, device_ordinal));
    *out = std::move(impl);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory for a list's device copy");
  }
}

}  // namespace gpu

Status GpuClusterMembers::Create(Span<int32_t> members, int32_t device_ordinal,
                                 std::unique_ptr<GpuClusterMembers>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuClusterMembers::Create: NULL output");
  GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
  return gpu::CreateClusterMembers(members, device_ordinal, out);
}

}  // namespace genie

// The string scan on the GPU (see genie/gpu_string_scan.hpp).
//
// Device layout.  The strings are stored by length bucket, in the set's
// (length, id) order, each bucket transposed: code point j of the i-th
// string of bucket L is at cps[bucket_cp[L] + j * count_L + i], so the
// threads of a warp, which take consecutive strings of a bucket, read
// consecutive words.
//
// One thread block per query, the query's prepared pattern in shared memory.
// Pass 1 visits the buckets in the order L = lq, lq - 1, lq + 1, ... and
// counts the distances found in a shared histogram; after every chunk of
// strings thread 0 lowers the cap to the smallest d with at least k strings
// at distance <= d, which shrinks both the length window and the work per
// string (early exit at the cap).  Then t = the k-th distance is exact (every
// string within t was computed exactly) and so are n_lt = #{d < t} and
// #{d == t}.  Pass 2 visits the window's buckets in ascending length, in
// chunks in the set's order, and writes every string with d < t and, in
// that order, the first k - n_lt with d == t: exactly the first k rows in
// (distance, length, id) order, which the host sorts.
#include <cuda_runtime_api.h>

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_string_scan.hpp"
#include "genie/myers_pattern.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr int32_t kHistogram = 1024;           // distances 0 .. kHistogram - 2, exact
constexpr int32_t kMaxGpuCap = kHistogram - 2;
constexpr int32_t kChunk = kThreads * 4;       // strings between two cap updates
constexpr int32_t kQueriesPerLaunch = 512;     // cancel is polled between launches
constexpr int64_t kMaxOutputSlots = int64_t{1} << 25;

struct DeviceSet {
  const uint32_t* cps;
  const int64_t* bucket_begin;  // position of bucket L's first string in the order
  const int64_t* bucket_cp;     // its first code point
  int32_t max_length;
};

__device__ __forceinline__ int32_t DistanceAt(const kernel::MyersPattern& p, const DeviceSet& set,
                                              int32_t L, int64_t count, int64_t i, int32_t cap) {
  const uint32_t* base = set.cps + set.bucket_cp[L] + i;
  return kernel::PatternDistance(
      p, [base, count](int32_t j) { return base[static_cast<int64_t>(j) * count]; }, L, cap);
}

// Outputs per query: out_pos/out_dist[q * k ...], out_count[q]; unresolved[q]
// when the histogram cannot hold the k-th distance.
__global__ void __launch_bounds__(kThreads)
StringScanKernel(DeviceSet set, const uint32_t* __restrict__ query_cps,
                 const int64_t* __restrict__ query_offsets, const int32_t* __restrict__ caps,
                 const uint8_t* __restrict__ excluded,  // by position in the order, or nullptr
                 int32_t k, int32_t* __restrict__ out_pos, int32_t* __restrict__ out_dist,
                 int32_t* __restrict__ out_count, uint8_t* __restrict__ unresolved) {
  using BlockScan = cub::BlockScan<int32_t, kThreads>;
  __shared__ alignas(16) unsigned char pattern_storage[sizeof(kernel::MyersPattern)];
  __shared__ int32_t hist[kHistogram];
  __shared__ int32_t cap;
  __shared__ int32_t found_lt, found_eq;
  __shared__ typename BlockScan::TempStorage scan_storage;
  kernel::MyersPattern& pattern = *reinterpret_cast<kernel::MyersPattern*>(pattern_storage);

  const int32_t q = blockIdx.x;
  const int32_t tid = threadIdx.x;
  const int32_t lq = static_cast<int32_t>(query_offsets[q + 1] - query_offsets[q]);
  const int32_t asked = caps[q];
  if (tid == 0) {
    kernel::PreparePattern(query_cps + query_offsets[q], lq, &pattern);
    cap = asked < 0 ? kMaxGpuCap : min(asked, kMaxGpuCap);
  }
  for (int32_t d = tid; d < kHistogram; d += kThreads) hist[d] = 0;
  __syncthreads();

  // pass 1: the k-th distance
  for (int32_t delta = 0; delta <= cap && (lq - delta >= 0 || lq + delta <= set.max_length); ++delta) {
    for (int side = 0; side < 2; ++side) {
      const int32_t L = side == 0 ? lq - delta : lq + delta;
      if ((side == 1 && delta == 0) || L < 0 || L > set.max_length || delta > cap) continue;
      const int64_t begin = set.bucket_begin[L];
      const int64_t count = set.bucket_begin[L + 1] - begin;
      for (int64_t start = 0; start < count && delta <= cap; start += kChunk) {
        const int32_t limit = cap;
        const int64_t end = min(count, start + kChunk);
        for (int64_t i = start + tid; i < end; i += kThreads) {
          if (excluded != nullptr && excluded[begin + i] != 0) continue;
          const int32_t d = DistanceAt(pattern, set, L, count, i, limit);
          if (d <= limit) atomicAdd(&hist[d], 1);
        }
        __syncthreads();
        if (tid == 0) {
          int32_t sum = 0;
          for (int32_t d = 0; d <= cap; ++d) {
            sum += hist[d];
            if (sum >= k) {
              cap = d;
              break;
            }
          }
        }
        __syncthreads();
      }
    }
  }

  // t, and how many rows come from below it and from it
  int32_t t = cap, n_lt = 0, quota = 0;
  {
    int32_t sum = 0;
    bool reached = false;
    for (int32_t d = 0; d <= cap; ++d) {
      if (sum + hist[d] >= k) {
        t = d;
        reached = true;
        break;
      }
      sum += hist[d];
    }
    // not reached: fewer than k strings within the cap, all of them are rows
    n_lt = reached ? sum : sum - hist[t];
    quota = min(k - n_lt, hist[t]);
    if (tid == 0) {
      // fewer than k within the histogram while the caller allowed more: the host answers
      unresolved[q] = (n_lt + hist[t] < k && (asked < 0 || asked > kMaxGpuCap)) ? 1 : 0;
      out_count[q] = n_lt + quota;
      found_lt = 0;
      found_eq = 0;
    }
  }
  __syncthreads();

  // pass 2: the rows, in (length, id) order within each distance
  int32_t* pos_out = out_pos + static_cast<int64_t>(q) * k;
  int32_t* dist_out = out_dist + static_cast<int64_t>(q) * k;
  const int32_t lo_len = max(0, lq - t);
  const int32_t hi_len = min(set.max_length, lq + t);
  for (int32_t L = lo_len; L <= hi_len; ++L) {
    if (found_lt == n_lt && found_eq >= quota) break;
    const int64_t begin = set.bucket_begin[L];
    const int64_t count = set.bucket_begin[L + 1] - begin;
    for (int64_t start = 0; start < count; start += kThreads) {
      if (found_lt == n_lt && found_eq >= quota) break;
      const int64_t i = start + tid;
      int32_t d = t + 1;
      if (i < count && (excluded == nullptr || excluded[begin + i] == 0)) {
        d = DistanceAt(pattern, set, L, count, i, t);
      }
      const int32_t is_lt = d < t ? 1 : 0;
      const int32_t is_eq = d == t ? 1 : 0;
      int32_t pre_lt, pre_eq, total_lt, total_eq;
      BlockScan(scan_storage).ExclusiveSum(is_lt, pre_lt, total_lt);
      __syncthreads();
      BlockScan(scan_storage).ExclusiveSum(is_eq, pre_eq, total_eq);
      if (is_lt) {
        const int32_t slot = found_lt + pre_lt;
        pos_out[slot] = static_cast<int32_t>(begin + i);
        dist_out[slot] = d;
      } else if (is_eq && found_eq + pre_eq < quota) {
        const int32_t slot = n_lt + found_eq + pre_eq;
        pos_out[slot] = static_cast<int32_t>(begin + i);
        dist_out[slot] = d;
      }
      __syncthreads();
      if (tid == 0) {
        found_lt += total_lt;
        found_eq += total_eq;
      }
      __syncthreads();
    }
  }
}

template <typename T>
Status Upload(const T* host, std::size_t count, DeviceArray<T>* dev, const char* what) {
  GENIE_RETURN_IF_ERROR(dev->Allocate(std::max<std::size_t>(count, 1), what));
  if (count > 0) {
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dev->get(), host, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

class GpuStringSetImpl final : public GpuStringSet {
 public:
  Status Init(const StringSet& set, int32_t device_ordinal) {
    device_ = device_ordinal;
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    const int32_t max_length = set.max_length();
    const std::size_t buckets = static_cast<std::size_t>(max_length) + 1;
    std::vector<int64_t> bucket_cp(buckets + 1, 0);
    for (std::size_t L = 0; L < buckets; ++L) {
      const int64_t count = set.length_begin[L + 1] - set.length_begin[L];
      bucket_cp[L + 1] = bucket_cp[L] + count * static_cast<int64_t>(L);
    }
    std::vector<uint32_t> cps(static_cast<std::size_t>(bucket_cp[buckets]));
    for (std::size_t L = 0; L < buckets; ++L) {
      const int64_t begin = set.length_begin[L];
      const int64_t count = set.length_begin[L + 1] - begin;
      for (int64_t i = 0; i < count; ++i) {
        const Span<CodePoint> s = set.strings.Get(set.order[static_cast<std::size_t>(begin + i)]);
        for (std::size_t j = 0; j < L; ++j) {
          cps[static_cast<std::size_t>(bucket_cp[L] + static_cast<int64_t>(j) * count + i)] = s[j];
        }
      }
    }
    GENIE_RETURN_IF_ERROR(Upload(cps.data(), cps.size(), &cps_, "scan strings"));
    GENIE_RETURN_IF_ERROR(Upload(set.length_begin.data(), set.length_begin.size(), &bucket_begin_,
                                 "scan length buckets"));
    GENIE_RETURN_IF_ERROR(Upload(bucket_cp.data(), bucket_cp.size(), &bucket_cp_, "scan bucket offsets"));
    max_length_ = max_length;
    return Status::Ok();
  }

  std::size_t device_bytes() const override {
    return cps_.bytes() + bucket_begin_.bytes() + bucket_cp_.bytes();
  }

  Status Scan(const StringSet& set, const StringScanRequest& request, int32_t threads,
              StringScanResult* out, const CancelCheck& cancel) override {
    if (out == nullptr) return Status::InvalidArgument("GpuStringSet::Scan: NULL output");
    try {
      return DoScan(set, request, threads, out, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU string scan");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("GPU string scan failed: ") + e.what());
    }
  }

 private:
  Status DoScan(const StringSet& set, const StringScanRequest& request, int32_t threads,
                StringScanResult* out, const CancelCheck& cancel) {
    GENIE_RETURN_IF_ERROR(ValidateStringScanRequest(set, request));
    const int32_t nq = request.queries.size();
    const int32_t k = request.k;
    std::vector<std::vector<int32_t>> objects(static_cast<std::size_t>(nq));
    std::vector<std::vector<int32_t>> distances(static_cast<std::size_t>(nq));
    std::vector<int32_t> host_queries;  // answered by CpuStringScan
    std::vector<int32_t> device_queries;
    for (int32_t q = 0; q < nq; ++q) {
      const bool fits = request.queries.Get(q).size() <= static_cast<std::size_t>(kernel::kPatternMaxLength);
      (fits && set.size() > 0 ? device_queries : host_queries).push_back(q);
    }

    if (!device_queries.empty()) {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      DeviceArray<uint8_t> d_excluded;
      if (!request.excluded.empty()) {
        std::vector<uint8_t> by_position(static_cast<std::size_t>(set.size()));
        for (std::size_t pos = 0; pos < by_position.size(); ++pos) {
          by_position[pos] = request.excluded[static_cast<std::size_t>(set.order[pos])];
        }
        GENIE_RETURN_IF_ERROR(Upload(by_position.data(), by_position.size(), &d_excluded,
                                     "scan excluded flags"));
      }
      const DeviceSet dset{cps_.get(), bucket_begin_.get(), bucket_cp_.get(), max_length_};
      const int64_t per_launch64 = std::min<int64_t>(kQueriesPerLaunch, std::max<int64_t>(1, kMaxOutputSlots / k));
      const int32_t per_launch = static_cast<int32_t>(per_launch64);
      for (std::size_t first = 0; first < device_queries.size(); first += static_cast<std::size_t>(per_launch)) {
        if (cancel.requested()) return Status::Cancelled();
        const std::size_t n = std::min<std::size_t>(per_launch, device_queries.size() - first);
        std::vector<uint32_t> qcps;
        std::vector<int64_t> qoff{0};
        std::vector<int32_t> qcaps;
        for (std::size_t i = 0; i < n; ++i) {
          const int32_t q = device_queries[first + i];
          const Span<CodePoint> s = request.queries.Get(q);
          qcps.insert(qcps.end(), s.begin(), s.end());
          qoff.push_back(static_cast<int64_t>(qcps.size()));
          qcaps.push_back(request.caps.empty() ? -1 : request.caps[static_cast<std::size_t>(q)]);
        }
        DeviceArray<uint32_t> d_qcps;
        DeviceArray<int64_t> d_qoff;
        DeviceArray<int32_t> d_caps, d_pos, d_dist, d_count;
        DeviceArray<uint8_t> d_unresolved;
        GENIE_RETURN_IF_ERROR(Upload(qcps.data(), qcps.size(), &d_qcps, "scan queries"));
        GENIE_RETURN_IF_ERROR(Upload(qoff.data(), qoff.size(), &d_qoff, "scan query offsets"));
        GENIE_RETURN_IF_ERROR(Upload(qcaps.data(), qcaps.size(), &d_caps, "scan caps"));
        const std::size_t slots = n * static_cast<std::size_t>(k);
        GENIE_RETURN_IF_ERROR(d_pos.Allocate(slots, "scan result positions"));
        GENIE_RETURN_IF_ERROR(d_dist.Allocate(slots, "scan result distances"));
        GENIE_RETURN_IF_ERROR(d_count.Allocate(n, "scan result counts"));
        GENIE_RETURN_IF_ERROR(d_unresolved.Allocate(n, "scan unresolved flags"));
        StringScanKernel<<<static_cast<unsigned>(n), kThreads>>>(
            dset, d_qcps.get(), d_qoff.get(), d_caps.get(), d_excluded.get(), k, d_pos.get(),
            d_dist.get(), d_count.get(), d_unresolved.get());
        GENIE_CUDA_CHECK_LAUNCH("StringScanKernel");
        std::vector<int32_t> count(n), pos(slots), dist(slots);
        std::vector<uint8_t> unresolved(n);
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(count.data(), d_count.get(), n * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost));
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(unresolved.data(), d_unresolved.get(), n,
                                              cudaMemcpyDeviceToHost));
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(pos.data(), d_pos.get(), slots * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost));
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dist.data(), d_dist.get(), slots * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost));
        std::vector<std::pair<int32_t, int32_t>> rows;
        for (std::size_t i = 0; i < n; ++i) {
          const int32_t q = device_queries[first + i];
          if (unresolved[i]) {
            host_queries.push_back(q);
            continue;
          }
          rows.clear();
          for (int32_t r = 0; r < count[i]; ++r) {
            const std::size_t slot = i * static_cast<std::size_t>(k) + static_cast<std::size_t>(r);
            rows.emplace_back(dist[slot], pos[slot]);
          }
          // (distance, position) is (distance, length, id): positions follow the set's order
          std::sort(rows.begin(), rows.end());
          for (const auto& r : rows) {
            objects[static_cast<std::size_t>(q)].push_back(set.order[static_cast<std::size_t>(r.second)]);
            distances[static_cast<std::size_t>(q)].push_back(r.first);
          }
        }
      }
    }

    if (!host_queries.empty()) {
      std::sort(host_queries.begin(), host_queries.end());
      StringScanRequest sub;
      sub.k = k;
      sub.excluded = request.excluded;
      for (int32_t q : host_queries) {
        sub.queries.Add(request.queries.Get(q));
        if (!request.caps.empty()) sub.caps.push_back(request.caps[static_cast<std::size_t>(q)]);
      }
      StringScanResult host;
      GENIE_RETURN_IF_ERROR(CpuStringScan(set, sub, threads, &host, cancel));
      for (std::size_t i = 0; i < host_queries.size(); ++i) {
        const std::size_t q = static_cast<std::size_t>(host_queries[i]);
        objects[q].assign(host.objects.begin() + host.offsets[i], host.objects.begin() + host.offsets[i + 1]);
        distances[q].assign(host.distances.begin() + host.offsets[i],
                            host.distances.begin() + host.offsets[i + 1]);
      }
    }

    out->offsets.assign(1, 0);
    out->objects.clear();
    out->distances.clear();
    for (int32_t q = 0; q < nq; ++q) {
      out->objects.insert(out->objects.end(), objects[static_cast<std::size_t>(q)].begin(),
                          objects[static_cast<std::size_t>(q)].end());
      out->distances.insert(out->distances.end(), distances[static_cast<std::size_t>(q)].begin(),
                            distances[static_cast<std::size_t>(q)].end());
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
    return Status::Ok();
  }

  int32_t device_ = 0;
  int32_t max_length_ = -1;
  DeviceArray<uint32_t> cps_;
  DeviceArray<int64_t> bucket_begin_;
  DeviceArray<int64_t> bucket_cp_;
};

Status CheckDevice(int32_t device_ordinal) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::DeviceUnavailable(std::string("no usable GPU: cudaGetDeviceCount failed: ") +
                                     cudaGetErrorName(error));
  }
  if (device_ordinal < 0 || device_ordinal >= count) {
    return Status::DeviceUnavailable("no usable GPU: device_ordinal " + std::to_string(device_ordinal) +
                                     " does not exist (" + std::to_string(count) + " CUDA device(s))");
  }
  return Status::Ok();
}

}  // namespace
}  // namespace gpu

Status GpuStringSet::Create(const StringSet& set, int32_t device_ordinal,
                            std::unique_ptr<GpuStringSet>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuStringSet::Create: NULL output");
  try {
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    auto impl = std::make_unique<gpu::GpuStringSetImpl>();
    GENIE_RETURN_IF_ERROR(impl->Init(set, device_ordinal));
    *out = std::move(impl);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory copying strings to the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU string set failed: ") + e.what());
  }
}

}  // namespace genie

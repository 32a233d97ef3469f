// The string scan on the GPU (see genie/gpu_string_scan.hpp; the device
// layout of the strings: string_device.cuh).
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
//
// A small batch cannot fill the device with one block per query (one query
// on one SM takes milliseconds), so below about kSplitBlocksPerSm blocks per
// SM a query is split over `parts` blocks.  The chunks of kThreads strings,
// numbered along the same bucket order, go round-robin to the parts.  Each
// part keeps its own histogram and cap, and publishes the cap with atomicMin
// and takes the others' (a part's k-th distance bounds the query's).  Every
// string within the final cap was computed exactly by its part, so the sum of
// the parts' histograms gives t, n_lt and #{d == t} as in the one-block pass.
// Pass 2 (a second launch) writes every string with d <= t, unordered, to at
// most kSplitSlots slots per query and the host sorts them; a query with more
// ties at t than that goes to the one-block kernel with its cap set to t.
#include <cuda_runtime_api.h>

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_string_scan.hpp"
#include "genie/myers_pattern.hpp"
#include "string_device.cuh"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr int32_t kHistogram = 1024;           // distances 0 .. kHistogram - 2, exact
constexpr int32_t kMaxGpuCap = kHistogram - 2;
constexpr int32_t kChunk = kThreads * 4;       // strings between two cap updates
constexpr int32_t kQueriesPerLaunch = 512;     // cancel is polled between launches
constexpr int64_t kMaxOutputSlots = int64_t{1} << 25;
constexpr int32_t kSplitBlocksPerSm = 4;      // a batch smaller than this fills the device split
constexpr int32_t kSplitSlots = 4096;          // rows with d <= t a split query may write

using DeviceSet = DeviceStringSet;

// From the histogram of the distances <= cap: t (the k-th distance, or cap
// when fewer than k lie within it), n_lt = #{d < t} and #{d == t}.
__device__ void Threshold(const int32_t* hist, int32_t cap, int32_t k, int32_t* t_out,
                          int32_t* n_lt_out, int32_t* eq_out, bool* reached_out) {
  int32_t sum = 0;
  for (int32_t d = 0; d <= cap; ++d) {
    if (sum + hist[d] >= k) {
      *t_out = d;
      *n_lt_out = sum;
      *eq_out = hist[d];
      *reached_out = true;
      return;
    }
    sum += hist[d];
  }
  *t_out = cap;
  *n_lt_out = sum - hist[cap];
  *eq_out = hist[cap];
  *reached_out = false;
}

// The smallest d <= cap with at least k strings at distance <= d in the
// histogram (a bound on the k-th distance), or cap when there is none.
__device__ __forceinline__ int32_t LoweredCap(const int32_t* hist, int32_t cap, int32_t k) {
  int32_t sum = 0;
  for (int32_t d = 0; d <= cap; ++d) {
    sum += hist[d];
    if (sum >= k) return d;
  }
  return cap;
}

// The first chunk of a bucket that part `part` of `parts` owns, when
// `chunk_base` chunks came before the bucket in the visiting order.
__device__ __forceinline__ int64_t FirstOwnedChunk(int64_t chunk_base, int32_t part, int32_t parts) {
  const int64_t r = (static_cast<int64_t>(part) - chunk_base) % parts;
  return r < 0 ? r + parts : r;
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
        if (tid == 0) cap = LoweredCap(hist, cap, k);
        __syncthreads();
      }
    }
  }

  // t, and how many rows come from below it and from it
  int32_t t, n_lt, eq;
  bool reached;
  Threshold(hist, cap, k, &t, &n_lt, &eq, &reached);
  const int32_t quota = min(k - n_lt, eq);
  if (tid == 0) {
    // fewer than k within the histogram while the caller allowed more: the host answers
    unresolved[q] = (!reached && (asked < 0 || asked > kMaxGpuCap)) ? 1 : 0;
    out_count[q] = n_lt + quota;
    found_lt = 0;
    found_eq = 0;
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

// Split pass 1: block = (query, part).  global_cap[q] starts at the query's
// cap; global_hist[q * kHistogram ...] starts at 0.
__global__ void __launch_bounds__(kThreads)
SplitCountKernel(DeviceSet set, const uint32_t* __restrict__ query_cps,
                 const int64_t* __restrict__ query_offsets, const uint8_t* __restrict__ excluded,
                 int32_t k, int32_t parts, int32_t* global_cap, int32_t* __restrict__ global_hist) {
  __shared__ alignas(16) unsigned char pattern_storage[sizeof(kernel::MyersPattern)];
  __shared__ int32_t hist[kHistogram];
  __shared__ int32_t cap;
  kernel::MyersPattern& pattern = *reinterpret_cast<kernel::MyersPattern*>(pattern_storage);
  const int32_t q = blockIdx.x / parts;
  const int32_t part = blockIdx.x % parts;
  const int32_t tid = threadIdx.x;
  const int32_t lq = static_cast<int32_t>(query_offsets[q + 1] - query_offsets[q]);
  if (tid == 0) {
    kernel::PreparePattern(query_cps + query_offsets[q], lq, &pattern);
    cap = *static_cast<volatile int32_t*>(&global_cap[q]);
  }
  for (int32_t d = tid; d < kHistogram; d += kThreads) hist[d] = 0;
  __syncthreads();

  int64_t chunk_base = 0;
  for (int32_t delta = 0; delta <= cap && (lq - delta >= 0 || lq + delta <= set.max_length); ++delta) {
    // a part that owned nothing lately still narrows its window by the others' caps
    __syncthreads();
    if (tid == 0) cap = min(cap, *static_cast<volatile int32_t*>(&global_cap[q]));
    __syncthreads();
    for (int side = 0; side < 2; ++side) {
      const int32_t L = side == 0 ? lq - delta : lq + delta;
      if ((side == 1 && delta == 0) || L < 0 || L > set.max_length || delta > cap) continue;
      const int64_t begin = set.bucket_begin[L];
      const int64_t count = set.bucket_begin[L + 1] - begin;
      const int64_t chunks = (count + kThreads - 1) / kThreads;
      int64_t c = FirstOwnedChunk(chunk_base, part, parts);
      chunk_base += chunks;
      for (; c < chunks && delta <= cap; c += parts) {
        const int32_t limit = cap;
        const int64_t i = c * kThreads + tid;
        if (i < count && (excluded == nullptr || excluded[begin + i] == 0)) {
          const int32_t d = DistanceAt(pattern, set, L, count, i, limit);
          if (d <= limit) atomicAdd(&hist[d], 1);
        }
        __syncthreads();
        if (tid == 0) {
          const int32_t lowered = LoweredCap(hist, cap, k);
          if (lowered < cap) atomicMin(&global_cap[q], lowered);
          cap = min(lowered, *static_cast<volatile int32_t*>(&global_cap[q]));
        }
        __syncthreads();
      }
    }
  }
  // every string this part found within its final cap was counted exactly
  for (int32_t d = tid; d <= cap; d += kThreads) {
    if (hist[d] != 0) atomicAdd(&global_hist[static_cast<int64_t>(q) * kHistogram + d], hist[d]);
  }
}

// Split pass 2: t from the summed histogram; every string with d <= t goes
// to the query's slots, when they hold them all.  meta[q * 4 ...] = {rows
// written, rows with d <= t, t, unresolved}.
__global__ void __launch_bounds__(kThreads)
SplitEmitKernel(DeviceSet set, const uint32_t* __restrict__ query_cps,
                const int64_t* __restrict__ query_offsets, const int32_t* __restrict__ caps,
                const uint8_t* __restrict__ excluded, int32_t k, int32_t parts,
                const int32_t* __restrict__ global_cap, const int32_t* __restrict__ global_hist,
                int32_t* __restrict__ slot_pos, int32_t* __restrict__ slot_dist, int32_t* meta) {
  __shared__ alignas(16) unsigned char pattern_storage[sizeof(kernel::MyersPattern)];
  __shared__ int32_t t_shared;
  __shared__ bool emit;
  kernel::MyersPattern& pattern = *reinterpret_cast<kernel::MyersPattern*>(pattern_storage);
  const int32_t q = blockIdx.x / parts;
  const int32_t part = blockIdx.x % parts;
  const int32_t tid = threadIdx.x;
  const int32_t lq = static_cast<int32_t>(query_offsets[q + 1] - query_offsets[q]);
  if (tid == 0) {
    const int32_t asked = caps[q];
    int32_t t, n_lt, eq;
    bool reached;
    Threshold(global_hist + static_cast<int64_t>(q) * kHistogram, global_cap[q], k, &t, &n_lt, &eq, &reached);
    const bool unresolved = !reached && (asked < 0 || asked > kMaxGpuCap);
    emit = !unresolved && n_lt + eq <= kSplitSlots;
    t_shared = t;
    if (part == 0) {
      meta[q * 4 + 1] = n_lt + eq;
      meta[q * 4 + 2] = t;
      meta[q * 4 + 3] = unresolved ? 1 : 0;
    }
    if (emit) kernel::PreparePattern(query_cps + query_offsets[q], lq, &pattern);
  }
  __syncthreads();
  if (!emit) return;
  const int32_t t = t_shared;
  int64_t chunk_base = 0;
  for (int32_t L = max(0, lq - t); L <= min(set.max_length, lq + t); ++L) {
    const int64_t begin = set.bucket_begin[L];
    const int64_t count = set.bucket_begin[L + 1] - begin;
    const int64_t chunks = (count + kThreads - 1) / kThreads;
    int64_t c = FirstOwnedChunk(chunk_base, part, parts);
    chunk_base += chunks;
    for (; c < chunks; c += parts) {
      const int64_t i = c * kThreads + tid;
      if (i >= count || (excluded != nullptr && excluded[begin + i] != 0)) continue;
      const int32_t d = DistanceAt(pattern, set, L, count, i, t);
      if (d <= t) {
        const int32_t slot = atomicAdd(&meta[q * 4], 1);
        slot_pos[static_cast<int64_t>(q) * kSplitSlots + slot] = static_cast<int32_t>(begin + i);
        slot_dist[static_cast<int64_t>(q) * kSplitSlots + slot] = d;
      }
    }
  }
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
    GENIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
    return Status::Ok();
  }

  std::size_t device_bytes() const override {
    std::lock_guard<std::mutex> lock(excluded_mutex_);
    return cps_.bytes() + bucket_begin_.bytes() + bucket_cp_.bytes() +
           (excluded_dev_ ? excluded_dev_->bytes() : 0);
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

  Status Within(const StringSet& set, const CodePointStrings& queries, double radius, Span<uint8_t> excluded,
                std::vector<RangeCandidate>* out, std::vector<int32_t>* host_queries, int64_t* computed,
                const CancelCheck& cancel) override {
    if (out == nullptr || host_queries == nullptr || computed == nullptr)
      return Status::InvalidArgument("GpuStringSet::Within: NULL output");
    if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(set.size()))
      return Status::InvalidArgument("string range search: one excluded flag per string, or none");
    try {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      std::shared_ptr<const DeviceArray<uint8_t>> on_device;
      if (!excluded.empty() && set.size() > 0) GENIE_RETURN_IF_ERROR(ExcludedOnDevice(set, excluded, &on_device));
      const DeviceSet dset{cps_.get(), bucket_begin_.get(), bucket_cp_.get(), max_length_};
      return StringRangeOnDevice(dset, set, on_device ? on_device->get() : nullptr, queries, radius, out,
                                 host_queries, computed, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU string range search");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("GPU string range search failed: ") + e.what());
    }
  }

 private:
  // What one Scan gathers: each query's rows, and the queries the host answers.
  struct ScanState {
    std::vector<std::vector<int32_t>> objects, distances;
    std::vector<int32_t> host_queries;
  };

  // A group of queries on the device: their code points, offsets and caps.
  struct QueryGroup {
    std::vector<int32_t> ids;   // query numbers in the request
    std::vector<int32_t> caps;  // -1: none
    DeviceArray<uint32_t> cps;
    DeviceArray<int64_t> offsets;
    DeviceArray<int32_t> d_caps;
  };

  static Status UploadGroup(const StringScanRequest& request, QueryGroup* g) {
    std::vector<uint32_t> cps;
    std::vector<int64_t> offsets{0};
    for (int32_t q : g->ids) {
      const Span<CodePoint> s = request.queries.Get(q);
      cps.insert(cps.end(), s.begin(), s.end());
      offsets.push_back(static_cast<int64_t>(cps.size()));
    }
    GENIE_RETURN_IF_ERROR(Upload(cps.data(), cps.size(), &g->cps, "scan queries"));
    GENIE_RETURN_IF_ERROR(Upload(offsets.data(), offsets.size(), &g->offsets, "scan query offsets"));
    return Upload(g->caps.data(), g->caps.size(), &g->d_caps, "scan caps");
  }

  // rows (distance, position) of query q, sorted: (distance, length, id)
  static void Emit(const StringSet& set, int32_t q, std::vector<std::pair<int32_t, int32_t>>* rows, int32_t k,
                   ScanState* st) {
    std::sort(rows->begin(), rows->end());
    if (rows->size() > static_cast<std::size_t>(k)) rows->resize(static_cast<std::size_t>(k));
    for (const auto& r : *rows) {
      st->objects[static_cast<std::size_t>(q)].push_back(set.order[static_cast<std::size_t>(r.second)]);
      st->distances[static_cast<std::size_t>(q)].push_back(r.first);
    }
  }

  // One block per query.
  Status ScanBlocks(const StringSet& set, const StringScanRequest& request, const DeviceSet& dset,
                    const uint8_t* d_excluded, QueryGroup* g, ScanState* st) {
    const std::size_t n = g->ids.size();
    const int32_t k = request.k;
    GENIE_RETURN_IF_ERROR(UploadGroup(request, g));
    DeviceArray<int32_t> d_pos, d_dist, d_count;
    DeviceArray<uint8_t> d_unresolved;
    const std::size_t slots = n * static_cast<std::size_t>(k);
    GENIE_RETURN_IF_ERROR(d_pos.Allocate(slots, "scan result positions"));
    GENIE_RETURN_IF_ERROR(d_dist.Allocate(slots, "scan result distances"));
    GENIE_RETURN_IF_ERROR(d_count.Allocate(n, "scan result counts"));
    GENIE_RETURN_IF_ERROR(d_unresolved.Allocate(n, "scan unresolved flags"));
    StringScanKernel<<<static_cast<unsigned>(n), kThreads>>>(
        dset, g->cps.get(), g->offsets.get(), g->d_caps.get(), d_excluded, k, d_pos.get(),
        d_dist.get(), d_count.get(), d_unresolved.get());
    GENIE_CUDA_CHECK_LAUNCH("StringScanKernel");
    std::vector<int32_t> count(n), pos(slots), dist(slots);
    std::vector<uint8_t> unresolved(n);
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(count.data(), d_count.get(), n * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(unresolved.data(), d_unresolved.get(), n, cudaMemcpyDeviceToHost));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(pos.data(), d_pos.get(), slots * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dist.data(), d_dist.get(), slots * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost));
    std::vector<std::pair<int32_t, int32_t>> rows;
    for (std::size_t i = 0; i < n; ++i) {
      if (unresolved[i]) {
        st->host_queries.push_back(g->ids[i]);
        continue;
      }
      rows.clear();
      for (int32_t r = 0; r < count[i]; ++r) {
        const std::size_t slot = i * static_cast<std::size_t>(k) + static_cast<std::size_t>(r);
        rows.emplace_back(dist[slot], pos[slot]);
      }
      Emit(set, g->ids[i], &rows, k, st);
    }
    return Status::Ok();
  }

  // `parts` blocks per query.  A query with more than kSplitSlots rows within
  // its k-th distance t joins *ties, with t as its cap, for ScanBlocks.
  Status ScanSplit(const StringSet& set, const StringScanRequest& request, const DeviceSet& dset,
                   const uint8_t* d_excluded, int32_t parts, QueryGroup* g, QueryGroup* ties,
                   ScanState* st) {
    const std::size_t n = g->ids.size();
    const int32_t k = request.k;
    GENIE_RETURN_IF_ERROR(UploadGroup(request, g));
    std::vector<int32_t> start_cap(n);
    for (std::size_t i = 0; i < n; ++i) start_cap[i] = g->caps[i] < 0 ? kMaxGpuCap : std::min(g->caps[i], kMaxGpuCap);
    DeviceArray<int32_t> d_cap, d_hist, d_pos, d_dist, d_meta;
    const std::size_t slots = n * static_cast<std::size_t>(kSplitSlots);
    GENIE_RETURN_IF_ERROR(Upload(start_cap.data(), n, &d_cap, "scan shared caps"));
    GENIE_RETURN_IF_ERROR(d_hist.Allocate(n * kHistogram, "scan histograms"));
    GENIE_RETURN_IF_ERROR(d_pos.Allocate(slots, "scan result positions"));
    GENIE_RETURN_IF_ERROR(d_dist.Allocate(slots, "scan result distances"));
    GENIE_RETURN_IF_ERROR(d_meta.Allocate(n * 4, "scan result counts"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemset(d_hist.get(), 0, d_hist.bytes()));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemset(d_meta.get(), 0, d_meta.bytes()));
    const unsigned blocks = static_cast<unsigned>(n * static_cast<std::size_t>(parts));
    SplitCountKernel<<<blocks, kThreads>>>(dset, g->cps.get(), g->offsets.get(), d_excluded, k, parts,
                                           d_cap.get(), d_hist.get());
    GENIE_CUDA_CHECK_LAUNCH("SplitCountKernel");
    SplitEmitKernel<<<blocks, kThreads>>>(dset, g->cps.get(), g->offsets.get(), g->d_caps.get(), d_excluded,
                                          k, parts, d_cap.get(), d_hist.get(), d_pos.get(), d_dist.get(),
                                          d_meta.get());
    GENIE_CUDA_CHECK_LAUNCH("SplitEmitKernel");
    std::vector<int32_t> meta(n * 4);
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(meta.data(), d_meta.get(), d_meta.bytes(), cudaMemcpyDeviceToHost));
    int32_t widest = 0;
    for (std::size_t i = 0; i < n; ++i) widest = std::max(widest, meta[i * 4]);
    // only the written part of each query's slots comes back
    std::vector<int32_t> pos(n * static_cast<std::size_t>(widest)), dist(pos.size());
    if (widest > 0) {
      const std::size_t row = static_cast<std::size_t>(widest) * sizeof(int32_t);
      const std::size_t pitch = static_cast<std::size_t>(kSplitSlots) * sizeof(int32_t);
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(pos.data(), row, d_pos.get(), pitch, row, n, cudaMemcpyDeviceToHost));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(dist.data(), row, d_dist.get(), pitch, row, n, cudaMemcpyDeviceToHost));
    }
    std::vector<std::pair<int32_t, int32_t>> rows;
    for (std::size_t i = 0; i < n; ++i) {
      const int32_t written = meta[i * 4], within_t = meta[i * 4 + 1], t = meta[i * 4 + 2];
      if (meta[i * 4 + 3] != 0) {
        st->host_queries.push_back(g->ids[i]);
      } else if (within_t > kSplitSlots) {
        ties->ids.push_back(g->ids[i]);
        ties->caps.push_back(t);
      } else {
        rows.clear();
        for (int32_t r = 0; r < written; ++r) {
          const std::size_t at = i * static_cast<std::size_t>(widest) + static_cast<std::size_t>(r);
          rows.emplace_back(dist[at], pos[at]);
        }
        Emit(set, g->ids[i], &rows, k, st);
      }
    }
    return Status::Ok();
  }

  // The device copy of excluded (by id), by position in the set's order.  A
  // backend passes the same flags (its index version's) with every scan, so
  // the last copy is kept and reused while the flags are equal.
  Status ExcludedOnDevice(const StringSet& set, Span<uint8_t> excluded,
                          std::shared_ptr<const DeviceArray<uint8_t>>* out) {
    std::lock_guard<std::mutex> lock(excluded_mutex_);
    if (excluded_dev_ && excluded_host_.size() == excluded.size() &&
        std::equal(excluded_host_.begin(), excluded_host_.end(), excluded.begin())) {
      *out = excluded_dev_;
      return Status::Ok();
    }
    std::vector<uint8_t> by_position(static_cast<std::size_t>(set.size()));
    for (std::size_t pos = 0; pos < by_position.size(); ++pos) {
      by_position[pos] = excluded[static_cast<std::size_t>(set.order[pos])];
    }
    auto dev = std::make_shared<DeviceArray<uint8_t>>();
    GENIE_RETURN_IF_ERROR(Upload(by_position.data(), by_position.size(), dev.get(), "scan excluded flags"));
    excluded_host_.assign(excluded.begin(), excluded.end());
    excluded_dev_ = dev;
    *out = std::move(dev);
    return Status::Ok();
  }

  Status DoScan(const StringSet& set, const StringScanRequest& request, int32_t threads,
                StringScanResult* out, const CancelCheck& cancel) {
    GENIE_RETURN_IF_ERROR(ValidateStringScanRequest(set, request));
    const int32_t nq = request.queries.size();
    const int32_t k = request.k;
    ScanState state;
    ScanState* st = &state;
    st->objects.resize(static_cast<std::size_t>(nq));
    st->distances.resize(static_cast<std::size_t>(nq));
    std::vector<int32_t> device_queries;
    for (int32_t q = 0; q < nq; ++q) {
      const bool fits = request.queries.Get(q).size() <= static_cast<std::size_t>(kernel::kPatternMaxLength);
      (fits && set.size() > 0 ? device_queries : st->host_queries).push_back(q);
    }

    if (!device_queries.empty()) {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      std::shared_ptr<const DeviceArray<uint8_t>> excluded;
      if (!request.excluded.empty()) GENIE_RETURN_IF_ERROR(ExcludedOnDevice(set, request.excluded, &excluded));
      const uint8_t* d_excluded = excluded ? excluded->get() : nullptr;
      const DeviceSet dset{cps_.get(), bucket_begin_.get(), bucket_cp_.get(), max_length_};
      const int64_t per_launch64 = std::min<int64_t>(kQueriesPerLaunch, std::max<int64_t>(1, kMaxOutputSlots / k));
      const std::size_t per_launch = static_cast<std::size_t>(per_launch64);
      const std::size_t fill = static_cast<std::size_t>(kSplitBlocksPerSm) * static_cast<std::size_t>(sm_count_);
      for (std::size_t first = 0; first < device_queries.size(); first += per_launch) {
        if (cancel.requested()) return Status::Cancelled();
        const std::size_t n = std::min(per_launch, device_queries.size() - first);
        QueryGroup group;
        for (std::size_t i = 0; i < n; ++i) {
          const int32_t q = device_queries[first + i];
          group.ids.push_back(q);
          group.caps.push_back(request.caps.empty() ? -1 : request.caps[static_cast<std::size_t>(q)]);
        }
        const std::size_t parts = (fill + n - 1) / n;
        // a k beyond the split pass's slots would send every query to the one-block kernel again
        if (parts >= 2 && k <= kSplitSlots) {
          QueryGroup ties;
          GENIE_RETURN_IF_ERROR(ScanSplit(set, request, dset, d_excluded, static_cast<int32_t>(parts),
                                          &group, &ties, &state));
          if (!ties.ids.empty()) GENIE_RETURN_IF_ERROR(ScanBlocks(set, request, dset, d_excluded, &ties, &state));
        } else {
          GENIE_RETURN_IF_ERROR(ScanBlocks(set, request, dset, d_excluded, &group, &state));
        }
      }
    }

    if (!st->host_queries.empty()) {
      std::sort(st->host_queries.begin(), st->host_queries.end());
      StringScanRequest sub;
      sub.k = k;
      sub.excluded = request.excluded;
      for (int32_t q : st->host_queries) {
        sub.queries.Add(request.queries.Get(q));
        if (!request.caps.empty()) sub.caps.push_back(request.caps[static_cast<std::size_t>(q)]);
      }
      StringScanResult host;
      GENIE_RETURN_IF_ERROR(CpuStringScan(set, sub, threads, &host, cancel));
      for (std::size_t i = 0; i < st->host_queries.size(); ++i) {
        const std::size_t q = static_cast<std::size_t>(st->host_queries[i]);
        st->objects[q].assign(host.objects.begin() + host.offsets[i], host.objects.begin() + host.offsets[i + 1]);
        st->distances[q].assign(host.distances.begin() + host.offsets[i],
                             host.distances.begin() + host.offsets[i + 1]);
      }
    }

    out->offsets.assign(1, 0);
    out->objects.clear();
    out->distances.clear();
    for (int32_t q = 0; q < nq; ++q) {
      out->objects.insert(out->objects.end(), st->objects[static_cast<std::size_t>(q)].begin(),
                          st->objects[static_cast<std::size_t>(q)].end());
      out->distances.insert(out->distances.end(), st->distances[static_cast<std::size_t>(q)].begin(),
                            st->distances[static_cast<std::size_t>(q)].end());
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
    return Status::Ok();
  }

  int32_t device_ = 0;
  int32_t sm_count_ = 1;
  int32_t max_length_ = -1;
  DeviceArray<uint32_t> cps_;
  DeviceArray<int64_t> bucket_begin_;
  DeviceArray<int64_t> bucket_cp_;
  mutable std::mutex excluded_mutex_;
  std::vector<uint8_t> excluded_host_;
  std::shared_ptr<const DeviceArray<uint8_t>> excluded_dev_;
};

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

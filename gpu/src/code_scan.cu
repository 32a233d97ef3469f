// The exact Hamming scan on the GPU (see genie/gpu_code_scan.hpp and, for
// the selection, genie/codes.hpp).
//
// Device layout: the codes row-major, WordsForBits(bits) 64-bit words each,
// resident for the life of the copy.  Per group of queries (as many as the
// distance buffer holds):
//   DistanceKernel  a block of kQueryBlock queries (their words in shared
//                   memory) against a stretch of codes, a thread a code, so
//                   each code is read once per block of queries; it writes
//                   one uint16 distance per (query, code), kNoDistance for
//                   an excluded code, and counts the distances in a
//                   per-block histogram (shared memory when it fits, else
//                   global atomics) added to the query's histogram;
//   KthKernel       a query per thread: its k-th distance from its histogram
//                   (FindKthDistance), the codes nearer and the codes at it;
//   GatherKernel    the grid of DistanceKernel again: every code nearer than
//                   the k-th distance or at it appended, as a (distance, id)
//                   key, to its query's list (at most kListKeys: the query's
//                   nearer and tied codes are counted, so a query whose list
//                   would overflow is known before and left out);
//   SortKernel      a block per query: its list sorted in shared memory
//                   (cub::BlockRadixSort), the first k written: the k nearest
//                   by (distance, id), the order CpuCodeScan gives.
// A query left out (thousands of codes tied at its k-th distance), and
// every query when k is beyond kMaxListK, takes SelectKernel instead: a
// block per query, one ordered pass over its distances that writes the
// codes nearer than the k-th distance and the first ones at it in object
// id order (two block scans per stretch that holds any); the host then
// orders those rows by distance with a stable sort.
#include <cuda_runtime_api.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "histogram_select.cuh"
#include "genie/gpu_code_scan.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kDistanceThreads = 256;
constexpr int kQueryBlock = 8;                    // queries a code is read for at once
constexpr int kCodesPerBlock = 4096;              // codes of a distance block
constexpr int kSharedHistogramBytes = 32 << 10;   // per-block histograms beyond this go global
constexpr int kSharedQueryBytes = 16 << 10;       // a query block's words
constexpr int kSortThreads = 256;
constexpr int kSortItems = 8;
constexpr int kListKeys = kSortThreads * kSortItems;  // a query's list: 2048 keys
constexpr int32_t kMaxListK = 1024;                   // beyond: SelectKernel for all
constexpr uint64_t kMinDistanceBufferBytes = 64ull << 20;
constexpr uint64_t kMaxDistanceBufferBytes = 1ull << 30;

// The queries of a block that fit kSharedQueryBytes (at least one).
__host__ __device__ inline int QueryBlock(int32_t words) {
  const int fit = kSharedQueryBytes / (words * 8);
  return fit < 1 ? 1 : (fit < kQueryBlock ? fit : kQueryBlock);
}

// grid: (code blocks, query blocks).  dist: gn x n, hist: gn x (bits + 1), zeroed.
__global__ void DistanceKernel(const uint64_t* __restrict__ codes, int32_t n, int32_t words, int32_t bits,
                               const uint64_t* __restrict__ queries, int32_t gn,
                               const uint8_t* __restrict__ excluded, uint16_t* __restrict__ dist,
                               uint32_t* __restrict__ hist, bool shared_hist) {
  extern __shared__ unsigned char shared[];
  const int qb = QueryBlock(words);
  const int q0 = blockIdx.y * qb;
  const int nb = min(qb, gn - q0);
  uint64_t* sq = reinterpret_cast<uint64_t*>(shared);
  uint32_t* sh = reinterpret_cast<uint32_t*>(shared + static_cast<size_t>(qb) * words * 8);
  const int bins = bits + 1;
  for (int i = threadIdx.x; i < nb * words; i += blockDim.x)
    sq[i] = queries[static_cast<size_t>(q0) * words + i];
  if (shared_hist)
    for (int i = threadIdx.x; i < nb * bins; i += blockDim.x) sh[i] = 0;
  __syncthreads();

  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kCodesPerBlock;
  const int64_t end = min(static_cast<int64_t>(n), begin + kCodesPerBlock);
  for (int64_t id = begin + threadIdx.x; id < end; id += blockDim.x) {
    const bool skip = excluded != nullptr && excluded[id] != 0;
    int d[kQueryBlock];
    for (int g = 0; g < kQueryBlock; ++g) d[g] = 0;
    if (!skip) {
      const uint64_t* row = codes + static_cast<size_t>(id) * words;
      for (int32_t w = 0; w < words; ++w) {
        const uint64_t x = row[w];
#pragma unroll
        for (int g = 0; g < kQueryBlock; ++g)
          if (g < nb) d[g] += __popcll(x ^ sq[g * words + w]);
      }
    }
#pragma unroll
    for (int g = 0; g < kQueryBlock; ++g) {
      if (g >= nb) break;
      RecordDistance(dist, n, q0 + g, g, id, skip, static_cast<uint32_t>(d[g]), sh, hist, bins, shared_hist);
    }
  }
  FlushHistograms(sh, hist, q0, nb, bins, shared_hist);
}

// A query's k-th distance: kd, the codes nearer (nearer) and at it (ties).
struct KthInfo {
  int32_t kd;
  int32_t nearer;
  int32_t ties;
  int32_t listed;  // nearer + ties when they fit a list, else -1 (SelectKernel)
};

__global__ void KthKernel(const uint32_t* __restrict__ hist, int32_t gn, int32_t bits, int32_t k,
                          KthInfo* __restrict__ kth) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= gn) return;
  const uint32_t* h = hist + static_cast<size_t>(q) * (bits + 1);
  int64_t nearer = 0;
  int32_t kd = -1;
  for (int32_t b = 0; b <= bits && kd < 0; ++b) {
    if (nearer + h[b] >= k)
      kd = b;
    else
      nearer += h[b];
  }
  if (kd < 0) {  // fewer than k codes: all of them, the farthest at `bits`
    kd = bits;
    nearer -= h[bits];
  }
  KthInfo info;
  info.kd = kd;
  info.nearer = static_cast<int32_t>(nearer);
  info.ties = static_cast<int32_t>(h[kd]);
  info.listed = nearer + h[kd] <= kListKeys ? static_cast<int32_t>(nearer + h[kd]) : -1;
  kth[q] = info;
}

// grid as DistanceKernel's (code blocks, query blocks): the listed queries' keys
__global__ void GatherKernel(const uint16_t* __restrict__ dist, int32_t n, int32_t gn, int qb,
                             const KthInfo* __restrict__ kth, unsigned long long* __restrict__ lists,
                             int32_t* __restrict__ fill) {
  const int q0 = blockIdx.y * qb;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kCodesPerBlock;
  const int64_t end = min(static_cast<int64_t>(n), begin + kCodesPerBlock);
  for (int q = q0; q < min(q0 + qb, gn); ++q) {
    const KthInfo info = kth[q];
    if (info.listed < 0) continue;
    const uint16_t* d = dist + static_cast<size_t>(q) * n;
    for (int64_t id = begin + threadIdx.x; id < end; id += blockDim.x) {
      const uint16_t v = d[id];
      if (v <= info.kd) {  // kNoDistance never is
        const int32_t slot = atomicAdd(fill + q, 1);
        lists[static_cast<size_t>(q) * kListKeys + slot] =
            (static_cast<unsigned long long>(v) << 32) | static_cast<uint32_t>(id);
      }
    }
  }
}

using ListSort = cub::BlockRadixSort<unsigned long long, kSortThreads, kSortItems>;

// A block per query: the first min(kk, listed) keys of its list in order;
// count[q] receives how many, or -1 for a query SelectKernel must take.
__global__ void SortKernel(const unsigned long long* __restrict__ lists, const KthInfo* __restrict__ kth,
                           int32_t kk, int32_t* __restrict__ ids, uint16_t* __restrict__ dists,
                           int32_t* __restrict__ count) {
  __shared__ typename ListSort::TempStorage sort_storage;
  const int q = blockIdx.x;
  const int32_t listed = kth[q].listed;
  if (listed < 0) {
    if (threadIdx.x == 0) count[q] = -1;
    return;
  }
  unsigned long long keys[kSortItems];
#pragma unroll
  for (int j = 0; j < kSortItems; ++j) {
    const int32_t slot = static_cast<int32_t>(threadIdx.x) * kSortItems + j;
    keys[j] = slot < listed ? lists[static_cast<size_t>(q) * kListKeys + slot] : ~0ull;
  }
  ListSort(sort_storage).Sort(keys, 0, 48);  // distance (16 bits) above the id (32)
  const int32_t take = min(kk, listed);
#pragma unroll
  for (int j = 0; j < kSortItems; ++j) {
    const int32_t rank = static_cast<int32_t>(threadIdx.x) * kSortItems + j;
    if (rank < take) {
      ids[static_cast<size_t>(q) * kk + rank] = static_cast<int32_t>(keys[j] & 0xFFFFFFFFull);
      dists[static_cast<size_t>(q) * kk + rank] = static_cast<uint16_t>(keys[j] >> 32);
    }
  }
  if (threadIdx.x == 0) count[q] = take;
}

class GpuCodeSetImpl final : public GpuCodeSet {
 public:
  Status Init(const CodeSet& set, int32_t device_ordinal, uint64_t budget_option) {
    device_ = device_ordinal;
    bits_ = set.bits;
    words_ = set.words;
    n_ = set.size();
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    uint64_t budget = budget_option;
    if (budget == 0) {
      size_t free_bytes = 0, total_bytes = 0;
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
      const uint64_t reserve = std::max<uint64_t>(512ull << 20, total_bytes / 20);
      budget = free_bytes > reserve ? (free_bytes - reserve) / 10 * 9 : 0;
    }
    const uint64_t set_bytes = static_cast<uint64_t>(n_) * words_ * sizeof(uint64_t);
    // a scan needs room for one query's distances at least
    const uint64_t one_query = static_cast<uint64_t>(std::max(n_, 1)) * sizeof(uint16_t) + (16u << 20);
    if (set_bytes + one_query > budget)
      return Status::DeviceOutOfMemory("the device memory budget of " + std::to_string(budget) +
                                       " bytes holds less than the " + std::to_string(set_bytes) +
                                       " bytes of codes and a scan's distances");
    distance_bytes_ = std::min<uint64_t>(kMaxDistanceBufferBytes,
                                         std::max<uint64_t>((budget - set_bytes) / 2, one_query));
    distance_bytes_ = std::max<uint64_t>(std::min<uint64_t>(distance_bytes_, budget - set_bytes),
                                         std::min<uint64_t>(kMinDistanceBufferBytes, budget - set_bytes));
    GENIE_RETURN_IF_ERROR(Upload(set.values.data(), set.values.size(), &codes_, "codes"));
    return Status::Ok();
  }

  Status Scan(const CodeSet& set, const CodeScanRequest& request, CodeScanResult* out,
              const CancelCheck& cancel) override {
    if (out == nullptr) return Status::InvalidArgument("GpuCodeSet::Scan: NULL output");
    try {
      return DoScan(set, request, out, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU code scan");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("GPU code scan failed: ") + e.what());
    }
  }

  std::size_t device_bytes() const override { return codes_.bytes(); }

 private:
  Status DoScan(const CodeSet& set, const CodeScanRequest& request, CodeScanResult* out,
                const CancelCheck& cancel) {
    GENIE_RETURN_IF_ERROR(ValidateCodeScanRequest(set, request));
    if (set.bits != bits_ || set.size() != n_) return Status::InvalidArgument("the code set changed since its GPU copy");
    *out = CodeScanResult();
    const int32_t nq = request.n_queries;
    if (nq == 0) return Status::Ok();
    if (n_ == 0) {
      out->offsets.assign(static_cast<std::size_t>(nq) + 1, 0);
      return Status::Ok();
    }
    const int32_t kk = std::min(request.k, n_);
    const int32_t bins = bits_ + 1;
    // a query's distances, histogram and rows
    const uint64_t per_query = static_cast<uint64_t>(n_) * 2 + static_cast<uint64_t>(bins) * 4 +
                               static_cast<uint64_t>(kk) * 6 + 32 + (kk <= kMaxListK ? kListKeys * 8 : 0);
    const int32_t group = static_cast<int32_t>(
        std::max<uint64_t>(1, std::min<uint64_t>(static_cast<uint64_t>(nq), distance_bytes_ / per_query)));
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    DeviceBlockScope blocks;  // the scan's small buffers are reused
    DeviceArray<uint64_t> d_queries;
    DeviceArray<uint8_t> d_excluded;
    DeviceArray<uint16_t> d_dist, d_rows_dist;
    DeviceArray<uint32_t> d_hist;
    DeviceArray<int32_t> d_rows, d_count, d_fill;
    DeviceArray<KthInfo> d_kth;
    DeviceArray<unsigned long long> d_lists;
    GENIE_RETURN_IF_ERROR(Upload(request.queries, static_cast<std::size_t>(nq) * words_, &d_queries, "code scan queries"));
    if (!request.excluded.empty())
      GENIE_RETURN_IF_ERROR(Upload(request.excluded.data(), request.excluded.size(), &d_excluded, "code scan excluded flags"));
    GENIE_RETURN_IF_ERROR(d_dist.Allocate(static_cast<std::size_t>(group) * n_, "code scan distances"));
    GENIE_RETURN_IF_ERROR(d_hist.Allocate(static_cast<std::size_t>(group) * bins, "code scan histograms"));
    GENIE_RETURN_IF_ERROR(d_rows.Allocate(static_cast<std::size_t>(group) * kk, "code scan rows"));
    GENIE_RETURN_IF_ERROR(d_rows_dist.Allocate(static_cast<std::size_t>(group) * kk, "code scan rows"));
    GENIE_RETURN_IF_ERROR(d_count.Allocate(static_cast<std::size_t>(group), "code scan row counts"));
    if (kk <= kMaxListK) {
      GENIE_RETURN_IF_ERROR(d_fill.Allocate(static_cast<std::size_t>(group), "code scan list fills"));
      GENIE_RETURN_IF_ERROR(d_kth.Allocate(static_cast<std::size_t>(group), "code scan k-th distances"));
      GENIE_RETURN_IF_ERROR(d_lists.Allocate(static_cast<std::size_t>(group) * kListKeys, "code scan lists"));
    }
    const int qb = QueryBlock(words_);
    const std::size_t query_bytes = static_cast<std::size_t>(qb) * words_ * 8;
    const std::size_t hist_bytes = static_cast<std::size_t>(qb) * bins * 4;
    const bool shared_hist = hist_bytes <= kSharedHistogramBytes;
    const std::size_t shared_bytes = query_bytes + (shared_hist ? hist_bytes : 0);
    std::vector<int32_t> ids, counts;
    std::vector<uint16_t> dists;
    out->objects.reserve(static_cast<std::size_t>(nq) * kk);
    out->distances.reserve(static_cast<std::size_t>(nq) * kk);
    for (int32_t g0 = 0; g0 < nq; g0 += group) {
      if (cancel.requested()) return Status::Cancelled();
      const int32_t gn = std::min(group, nq - g0);
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_hist.get(), 0, static_cast<std::size_t>(gn) * bins * 4));
      const dim3 grid(static_cast<unsigned>((n_ + kCodesPerBlock - 1) / kCodesPerBlock),
                      static_cast<unsigned>((gn + qb - 1) / qb));
      DistanceKernel<<<grid, kDistanceThreads, shared_bytes>>>(
          codes_.get(), n_, words_, bits_, d_queries.get() + static_cast<std::size_t>(g0) * words_, gn,
          request.excluded.empty() ? nullptr : d_excluded.get(), d_dist.get(), d_hist.get(), shared_hist);
      GENIE_CUDA_CHECK_LAUNCH("DistanceKernel");
      counts.resize(static_cast<std::size_t>(gn));
      ids.resize(static_cast<std::size_t>(gn) * kk);
      dists.resize(static_cast<std::size_t>(gn) * kk);
      std::vector<int32_t> hard;  // the queries SelectKernel takes
      if (kk <= kMaxListK) {
        KthKernel<<<static_cast<unsigned>((gn + 127) / 128), 128>>>(d_hist.get(), gn, bits_, kk, d_kth.get());
        GENIE_CUDA_CHECK_LAUNCH("KthKernel");
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_fill.get(), 0, sizeof(int32_t) * static_cast<std::size_t>(gn)));
        GatherKernel<<<grid, kDistanceThreads>>>(d_dist.get(), n_, gn, qb, d_kth.get(), d_lists.get(), d_fill.get());
        GENIE_CUDA_CHECK_LAUNCH("GatherKernel");
        SortKernel<<<static_cast<unsigned>(gn), kSortThreads>>>(d_lists.get(), d_kth.get(), kk, d_rows.get(),
                                                                 d_rows_dist.get(), d_count.get());
        GENIE_CUDA_CHECK_LAUNCH("SortKernel");
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(counts.data(), d_count.get(), counts.size() * 4, cudaMemcpyDeviceToHost));
        for (int32_t q = 0; q < gn; ++q)
          if (counts[static_cast<std::size_t>(q)] < 0) hard.push_back(q);
      } else {
        for (int32_t q = 0; q < gn; ++q) hard.push_back(q);
      }
      if (!hard.empty()) {
        DeviceArray<int32_t> d_qmap;
        GENIE_RETURN_IF_ERROR(Upload(hard.data(), hard.size(), &d_qmap, "code scan query map"));
        SelectKernel<<<static_cast<unsigned>(hard.size()), kSelectThreads>>>(
            d_dist.get(), d_hist.get(), n_, bits_, kk, kk, d_qmap.get(), d_rows.get(), d_rows_dist.get(), d_count.get());
        GENIE_CUDA_CHECK_LAUNCH("SelectKernel");
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(counts.data(), d_count.get(), counts.size() * 4, cudaMemcpyDeviceToHost));
      }
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(ids.data(), d_rows.get(), ids.size() * 4, cudaMemcpyDeviceToHost));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dists.data(), d_rows_dist.get(), dists.size() * 2, cudaMemcpyDeviceToHost));
      for (int32_t q = 0; q < gn; ++q) {
        if (counts[static_cast<std::size_t>(q)] > kk) return Status::Internal("GPU code scan: a query outgrew its k rows");
        AppendByDistance(ids.data() + static_cast<std::size_t>(q) * kk, dists.data() + static_cast<std::size_t>(q) * kk,
                         counts[static_cast<std::size_t>(q)], out);
      }
    }
    return Status::Ok();
  }

  // rows in object id order, appended ordered by (distance, id): a stable
  // counting pass over their few distinct distances
  static void AppendByDistance(const int32_t* ids, const uint16_t* dists, int32_t count, CodeScanResult* out) {
    std::vector<int32_t> order(static_cast<std::size_t>(count));
    for (int32_t i = 0; i < count; ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return dists[a] < dists[b]; });
    for (int32_t i : order) {
      out->objects.push_back(ids[i]);
      out->distances.push_back(dists[i]);
    }
    out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
  }

  int32_t device_ = 0;
  int32_t bits_ = 0;
  int32_t words_ = 0;
  int32_t n_ = 0;
  uint64_t distance_bytes_ = 0;
  DeviceArray<uint64_t> codes_;
};

}  // namespace
}  // namespace gpu

Status GpuCodeSet::Create(const CodeSet& set, int32_t device_ordinal, uint64_t memory_budget_bytes,
                          std::unique_ptr<GpuCodeSet>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuCodeSet::Create: NULL output");
  try {
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    auto impl = std::make_unique<gpu::GpuCodeSetImpl>();
    GENIE_RETURN_IF_ERROR(impl->Init(set, device_ordinal, memory_budget_bytes));
    *out = std::move(impl);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory copying codes to the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU code set failed: ") + e.what());
  }
}

}  // namespace genie

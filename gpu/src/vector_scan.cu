// The exact vector scan on the GPU (see genie/gpu_vector_scan.hpp and, for
// why it is exact, genie/vectors.hpp).
//
// Device layout.  The vectors, row-major, each padded with zeros to dimp (a
// multiple of 4) so that rows and queries load as float4; the zeros add
// (0 - 0)^2 = 0 exactly.  A set that does not fit in the memory budget
// stays on the host and is streamed through a staging buffer in parts of
// part_rows_ vectors (multiple loading); a part is copied once per scan.
//
// Each vector gets an upper bound U = s32 + e on its squared distance and a
// lower bound L = s32 - e, from a float32 distance s32 and a bound e on its
// error (vector_distance.cu); the k-th smallest U bounds the k-th squared
// distance, and every vector with L <= that bound is re-ranked.  A float32
// overflow (or NaN) makes U infinite: the vector is then always a candidate.
//
// Per part and group of queries (as many as fit the distance buffer):
//   LaunchDistances every U (vector_distance.cu: the tensor cores'
//                   TF32 tiles for groups of more than 8 queries, float32
//                   tiles for values they do not take, a warp a vector for
//                   8 queries at most); excluded vectors get +infinity;
//   KthKernel       a bound on each query's k-th smallest U, at least it
//                   and sharing its first 22 bits (vector_select.cu);
//   GatherKernel    the vectors whose L is within the k-th U, at most k +
//                   kSlack per query (a query with more, from ties, is
//                   gathered again with room for all);
//   RerankKernel    L2Distance of each, a warp a vector, in element order
//                   with every operation rounded on its own: the host's bits.
// All of it is queued on the set's stream, the inputs sent in one copy and
// the candidates fetched in one, so a scan of one part waits once; the
// host keeps each query's best k by (distance, id) over the parts.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_vector_scan.hpp"
#include "genie/parallel.hpp"
#include "range_search.hpp"
#include "vector_distance.hpp"
#include "vector_select.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kGatherThreads = 256;
// GatherKernel's vectors a thread for launches of kGatherManyQueries queries and more
constexpr int kGatherPerThread = 8;
constexpr int32_t kGatherManyQueries = 128;
constexpr int kRerankWarps = 4;     // candidates a block
constexpr int kRerankChunk = 256;   // squared differences staged at a time
constexpr int kBestWarps = 4;       // queries a block of BestKernel
// Launches of at most kHostBestQueries queries leave BestKernel's work to the host.
constexpr int32_t kHostBestQueries = 64;
// BestKernel's rounds read every candidate once a rank: beyond kBestMaxK
// (k up to the whole set) the host's sort, O(c log c), is the cheaper.
constexpr int32_t kBestMaxK = 256;
constexpr int32_t kSlack = 64;                           // gather slots beyond k
// float32 distances of a group.  kDistanceBufferBytes leaves room for a
// whole tile of queries (kDistanceTile) over 8M vectors.  At 256 MB a group
// of 4.5M vectors held only 14 queries: the distance kernel then computed
// 128-query tiles for 14, and the k-th selection ran on 14 blocks (569 ms
// at 4.5M x 128, against 35 ms at 1M).  The buffer grows past
// kMinDistanceBufferBytes only into memory that the resident vectors leave
// free: a set resident beside the small buffer stays resident.
constexpr uint64_t kDistanceBufferBytes = 4ull << 30;
constexpr uint64_t kMinDistanceBufferBytes = 256ull << 20;
constexpr int32_t kMaxGroup = 16384;                     // queries of a group (grid y)
// A scan of at most kHostNormQueries queries sends them up padded, with
// their norms (computed on the host) and the excluded flags, in one copy
// from pinned memory; a larger one copies the queries as they are and
// computes their norms on the device.
constexpr int32_t kHostNormQueries = 64;

// Where launched query i's candidate slots begin: begin[i], or room * i
// when every query has room slots (then nothing describes them on the device).
struct Slots {
  const int64_t* begin;
  int64_t room;
  __device__ int64_t at(int64_t i) const { return begin != nullptr ? begin[i] : room * i; }
};

// Launched query i (row qmap[i] of d32, or i) gathers the vectors whose
// lower bound is within its k-th upper bound into slots [slots.at(i),
// slots.at(i + 1)); count[i] counts them all, also those beyond the slots.
// A thread takes kPer vectors, a block's width apart, and loads their
// bounds before testing any, so the loads overlap: for many queries 8 (a
// thread a vector read 10,000 x 60,000 bounds at a third of the memory's
// rate: 1.70 -> 0.85 ms on an H200), for a few 1 (8 left a single query's
// 60,000 bounds to 30 blocks: 3 -> 6 us).
template <int kPer>
__global__ void __launch_bounds__(kGatherThreads)
GatherKernel(const float* __restrict__ d32, Norms qn, Norms xn, int32_t n_rows, GroupTerms terms,
             const int32_t* __restrict__ qmap, const float* __restrict__ kth, const uint8_t* __restrict__ excluded,
             Slots slots, int32_t* __restrict__ count, int32_t* __restrict__ cand) {
  const int32_t i = static_cast<int32_t>(blockIdx.y);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kGatherThreads * kPer + threadIdx.x;
  if (base >= n_rows) return;
  const int64_t q = qmap != nullptr ? qmap[i] : i;
  const float* row = d32 + q * n_rows;
  float upper[kPer];
#pragma unroll
  for (int v = 0; v < kPer; ++v) {
    const int64_t r = base + int64_t{v} * kGatherThreads;
    upper[v] = r < n_rows ? row[r] : 0.0f;
  }
  const ErrorTerms used = terms.get();
  const float q_len = qn.length[q];
  const double limit = static_cast<double>(kth[q]) * (1.0 + 0x1p-20);
#pragma unroll
  for (int v = 0; v < kPer; ++v) {
    const int64_t r = base + int64_t{v} * kGatherThreads;
    if (r >= n_rows || (excluded != nullptr && excluded[r])) continue;
    // L = U - 2e, less U's own rounding; infinite U: always a candidate
    const double e = ErrorBound(used, q_len, xn.length[r]);
    const double lower = isinf(upper[v]) ? -INFINITY : static_cast<double>(upper[v]) * (1.0 - 0x1p-22) - 2.0 * e;
    if (lower <= limit) {
      const int64_t slot = atomicAdd(&count[i], 1);
      const int64_t begin = slots.at(i);
      if (begin + slot < slots.at(i + 1)) cand[begin + slot] = static_cast<int32_t>(r);
    }
  }
}

// L2Distance of each gathered vector, exactly as the host computes it: a
// warp a candidate.  The squared differences are independent, so the lanes
// compute them side by side, a chunk at a time, into shared memory; the sum
// is the host's serial one, in element order with every operation rounded
// on its own, and one lane adds the chunk.  (A thread a candidate, reading
// its row element by element, waited on memory at every step: 44 us for a
// single query's 74 candidates of 784 dimensions on an H200.)
__global__ void __launch_bounds__(kRerankWarps * 32)
RerankKernel(const float* __restrict__ rows, const float* __restrict__ queries, int32_t dim, int32_t dimp,
             const int32_t* __restrict__ qmap, Slots slots, const int32_t* __restrict__ count,
             const int32_t* __restrict__ cand, double* __restrict__ dist) {
  __shared__ double products[kRerankWarps][kRerankChunk];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int32_t i = static_cast<int32_t>(blockIdx.y);
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kRerankWarps + warp;
  const int64_t begin = slots.at(i);
  if (j >= min(static_cast<int64_t>(count[i]), slots.at(i + 1) - begin)) return;  // the whole warp
  const int64_t q = qmap != nullptr ? qmap[i] : i;
  const float* x = rows + static_cast<int64_t>(cand[begin + j]) * dimp;
  const float* y = queries + q * dimp;
  double* p = products[warp];
  double sum = 0.0;
  for (int32_t t0 = 0; t0 < dim; t0 += kRerankChunk) {
    const int32_t len = min(kRerankChunk, dim - t0);
    for (int32_t t = lane; t < len; t += 32) {
      const double d = __dsub_rn(static_cast<double>(x[t0 + t]), static_cast<double>(y[t0 + t]));
      p[t] = __dmul_rn(d, d);
    }
    __syncwarp();
    if (lane == 0) {
      // 16 loads at a time, then their adds: only the adds wait on each other
      int32_t t = 0;
      for (; t + 16 <= len; t += 16) {
        double v[16];
#pragma unroll
        for (int u = 0; u < 16; ++u) v[u] = p[t + u];
#pragma unroll
        for (int u = 0; u < 16; ++u) sum = __dadd_rn(sum, v[u]);
      }
      for (; t < len; ++t) sum = __dadd_rn(sum, p[t]);
    }
    __syncwarp();
  }
  if (lane == 0) dist[begin + j] = __dsqrt_rn(sum);
}

// For launches of more than kHostBestQueries queries: the best min(count,
// k) candidates of each by (distance, candidate), in that order, into kk
// slots a query (kk >= that): a warp a query, each round taking the smallest pair above the last one taken (the
// candidates are distinct, so the pairs are), k rounds over the query's
// count candidates.  Only k pairs a query then travel to the host, already
// ordered, instead of every candidate (which the host sorted: 10,000
// queries' 74 slots took 7 ms to fetch and merge).  A query with more
// candidates than slots is left to the host, which gathers it again.
__global__ void __launch_bounds__(kBestWarps * 32)
BestKernel(const double* __restrict__ dist, const int32_t* __restrict__ cand, Slots slots,
           const int32_t* __restrict__ count, int32_t launched, int32_t k, int32_t kk, double* __restrict__ best_dist,
           int32_t* __restrict__ best_cand) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int32_t i = static_cast<int32_t>(blockIdx.x) * kBestWarps + static_cast<int32_t>(threadIdx.x >> 5);
  if (i >= launched) return;  // the whole warp
  const int64_t begin = slots.at(i);
  const int32_t c = count[i];
  if (c > slots.at(i + 1) - begin) return;
  const int32_t keep = min(c, k);
  double last_d = -INFINITY;  // distances are finite and >= 0
  int32_t last_c = -1;
  for (int32_t r = 0; r < keep; ++r) {
    double bd = INFINITY;
    int32_t bc = INT32_MAX;
    for (int32_t j = lane; j < c; j += 32) {
      const double d = dist[begin + j];
      const int32_t x = cand[begin + j];
      const bool above = d > last_d || (d == last_d && x > last_c);
      if (above && (d < bd || (d == bd && x < bc))) {
        bd = d;
        bc = x;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const double od = __shfl_xor_sync(0xFFFFFFFFu, bd, off);
      const int32_t oc = __shfl_xor_sync(0xFFFFFFFFu, bc, off);
      if (od < bd || (od == bd && oc < bc)) {
        bd = od;
        bc = oc;
      }
    }
    if (lane == 0) {
      best_dist[static_cast<int64_t>(i) * kk + r] = bd;
      best_cand[static_cast<int64_t>(i) * kk + r] = bc;
    }
    last_d = bd;
    last_c = bc;
  }
}

// Each query's best k (distance, id) pairs over the parts and groups of a
// scan, in one flat array of k a query, into which each part's ordered
// best are merged (per-query lists cost a heap allocation each, which for
// 10,000 queries was more than the scan's re-rank).
class BestK {
 public:
  BestK(int32_t nq, int32_t k)
      : k_(k), kept_(static_cast<std::size_t>(nq), 0), best_(static_cast<std::size_t>(nq) * static_cast<std::size_t>(k)) {}

  int32_t k() const { return k_; }

  // Merges count candidates of query q (distances dist, ids row0 + cand),
  // ordered by (distance, id) when sorted (as BestKernel leaves them).
  void Merge(int32_t q, const double* dist, const int32_t* cand, int64_t count, int32_t row0, bool sorted) {
    if (count == 0) return;
    std::pair<double, int32_t>* best = best_.data() + static_cast<std::size_t>(q) * k_;
    int32_t& kept = kept_[static_cast<std::size_t>(q)];
    fresh_.clear();
    for (int64_t j = 0; j < count; ++j) fresh_.emplace_back(dist[j], row0 + cand[j]);
    if (!sorted) {
      const std::size_t keep = std::min(fresh_.size(), static_cast<std::size_t>(k_));
      std::partial_sort(fresh_.begin(), fresh_.begin() + static_cast<std::ptrdiff_t>(keep), fresh_.end());
      fresh_.resize(keep);
    }
    scratch_.resize(static_cast<std::size_t>(kept) + fresh_.size());
    std::merge(best, best + kept, fresh_.begin(), fresh_.end(), scratch_.begin());
    const std::size_t keep = std::min(scratch_.size(), static_cast<std::size_t>(k_));
    std::copy_n(scratch_.begin(), keep, best);
    kept = static_cast<int32_t>(keep);
  }

  void Emit(VectorScanResult* out) const {
    std::size_t total = 0;
    for (int32_t kept : kept_) total += static_cast<std::size_t>(kept);
    out->offsets.assign(1, 0);
    out->offsets.reserve(kept_.size() + 1);
    out->objects.clear();
    out->objects.reserve(total);
    out->distances.clear();
    out->distances.reserve(total);
    for (std::size_t q = 0; q < kept_.size(); ++q) {
      const std::pair<double, int32_t>* best = best_.data() + q * static_cast<std::size_t>(k_);
      for (int32_t i = 0; i < kept_[q]; ++i) {
        out->objects.push_back(best[i].second);
        out->distances.push_back(best[i].first);
      }
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
  }

 private:
  int32_t k_;
  std::vector<int32_t> kept_;
  std::vector<std::pair<double, int32_t>> best_;
  std::vector<std::pair<double, int32_t>> fresh_, scratch_;
};

class GpuVectorSetImpl final : public GpuVectorSet {
 public:
  // Copies from the set's page-locked rows done before they are unlocked
  // (a cancelled scan may have left some queued).
  ~GpuVectorSetImpl() override {
    if (stream_.get() != nullptr) (void)cudaStreamSynchronize(stream_.get());
  }
  Status Init(const VectorSet& set, int32_t device_ordinal, uint64_t budget_option) {
    device_ = device_ordinal;
    dim_ = set.dim;
    dimp_ = (set.dim + 3) / 4 * 4;
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
    // a quarter (at most kMinDistanceBufferBytes) for a scan's distances, the
    // rest for the vectors; a resident set's distances may take half of what it
    // leaves (the norms, queries and gathers need some), up to a quarter of the
    // budget and kDistanceBufferBytes
    const uint64_t row_bytes = static_cast<uint64_t>(dimp_) * sizeof(float);
    const uint64_t set_bytes = static_cast<uint64_t>(n_) * row_bytes;
    distance_bytes_ = std::max<uint64_t>(std::min<uint64_t>(budget / 4, kMinDistanceBufferBytes), 1u << 20);
    if (budget >= distance_bytes_ && set_bytes <= budget - distance_bytes_)
      distance_bytes_ = std::max(distance_bytes_, std::min<uint64_t>({budget / 4, kDistanceBufferBytes, (budget - set_bytes) / 2}));
    const uint64_t room = budget > distance_bytes_ ? budget - distance_bytes_ : 0;
    if (set_bytes <= room) {
      part_rows_ = std::max(n_, 1);
    } else {
      part_rows_ = static_cast<int32_t>(std::min<uint64_t>(room / row_bytes, static_cast<uint64_t>(n_)));
      part_rows_ = part_rows_ / kDistanceTile * kDistanceTile;
      if (part_rows_ < kDistanceTile)
        return Status::DeviceOutOfMemory("the device memory budget holds less than " + std::to_string(kDistanceTile) +
                                         " vectors of " + std::to_string(dim_) + " dimensions");
    }
    GENIE_RETURN_IF_ERROR(stream_.Create());
    GENIE_RETURN_IF_ERROR(rows_.Allocate(static_cast<std::size_t>(part_rows_) * dimp_, "vectors"));
    // A set that streams is page-locked in place when the driver allows: its
    // parts and a range search's runs of rows then go up by DMA, without a
    // pass through staging (else they stay pageable, slower, the same rows).
    // (At most kHostRegistrationPieceBytes: registering takes time in
    // proportion and cannot be cancelled.)
    const std::size_t set_host_bytes = set.values.size() * sizeof(float);
    if (!resident() && set_host_bytes > 0 && set_host_bytes <= kHostRegistrationPieceBytes)
      set_pinned_ = set_pin_.Register(set.values.data(), set_host_bytes);
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(rows_.get(), 0, rows_.bytes(), stream_.get()));
    if (resident()) GENIE_RETURN_IF_ERROR(CopyRows(set, 0, n_, stream_.get()));
    // The norms of every vector stay on the device, also when the vectors
    // stream.  A resident set's are computed there, a thread a vector, with
    // the host's bits: on the host the serial sums of Fashion-MNIST's 60,000
    // x 784 took 40 ms of a new connection's first search (2 cores; more
    // on the GPU host), on the device microseconds.
    DeviceArray<int> outside;
    if (resident()) {
      GENIE_RETURN_IF_ERROR(x_squared_.Allocate(static_cast<std::size_t>(std::max(n_, 1)), "vector norms"));
      GENIE_RETURN_IF_ERROR(x_length_.Allocate(static_cast<std::size_t>(std::max(n_, 1)), "vector norms"));
      GENIE_RETURN_IF_ERROR(outside.Allocate(1, "vector range flag"));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(outside.get(), 0, sizeof(int), stream_.get()));
      GENIE_RETURN_IF_ERROR(LaunchNorms(rows_.get(), n_, dim_, dimp_, x_squared_.get(), x_length_.get(), outside.get(),
                                        stream_.get()));
    } else {
      std::vector<float> squared, length;
      HostNorms(set.values.data(), n_, dim_, dim_, &squared, &length, &tf32_safe_);
      GENIE_RETURN_IF_ERROR(Upload(squared.data(), squared.size(), &x_squared_, "vector norms"));
      GENIE_RETURN_IF_ERROR(Upload(length.data(), length.size(), &x_length_, "vector norms"));
    }
    // Everything above done before any scan: the norms' pageable copies on
    // the default stream may still be in flight when cudaMemcpy returns, and
    // range searches read rows_ on the default stream.
    GENIE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    if (resident()) {
      int beyond = 0;
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(&beyond, outside.get(), sizeof(int), cudaMemcpyDeviceToHost));
      tf32_safe_ = beyond == 0;
    }
    return Status::Ok();
  }

  Status Scan(const VectorSet& set, const VectorScanRequest& request, VectorScanResult* out,
              const CancelCheck& cancel) override {
    if (out == nullptr) return Status::InvalidArgument("GpuVectorSet::Scan: NULL output");
    try {
      // one scan at a time: the stream, the pinned slots and (streamed) the
      // part buffer are the set's
      std::lock_guard<std::mutex> lock(scan_mutex_);
      return DoScan(set, request, out, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU vector scan");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("GPU vector scan failed: ") + e.what());
    }
  }

  Status RangeCandidates(const VectorSet& set, const GpuRangeRequest& request, const RangePlan& plan,
                         std::vector<RangeCandidate>* out, const CancelCheck& cancel) override {
    if (out == nullptr) return Status::InvalidArgument("GpuVectorSet::RangeCandidates: NULL output");
    if (set.size() != n_ || set.dim != dim_) return Status::InvalidArgument("a range search of another set");
    if (request.device_members != nullptr && request.device_members->device() != device_)
      return Status::InvalidArgument("the list's members are on another device");
    try {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      if (resident())
        return RangeOnDevice(rows_.get(), dimp_, dim_, request.queries, request.n_queries, request.radius, plan,
                             request.device_members != nullptr ? request.device_members->data() : nullptr, out,
                             cancel);
      // two slots of the part buffer, each small enough to stage through
      // one pinned slot; the buffer and the pool are the scans' too
      std::lock_guard<std::mutex> lock(scan_mutex_);
      // a scan's copies into the part buffer done (one that was cancelled
      // may have left some queued)
      GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
      StreamedRows rows;
      rows.set = &set;
      rows.set_pinned = set_pinned_;
      rows.members = request.members;
      rows.member_rows = request.member_rows;
      rows.member_rows_pinned = request.member_rows_pinned;
      rows.member_rows_one_piece = request.member_rows_one_piece;
      rows.slots = rows_.get();
      rows.slot_rows = static_cast<int32_t>(std::min<uint64_t>(
          static_cast<uint64_t>(part_rows_ / 2), kMaxPinnedBytes / (static_cast<uint64_t>(dimp_) * sizeof(float))));
      rows.dimp = dimp_;
      rows.dim = dim_;
      rows.threads = request.threads;
      rows.pinned = &pinned_;
      return RangeStreamed(rows, request.queries, request.n_queries, request.radius, plan, out, cancel);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU range search");
    }
  }

  std::size_t device_bytes() const override { return rows_.bytes() + x_squared_.bytes() + x_length_.bytes(); }
  int32_t parts() const override { return n_ == 0 ? 1 : (n_ + part_rows_ - 1) / part_rows_; }

 private:
  bool resident() const { return part_rows_ >= n_; }

  // Vectors [first, first + count) of the set into rows_, padded to dimp_.
  // (On the scan's stream, after the work that reads the part before.)
  Status CopyRows(const VectorSet& set, int32_t first, int32_t count, cudaStream_t stream) {
    if (count == 0) return Status::Ok();
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(rows_.get(), static_cast<std::size_t>(dimp_) * sizeof(float),
                                                 set.row(first), static_cast<std::size_t>(dim_) * sizeof(float),
                                                 static_cast<std::size_t>(dim_) * sizeof(float),
                                                 static_cast<std::size_t>(count), cudaMemcpyHostToDevice, stream));
    return Status::Ok();
  }

  // Gathers and re-ranks the launched queries (qmap: their rows in the
  // group, or identity, when every query has the same room) with slots per
  // slot_begin; merges their (distance, id) pairs into found, but for those
  // in *overflow (which gets them with their counts).  Everything is queued on the scan's stream, the slots and the
  // query map go up in one copy and the answers come down in one, after
  // which the host waits once: the rerank covers every slot of a query and
  // stops at its count, which only the device knows.
  Status GatherRerank(const float* rows, int32_t n_rows, int32_t row0, const float* d32, const float* d_queries,
                      Norms qn, Norms xn, const GroupTerms& terms, int32_t group_first, const std::vector<int32_t>& qmap_host,
                      const std::vector<int64_t>& slot_begin, const float* d_kth, const uint8_t* d_excluded,
                      BestK* found, std::vector<std::pair<int32_t, int32_t>>* overflow) {
    const cudaStream_t stream = stream_.get();
    const int32_t launched = static_cast<int32_t>(slot_begin.size()) - 1;
    const int64_t slots = slot_begin.back();
    const std::size_t cells = static_cast<std::size_t>(std::max<int64_t>(slots, 1));
    // the first round gives every query the same room: nothing to send
    Slots d_slots{nullptr, launched > 0 ? slot_begin[1] : 0};
    const int32_t* qmap = nullptr;
    DeviceMemory d_meta;
    if (!qmap_host.empty()) {
      UploadBatch meta;
      const std::size_t at_begin = meta.Add(slot_begin);
      const std::size_t at_qmap = meta.Add(qmap_host);
      GENIE_RETURN_IF_ERROR(meta.Upload(&d_meta, stream, "vector scan slots", &pinned_));
      d_slots.begin = UploadBatch::At<int64_t>(d_meta, at_begin);
      qmap = UploadBatch::At<int32_t>(d_meta, at_qmap);
    }
    // What comes back, in one buffer: each query's best kk (distances,
    // candidates) when BestKernel picks them on the device, or for at most
    // kHostBestQueries queries every candidate (the host sorts them: cheaper
    // than a launch), then the counts.
    int64_t widest = 0;
    for (int32_t i = 0; i < launched; ++i) widest = std::max<int64_t>(widest, slot_begin[i + 1] - slot_begin[i]);
    const int32_t k = found->k();
    const bool best_on_device = launched > kHostBestQueries && k <= kBestMaxK;
    const int32_t kk = static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(k, widest)));
    const std::size_t back_cells =
        best_on_device ? static_cast<std::size_t>(launched) * static_cast<std::size_t>(kk) : cells;
    const std::size_t at_cand = sizeof(double) * back_cells;
    const std::size_t at_count = at_cand + sizeof(int32_t) * back_cells;
    const std::size_t back_bytes = at_count + sizeof(int32_t) * static_cast<std::size_t>(launched);
    DeviceMemory d_back, d_work;
    GENIE_RETURN_IF_ERROR(d_back.Allocate(back_bytes, "vector scan results"));
    double* d_dist = UploadBatch::At<double>(d_back, 0);
    int32_t* d_cand = UploadBatch::At<int32_t>(d_back, at_cand);
    int32_t* d_count = UploadBatch::At<int32_t>(d_back, at_count);
    if (best_on_device) {  // the candidates stay on the device
      GENIE_RETURN_IF_ERROR(d_work.Allocate((sizeof(double) + sizeof(int32_t)) * cells, "vector scan candidates"));
      d_dist = UploadBatch::At<double>(d_work, 0);
      d_cand = UploadBatch::At<int32_t>(d_work, sizeof(double) * cells);
    }
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_count, 0, sizeof(int32_t) * launched, stream));
    const bool many = launched >= kGatherManyQueries;
    const auto gather = many ? GatherKernel<kGatherPerThread> : GatherKernel<1>;
    gather<<<dim3(GridBlocks(n_rows, kGatherThreads * (many ? kGatherPerThread : 1)), static_cast<unsigned>(launched)),
             kGatherThreads, 0, stream>>>(d32, qn, xn, n_rows, terms, qmap, d_kth, d_excluded, d_slots, d_count,
                                          d_cand);
    GENIE_CUDA_CHECK_LAUNCH("GatherKernel");
    if (widest > 0) {
      RerankKernel<<<dim3(GridBlocks(widest, kRerankWarps), static_cast<unsigned>(launched)), kRerankWarps * 32, 0,
                     stream>>>(rows, d_queries, dim_, dimp_, qmap, d_slots, d_count, d_cand, d_dist);
      GENIE_CUDA_CHECK_LAUNCH("RerankKernel");
      if (best_on_device) {
        BestKernel<<<GridBlocks(launched, kBestWarps), kBestWarps * 32, 0, stream>>>(
            d_dist, d_cand, d_slots, d_count, launched, k, kk, UploadBatch::At<double>(d_back, 0),
            UploadBatch::At<int32_t>(d_back, at_cand));
        GENIE_CUDA_CHECK_LAUNCH("BestKernel");
      }
    }
    // the way down: a pinned slot the set keeps, else pageable memory
    std::vector<unsigned char> pageable;
    PinnedSlot* slot = nullptr;
    if (back_bytes > kMaxPinnedBytes || !pinned_.Take(back_bytes, &slot).ok()) {
      slot = nullptr;
      pageable.resize(back_bytes);
    }
    unsigned char* back = slot != nullptr ? slot->data() : pageable.data();
    const cudaError_t copied = cudaMemcpyAsync(back, d_back.get(), back_bytes, cudaMemcpyDeviceToHost, stream);
    const cudaError_t waited = copied == cudaSuccess ? cudaStreamSynchronize(stream) : copied;
    if (slot != nullptr) pinned_.Give(slot);  // idle: the stream has drained
    GENIE_CUDA_RETURN_IF_ERROR(waited);
    const double* dist = reinterpret_cast<const double*>(back);
    const int32_t* cand = reinterpret_cast<const int32_t*>(back + at_cand);
    const int32_t* count = reinterpret_cast<const int32_t*>(back + at_count);
    for (int32_t i = 0; i < launched; ++i) {
      const int32_t q = qmap_host.empty() ? i : qmap_host[static_cast<std::size_t>(i)];
      if (count[i] > slot_begin[i + 1] - slot_begin[i]) {
        overflow->emplace_back(q, count[i]);
        continue;
      }
      if (best_on_device) {
        const std::size_t at = static_cast<std::size_t>(i) * static_cast<std::size_t>(kk);
        found->Merge(group_first + q, dist + at, cand + at, std::min(count[i], k), row0, true);
      } else {
        found->Merge(group_first + q, dist + slot_begin[i], cand + slot_begin[i], count[i], row0, false);
      }
    }
    return Status::Ok();
  }

  // The queries on the device, padded like the vectors, with their norms
  // and the excluded flags.  A few queries go up in one pinned copy with
  // norms the host computed (each a serial double sum: a single thread on
  // the device takes microseconds for 784 dimensions); many are copied as
  // they are and their norms computed there, where 10,000 queries' sums run
  // side by side (on the host they took longer than the scan).
  struct StagedQueries {
    DeviceMemory staged;  // the one copy of a few queries
    DeviceArray<float> queries, squared, length;
    DeviceArray<uint8_t> excluded;
    // nonzero on the device when a query value is OutsideTf32Range (not
    // allocated for a few queries: the host's answer is host_safe)
    DeviceArray<int> outside;
    const float* d_queries = nullptr;
    Norms norms{nullptr, nullptr};
    const uint8_t* d_excluded = nullptr;
    bool host_safe = false;
  };

  Status StageQueries(const VectorScanRequest& request, StagedQueries* st) {
    const cudaStream_t stream = stream_.get();
    const int32_t nq = request.n_queries;
    const std::size_t width = static_cast<std::size_t>(dimp_);
    if (nq <= kHostNormQueries) {
      GENIE_RETURN_IF_ERROR(CheckQueryValues(request, dim_));
      std::vector<float> padded(static_cast<std::size_t>(nq) * width, 0.0f), squared, length;
      for (int32_t q = 0; q < nq; ++q)
        std::copy_n(request.queries + static_cast<std::size_t>(q) * dim_, dim_, padded.data() + q * width);
      HostNorms(request.queries, nq, dim_, dim_, &squared, &length, &st->host_safe);
      UploadBatch batch;
      const std::size_t at_queries = batch.Add(padded);
      const std::size_t at_squared = batch.Add(squared);
      const std::size_t at_length = batch.Add(length);
      const std::size_t at_excluded = batch.Add(request.excluded.data(), request.excluded.size());
      GENIE_RETURN_IF_ERROR(batch.Upload(&st->staged, stream, "vector scan queries", &pinned_));
      st->d_queries = UploadBatch::At<float>(st->staged, at_queries);
      st->norms = Norms{UploadBatch::At<float>(st->staged, at_squared), UploadBatch::At<float>(st->staged, at_length)};
      if (!request.excluded.empty()) st->d_excluded = UploadBatch::At<uint8_t>(st->staged, at_excluded);
      return Status::Ok();
    }
    // a query value that is not finite is the caller's error also where the
    // device has no room for the queries (the copy below checks them)
    const Status allocated = st->queries.Allocate(static_cast<std::size_t>(nq) * width, "vector scan queries");
    if (!allocated.ok()) {
      GENIE_RETURN_IF_ERROR(CheckQueryValues(request, dim_));
      return allocated;
    }
    // padded on the host into a pinned slot the set keeps, then one
    // asynchronous copy (from pageable memory 10,000 Fashion-MNIST queries
    // took 5 ms); beyond kMaxPinnedBytes, a pageable copy of the rows
    PinnedSlot* slot = nullptr;
    if (st->queries.bytes() <= kMaxPinnedBytes && pinned_.Take(st->queries.bytes(), &slot).ok()) {
      float* padded = reinterpret_cast<float*>(slot->data());
      // in pieces of about 512 kB on up to 8 of the host's cores, each value
      // checked as it is copied: one core checked 1,024 Fashion-MNIST queries
      // (3.2 MB) in 0.38 ms and then copied them in 0.35, 0.75 ms of a 2.0 ms
      // call before the device had anything to do (bench/warpgroup-tiles-h200.txt)
      const int64_t pieces =
          std::min<int64_t>({64, nq, 1 + static_cast<int64_t>(st->queries.bytes() / (512u << 10))});
      const int64_t per_piece = (nq + pieces - 1) / pieces;
      const int32_t threads = std::min<int32_t>({static_cast<int32_t>(pieces), 8, ResolveThreads(0)});
      std::atomic<bool> finite{true};
      const Status copied_rows = ParallelFor(pieces, threads, [&](int64_t piece) {
        const int64_t end = std::min<int64_t>(nq, (piece + 1) * per_piece);
        bool piece_finite = true;
        for (int64_t q = piece * per_piece; q < end; ++q) {
          piece_finite &= CopyFinite(request.queries + static_cast<std::size_t>(q) * dim_, static_cast<std::size_t>(dim_),
                                     padded + q * width);
          std::fill(padded + q * width + dim_, padded + (q + 1) * width, 0.0f);
        }
        if (!piece_finite) finite.store(false);
        return Status::Ok();
      });
      if (!copied_rows.ok() || !finite.load()) {
        pinned_.Give(slot);
        GENIE_RETURN_IF_ERROR(copied_rows);
        return CheckQueryValues(request, dim_);  // its message
      }
      const cudaError_t copied =
          cudaMemcpyAsync(st->queries.get(), padded, st->queries.bytes(), cudaMemcpyHostToDevice, stream);
      const Status marked = copied == cudaSuccess ? slot->MarkUsed(stream)
                                                  : CudaStatus(copied, "cudaMemcpyAsync (queries)", __FILE__, __LINE__);
      pinned_.Give(slot);  // idle again once the copy is done (Take waits for it)
      GENIE_RETURN_IF_ERROR(marked);
    } else {
      GENIE_RETURN_IF_ERROR(CheckQueryValues(request, dim_));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(st->queries.get(), 0, st->queries.bytes(), stream));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(st->queries.get(), width * sizeof(float), request.queries,
                                                   static_cast<std::size_t>(dim_) * sizeof(float),
                                                   static_cast<std::size_t>(dim_) * sizeof(float),
                                                   static_cast<std::size_t>(nq), cudaMemcpyHostToDevice, stream));
    }
    GENIE_RETURN_IF_ERROR(st->squared.Allocate(static_cast<std::size_t>(nq), "query norms"));
    GENIE_RETURN_IF_ERROR(st->length.Allocate(static_cast<std::size_t>(nq), "query norms"));
    GENIE_RETURN_IF_ERROR(st->outside.Allocate(1, "query range flag"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(st->outside.get(), 0, sizeof(int), stream));
    GENIE_RETURN_IF_ERROR(LaunchNorms(st->queries.get(), nq, dim_, dimp_, st->squared.get(), st->length.get(),
                                      st->outside.get(), stream));
    if (!request.excluded.empty()) {
      GENIE_RETURN_IF_ERROR(st->excluded.Allocate(request.excluded.size(), "vector scan excluded flags"));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(st->excluded.get(), request.excluded.data(), request.excluded.size(),
                                                 cudaMemcpyHostToDevice, stream));
      st->d_excluded = st->excluded.get();
    }
    st->d_queries = st->queries.get();
    st->norms = Norms{st->squared.get(), st->length.get()};
    return Status::Ok();
  }

  Status DoScan(const VectorSet& set, const VectorScanRequest& request, VectorScanResult* out,
                const CancelCheck& cancel) {
    // the query values are checked as StageQueries copies them
    GENIE_RETURN_IF_ERROR(ValidateVectorScanShape(set, request));
    if (set.dim != dim_ || set.size() != n_) return Status::InvalidArgument("the vector set changed since its GPU copy");
    const int32_t nq = request.n_queries;
    const int32_t k = request.k;
    // no query has more than n_ rows to keep (k may be up to 2^30)
    BestK found(nq, std::min(k, std::max(n_, 1)));
    if (nq == 0 || n_ == 0)  // (else StageQueries checks them)
      GENIE_RETURN_IF_ERROR(CheckQueryValues(request, dim_));
    if (nq > 0 && n_ > 0) {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      DeviceBlockScope blocks;  // the scan's small buffers are reused
      const cudaStream_t stream = stream_.get();
      StagedQueries staged;
      GENIE_RETURN_IF_ERROR(StageQueries(request, &staged));
      int32_t group = static_cast<int32_t>(std::max<uint64_t>(
          1, std::min<uint64_t>({static_cast<uint64_t>(nq), static_cast<uint64_t>(kMaxGroup),
                                 distance_bytes_ / (sizeof(float) * static_cast<uint64_t>(part_rows_))})));
      // whole tiles of queries, but for the last group
      if (group < nq && group > kDistanceTile) group = group / kDistanceTile * kDistanceTile;
      DeviceArray<float> d32;
      GENIE_RETURN_IF_ERROR(d32.Allocate(static_cast<std::size_t>(group) * part_rows_, "vector scan distances"));
      // the queries rounded to TF32 for Hopper's warpgroup tiles
      // (RoundQueriesTf32): all of them once when they are one group, else
      // a group's worth before each of its launches, so the copy never
      // holds more than a group (the scan's budget bounds the group, not nq)
      const bool warpgroup = tf32_safe_ && group > kMidQueries && WarpgroupTilesUsable();  // (group <= nq)
      const bool round_once = group >= nq;
      DeviceArray<float> rounded;
      if (warpgroup) {
        GENIE_RETURN_IF_ERROR(rounded.Allocate(static_cast<std::size_t>(group) * dimp_, "TF32 queries"));
        if (round_once)
          GENIE_RETURN_IF_ERROR(RoundQueriesTf32(staged.d_queries, static_cast<int64_t>(rounded.size()), rounded.get(),
                                                 stream));
      }
      for (int32_t row0 = 0; row0 < n_; row0 += part_rows_) {
        const int32_t n_rows = std::min(part_rows_, n_ - row0);
        if (!resident()) {
          if (cancel.requested()) return Status::Cancelled();
          GENIE_RETURN_IF_ERROR(CopyRows(set, row0, n_rows, stream));
        }
        const uint8_t* excluded = staged.d_excluded == nullptr ? nullptr : staged.d_excluded + row0;
        for (int32_t g0 = 0; g0 < nq; g0 += group) {
          if (cancel.requested()) return Status::Cancelled();
          const int32_t gn = std::min(group, nq - g0);
          const float* queries = staged.d_queries + static_cast<std::size_t>(g0) * dimp_;
          const float* group_rounded = nullptr;
          if (warpgroup && gn > kMidQueries) {  // (else the group takes other tiles)
            if (!round_once)
              GENIE_RETURN_IF_ERROR(RoundQueriesTf32(queries, static_cast<int64_t>(gn) * dimp_, rounded.get(), stream));
            group_rounded = rounded.get();
          }
          const Norms qn{staged.norms.squared + g0, staged.norms.length + g0};
          const Norms xn{x_squared_.get() + row0, x_length_.get() + row0};
          GroupTerms terms;
          GENIE_RETURN_IF_ERROR(LaunchDistances(queries, qn, gn, rows_.get(), xn, n_rows, dimp_, dim_, tf32_safe_,
                                                staged.outside.get(), staged.host_safe, excluded, d32.get(), stream,
                                                &terms, group_rounded));
          DeviceArray<float> d_kth;
          GENIE_RETURN_IF_ERROR(d_kth.Allocate(static_cast<std::size_t>(gn), "vector scan k-th distances"));
          GENIE_RETURN_IF_ERROR(LaunchKthSelect(d32.get(), gn, n_rows, k, d_kth.get(), stream));
          // room for k and some ties; a query with more is gathered again with room for all
          const int64_t room = std::min<int64_t>(static_cast<int64_t>(k) + kSlack, n_rows);
          std::vector<int64_t> slot_begin(static_cast<std::size_t>(gn) + 1);
          for (int32_t i = 0; i <= gn; ++i) slot_begin[static_cast<std::size_t>(i)] = room * i;
          std::vector<std::pair<int32_t, int32_t>> overflow;
          GENIE_RETURN_IF_ERROR(GatherRerank(rows_.get(), n_rows, row0, d32.get(), queries, qn, xn, terms, g0, {},
                                             slot_begin, d_kth.get(), excluded, &found, &overflow));
          if (!overflow.empty()) {
            std::vector<int32_t> qmap;
            std::vector<int64_t> begin{0};
            for (const auto& o : overflow) {
              qmap.push_back(o.first);
              begin.push_back(begin.back() + o.second);
            }
            std::vector<std::pair<int32_t, int32_t>> again;
            GENIE_RETURN_IF_ERROR(GatherRerank(rows_.get(), n_rows, row0, d32.get(), queries, qn, xn, terms, g0, qmap,
                                               begin, d_kth.get(), excluded, &found, &again));
            if (!again.empty()) return Status::Internal("GPU vector scan: a gather outgrew its exact count");
          }
        }
      }
    }
    found.Emit(out);
    return Status::Ok();
  }

  int32_t device_ = 0;
  int32_t dim_ = 0;
  int32_t dimp_ = 0;
  int32_t n_ = 0;
  int32_t part_rows_ = 1;
  uint64_t distance_bytes_ = 0;
  DeviceArray<float> rows_;  // the whole set, or the part being scanned
  DeviceArray<float> x_squared_, x_length_;  // every vector's norms
  bool tf32_safe_ = false;  // no value of the set is OutsideTf32Range
  Stream stream_;      // a scan's work, queued without waiting
  PinnedPool pinned_;  // staging for its copies (freed before the stream)
  // a streamed set's rows page-locked in place (when set_pinned_); the set
  // outlives this copy, and the destructor waits for copies from them
  HostRegistration set_pin_;
  bool set_pinned_ = false;
  std::mutex scan_mutex_;
};

}  // namespace
}  // namespace gpu

Status GpuVectorSet::Create(const VectorSet& set, int32_t device_ordinal, uint64_t memory_budget_bytes,
                            std::unique_ptr<GpuVectorSet>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuVectorSet::Create: NULL output");
  try {
    GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
    auto impl = std::make_unique<gpu::GpuVectorSetImpl>();
    GENIE_RETURN_IF_ERROR(impl->Init(set, device_ordinal, memory_budget_bytes));
    *out = std::move(impl);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory copying vectors to the GPU");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU vector set failed: ") + e.what());
  }
}

}  // namespace genie

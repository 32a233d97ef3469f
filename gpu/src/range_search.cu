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
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "answer_buffer.hpp"
#include "cuda_util.hpp"
#include "genie/gpu_vector_scan.hpp"
#include "genie/parallel.hpp"
#include "genie/vectors.hpp"
#include "range_search.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kRangeThreads = 256;  // 8 warps
constexpr int32_t kChunkMembers = 1024;
// chunks launched between polls of cancel: 8M members, a few ms at 784 dimensions
constexpr int64_t kChunksPerLaunch = 1 << 13;
// the floats a streamed launch reads at most: kChunksPerLaunch full chunks at
// 784 dimensions (a launch of RangeOnDevice there), a few ms
constexpr int64_t kLaunchFloats = kChunksPerLaunch * kChunkMembers * 784;
// and at most this many chunks (blocks): short chunks at few dimensions
// cost their blocks' start more than their floats
constexpr int64_t kMaxLaunchChunks = int64_t{1} << 18;
// the most answers kChunksPerLaunch chunks can find (a streamed slot's
// buffer grows to this at most; a segment with more is run again that
// many chunks at a time)
constexpr unsigned long long kMaxAnswers = static_cast<unsigned long long>(kChunksPerLaunch) * kChunkMembers;

struct Chunk {
  int64_t begin;   // into the members, or the first object when not listed
  int32_t query;
  int32_t count;
  int32_t listed;  // 1: begin indexes the members
  // < 0: rows holds the whole set, by object id; else (a streamed set) the
  // chunk's members are rows row, row + 1, ... of a slot, and a hit names
  // its row there (the host knows the object)
  int32_t row;
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
    const int32_t o = chunk.row >= 0 ? chunk.row + i : chunk.listed ? members[at] : static_cast<int32_t>(at);
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

// The float32 sums above which a member cannot be within radius (see
// above: the float32 pass's proven bound, the host's WithinThreshold).
float RangeThreshold(double radius, int32_t dim) { return FloatAtLeast(WithinThreshold(dim, radius)); }

// The queries, padded to dimp floats a row, into *out on stream (NULL: the
// default stream, synchronously).
Status UploadQueries(const float* queries, int32_t n_queries, int32_t dim, int32_t dimp, cudaStream_t stream,
                     DeviceArray<float>* out) {
  GENIE_RETURN_IF_ERROR(out->Allocate(static_cast<std::size_t>(n_queries) * dimp, "range queries"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->get(), 0, out->bytes(), stream));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(out->get(), static_cast<std::size_t>(dimp) * sizeof(float), queries,
                                               static_cast<std::size_t>(dim) * sizeof(float),
                                               static_cast<std::size_t>(dim) * sizeof(float),
                                               static_cast<std::size_t>(n_queries), cudaMemcpyHostToDevice, stream));
  if (stream == nullptr) GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  return Status::Ok();
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
                             item.listed ? 1 : 0, -1});
  }
  DeviceArray<float> d_queries;
  GENIE_RETURN_IF_ERROR(UploadQueries(queries, n_queries, dim, dimp, nullptr, &d_queries));
  DeviceArray<Chunk> d_chunks;
  GENIE_RETURN_IF_ERROR(Upload(chunks.data(), chunks.size(), &d_chunks, "range chunks"));
  const float threshold = RangeThreshold(radius, dim);
  AnswerBuffer<Hit> answers;
  GENIE_RETURN_IF_ERROR(answers.Init(std::size_t{1} << 16, "range answers"));
  std::vector<Hit> hits;
  for (int64_t c0 = 0; c0 < static_cast<int64_t>(chunks.size()); c0 += kChunksPerLaunch) {
    if (cancel.requested()) return Status::Cancelled();
    const int64_t n = std::min<int64_t>(kChunksPerLaunch, static_cast<int64_t>(chunks.size()) - c0);
    GENIE_RETURN_IF_ERROR(answers.Run(
        [&]() -> Status {
          RangeKernel<<<static_cast<unsigned>(n), kRangeThreads>>>(rows, dimp, dim, d_queries.get(),
                                                                   d_chunks.get() + c0, members, threshold, radius,
                                                                   answers.answers(), answers.count(),
                                                                   answers.capacity());
          GENIE_CUDA_CHECK_LAUNCH("RangeKernel");
          return Status::Ok();
        },
        &hits));
  }
  out->reserve(hits.size());
  for (const Hit& h : hits) out->push_back(RangeCandidate{h.query, h.object, h.distance});
  return Status::Ok();
}

// ---- the multi-pipeline (paper section 3.5): a set beyond the device budget ----
namespace {

// A run of rows that one segment copies: sources [begin, end) (member
// positions when listed, else object ids) into its slot from row on.
struct Fragment {
  int64_t begin;
  int64_t end;
  bool listed;
  int32_t segment;
  int32_t row;
};

// What one slot holds in turn: n_rows rows, by its runs [first_fragment,
// first_fragment + n_fragments) (ObjectAt names a row's object), and its
// chunks [first_chunk, first_chunk + n_chunks).
struct Segment {
  int32_t n_rows = 0;
  int64_t first_chunk = 0;
  int64_t n_chunks = 0;
  int64_t first_fragment = 0;
  int64_t n_fragments = 0;
};

// Listed sources before the objects past the list, each kind by position.
bool FragmentBefore(bool listed_a, int64_t a, bool listed_b, int64_t b) {
  return listed_a != listed_b ? listed_a : a < b;
}

// The run of a segment's runs (ascending by row, the first at row 0) that
// holds row `row`: the last whose row is at most it.  The host names a
// hit's object by it, the device gathers a row by it.
__host__ __device__ inline const Fragment& RunOf(const Fragment* runs, int32_t n_runs, int32_t row) {
  int32_t lo = 0, hi = n_runs - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (runs[mid].row <= row) lo = mid; else hi = mid - 1;
  }
  return runs[lo];
}

// Where row `row` of run comes from: a position in the list's order
// (listed) or an object id.
__host__ __device__ inline int64_t SourceOf(const Fragment& run, int64_t row) { return run.begin + (row - run.row); }

// The object in row `row` of segment g; -1 past its rows.
int32_t ObjectAt(const Segment& g, const std::vector<Fragment>& fragments, Span<int32_t> members, int32_t row) {
  if (row < 0 || row >= g.n_rows) return -1;
  const Fragment& run = RunOf(fragments.data() + g.first_fragment, static_cast<int32_t>(g.n_fragments), row);
  const int64_t at = SourceOf(run, row);
  return run.listed ? members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at);
}

// The union of the rows the plan's items read (each row once, however many
// queries read it), packed into segments of at most slot_rows rows, and
// every item's members as chunks of the segment that holds them.
Status PackSegments(const RangePlan& plan, Span<int32_t> members, int32_t n_objects, int32_t slot_rows,
                    std::vector<Segment>* segments, std::vector<Fragment>* fragments_out,
                    std::vector<Chunk>* chunks) {
  struct Interval {
    int64_t begin, end;
    bool listed;
  };
  std::vector<Interval> intervals;
  intervals.reserve(plan.items.size());
  for (const RangeItem& item : plan.items) {
    const int64_t bound = item.listed ? static_cast<int64_t>(members.size()) : n_objects;
    if (item.count < 0 || item.begin < 0 || item.begin + item.count > bound)
      return Status::InvalidArgument(item.listed ? "a range item beyond the list's members"
                                                 : "a range item beyond the set");
    if (item.count > 0) intervals.push_back(Interval{item.begin, item.begin + item.count, item.listed});
  }
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return FragmentBefore(a.listed, a.begin, b.listed, b.begin);
  });
  std::vector<Fragment> fragments;
  segments->clear();
  int32_t used = slot_rows;  // the last segment is full: the next row starts one
  for (std::size_t i = 0; i < intervals.size();) {
    Interval run = intervals[i];
    for (++i; i < intervals.size() && intervals[i].listed == run.listed && intervals[i].begin <= run.end; ++i)
      run.end = std::max(run.end, intervals[i].end);
    for (int64_t at = run.begin; at < run.end;) {
      if (used == slot_rows) {
        segments->emplace_back();
        used = 0;
      }
      const int64_t take = std::min<int64_t>(run.end - at, slot_rows - used);
      if (segments->back().n_fragments++ == 0)
        segments->back().first_fragment = static_cast<int64_t>(fragments.size());
      fragments.push_back(Fragment{at, at + take, run.listed, static_cast<int32_t>(segments->size() - 1), used});
      used += static_cast<int32_t>(take);
      segments->back().n_rows = used;
      at += take;
    }
  }
  std::vector<std::vector<Chunk>> per_segment(segments->size());
  for (const RangeItem& item : plan.items) {
    const int64_t end = item.begin + item.count;
    // the first fragment of the item's kind that ends past its begin
    auto f = std::lower_bound(fragments.begin(), fragments.end(), item, [](const Fragment& g, const RangeItem& it) {
      return g.listed != it.listed ? g.listed : g.end <= it.begin;
    });
    for (; f != fragments.end() && f->listed == item.listed && f->begin < end; ++f) {
      const int64_t from = std::max(item.begin, f->begin), to = std::min(end, f->end);
      for (int64_t at = from; at < to; at += kChunkMembers)
        per_segment[static_cast<std::size_t>(f->segment)].push_back(
            Chunk{at, item.query, static_cast<int32_t>(std::min<int64_t>(kChunkMembers, to - at)),
                  item.listed ? 1 : 0, f->row + static_cast<int32_t>(at - f->begin)});
    }
  }
  chunks->clear();
  for (std::size_t g = 0; g < segments->size(); ++g) {
    (*segments)[g].first_chunk = static_cast<int64_t>(chunks->size());
    (*segments)[g].n_chunks = static_cast<int64_t>(per_segment[g].size());
    chunks->insert(chunks->end(), per_segment[g].begin(), per_segment[g].end());
  }
  *fragments_out = std::move(fragments);
  return Status::Ok();
}

// Waits for stream's work, polling cancel (the work queued is bounded: a
// launch of at most kLaunchFloats floats and kMaxLaunchChunks chunks, and a
// slot's copy or gather).
Status WaitStream(cudaStream_t stream, const CancelCheck& cancel) {
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return Status::Ok();
    if (state != cudaErrorNotReady) GENIE_CUDA_RETURN_IF_ERROR(state);
    if (cancel.requested()) return Status::Cancelled();
    // (a sleep, not a spin: the host's other threads gather and plan)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// One of the two slots: device rows, staging (taken when a segment is
// gathered), its answers, the segment in it.
struct Slot {
  float* rows = nullptr;
  PinnedSlot* staging = nullptr;
  Stream stream;
  DeviceArray<unsigned long long> count;
  DeviceArray<Hit> hits;
  std::size_t capacity = 0;
  int64_t segment = -1;  // < 0: nothing to collect
};

// Runs a segment may copy one by one from page-locked memory; beyond, a
// copy's fixed cost (microseconds) outweighs the host's gathering them.
constexpr int64_t kMaxDirectCopies = 16;

// How a segment's rows reach its slot.
enum class Copy {
  kDirect,  // a DMA a run, straight from page-locked rows
  kDevice,  // gathered by the device from page-locked rows (GatherRuns)
  kHost,    // gathered on the host into pinned staging, one DMA
};

// g's way: a DMA a run for a few runs of page-locked rows (a DMA reads
// within one registration: the list's rows locked in one piece); the
// device's gather for more, where it reads host memory at its host
// address (device_reads_host); else the host's.
Copy HowCopied(const StreamedRows& rows, const Segment& g, const std::vector<Fragment>& fragments,
               bool device_reads_host) {
  bool pinned = true, one_piece = true;
  for (int64_t f = g.first_fragment; f < g.first_fragment + g.n_fragments; ++f) {
    const Fragment& run = fragments[static_cast<std::size_t>(f)];
    pinned = pinned && (run.listed ? rows.member_rows != nullptr && rows.member_rows_pinned : rows.set_pinned);
    one_piece = one_piece && (!run.listed || rows.member_rows_one_piece);
  }
  if (!pinned) return Copy::kHost;
  if (g.n_fragments <= kMaxDirectCopies && one_piece) return Copy::kDirect;
  return device_reads_host ? Copy::kDevice : Copy::kHost;
}

constexpr int kGatherThreads = 256;  // a warp a row

// A segment of many runs of page-locked rows, gathered by the device itself:
// a warp a row of the slot finds its run (the last whose row is at most
// its own) and reads the row over the bus from the host's memory, at the
// address the host registered (the device reads registered memory there:
// cudaDevAttrCanUseHostPointerForRegisteredMem).  So no host thread passes
// over the rows and no staging is filled: the bytes cross the bus once, as
// a DMA's would, and a run of one row costs no more than a row.  vec4: dim
// and dimp are multiples of 4 and both row bases 16-byte aligned.
__global__ void __launch_bounds__(kGatherThreads)
GatherRuns(const Fragment* __restrict__ runs, int32_t n_runs, int32_t n_rows, const float* member_rows,
           const float* set_rows, int32_t dim, int32_t dimp, int vec4, float* __restrict__ slot) {
  const int32_t r = static_cast<int32_t>(blockIdx.x) * (kGatherThreads / 32) + static_cast<int32_t>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (r >= n_rows) return;
  const Fragment run = RunOf(runs, n_runs, r);
  const float* from = (run.listed ? member_rows : set_rows) + SourceOf(run, r) * dim;
  float* to = slot + static_cast<int64_t>(r) * dimp;
  if (vec4) {
    const float4* f4 = reinterpret_cast<const float4*>(from);
    float4* t4 = reinterpret_cast<float4*>(to);
    for (int32_t t = lane; t < dim / 4; t += 32) t4[t] = f4[t];
  } else {
    for (int32_t t = lane; t < dim; t += 32) to[t] = from[t];
  }
}

// Whether this device reads page-locked host memory at its host address.
bool ReadsHostPointers() {
  int device = 0, can = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&can, cudaDevAttrCanUseHostPointerForRegisteredMem, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return can != 0;
}

}  // namespace

Status RangeStreamed(const StreamedRows& rows, const float* queries, int32_t n_queries, double radius,
                     const RangePlan& plan, std::vector<RangeCandidate>* out, const CancelCheck& cancel) {
  out->clear();
  if (n_queries == 0 || plan.items.empty()) return Status::Ok();
  const VectorSet& set = *rows.set;
  const int32_t slot_rows = rows.slot_rows, dimp = rows.dimp, dim = rows.dim;
  PinnedPool* pinned = rows.pinned;
  if (slot_rows < 1) return Status::InvalidArgument("a streamed range search needs slots of at least one row");
  std::vector<Segment> segments;
  std::vector<Fragment> fragments;
  std::vector<Chunk> chunks;
  GENIE_RETURN_IF_ERROR(PackSegments(plan, rows.members, set.size(), slot_rows, &segments, &fragments, &chunks));
  if (segments.empty()) return Status::Ok();
  DeviceBlockScope blocks;
  Slot slot[2];
  for (Slot& s : slot) GENIE_RETURN_IF_ERROR(s.stream.Create());
  slot[0].rows = rows.slots;
  slot[1].rows = rows.slots + static_cast<std::size_t>(slot_rows) * dimp;
  DeviceArray<float> d_queries;
  DeviceArray<Chunk> d_chunks;
  DeviceArray<Fragment> d_runs;
  // every piece of work queued on the slots' streams is done before their
  // buffers go, however this returns; the staging goes back to the pool
  struct Drain {
    Slot* slot;
    PinnedPool* pool;
    ~Drain() {
      for (int i = 0; i < 2; ++i) {
        if (slot[i].stream.get() != nullptr) cudaStreamSynchronize(slot[i].stream.get());
        if (slot[i].staging != nullptr) pool->Give(slot[i].staging);
      }
    }
  } drain{slot, pinned};
  const cudaStream_t first = slot[0].stream.get();
  GENIE_RETURN_IF_ERROR(UploadQueries(queries, n_queries, dim, dimp, first, &d_queries));
  GENIE_RETURN_IF_ERROR(d_chunks.Allocate(chunks.size(), "range chunks"));
  GENIE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_chunks.get(), chunks.data(), d_chunks.bytes(), cudaMemcpyHostToDevice, first));
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(first));  // both streams read them
  const std::size_t row_bytes = static_cast<std::size_t>(dimp) * sizeof(float);
  for (Slot& s : slot) {
    GENIE_RETURN_IF_ERROR(s.count.Allocate(1, "range count"));
    s.capacity = 1 << 16;
    GENIE_RETURN_IF_ERROR(s.hits.Allocate(s.capacity, "range answers"));
  }
  const float threshold = RangeThreshold(radius, dim);
  // each segment's way, and the runs of those the device gathers, up once
  // for all segments
  const bool device_reads_host = ReadsHostPointers();
  std::vector<Copy> how(segments.size());
  for (std::size_t j = 0; j < segments.size(); ++j) how[j] = HowCopied(rows, segments[j], fragments, device_reads_host);
  if (std::find(how.begin(), how.end(), Copy::kDevice) != how.end()) {
    GENIE_RETURN_IF_ERROR(d_runs.Allocate(fragments.size(), "range runs"));
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d_runs.get(), fragments.data(), d_runs.bytes(), cudaMemcpyHostToDevice, first));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(first));
  }
  const float* set_rows = set.values.data();
  const int vec4 = dim % 4 == 0 && dimp % 4 == 0 && reinterpret_cast<std::uintptr_t>(set_rows) % 16 == 0 &&
                   (rows.member_rows == nullptr || reinterpret_cast<std::uintptr_t>(rows.member_rows) % 16 == 0);

  // The segment's chunks on its slot, each launch of as many as read at
  // most kLaunchFloats floats (and kMaxLaunchChunks chunks at most), each
  // further one queued once the one before is done, so that cancel is never
  // more than a launch away: chunks [from, to) of the segment (all of them:
  // 0, n_chunks).  (By floats, not a count of chunks: a batch's many short
  // chunks at 128 dimensions go in one launch where 8,192 chunks a launch
  // cut them into several, the host waiting on each before it could queue
  // the next segment's copy.)
  auto launch = [&](Slot& s, int64_t from, int64_t to) -> Status {
    const Segment& g = segments[static_cast<std::size_t>(s.segment)];
    const cudaStream_t stream = s.stream.get();
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.count.get(), 0, s.count.bytes(), stream));
    for (int64_t c0 = from; c0 < to;) {
      if (c0 > from) GENIE_RETURN_IF_ERROR(WaitStream(stream, cancel));
      int64_t c1 = c0, floats = 0;
      for (; c1 < to && c1 - c0 < kMaxLaunchChunks; ++c1) {
        const int64_t more = static_cast<int64_t>(chunks[static_cast<std::size_t>(g.first_chunk + c1)].count) * dim;
        if (c1 > c0 && floats + more > kLaunchFloats) break;
        floats += more;
      }
      RangeKernel<<<static_cast<unsigned>(c1 - c0), kRangeThreads, 0, stream>>>(
          s.rows, dimp, dim, d_queries.get(), d_chunks.get() + g.first_chunk + c0, nullptr, threshold, radius,
          s.hits.get(), s.count.get(), s.capacity);
      GENIE_CUDA_CHECK_LAUNCH("RangeKernel");
      c0 = c1;
    }
    return Status::Ok();
  };
  // The answers of the slot's segment, its rows named by their objects.  A
  // buffer too small is grown to the count (at most kMaxAnswers, what
  // kChunksPerLaunch chunks can find) and the segment run again, its rows
  // still in the slot: whole when its answers fit, else kChunksPerLaunch
  // chunks at a time.
  std::vector<Hit> hits;
  auto fetch = [&](Slot& s, unsigned long long* found) -> Status {
    const cudaStream_t stream = s.stream.get();
    GENIE_RETURN_IF_ERROR(WaitStream(stream, cancel));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(found, s.count.get(), sizeof(*found), cudaMemcpyDeviceToHost, stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    if (*found > s.capacity) return Status::Ok();  // the caller grows the buffer
    hits.resize(static_cast<std::size_t>(*found));
    if (*found > 0) {
      GENIE_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(hits.data(), s.hits.get(), sizeof(Hit) * *found, cudaMemcpyDeviceToHost, stream));
      GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    }
    const Segment& g = segments[static_cast<std::size_t>(s.segment)];
    for (const Hit& h : hits) {
      const int32_t object = ObjectAt(g, fragments, rows.members, h.object);
      if (object < 0) return Status::Internal("a streamed range answer of no row");
      out->push_back(RangeCandidate{h.query, object, h.distance});
    }
    return Status::Ok();
  };
  auto collect = [&](Slot& s) -> Status {
    if (s.segment < 0) return Status::Ok();
    unsigned long long found = 0;
    GENIE_RETURN_IF_ERROR(fetch(s, &found));
    if (found > s.capacity) {
      s.capacity = static_cast<std::size_t>(std::min<unsigned long long>(found, kMaxAnswers));
      GENIE_RETURN_IF_ERROR(s.hits.Allocate(s.capacity, "range answers"));
      const int64_t n_chunks = segments[static_cast<std::size_t>(s.segment)].n_chunks;
      const int64_t step = found <= kMaxAnswers ? n_chunks : kChunksPerLaunch;
      for (int64_t c0 = 0; c0 < n_chunks; c0 += step) {
        GENIE_RETURN_IF_ERROR(launch(s, c0, std::min(n_chunks, c0 + step)));
        GENIE_RETURN_IF_ERROR(fetch(s, &found));
        if (found > s.capacity) return Status::Internal("the GPU range search's count changed between two runs");
      }
    }
    s.segment = -1;
    return Status::Ok();
  };

  // Segment j goes to slot j % 2: while the device copies and searches one
  // slot, the host collects the other's answers and gathers its next rows.
  constexpr int64_t kGatherRows = 256;  // rows a gathering thread copies at a time
  for (int64_t j = 0; j < static_cast<int64_t>(segments.size()); ++j) {
    Slot& s = slot[j % 2];
    GENIE_RETURN_IF_ERROR(collect(s));  // also: its stream is idle, its staging free
    if (cancel.requested()) return Status::Cancelled();
    const Segment& g = segments[static_cast<std::size_t>(j)];
    if (how[static_cast<std::size_t>(j)] == Copy::kDirect) {
      // each run straight from page-locked host memory: one DMA a run, no host pass
      for (int64_t f = g.first_fragment; f < g.first_fragment + g.n_fragments; ++f) {
        const Fragment& run = fragments[static_cast<std::size_t>(f)];
        const float* from = run.listed ? rows.member_rows + run.begin * dim : set.row(static_cast<int32_t>(run.begin));
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
            s.rows + static_cast<std::size_t>(run.row) * dimp, row_bytes, from, static_cast<std::size_t>(dim) * sizeof(float),
            static_cast<std::size_t>(dim) * sizeof(float), static_cast<std::size_t>(run.end - run.begin),
            cudaMemcpyHostToDevice, s.stream.get()));
      }
    } else if (how[static_cast<std::size_t>(j)] == Copy::kDevice) {
      const int32_t n_rows = g.n_rows;
      const unsigned blocks = static_cast<unsigned>((n_rows + kGatherThreads / 32 - 1) / (kGatherThreads / 32));
      GatherRuns<<<blocks, kGatherThreads, 0, s.stream.get()>>>(
          d_runs.get() + g.first_fragment, static_cast<int32_t>(g.n_fragments), n_rows, rows.member_rows, set_rows,
          dim, dimp, vec4, s.rows);
      GENIE_CUDA_CHECK_LAUNCH("GatherRuns");
    } else {
      // many short runs of pageable rows (or of locked ones where the device
      // does not read host memory at its host address): gathered into the
      // slot's staging, one copy
      if (s.staging == nullptr)
        GENIE_RETURN_IF_ERROR(pinned->Take(static_cast<std::size_t>(slot_rows) * row_bytes, &s.staging));
      float* staging = reinterpret_cast<float*>(s.staging->data());
      const int64_t n_rows = g.n_rows;
      const auto first_run = fragments.begin() + g.first_fragment;
      const auto end_run = first_run + g.n_fragments;
      const std::size_t dim_bytes = static_cast<std::size_t>(dim) * sizeof(float);
      GENIE_RETURN_IF_ERROR(ParallelFor(
          (n_rows + kGatherRows - 1) / kGatherRows, rows.threads,
          [&](int64_t b) {
            const int64_t r0 = b * kGatherRows, r1 = std::min(n_rows, (b + 1) * kGatherRows);
            // the runs over rows [r0, r1) (in row order): a listed run's
            // rows lie in a row of the list's order, read as one block
            // where they are kept; the rest row by row by id
            auto run = std::upper_bound(first_run, end_run, r0,
                                        [](int64_t r, const Fragment& f) { return r < f.row; });
            if (run != first_run) --run;
            for (int64_t r = r0; r < r1 && run != end_run; ++run) {
              const int64_t run_end = std::min<int64_t>(r1, run->row + (run->end - run->begin));
              if (run->listed && rows.member_rows != nullptr) {
                const float* from = rows.member_rows + (run->begin + (r - run->row)) * dim;
                if (dimp == dim) {
                  std::memcpy(staging + r * dimp, from, static_cast<std::size_t>(run_end - r) * dim_bytes);
                } else {
                  for (int64_t x = r; x < run_end; ++x) std::memcpy(staging + x * dimp, from + (x - r) * dim, dim_bytes);
                }
              } else {
                for (int64_t x = r; x < run_end; ++x) {
                  const int64_t at = SourceOf(*run, x);
                  const int32_t o = run->listed ? rows.members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at);
                  std::memcpy(staging + x * dimp, set.row(o), dim_bytes);
                }
              }
              r = run_end;
            }
            return Status::Ok();
          },
          cancel));
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.rows, staging, static_cast<std::size_t>(n_rows) * row_bytes,
                                                 cudaMemcpyHostToDevice, s.stream.get()));
      GENIE_RETURN_IF_ERROR(s.staging->MarkUsed(s.stream.get()));
    }
    s.segment = j;
    GENIE_RETURN_IF_ERROR(launch(s, 0, g.n_chunks));
  }
  for (Slot& s : slot) GENIE_RETURN_IF_ERROR(collect(s));
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

namespace {

// The bytes the process's GpuHostRegistrations hold locked.
std::atomic<std::size_t> g_locked_bytes{0};

class HostRegistrationImpl final : public GpuHostRegistration {
 public:
  ~HostRegistrationImpl() override {
    registered.clear();  // unlocked before the bytes are given back
    g_locked_bytes.fetch_sub(bytes);
  }
  std::size_t pieces() const override { return registered.size(); }
  std::size_t bytes = 0;  // counted in g_locked_bytes
  std::vector<gpu::HostRegistration> registered;
};

// A quarter of min(physical memory, the control group's memory.max).
std::size_t LockableBytesOnce() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  std::size_t memory = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  // cgroup v2 ("max" or a number of bytes)
  if (FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
    unsigned long long limit = 0;
    if (std::fscanf(f, "%llu", &limit) == 1 && limit > 0 && (memory == 0 || limit < memory))
      memory = static_cast<std::size_t>(limit);
    std::fclose(f);
  }
  return memory == 0 ? kHostRegistrationPieceBytes : memory / 4;
}

// Piece boundaries on 2 MB: no page is in two registrations, whether the
// memory is in small pages or transparent huge ones.
constexpr std::uintptr_t kPieceAlign = std::uintptr_t{2} << 20;

}  // namespace

std::size_t PageLockableBytes() {
  static const std::size_t lockable = LockableBytesOnce();
  return lockable;
}

Status GpuHostRegistration::Create(const void* data, std::size_t bytes, int32_t device_ordinal,
                                   std::unique_ptr<GpuHostRegistration>* out, const CancelCheck& cancel) {
  if (out == nullptr || data == nullptr || bytes == 0)
    return Status::InvalidArgument("GpuHostRegistration::Create: nothing to register");
  gpu::DeviceGuard guard;  // the context of the device that copies from it
  GENIE_RETURN_IF_ERROR(guard.Enter(device_ordinal));
  try {
    auto made = std::make_unique<HostRegistrationImpl>();
    // the bytes counted before any is locked (a registration running beside
    // this one sees them); from here made's destructor gives them back
    if (g_locked_bytes.fetch_add(bytes) + bytes > PageLockableBytes()) {
      g_locked_bytes.fetch_sub(bytes);
      return Status::DeviceError("page-locking the rows would pass the process's page-locked memory limit");
    }
    made->bytes = bytes;
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(data), end = begin + bytes;
    for (std::uintptr_t at = begin; at < end;) {
      if (at > begin && cancel.requested()) return Status::Cancelled();  // the pieces so far unregistered
      std::uintptr_t next = end;
      if (end - at > kHostRegistrationPieceBytes) next = (at + kHostRegistrationPieceBytes) / kPieceAlign * kPieceAlign;
      made->registered.emplace_back();
      if (!made->registered.back().Register(reinterpret_cast<const void*>(at), next - at))
        return Status::DeviceError("cudaHostRegister refused the rows");
      at = next;
    }
    *out = std::move(made);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory for a host registration");
  }
}

Status GpuClusterMembers::Create(Span<int32_t> members, int32_t device_ordinal,
                                 std::unique_ptr<GpuClusterMembers>* out) {
  if (out == nullptr) return Status::InvalidArgument("GpuClusterMembers::Create: NULL output");
  GENIE_RETURN_IF_ERROR(gpu::CheckDevice(device_ordinal));
  return gpu::CreateClusterMembers(members, device_ordinal, out);
}

}  // namespace genie

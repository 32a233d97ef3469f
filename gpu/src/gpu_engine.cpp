// The CUDA engine: device-resident List Array, c-PQ matchers (faithful and
// tiled), the count-table baseline, and multiple loading.
//
// Design notes (the invariants the kernels keep; see kernels.hpp for the
// kernel decomposition):
//
// * Bitmap Counter.  A query with score bound M gets b = ceil(log2(M + 1))
//   bits per object (M = 2^b - 1 fits in b bits, M = 2^b needs b + 1), and
//   floor(32 / b) counters per 32-bit word: counters never straddle words, so
//   one 32-bit atomicAdd of (w << shift) updates a counter, and since no count
//   ever exceeds M <= 2^b - 1 nothing carries into the neighbour.  M is
//   min(CompileBatch's bound, the sum of the weights of the query's list runs
//   (its slices rejoined and cut at keyword-list boundaries)), both of which
//   bound every object's score: an object occurs at most once in a run.
//   (Not the sum of slice weights: a slice may span several lists.)
//   c-PQ takes queries with M <= 4095; larger bounds use the count table.
//
// * Gate (Algorithm 1).  ZA[j] counts the objects whose count reached j while
//   j >= AT; a weighted update old -> old + w adds 1 to every level in
//   (old, old + w] at or above AT.  AT advances while ZA[AT] >= k.  Then, at
//   the end, with AT re-advanced once more after the kernel (all updates
//   visible), ZA[AT] is exactly the number of objects scoring >= AT (< k) and
//   at least k objects score >= AT - 1: the k-th score is AT - 1 (Thm 3.1).
//
// * Hash table.  Capacity a power of two; key = object, value = count, one
//   64-bit CAS per change; modified Robin Hood: entries below AT - 1 are
//   overwritten regardless of age.  Every object scoring >= AT is in it (it
//   was inserted with its final count, never below AT - 1), and so are at
//   least k objects scoring >= AT - 1.  An insertion that finds no slot in
//   `capacity` probes flags its query; flagged queries are recomputed exactly
//   with the count table.  Keys may be duplicated; selection deduplicates.
//
// * Selection.  Faithful: the hash table is scanned once for the objects
//   whose true count (re-read from the Bitmap Counter) is >= AT; the ties at
//   AT - 1 are then the first k - ZA[AT] objects of count AT - 1 in id order,
//   read off the Bitmap Counter (an early-exit scan), so the results equal the
//   CPU engines' hit for hit.  GENIE_GPU_TIES=paper keeps the paper's pure
//   selection instead (entries >= AT - 1, ties arbitrary).  Tiled: each tile
//   inserts its own top-k (lowest ids first among ties) restricted to counts
//   >= AT - 1, which provably contains the global top-k with its exact
//   tie-breaking; the entries >= max(AT - 1, 1) are sorted.  Count table:
//   radix selection of the k-th count T, then everything above T and the
//   first ties at T in id order.  All three sort their candidates by (score
//   desc, object asc) with CUB's segmented sort and cut to k.
//
// * Multiple loading.  The index is uploaded when it takes at most half the
//   budget.  Otherwise (or when one query's state does not fit beside it) the
//   objects are split into parts (PlanObjectParts + SliceObjects, cached, page
//   locked), part i + 1 is copied on a second stream while part i is matched,
//   and the per-part top-k are merged (MergePartResults).  Query groups are
//   sized so that the index (or two part buffers) plus the groups' state fit
//   the budget.  All device memory is RAII: freed after each group, on every
//   error path, on Drop and on destruction.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/gpu_stats.hpp"
#include "genie/parallel.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {
namespace {

enum class Matcher { kTiled, kFaithful, kCountTable };

const char* MatcherName(Matcher m) {
  switch (m) {
    case Matcher::kTiled: return "tiled";
    case Matcher::kFaithful: return "faithful";
    case Matcher::kCountTable: return "count-table";
  }
  return "?";
}

struct Config {
  Matcher matcher = Matcher::kTiled;
  bool exact_ties = true;
  uint32_t forced_ht_slots = 0;
  int32_t tile_words = kDefaultTileWords;
  bool profile = false;
};

// Per-phase wall times of a search (GENIE_GPU_PROFILE=1): each mark waits for
// the device, then charges the time since the previous mark to its phase.
class Profiler {
 public:
  void Start(bool enabled, cudaStream_t stream) {
    enabled_ = enabled;
    stream_ = stream;
    phases_.clear();
    last_ = Clock::now();
  }
  void Mark(const char* phase) {
    if (!enabled_) return;
    (void)cudaStreamSynchronize(stream_);
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    for (auto& p : phases_) {
      if (p.first == phase) {
        p.second += ms;
        return;
      }
    }
    phases_.emplace_back(phase, ms);
  }
  std::string Report() const {
    std::string out;
    char buf[96];
    for (const auto& p : phases_) {
      std::snprintf(buf, sizeof(buf), "%s%s %.1f", out.empty() ? "" : "; ", p.first.c_str(), p.second);
      out += buf;
    }
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_ = false;
  cudaStream_t stream_ = nullptr;
  Clock::time_point last_;
  std::vector<std::pair<std::string, double>> phases_;
};

constexpr uint64_t kGroupFixedBytes = 16ull << 20;  // CUB temp slack, small arrays
constexpr std::size_t kMaxGroupQueries = 32768;
constexpr int64_t kMaxParts = 1 << 16;

int32_t BitsFor(int64_t max_score) {
  int32_t b = 1;
  while (b < 31 && ((int64_t{1} << b) - 1) < max_score) ++b;
  return b;
}

uint64_t NextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The index (or one part of it) as the device sees it.
struct DeviceIndexView {
  const int32_t* postings = nullptr;  // device List Array
  int32_t num_objects = 0;
  Span<int64_t> keyword_offsets;      // host Position Map (tiled matcher cuts slices at lists)
};

struct Segment {
  int64_t begin;
  int64_t end;
  int32_t weight;
};

// The batch compiled by CompileBatch, in chunks of queries compiled on
// several threads; per query, its slices and CompileBatch's score bound.
struct CompiledQueries {
  std::vector<CompiledBatch> chunks;
  std::vector<const ListSlice*> first;
  std::vector<int64_t> count;
  std::vector<int64_t> bound;

  int32_t num_queries() const { return static_cast<int32_t>(bound.size()); }
  Span<ListSlice> Slices(int32_t q) const {
    return Span<ListSlice>(first[static_cast<std::size_t>(q)],
                           static_cast<std::size_t>(count[static_cast<std::size_t>(q)]));
  }
};

// CompileBatch on chunks of the batch (offsets rebased), in parallel.
Status CompileQueries(const InvertedIndex& index, const genie_query_batch& batch, int threads,
                      CompiledQueries* out) {
  GENIE_RETURN_IF_ERROR(ValidateBatch(batch));
  const int64_t nq = batch.n_queries;
  const int64_t per_chunk = std::max<int64_t>(16, (nq + threads * 4 - 1) / (threads * 4));
  const int64_t n_chunks = (nq + per_chunk - 1) / per_chunk;
  out->chunks.assign(static_cast<std::size_t>(n_chunks), CompiledBatch());
  Status status = ParallelFor(n_chunks, threads, [&](int64_t c) -> Status {
    const int64_t q0 = c * per_chunk, q1 = std::min(nq, q0 + per_chunk);
    const int64_t i0 = batch.query_offsets[q0], i1 = batch.query_offsets[q1];
    const int64_t r0 = batch.item_offsets[i0];
    std::vector<int64_t> query_offsets(static_cast<std::size_t>(q1 - q0 + 1));
    std::vector<int64_t> item_offsets(static_cast<std::size_t>(i1 - i0 + 1));
    for (int64_t j = 0; j <= q1 - q0; ++j) {
      query_offsets[static_cast<std::size_t>(j)] = batch.query_offsets[q0 + j] - i0;
    }
    for (int64_t j = 0; j <= i1 - i0; ++j) {
      item_offsets[static_cast<std::size_t>(j)] = batch.item_offsets[i0 + j] - r0;
    }
    genie_query_batch sub{};
    sub.n_queries = static_cast<int32_t>(q1 - q0);
    sub.query_offsets = query_offsets.data();
    sub.item_offsets = item_offsets.data();
    sub.item_weights = batch.item_weights ? batch.item_weights + i0 : nullptr;
    sub.ranges_lo = batch.ranges_lo ? batch.ranges_lo + r0 : nullptr;
    sub.ranges_hi = batch.ranges_hi ? batch.ranges_hi + r0 : nullptr;
    return CompileBatch(index, sub, &out->chunks[static_cast<std::size_t>(c)]);
  });
  if (!status.ok()) {
    // Report the error with the batch's own query numbers.
    if (status.code() == GENIE_INVALID_ARGUMENT) {
      CompiledBatch whole;
      Status exact = CompileBatch(index, batch, &whole);
      if (!exact.ok()) return exact;
    }
    return status;
  }
  out->first.resize(static_cast<std::size_t>(nq));
  out->count.resize(static_cast<std::size_t>(nq));
  out->bound.resize(static_cast<std::size_t>(nq));
  int64_t q = 0;
  for (const CompiledBatch& chunk : out->chunks) {
    for (int32_t j = 0; j < chunk.num_queries(); ++j, ++q) {
      const int64_t b = chunk.query_slice_offsets[static_cast<std::size_t>(j)];
      const int64_t e = chunk.query_slice_offsets[static_cast<std::size_t>(j) + 1];
      out->first[static_cast<std::size_t>(q)] = chunk.slices.data() + b;
      out->count[static_cast<std::size_t>(q)] = e - b;
      out->bound[static_cast<std::size_t>(q)] = chunk.max_score[static_cast<std::size_t>(j)];
    }
  }
  return Status::Ok();
}

// A query's slices, consecutive contiguous slices of equal weight joined
// back into ranges (CompileBatch cuts spans into split_length slices), then
// each range cut at keyword-list boundaries (CompileBatch joins the lists of
// a keyword range into one span): sorted runs of one list each.
template <typename Emit>
void ForEachListRun(Span<ListSlice> slices, Span<int64_t> offs, Emit emit) {
  const std::size_t last = slices.size();
  for (std::size_t s = 0; s < last;) {
    const ListSlice& first = slices[s];
    int64_t b = first.begin, e = first.end;
    const int32_t w = first.weight;
    for (++s; s < last; ++s) {
      const ListSlice& next = slices[s];
      if (next.begin != e || next.weight != w) break;
      e = next.end;
    }
    if (b >= e) continue;
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(offs.begin(), offs.end(), b) - offs.begin());
    i = i == 0 ? 0 : i - 1;
    while (b < e) {
      while (i + 1 < offs.size() && offs[i + 1] <= b) ++i;
      const int64_t list_end = i + 1 < offs.size() ? offs[i + 1] : e;
      const int64_t piece_end = std::min(e, list_end);
      emit(Segment{b, piece_end, w});
      b = piece_end;
    }
  }
}

// Per query: the score bound the counters are sized from, and (tiled) the
// list runs.  The bound is min(CompileBatch's, the sum of the run weights):
// an object occurs at most once in a run, so both bound every score.
struct Prepared {
  std::vector<int64_t> max_score;
  std::vector<int64_t> num_runs;
  std::vector<std::vector<Segment>> runs;
};

Status Prepare(const CompiledQueries& cq, Span<int64_t> offs, bool keep_runs, int threads,
               Prepared* out) {
  const int32_t nq = cq.num_queries();
  out->max_score.assign(static_cast<std::size_t>(nq), 0);
  out->num_runs.assign(static_cast<std::size_t>(nq), 0);
  out->runs.clear();
  if (keep_runs) out->runs.resize(static_cast<std::size_t>(nq));
  const int64_t per_task = 8;
  return ParallelFor((nq + per_task - 1) / per_task, threads, [&](int64_t t) -> Status {
    const int32_t q1 = static_cast<int32_t>(std::min<int64_t>(nq, (t + 1) * per_task));
    for (int32_t q = static_cast<int32_t>(t * per_task); q < q1; ++q) {
      const std::size_t qi = static_cast<std::size_t>(q);
      int64_t sum = 0, runs = 0;
      std::vector<Segment>* keep = keep_runs ? &out->runs[qi] : nullptr;
      ForEachListRun(cq.Slices(q), offs, [&](const Segment& seg) {
        sum += seg.weight;
        ++runs;
        if (keep != nullptr) keep->push_back(seg);
      });
      out->max_score[qi] = std::min(sum, cq.bound[qi]);
      out->num_runs[qi] = runs;
    }
    return Status::Ok();
  });
}

class GpuEngine final : public Engine {
 public:
  GpuEngine(int device, const EngineOptions& options, const Config& config)
      : device_(device),
        budget_option_(options.memory_budget_bytes),
        config_(config),
        threads_(std::min(ResolveThreads(options.threads), 64)) {}

  ~GpuEngine() override {
    DeviceGuard guard;
    (void)guard.Enter(device_);
    ReleaseAll();
    copy_done_[0].Reset();
    copy_done_[1].Reset();
    compute_done_[0].Reset();
    compute_done_[1].Reset();
    copy_stream_.Reset();
    compute_stream_.Reset();
  }

  Status Init() {
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    GENIE_RETURN_IF_ERROR(compute_stream_.Create());
    GENIE_RETURN_IF_ERROR(copy_stream_.Create());
    for (int i = 0; i < 2; ++i) {
      GENIE_RETURN_IF_ERROR(copy_done_[i].Create());
      GENIE_RETURN_IF_ERROR(compute_done_[i].Create());
    }
    return Status::Ok();
  }

  genie_engine_kind kind() const override { return GENIE_ENGINE_GPU; }

  Status Upload(std::shared_ptr<const InvertedIndex> index) override {
    if (index == nullptr) return Status::InvalidArgument("cannot upload a NULL index");
    try {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      ReleaseAll();
      index_ = std::move(index);
      const Span<int32_t> postings = index_->postings();
      const uint64_t bytes = postings.size() * sizeof(int32_t);
      uint64_t budget = 0;
      GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
      resident_ = false;
      if (bytes == 0) {
        resident_ = true;
      } else if (bytes <= budget / 2) {
        Status status = resident_postings_.Allocate(postings.size(), "the List Array");
        if (status.code() == GENIE_DEVICE_OUT_OF_MEMORY) return Status::Ok();  // multiple loading
        GENIE_RETURN_IF_ERROR(status);
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(resident_postings_.get(), postings.data(), bytes,
                                                   cudaMemcpyHostToDevice,
                                                   compute_stream_.get()));
        GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_stream_.get()));
        resident_ = true;
      }
      return Status::Ok();
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory uploading the index");
    } catch (...) {
      return Status::Internal("unexpected exception uploading the index");
    }
  }

  Status Drop() override {
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    ReleaseAll();
    return Status::Ok();
  }

  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    if (out == nullptr) return Status::InvalidArgument("results output is NULL");
    GENIE_RETURN_IF_ERROR(ValidateK(k));
    if (index_ == nullptr) return Status::InvalidArgument("no index uploaded to the engine");
    const auto start = std::chrono::steady_clock::now();
    stats_ = SearchStats();
    stats_.matcher = MatcherName(config_.matcher);
    try {
      DeviceGuard guard;
      GENIE_RETURN_IF_ERROR(guard.Enter(device_));
      DeviceMemory::ResetPeak();
      const char* profile_env = std::getenv("GENIE_GPU_PROFILE");
      prof_.Start(config_.profile || (profile_env != nullptr && std::atoi(profile_env) != 0),
                  compute_stream_.get());
      stats_.index_device_bytes = resident_postings_.bytes();
      TopKResults results;
      Status status = SearchImpl(batch, k, &results);
      if (!status.ok()) {
        // Anything queued is finished or failed before the buffers go.
        (void)cudaStreamSynchronize(compute_stream_.get());
        (void)cudaStreamSynchronize(copy_stream_.get());
        return status;
      }
      *out = std::move(results);
      stats_.peak_device_bytes = DeviceMemory::PeakBytes();
      stats_.device_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      prof_.Mark("results");
      stats_.profile = prof_.Report();
      return Status::Ok();
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the GPU engine");
    } catch (...) {
      return Status::Internal("unexpected exception in the GPU engine");
    }
  }

  const SearchStats& stats() const { return stats_; }

 private:
  void ReleaseAll() {
    resident_postings_.Reset();
    resident_ = false;
    ReleaseParts();
    index_.reset();
  }

  void ReleaseParts() {
    part_pins_.clear();
    parts_.clear();
    part_ranges_.clear();
    part_count_ = 0;
  }

  // The device-memory budget for the index plus a batch's state.
  Status EffectiveBudget(uint64_t* budget) {
    if (budget_option_ > 0) {
      *budget = budget_option_;
      return Status::Ok();
    }
    size_t free_bytes = 0, total_bytes = 0;
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    // Most of the free memory (what we hold ourselves counts as ours), less
    // a reserve for the CUDA context, CUB and fragmentation.
    const uint64_t ours = resident_postings_.bytes();
    const uint64_t usable = static_cast<uint64_t>(free_bytes) + ours;
    const uint64_t reserve = std::max<uint64_t>(512ull << 20, total_bytes / 20);
    *budget = usable > reserve ? (usable - reserve) / 10 * 9 : 0;
    return Status::Ok();
  }

  Status SearchImpl(const genie_query_batch& batch, int32_t k, TopKResults* out) {
    const InvertedIndex& index = *index_;
    uint64_t budget = 0;
    GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
    if (resident_) {
      CompiledQueries compiled;
      GENIE_RETURN_IF_ERROR(CompileQueries(index, batch, threads_, &compiled));
      prof_.Mark("compile");
      const int32_t nq = compiled.num_queries();
      const uint64_t held = resident_postings_.bytes();
      const uint64_t avail = budget > held ? budget - held : 0;
      DeviceIndexView view;
      view.postings = resident_postings_.get();
      view.num_objects = index.num_objects();
      view.keyword_offsets = index.keyword_offsets();
      std::vector<std::vector<Hit>> per_query;
      Status status = RunQueries(view, compiled, k, avail, &per_query);
      if (status.ok()) {
        stats_.parts = 1;
        Assemble(nq, &per_query, out);
        return Status::Ok();
      }
      if (status.code() != GENIE_DEVICE_OUT_OF_MEMORY || index.num_objects() < 2) return status;
      // One query's state does not fit beside the index: multiple loading.
      stats_ = SearchStats();
      stats_.matcher = MatcherName(config_.matcher);
      stats_.index_device_bytes = held;
      return SearchParts(batch, k, avail, out);
    }
    return SearchParts(batch, k, budget, out);
  }

  static void Assemble(int32_t nq, std::vector<std::vector<Hit>>* per_query, TopKResults* out) {
    TopKResults results;
    std::size_t total = 0;
    for (const auto& hits : *per_query) total += hits.size();
    results.hits.reserve(total);
    results.query_offsets.reserve(static_cast<std::size_t>(nq) + 1);
    for (int32_t q = 0; q < nq; ++q) {
      const auto& hits = (*per_query)[static_cast<std::size_t>(q)];
      results.hits.insert(results.hits.end(), hits.begin(), hits.end());
      results.query_offsets.push_back(static_cast<int64_t>(results.hits.size()));
    }
    *out = std::move(results);
  }

  // ---- multiple loading ----------------------------------------------------

  static uint64_t PartPostings(const InvertedIndex& index, int32_t begin, int32_t end) {
    const Span<int64_t> offs = index.keyword_offsets();
    const Span<int32_t> postings = index.postings();
    uint64_t total = 0;
    for (std::size_t i = 0; i + 1 < offs.size(); ++i) {
      const int32_t* first = postings.data() + offs[i];
      const int32_t* last = postings.data() + offs[i + 1];
      const int32_t* from = std::lower_bound(first, last, begin);
      const int32_t* to = std::lower_bound(from, last, end);
      total += static_cast<uint64_t>(to - from);
    }
    return total;
  }

  Status SearchParts(const genie_query_batch& batch, int32_t k, uint64_t avail,
                     TopKResults* out) {
    const InvertedIndex& index = *index_;
    const int32_t n = index.num_objects();
    // The whole batch compiled once, for the planning: a part's lists are
    // sub-lists of the whole index's, so its state needs are bounded by these.
    CompiledQueries whole;
    GENIE_RETURN_IF_ERROR(CompileQueries(index, batch, threads_, &whole));
    Prepared whole_prep;
    GENIE_RETURN_IF_ERROR(Prepare(whole, index.keyword_offsets(), false, threads_, &whole_prep));
    const int32_t nq = whole.num_queries();
    const uint64_t index_bytes = index.postings().size() * sizeof(int32_t);
    if (avail <= kGroupFixedBytes) {
      return Status::DeviceOutOfMemory("the device-memory budget (" + std::to_string(avail) +
                                       " bytes available) is too small for any search");
    }

    // Pick the number of parts: two part buffers plus the largest query's
    // state (for a part's object count) must fit, with room for groups.
    int64_t parts = std::min<int64_t>(
        n, std::max<int64_t>(
               2, static_cast<int64_t>(index_bytes * 4 / std::max<uint64_t>(avail, 1)) + 1));
    std::vector<std::pair<int32_t, int32_t>> ranges;
    uint64_t max_part_bytes = 0, state_budget = 0;
    for (;;) {
      if (parts > n || parts > kMaxParts) {
        return Status::DeviceOutOfMemory(
            "the device-memory budget (" + std::to_string(avail) +
            " bytes available) is too small even for multiple loading of this batch");
      }
      ranges = PlanObjectParts(n, static_cast<int32_t>(parts));
      uint64_t largest = 0;
      int32_t largest_objects = 0;
      for (const auto& r : ranges) {
        largest = std::max(largest, PartPostings(index, r.first, r.second));
        largest_objects = std::max(largest_objects, r.second - r.first);
      }
      max_part_bytes = largest * sizeof(int32_t);
      const uint64_t buffers = 2 * max_part_bytes;
      if (buffers < avail) {
        state_budget = avail - buffers;
        const int32_t k_part = std::min(k, std::max(largest_objects, 1));
        const int32_t tiles = TileCount(largest_objects, whole_prep.max_score);
        uint64_t worst = 0;
        for (int32_t q = 0; q < nq; ++q) {
          const int64_t m = whole_prep.max_score[static_cast<std::size_t>(q)];
          worst = std::max(worst, QueryBytes(whole, whole_prep, q, largest_objects, k_part, tiles,
                                             RouteOf(m)));
        }
        if (worst + kGroupFixedBytes <= state_budget) break;
      }
      parts *= 2;
    }

    if (part_count_ != static_cast<int32_t>(ranges.size()) || part_ranges_ != ranges) {
      ReleaseParts();
      parts_.resize(ranges.size());
      GENIE_RETURN_IF_ERROR(ParallelFor(static_cast<int64_t>(ranges.size()), threads_,
                                        [&](int64_t i) -> Status {
        const auto& r = ranges[static_cast<std::size_t>(i)];
        parts_[static_cast<std::size_t>(i)] =
            std::make_unique<InvertedIndex>(index.SliceObjects(r.first, r.second));
        return Status::Ok();
      }));
      for (const auto& part : parts_) {
        const Span<int32_t> pp = part->postings();
        part_pins_.emplace_back();
        part_pins_.back().Register(pp.data(), pp.size() * sizeof(int32_t));
      }
      part_ranges_ = ranges;
      part_count_ = static_cast<int32_t>(ranges.size());
    }
    prof_.Mark("plan parts");

    DeviceArray<int32_t> buffers[2];
    for (auto& b : buffers) {
      GENIE_RETURN_IF_ERROR(b.Allocate(std::max<uint64_t>(max_part_bytes / 4, 1), "a part buffer"));
    }
    cudaStream_t compute = compute_stream_.get();
    cudaStream_t copy = copy_stream_.get();
    auto issue_copy = [&](int32_t part) -> Status {
      const int slot = part % 2;
      const Span<int32_t> pp = parts_[static_cast<std::size_t>(part)]->postings();
      if (part >= 2) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, compute_done_[slot].get(), 0));
      }
      if (!pp.empty()) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers[slot].get(), pp.data(),
                                                   pp.size() * sizeof(int32_t),
                                                   cudaMemcpyHostToDevice, copy));
      }
      GENIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_done_[slot].get(), copy));
      return Status::Ok();
    };

    std::vector<TopKResults> part_results(ranges.size());
    GENIE_RETURN_IF_ERROR(issue_copy(0));
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const int slot = static_cast<int>(i % 2);
      if (i + 1 < ranges.size()) GENIE_RETURN_IF_ERROR(issue_copy(static_cast<int32_t>(i + 1)));
      const InvertedIndex& part = *parts_[i];
      CompiledQueries compiled;  // host work overlaps the copies in flight
      GENIE_RETURN_IF_ERROR(CompileQueries(part, batch, threads_, &compiled));
      GENIE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, copy_done_[slot].get(), 0));
      DeviceIndexView view;
      view.postings = buffers[slot].get();
      view.num_objects = part.num_objects();
      view.keyword_offsets = part.keyword_offsets();
      std::vector<std::vector<Hit>> per_query;
      GENIE_RETURN_IF_ERROR(RunQueries(view, compiled, k, state_budget, &per_query));
      GENIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_done_[slot].get(), compute));
      Assemble(nq, &per_query, &part_results[i]);
    }
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute));
    stats_.parts = static_cast<int32_t>(ranges.size());
    MergePartResults(part_results, ranges, k, out);
    return Status::Ok();
  }

  // ---- planning ------------------------------------------------------------

  Matcher RouteOf(int64_t max_score) const {
    if (config_.matcher == Matcher::kCountTable || max_score > kCpqMaxScore) {
      return Matcher::kCountTable;
    }
    return config_.matcher;
  }

  int32_t TileObjects(int32_t bits) const {
    return config_.tile_words * (32 / bits);
  }

  // Tiles for the widest counters among the batch's c-PQ queries.
  int32_t TileCount(int32_t n, const std::vector<int64_t>& max_score) const {
    int64_t widest = 1;
    for (int64_t m : max_score) {
      if (m <= kCpqMaxScore) widest = std::max(widest, m);
    }
    const int32_t per_tile = TileObjects(BitsFor(widest));
    return static_cast<int32_t>((static_cast<int64_t>(n) + per_tile - 1) / per_tile);
  }

  uint32_t HtCapacity(Matcher m, int32_t k, int64_t max_score, int32_t tiles) const {
    if (config_.forced_ht_slots > 0) return config_.forced_ht_slots;
    uint64_t want;
    if (m == Matcher::kTiled) {
      // Each tile inserts at most k entries: O(k * min(tiles, max score)).
      want = static_cast<uint64_t>(k) * static_cast<uint64_t>(std::min<int64_t>(tiles, max_score)) +
             static_cast<uint64_t>(k) + 1024;
    } else {
      // O(k * max score), capped: with expired entries overwritten and the
      // ZA-sharpened gate the live entries are about 2k at any time.
      want = static_cast<uint64_t>(k) * static_cast<uint64_t>(std::min<int64_t>(max_score, 8)) + 1024;
    }
    return static_cast<uint32_t>(std::min<uint64_t>(NextPow2(want), 1ull << 30));
  }

  uint64_t QueryBytes(const CompiledQueries& cq, const Prepared& prep, int32_t q, int32_t n,
                      int32_t k, int32_t tiles, Matcher route) const {
    const std::size_t qi = static_cast<std::size_t>(q);
    const int64_t max_score = prep.max_score[qi];
    const uint64_t slices = static_cast<uint64_t>(cq.count[qi]);
    const uint64_t common = static_cast<uint64_t>(k) * 8 + 128;
    const uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(max_score, 1));
    if (route == Matcher::kCountTable) {
      return common + slices * 28 + static_cast<uint64_t>(RoundUp(n, 4)) * 4 +
             static_cast<uint64_t>(k) * 24;
    }
    const uint64_t cap = HtCapacity(route, k, max_score, tiles);
    if (route == Matcher::kFaithful) {
      const int32_t per_word = 32 / BitsFor(max_score);
      const uint64_t words = static_cast<uint64_t>(RoundUp((n + per_word - 1) / per_word, 4));
      return common + slices * 28 + words * 4 + (ms + 2) * 4 + cap * 8 + (cap + k) * 24;
    }
    const uint64_t runs = static_cast<uint64_t>(prep.num_runs[qi]);
    return common + (ms + 2) * 4 + cap * 8 + cap * 24 +
           runs * (24 + (static_cast<uint64_t>(tiles) + 1) * 4);
  }

  Status PlanGroups(const std::vector<int32_t>& queries, const std::vector<uint64_t>& bytes,
                    uint64_t avail, std::vector<std::vector<int32_t>>* groups) {
    groups->clear();
    std::vector<int32_t> current;
    uint64_t current_bytes = kGroupFixedBytes;
    for (int32_t q : queries) {
      const uint64_t b = bytes[static_cast<std::size_t>(q)];
      if (kGroupFixedBytes + b > avail) {
        return Status::DeviceOutOfMemory(
            "one query needs " + std::to_string(b + kGroupFixedBytes) +
            " bytes of device memory; the budget leaves " + std::to_string(avail));
      }
      if (!current.empty() &&
          (current_bytes + b > avail || current.size() >= kMaxGroupQueries)) {
        groups->push_back(std::move(current));
        current.clear();
        current_bytes = kGroupFixedBytes;
      }
      current.push_back(q);
      current_bytes += b;
    }
    if (!current.empty()) groups->push_back(std::move(current));
    return Status::Ok();
  }

  // ---- one (part of the) index, all queries ----------------------------------

  Status RunQueries(const DeviceIndexView& view, const CompiledQueries& cq, int32_t k,
                    uint64_t avail, std::vector<std::vector<Hit>>* per_query) {
    const int32_t nq = cq.num_queries();
    per_query->assign(static_cast<std::size_t>(nq), {});
    const int32_t n = view.num_objects;
    if (n <= 0 || nq == 0) return Status::Ok();
    const int32_t k_eff = std::min(k, n);
    Prepared prep;
    GENIE_RETURN_IF_ERROR(Prepare(cq, view.keyword_offsets, config_.matcher == Matcher::kTiled,
                                  threads_, &prep));
    std::vector<int32_t> cpq, count;
    for (int32_t q = 0; q < nq; ++q) {
      const int64_t m = prep.max_score[static_cast<std::size_t>(q)];
      if (m <= 0) continue;  // no postings: no hits
      (RouteOf(m) == Matcher::kCountTable ? count : cpq).push_back(q);
    }
    const int32_t tiles = TileCount(n, prep.max_score);
    std::vector<uint64_t> bytes(static_cast<std::size_t>(nq), 0);
    for (int32_t q : cpq) {
      bytes[static_cast<std::size_t>(q)] = QueryBytes(cq, prep, q, n, k_eff, tiles, config_.matcher);
    }
    prof_.Mark("prepare");
    std::vector<int32_t> overflowed;
    if (!cpq.empty()) {
      std::vector<std::vector<int32_t>> groups;
      GENIE_RETURN_IF_ERROR(PlanGroups(cpq, bytes, avail, &groups));
      for (const auto& group : groups) {
        if (config_.matcher == Matcher::kTiled) {
          GENIE_RETURN_IF_ERROR(RunTiledGroup(view, prep, group, k_eff, per_query, &overflowed));
        } else {
          GENIE_RETURN_IF_ERROR(
              RunFaithfulGroup(view, cq, prep, group, k_eff, per_query, &overflowed));
        }
        ++stats_.query_groups;
      }
      stats_.cpq_queries += static_cast<int32_t>(cpq.size());
      stats_.overflow_queries += static_cast<int32_t>(overflowed.size());
    }
    count.insert(count.end(), overflowed.begin(), overflowed.end());
    if (!count.empty()) {
      std::sort(count.begin(), count.end());
      for (int32_t q : count) {
        bytes[static_cast<std::size_t>(q)] =
            QueryBytes(cq, prep, q, n, k_eff, 0, Matcher::kCountTable);
      }
      std::vector<std::vector<int32_t>> groups;
      GENIE_RETURN_IF_ERROR(PlanGroups(count, bytes, avail, &groups));
      for (const auto& group : groups) {
        for (int32_t q : group) (*per_query)[static_cast<std::size_t>(q)].clear();
        GENIE_RETURN_IF_ERROR(RunCountGroup(view, cq, prep, group, k_eff, per_query));
        ++stats_.query_groups;
      }
      stats_.count_queries += static_cast<int32_t>(count.size());
    }
    return Status::Ok();
  }

  // Slices of the group's queries as device work: <= kSlicesPerBlock slices
  // of one query per block (paper III-B).  Built on several threads.
  struct Work {
    std::unique_ptr<DevSlice[]> slices;
    std::unique_ptr<WorkItem[]> items;
    int64_t num_slices = 0;
    int64_t num_items = 0;
  };

  static constexpr int64_t kMaxDevSlice = 1 << 20;

  // The group's work on the device, for the scan kernels of either matcher.
  struct DeviceWork {
    DeviceArray<DevSlice> slices;
    DeviceArray<WorkItem> items;
    void Reset() {
      slices.Reset();
      items.Reset();
    }
  };

  Status UploadWork(const Work& work, DeviceWork* out) {
    GENIE_RETURN_IF_ERROR(CopyToDevice(&out->slices, work.slices.get(),
                                       static_cast<std::size_t>(work.num_slices), "slices"));
    return CopyToDevice(&out->items, work.items.get(), static_cast<std::size_t>(work.num_items),
                        "work items");
  }

  Status BuildWork(const CompiledQueries& cq, const std::vector<int32_t>& group, Work* work) {
    const std::size_t g = group.size();
    std::vector<int64_t> slice_start(g + 1, 0), item_start(g + 1, 0);
    for (std::size_t i = 0; i < g; ++i) {
      int64_t pieces = 0;
      for (const ListSlice& slice : cq.Slices(group[i])) {
        if (slice.end > slice.begin) pieces += (slice.end - slice.begin + kMaxDevSlice - 1) / kMaxDevSlice;
      }
      slice_start[i + 1] = slice_start[i] + pieces;
      item_start[i + 1] = item_start[i] + (pieces + kSlicesPerBlock - 1) / kSlicesPerBlock;
    }
    if (slice_start[g] > std::numeric_limits<int32_t>::max() ||
        item_start[g] > std::numeric_limits<int32_t>::max()) {
      return Status::Internal("too many slices in one query group");
    }
    work->num_slices = slice_start[g];
    work->num_items = item_start[g];
    work->slices.reset(new DevSlice[static_cast<std::size_t>(std::max<int64_t>(work->num_slices, 1))]);
    work->items.reset(new WorkItem[static_cast<std::size_t>(std::max<int64_t>(work->num_items, 1))]);
    return ParallelFor(static_cast<int64_t>(g), threads_, [&](int64_t i) -> Status {
      const std::size_t ii = static_cast<std::size_t>(i);
      int64_t s = slice_start[ii];
      for (const ListSlice& slice : cq.Slices(group[ii])) {
        // Slices are at most split_length long; longer ones (a custom
        // split) are cut here so that a block's work stays bounded.
        for (int64_t b = slice.begin; b < slice.end; b += kMaxDevSlice) {
          DevSlice& d = work->slices[static_cast<std::size_t>(s++)];
          d.begin = b;
          d.length = static_cast<int32_t>(std::min<int64_t>(slice.end - b, kMaxDevSlice));
          d.weight = slice.weight;
        }
      }
      int64_t item = item_start[ii];
      const int32_t end = static_cast<int32_t>(slice_start[ii + 1]);
      for (int32_t f = static_cast<int32_t>(slice_start[ii]); f < end; f += kSlicesPerBlock) {
        work->items[static_cast<std::size_t>(item++)] =
            WorkItem{static_cast<int32_t>(i), f, std::min(end, f + kSlicesPerBlock)};
      }
      return Status::Ok();
    });
  }

  template <typename T>
  Status CopyToDevice(DeviceArray<T>* dst, const T* src, std::size_t count, const char* what) {
    GENIE_RETURN_IF_ERROR(dst->Allocate(std::max<std::size_t>(count, 1), what));
    if (count > 0) {
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->get(), src, count * sizeof(T),
                                                 cudaMemcpyHostToDevice, compute_stream_.get()));
    }
    return Status::Ok();
  }

  template <typename T>
  Status CopyToDevice(DeviceArray<T>* dst, const std::vector<T>& src, const char* what) {
    return CopyToDevice(dst, src.data(), src.size(), what);
  }

  // Candidate buffers shared by the three matchers' selection tails.
  struct Candidates {
    DeviceArray<unsigned long long> keys;
    DeviceArray<int64_t> seg_begin, seg_end;
    DeviceArray<SelectState> select;
    CandState state{};
    int64_t total = 0;

    Status Allocate(int64_t total_slots, int32_t g) {
      total = std::max<int64_t>(total_slots, 1);
      GENIE_RETURN_IF_ERROR(keys.Allocate(static_cast<std::size_t>(total), "candidates"));
      GENIE_RETURN_IF_ERROR(seg_begin.Allocate(static_cast<std::size_t>(g), "segment offsets"));
      GENIE_RETURN_IF_ERROR(seg_end.Allocate(static_cast<std::size_t>(g), "segment offsets"));
      GENIE_RETURN_IF_ERROR(select.Allocate(static_cast<std::size_t>(g), "selection state"));
      state.keys = keys.get();
      state.seg_begin = seg_begin.get();
      state.seg_end = seg_end.get();
      state.select = select.get();
      return Status::Ok();
    }
  };

  // Sorts every query's candidates, keeps the first k distinct, copies them
  // back into per_query.
  Status SortEmitFetch(Candidates* cand, const std::vector<int32_t>& group, int32_t k,
                       std::vector<std::vector<Hit>>* per_query) {
    cudaStream_t stream = compute_stream_.get();
    const int32_t g = static_cast<int32_t>(group.size());
    DeviceArray<unsigned long long> sorted;
    GENIE_RETURN_IF_ERROR(sorted.Allocate(static_cast<std::size_t>(cand->total), "sorted candidates"));
    std::size_t temp_bytes = 0;
    GENIE_RETURN_IF_ERROR(SortCandidates(nullptr, &temp_bytes, cand->keys.get(), sorted.get(),
                                         cand->total, g, cand->seg_begin.get(),
                                         cand->seg_end.get(), stream));
    DeviceMemory temp;
    GENIE_RETURN_IF_ERROR(temp.Allocate(std::max<std::size_t>(temp_bytes, 16), "sort scratch"));
    GENIE_RETURN_IF_ERROR(SortCandidates(temp.get(), &temp_bytes, cand->keys.get(), sorted.get(),
                                         cand->total, g, cand->seg_begin.get(),
                                         cand->seg_end.get(), stream));
    prof_.Mark("sort");
    DeviceArray<DevHit> hits;
    DeviceArray<int32_t> counts;
    GENIE_RETURN_IF_ERROR(hits.Allocate(static_cast<std::size_t>(g) * k, "results"));
    GENIE_RETURN_IF_ERROR(counts.Allocate(static_cast<std::size_t>(g), "result counts"));
    GENIE_RETURN_IF_ERROR(LaunchEmit(sorted.get(), cand->state, g, k, hits.get(), counts.get(), stream));
    std::vector<DevHit> host_hits(static_cast<std::size_t>(g) * k);
    std::vector<int32_t> host_counts(static_cast<std::size_t>(g));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_counts.data(), counts.get(),
                                               host_counts.size() * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_hits.data(), hits.get(),
                                               host_hits.size() * sizeof(DevHit),
                                               cudaMemcpyDeviceToHost, stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    prof_.Mark("emit+fetch");
    for (int32_t i = 0; i < g; ++i) {
      auto& dst = (*per_query)[static_cast<std::size_t>(group[static_cast<std::size_t>(i)])];
      const int32_t c = std::min(host_counts[static_cast<std::size_t>(i)], k);
      dst.resize(static_cast<std::size_t>(std::max(c, 0)));
      for (int32_t j = 0; j < c; ++j) {
        const DevHit& h = host_hits[static_cast<std::size_t>(i) * k + j];
        dst[static_cast<std::size_t>(j)] = Hit{h.object, h.score};
      }
    }
    return Status::Ok();
  }

  Status FetchOverflow(const DeviceArray<int32_t>& overflow, const std::vector<int32_t>& group,
                       std::vector<int32_t>* overflowed) {
    std::vector<int32_t> flags(group.size());
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(flags.data(), overflow.get(),
                                               flags.size() * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, compute_stream_.get()));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_stream_.get()));
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (flags[i] != 0) overflowed->push_back(group[i]);
    }
    return Status::Ok();
  }

  // The c-PQ state every c-PQ matcher has: ZipperArrays, AuditThresholds,
  // hash tables, overflow flags.
  struct GateBuffers {
    DeviceArray<QueryParams> queries;
    DeviceArray<int32_t> za, at, overflow;
    DeviceArray<unsigned long long> ht;
  };

  Status AllocateGate(GateBuffers* gb, const std::vector<QueryParams>& params, int64_t za_total,
                      int64_t ht_total, int32_t k, GateState* gate) {
    cudaStream_t stream = compute_stream_.get();
    const std::size_t g = params.size();
    GENIE_RETURN_IF_ERROR(CopyToDevice(&gb->queries, params, "query parameters"));
    GENIE_RETURN_IF_ERROR(gb->za.Allocate(static_cast<std::size_t>(za_total), "ZipperArrays"));
    GENIE_RETURN_IF_ERROR(gb->at.Allocate(g, "AuditThresholds"));
    GENIE_RETURN_IF_ERROR(gb->overflow.Allocate(g, "overflow flags"));
    GENIE_RETURN_IF_ERROR(gb->ht.Allocate(static_cast<std::size_t>(ht_total), "hash tables"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->za.get(), 0, gb->za.bytes(), stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->overflow.get(), 0, gb->overflow.bytes(), stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->ht.get(), 0xFF, gb->ht.bytes(), stream));
    GENIE_RETURN_IF_ERROR(LaunchInitAt(gb->at.get(), static_cast<int32_t>(g), stream));
    gate->queries = gb->queries.get();
    gate->bc = nullptr;
    gate->za = gb->za.get();
    gate->at = gb->at.get();
    gate->ht = gb->ht.get();
    gate->overflow = gb->overflow.get();
    gate->k = k;
    gate->num_queries = static_cast<int32_t>(g);
    return Status::Ok();
  }

  Status RunFaithfulGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                          const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                          std::vector<std::vector<Hit>>* per_query,
                          std::vector<int32_t>* overflowed) {
    cudaStream_t stream = compute_stream_.get();
    const int32_t n = view.num_objects;
    const int32_t g = static_cast<int32_t>(group.size());
    std::vector<QueryParams> params(group.size());
    int64_t bc_total = 0, za_total = 0, ht_total = 0, cand_total = 0;
    for (std::size_t i = 0; i < group.size(); ++i) {
      const int64_t ms = prep.max_score[static_cast<std::size_t>(group[i])];
      QueryParams& p = params[i];
      p.max_score = static_cast<int32_t>(ms);
      p.bits = BitsFor(ms);
      p.per_word = 32 / p.bits;
      const uint32_t cap = HtCapacity(Matcher::kFaithful, k, ms, 0);
      p.ht_mask = cap - 1;
      p.bc_offset = bc_total;
      p.za_offset = za_total;
      p.ht_offset = ht_total;
      p.cand_offset = cand_total;
      bc_total += RoundUp((static_cast<int64_t>(n) + p.per_word - 1) / p.per_word, 4);
      za_total += ms + 2;
      ht_total += cap;
      cand_total += static_cast<int64_t>(cap) + k;
    }
    Work work;
    GENIE_RETURN_IF_ERROR(BuildWork(cq, group, &work));
    prof_.Mark("host prep");

    GateBuffers gb;
    GateState gate{};
    GENIE_RETURN_IF_ERROR(AllocateGate(&gb, params, za_total, ht_total, k, &gate));
    DeviceArray<uint32_t> bc;
    GENIE_RETURN_IF_ERROR(bc.Allocate(static_cast<std::size_t>(bc_total), "Bitmap Counters"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(bc.get(), 0, bc.bytes(), stream));
    gate.bc = bc.get();
    DeviceWork d_work;
    GENIE_RETURN_IF_ERROR(UploadWork(work, &d_work));
    prof_.Mark("alloc+init");
    GENIE_RETURN_IF_ERROR(LaunchCpqScan(view.postings, d_work.items.get(), work.num_items,
                                        d_work.slices.get(), gate, stream));
    prof_.Mark("scan kernel");
    d_work.Reset();

    Candidates cand;
    GENIE_RETURN_IF_ERROR(cand.Allocate(cand_total, g));
    GENIE_RETURN_IF_ERROR(LaunchHtCollect(gate, cand.state, /*from_bc=*/true,
                                          config_.exact_ties, stream));
    if (config_.exact_ties) {
      GENIE_RETURN_IF_ERROR(LaunchOrderedCollect(gb.queries.get(), bc.get(), n, g, cand.state,
                                                 /*collect_above=*/false, stream));
    }
    prof_.Mark("select");
    GENIE_RETURN_IF_ERROR(FetchOverflow(gb.overflow, group, overflowed));
    return SortEmitFetch(&cand, group, k, per_query);
  }

  Status RunTiledGroup(const DeviceIndexView& view, const Prepared& prep,
                       const std::vector<int32_t>& group, int32_t k,
                       std::vector<std::vector<Hit>>* per_query,
                       std::vector<int32_t>* overflowed) {
    cudaStream_t stream = compute_stream_.get();
    const int32_t n = view.num_objects;
    const int32_t g = static_cast<int32_t>(group.size());
    int64_t group_max = 1;
    for (int32_t q : group) group_max = std::max(group_max, prep.max_score[static_cast<std::size_t>(q)]);
    TiledParams tp{};
    tp.bits = BitsFor(group_max);
    tp.per_word = 32 / tp.bits;
    tp.tile_words = config_.tile_words;
    tp.tile_objects = tp.tile_words * tp.per_word;
    tp.num_tiles =
        static_cast<int32_t>((static_cast<int64_t>(n) + tp.tile_objects - 1) / tp.tile_objects);
    tp.n_objects = n;
    tp.hist_bins = static_cast<int32_t>(group_max) + 2;

    // The group's list runs (one per segment; each gets its own tile bounds).
    std::vector<int64_t> seg_offsets(group.size() + 1, 0);
    for (std::size_t i = 0; i < group.size(); ++i) {
      seg_offsets[i + 1] =
          seg_offsets[i] + static_cast<int64_t>(prep.runs[static_cast<std::size_t>(group[i])].size());
    }
    const int64_t num_segs = seg_offsets.back();
    if (num_segs > std::numeric_limits<int32_t>::max()) {
      return Status::Internal("too many list runs in one query group");
    }
    std::unique_ptr<int64_t[]> seg_begin(new int64_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
    std::unique_ptr<int32_t[]> seg_length(new int32_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
    std::unique_ptr<int32_t[]> seg_weight(new int32_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
    for (std::size_t i = 0; i < group.size(); ++i) {
      int64_t s = seg_offsets[i];
      for (const Segment& seg : prep.runs[static_cast<std::size_t>(group[i])]) {
        seg_begin[static_cast<std::size_t>(s)] = seg.begin;
        seg_length[static_cast<std::size_t>(s)] = static_cast<int32_t>(seg.end - seg.begin);
        seg_weight[static_cast<std::size_t>(s)] = seg.weight;
        ++s;
      }
    }
    prof_.Mark("host prep");

    std::vector<QueryParams> params(group.size());
    int64_t za_total = 0, ht_total = 0;
    for (std::size_t i = 0; i < group.size(); ++i) {
      const int64_t ms = prep.max_score[static_cast<std::size_t>(group[i])];
      QueryParams& p = params[i];
      p.max_score = static_cast<int32_t>(ms);
      p.bits = tp.bits;
      p.per_word = tp.per_word;
      const uint32_t cap = HtCapacity(Matcher::kTiled, k, ms, tp.num_tiles);
      p.ht_mask = cap - 1;
      p.bc_offset = 0;
      p.za_offset = za_total;
      p.ht_offset = ht_total;
      p.cand_offset = ht_total;
      za_total += ms + 2;
      ht_total += cap;
    }

    GateBuffers gb;
    GateState gate{};
    GENIE_RETURN_IF_ERROR(AllocateGate(&gb, params, za_total, ht_total, k, &gate));
    DeviceArray<int64_t> d_seg_begin, d_seg_offsets;
    DeviceArray<int32_t> d_seg_length, d_seg_weight;
    DeviceArray<uint32_t> d_bounds;
    const std::size_t segs = static_cast<std::size_t>(num_segs);
    GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_begin, seg_begin.get(), segs, "list runs"));
    GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_length, seg_length.get(), segs, "list runs"));
    GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_weight, seg_weight.get(), segs, "list runs"));
    GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_offsets, seg_offsets, "list runs"));
    GENIE_RETURN_IF_ERROR(d_bounds.Allocate(
        std::max<std::size_t>(segs * (static_cast<std::size_t>(tp.num_tiles) + 1), 1),
        "tile bounds"));
    GENIE_RETURN_IF_ERROR(LaunchTileBounds(view.postings, d_seg_begin.get(), d_seg_length.get(),
                                           static_cast<int32_t>(num_segs), tp.num_tiles,
                                           tp.tile_objects, d_bounds.get(), stream));
    tp.postings = view.postings;
    tp.seg_begin = d_seg_begin.get();
    tp.bounds = d_bounds.get();
    tp.seg_offsets = d_seg_offsets.get();
    tp.seg_weight = d_seg_weight.get();
    prof_.Mark("alloc+init+bounds");
    GENIE_RETURN_IF_ERROR(LaunchTiled(tp, gate, stream));
    prof_.Mark("tiled kernel");

    Candidates cand;
    GENIE_RETURN_IF_ERROR(cand.Allocate(ht_total, g));
    GENIE_RETURN_IF_ERROR(LaunchHtCollect(gate, cand.state, /*from_bc=*/false,
                                          /*exact_ties=*/false, stream));
    prof_.Mark("select");
    GENIE_RETURN_IF_ERROR(FetchOverflow(gb.overflow, group, overflowed));
    return SortEmitFetch(&cand, group, k, per_query);
  }

  Status RunCountGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                       const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                       std::vector<std::vector<Hit>>* per_query) {
    cudaStream_t stream = compute_stream_.get();
    const int32_t n = view.num_objects;
    const int32_t g = static_cast<int32_t>(group.size());
    const int64_t stride = RoundUp(n, 4);
    std::vector<QueryParams> params(group.size());
    for (std::size_t i = 0; i < group.size(); ++i) {
      QueryParams& p = params[i];
      p.max_score = static_cast<int32_t>(prep.max_score[static_cast<std::size_t>(group[i])]);
      p.bits = 32;
      p.per_word = 1;
      p.ht_mask = 0;
      p.bc_offset = static_cast<int64_t>(i) * stride;
      p.za_offset = 0;
      p.ht_offset = 0;
      p.cand_offset = static_cast<int64_t>(i) * k;
    }
    Work work;
    GENIE_RETURN_IF_ERROR(BuildWork(cq, group, &work));
    prof_.Mark("host prep");
    DeviceArray<QueryParams> d_params;
    GENIE_RETURN_IF_ERROR(CopyToDevice(&d_params, params, "query parameters"));
    DeviceArray<uint32_t> table;
    GENIE_RETURN_IF_ERROR(table.Allocate(static_cast<std::size_t>(stride) * g, "count table"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(table.get(), 0, table.bytes(), stream));
    DeviceWork d_work;
    GENIE_RETURN_IF_ERROR(UploadWork(work, &d_work));
    prof_.Mark("alloc+init");
    GENIE_RETURN_IF_ERROR(LaunchCountScan(view.postings, d_work.items.get(), work.num_items,
                                          d_work.slices.get(), d_params.get(), table.get(), stream));
    prof_.Mark("scan kernel");
    d_work.Reset();
    Candidates cand;
    GENIE_RETURN_IF_ERROR(cand.Allocate(static_cast<int64_t>(g) * k, g));
    GENIE_RETURN_IF_ERROR(LaunchCountSelect(d_params.get(), table.get(), n, k, g, cand.state, stream));
    GENIE_RETURN_IF_ERROR(LaunchOrderedCollect(d_params.get(), table.get(), n, g, cand.state,
                                               /*collect_above=*/true, stream));
    prof_.Mark("select");
    return SortEmitFetch(&cand, group, k, per_query);
  }

  const int device_;
  const uint64_t budget_option_;
  const Config config_;
  const int threads_;  // host threads for compiling and preparing batches
  std::shared_ptr<const InvertedIndex> index_;
  DeviceArray<int32_t> resident_postings_;
  bool resident_ = false;
  // Multiple loading: the parts of the index (host, page-locked), cached.
  int32_t part_count_ = 0;
  std::vector<std::pair<int32_t, int32_t>> part_ranges_;
  std::vector<std::unique_ptr<InvertedIndex>> parts_;
  std::vector<HostRegistration> part_pins_;
  Stream compute_stream_, copy_stream_;
  Event copy_done_[2], compute_done_[2];
  SearchStats stats_;
  Profiler prof_;
};

Config ConfigFromEnvironment() {
  Config config;
  if (const char* m = std::getenv("GENIE_GPU_MATCHER")) {
    if (std::strcmp(m, "faithful") == 0) config.matcher = Matcher::kFaithful;
    if (std::strcmp(m, "count-table") == 0) config.matcher = Matcher::kCountTable;
  }
  if (const char* t = std::getenv("GENIE_GPU_TIES")) {
    if (std::strcmp(t, "paper") == 0) config.exact_ties = false;
  }
  if (const char* s = std::getenv("GENIE_GPU_HT_SLOTS")) {
    const long long v = std::atoll(s);
    if (v > 0) config.forced_ht_slots = static_cast<uint32_t>(NextPow2(static_cast<uint64_t>(v)));
  }
  if (const char* p = std::getenv("GENIE_GPU_PROFILE")) config.profile = std::atoi(p) != 0;
  if (const char* w = std::getenv("GENIE_GPU_TILE_WORDS")) {
    const long long v = std::atoll(w);
    if (v >= 512 && v <= 49152 && v % 512 == 0) config.tile_words = static_cast<int32_t>(v);
  }
  return config;
}

std::unique_ptr<Engine> Make(const EngineOptions& options, Config config, Status* status) {
  Status local;
  Status* st = status != nullptr ? status : &local;
  *st = Status::Ok();
  try {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      *st = Status::DeviceUnavailable(std::string("no usable GPU: cudaGetDeviceCount failed: ") +
                                      cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
                                      ")");
      return nullptr;
    }
    if (count == 0) {
      *st = Status::DeviceUnavailable("no usable GPU: the CUDA runtime sees no device");
      return nullptr;
    }
    if (options.device_ordinal < 0 || options.device_ordinal >= count) {
      *st = Status::DeviceUnavailable("no usable GPU: device_ordinal " +
                                      std::to_string(options.device_ordinal) +
                                      " does not exist (" + std::to_string(count) +
                                      " CUDA device(s))");
      return nullptr;
    }
    DeviceGuard guard;
    Status s = guard.Enter(options.device_ordinal);
    if (s.ok()) s = ProbeKernelImage();
    if (!s.ok()) {
      *st = Status::DeviceUnavailable("no usable GPU: device " +
                                      std::to_string(options.device_ordinal) +
                                      " cannot run genie's kernels: " + s.message());
      return nullptr;
    }
    auto engine = std::make_unique<GpuEngine>(options.device_ordinal, options, config);
    s = engine->Init();
    if (!s.ok()) {
      *st = s;
      return nullptr;
    }
    return engine;
  } catch (const std::bad_alloc&) {
    *st = Status::OutOfMemory("out of host memory creating the GPU engine");
  } catch (...) {
    *st = Status::Internal("unexpected exception creating the GPU engine");
  }
  return nullptr;
}

}  // namespace

bool GetLastSearchStats(const Engine* engine, SearchStats* stats) {
  const auto* gpu = dynamic_cast<const GpuEngine*>(engine);
  if (gpu == nullptr || stats == nullptr) return false;
  *stats = gpu->stats();
  return true;
}

}  // namespace gpu

std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options, Status* status) {
  return gpu::Make(options, gpu::ConfigFromEnvironment(), status);
}

std::unique_ptr<Engine> MakeGpuCountTableEngine(const EngineOptions& options, Status* status) {
  gpu::Config config = gpu::ConfigFromEnvironment();
  config.matcher = gpu::Matcher::kCountTable;
  return gpu::Make(options, config, status);
}

}  // namespace genie

// The multi-threaded CPU engine, in two orders.  A batch of queries is
// counted tile by tile (cpu_tiles.cpp), so that its queries share each
// tile's postings from the cache.  One query at a time (small batches, and
// here): queries are spread over threads; each thread scores one query at a
// time with a counter per object, remembering which counters it touched so
// that resetting costs what scoring cost, then picks the exact top-k by a
// histogram of scores (scores are bounded by the query's max_score) or, for
// large bounds, with a heap of k hits.
//
// It runs inside a PostgreSQL backend: worker threads start with every
// signal blocked (so PostgreSQL's handlers only ever run in the backend's own
// thread), call nothing but plain C++, and report failures as a Status.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "genie/engine.hpp"
#include "genie/parallel.hpp"
#include "cpu_tiles.hpp"

namespace genie {
namespace {

// Histogram selection needs max_score + 1 buckets; above this the heap is used.
constexpr int64_t kMaxHistogramScore = 65535;

// A worker polls the cancel callback before each query and, within a query,
// at the first slice boundary after this many postings (a few hundred
// microseconds of counting), never inside the per-posting loop.
constexpr int64_t kCancelPollPostings = 1 << 16;

// After a touched-list overflow the counters are scanned in blocks of this
// many: a block whose largest counter is below what a pass wants is skipped
// whole.  The block's maximum is a plain reduction the compiler vectorises,
// where a histogram of every counter, or a test of each, was 80% of a query
// document's time on 125k documents (dense scores: mispredicted branches,
// and increments of the same bucket waiting on each other).
constexpr std::size_t kScanBlock = 64;

template <typename Counter>
Counter BlockMax(const Counter* counters, std::size_t n) {
  Counter max = 0;
  for (std::size_t i = 0; i < n; ++i) max = std::max(max, counters[i]);
  return max;
}

// The touched list holds at most this many objects; a query touching more
// falls back to scanning all counters, which then costs at most 16 times the
// postings it scanned anyway.  This bounds the list's memory at n/4 bytes.
std::size_t TouchedCapacity(std::size_t n) { return std::min(n, n / 16 + 16); }

int CounterWidth(int64_t max_score) {
  if (max_score <= 0xFF) return 1;
  if (max_score <= 0xFFFF) return 2;
  return 4;
}

// Bytes one thread holds while scoring objects [0, n).
uint64_t PerThreadBytes(uint64_t n, int width, uint64_t histogram_entries) {
  return (n + n / kScanBlock + 1) * static_cast<uint64_t>(width) +
         2 * sizeof(int32_t) * TouchedCapacity(n) +
         sizeof(uint32_t) * histogram_entries;
}

// A scorer on the calling thread (a lone query's, or a small batch's) keeps
// its scratch there between engine calls: the counters, left zeroed by every
// query it completes, and the touched list.  A lone query at 1M objects
// allocated and zeroed a megabyte of fresh pages for a few thousand postings
// (a tenth of a CPU statement's time).  One counter width is kept a thread,
// and only up to kKeptScratchBytes; a cancelled scorer's is dropped.
constexpr std::size_t kKeptScratchBytes = std::size_t{16} << 20;

template <typename Counter>
struct KeptScratch {
  std::vector<Counter> counters;  // all zero
  std::vector<int32_t> touched;
};

template <typename Counter>
KeptScratch<Counter>& Kept() {
  thread_local KeptScratch<Counter> kept;
  return kept;
}

void DropKeptScratch() {
  Kept<uint8_t>() = {};
  Kept<uint16_t>() = {};
  Kept<uint32_t>() = {};
}

// What the workers of one part share.  A part is the objects
// [base, base + size); the compiled batch holds only their postings.
struct PartWork {
  const InvertedIndex* index;
  const CompiledBatch* compiled;
  int32_t base;
  int32_t size;
  std::size_t k;  // already at most size
  bool keep_scratch = false;  // one worker, on the calling thread
  std::vector<std::vector<Hit>>* per_query;
  CancelCheck cancel;
  std::atomic<int32_t> next_query{0};
  FirstFailure failure;
};

template <typename Counter>
class QueryScorer {
 public:
  explicit QueryScorer(const PartWork& work)
      : index_(*work.index),
        compiled_(*work.compiled),
        base_(work.base),
        cancel_(work.cancel),
        k_(work.k),
        n_(static_cast<std::size_t>(work.size)),
        keep_(work.keep_scratch &&
              n_ * sizeof(Counter) + TouchedCapacity(n_) * sizeof(int32_t) <= kKeptScratchBytes) {
    if (keep_) {
      KeptScratch<Counter>& kept = Kept<Counter>();
      if (kept.counters.size() == n_ && kept.touched.size() == TouchedCapacity(n_)) {
        counters_.swap(kept.counters);
        touched_.swap(kept.touched);
        return;
      }
    }
    counters_.assign(n_, 0);
    touched_.assign(TouchedCapacity(n_), 0);
  }

  ~QueryScorer() {
    if (!keep_ || !clean_) return;
    DropKeptScratch();
    KeptScratch<Counter>& kept = Kept<Counter>();
    kept.counters.swap(counters_);
    kept.touched.swap(touched_);
  }

  QueryScorer(const QueryScorer&) = delete;
  QueryScorer& operator=(const QueryScorer&) = delete;

  // False when cancelled (the scorer is then left dirty: discard it).
  bool Score(int32_t q, std::vector<Hit>* out) {
    clean_ = false;
    out->clear();
    if (!Accumulate(q)) return false;
    const int64_t max_score = compiled_.max_score[static_cast<std::size_t>(q)];
    if (!overflow_ && n_touched_ <= k_) {
      ForEachCandidate([&](int32_t o, Counter c) { out->push_back({o, static_cast<int32_t>(c)}); });
      std::sort(out->begin(), out->end(), HitBefore);
    } else {
      const std::size_t candidates = overflow_ ? n_ : n_touched_;
      if (max_score <= kMaxHistogramScore &&
          static_cast<uint64_t>(max_score) <= 4 * static_cast<uint64_t>(candidates) + 1024) {
        SelectByHistogram(max_score, out);
      } else {
        SelectByHeap(out);
      }
    }
    n_touched_ = 0;
    overflow_ = false;
    clean_ = true;
    return true;
  }

 private:
  // False when cancelled midway.
  bool Accumulate(int32_t q) {
    const int32_t* postings = index_.postings().data();
    for (int64_t s = compiled_.query_slice_offsets[q]; s < compiled_.query_slice_offsets[q + 1];
         ++s) {
      const ListSlice& slice = compiled_.slices[static_cast<std::size_t>(s)];
      if (since_poll_ >= kCancelPollPostings) {
        since_poll_ = 0;
        if (cancel_.requested()) return false;
      }
      since_poll_ += slice.end - slice.begin;
      Count(postings, slice.begin, slice.end, slice.weight);
    }
    return true;
  }

  // Adds weight to the counters of postings [i, end), recording first
  // touches until the touched list is full.
  void Count(const int32_t* postings, int64_t i, int64_t end, int32_t weight_in) {
    const int32_t base = base_;
    Counter* counters = counters_.data();
    // Fits: the weight is at most max_score, which picked Counter.
    const auto weight = static_cast<Counter>(weight_in);
    if (!overflow_) {
      int32_t* touched = touched_.data();
      const std::size_t capacity = touched_.size();
      std::size_t n_touched = n_touched_;
      for (; i < end; ++i) {
        const int32_t o = postings[i] - base;
        const Counter c = counters[o];
        if (c == 0) {
          if (n_touched == capacity) {
            overflow_ = true;
            break;  // posting i is added by the loop below
          }
          touched[n_touched++] = o;
        }
        counters[o] = static_cast<Counter>(c + weight);
      }
      n_touched_ = n_touched;
    }
    for (; i < end; ++i) {
      const int32_t o = postings[i] - base;
      counters[o] = static_cast<Counter>(counters[o] + weight);
    }
  }

  // Visits every object with a nonzero score and resets its counter.  After
  // an overflow the visit is in ascending object order.
  template <typename Visit>
  void ForEachCandidate(Visit&& visit) {
    Counter* counters = counters_.data();
    if (overflow_) {
      for (std::size_t o = 0; o < n_; ++o) {
        if (counters[o] != 0) {
          const Counter c = counters[o];
          counters[o] = 0;
          visit(static_cast<int32_t>(o), c);
        }
      }
    } else {
      for (std::size_t i = 0; i < n_touched_; ++i) {
        const int32_t o = touched_[i];
        const Counter c = counters[o];
        counters[o] = 0;
        visit(o, c);
      }
    }
  }

  // Counts scores, finds the threshold score t such that fewer than k objects
  // score above it, takes everything above t and the lowest-numbered objects
  // at t.  Linear in the candidates plus max_score.
  //
  // After an overflow, the scores are dense and a histogram of every counter
  // is bound by its increments of the same few buckets.  So the counters'
  // block maxima come first: if k blocks reach a score f, at least k objects
  // score f or more, so t >= f, and only blocks whose maximum reaches f can
  // hold an object the selection takes or a count it reads (buckets >= f).
  void SelectByHistogram(int64_t max_score, std::vector<Hit>* out) {
    const auto buckets = static_cast<std::size_t>(max_score) + 1;
    if (histogram_.size() < buckets) histogram_.resize(buckets);
    const auto clear_histogram = [&] {
      std::fill(histogram_.begin(), histogram_.begin() + static_cast<std::ptrdiff_t>(buckets), 0u);
    };
    const Counter* counters = counters_.data();
    Counter floor = 1;  // the blocks visited reach it
    if (overflow_) {
      const std::size_t blocks = (n_ + kScanBlock - 1) / kScanBlock;
      block_max_.resize(blocks);
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t first = b * kScanBlock;
        block_max_[b] = BlockMax(counters + first, std::min(n_, first + kScanBlock) - first);
      }
      if (blocks >= k_) {
        clear_histogram();
        for (Counter m : block_max_) ++histogram_[m];
        std::size_t reached = 0;
        for (std::size_t s = buckets - 1; s >= 1; --s) {
          reached += histogram_[s];
          if (reached >= k_) {
            floor = static_cast<Counter>(s);
            break;
          }
        }
      }
      clear_histogram();
      for (std::size_t b = 0; b < blocks; ++b) {
        if (block_max_[b] < floor) continue;
        const std::size_t first = b * kScanBlock, end = std::min(n_, first + kScanBlock);
        for (std::size_t o = first; o < end; ++o) ++histogram_[counters[o]];
      }
    } else {
      clear_histogram();
      for (std::size_t i = 0; i < n_touched_; ++i) ++histogram_[counters[touched_[i]]];
    }

    int64_t threshold = 0;  // 0: fewer than k candidates, take them all
    std::size_t above = 0;
    for (int64_t s = max_score; s >= 1; --s) {
      const std::size_t at = histogram_[static_cast<std::size_t>(s)];
      if (above + at >= k_) {
        threshold = s;
        break;
      }
      above += at;
    }
    const std::size_t need_at_threshold = threshold == 0 ? 0 : k_ - above;

    if (overflow_) {
      // Ascending object order, so the ties taken are the lowest-numbered.
      // Only blocks reaching the threshold (>= floor) are visited; the
      // counters are then reset in one pass.
      const auto wanted = static_cast<Counter>(std::max<int64_t>(threshold, 1));
      std::size_t taken = 0;
      for (std::size_t b = 0; b < block_max_.size(); ++b) {
        if (block_max_[b] < wanted) continue;
        const std::size_t first = b * kScanBlock, end = std::min(n_, first + kScanBlock);
        for (std::size_t o = first; o < end; ++o) {
          const Counter c = counters[o];
          if (c > threshold || (c == threshold && c != 0 && taken++ < need_at_threshold))
            out->push_back({static_cast<int32_t>(o), static_cast<int32_t>(c)});
        }
      }
      std::fill(counters_.begin(), counters_.end(), Counter{0});
    } else {
      // The touched list is in first-touch order: the ties are ranked apart.
      ties_.clear();
      ForEachCandidate([&](int32_t o, Counter c) {
        if (c > threshold)
          out->push_back({o, static_cast<int32_t>(c)});
        else if (c == threshold)
          ties_.push_back(o);
      });
      if (ties_.size() > need_at_threshold) {
        std::nth_element(ties_.begin(), ties_.begin() + static_cast<std::ptrdiff_t>(need_at_threshold),
                         ties_.end());
        ties_.resize(need_at_threshold);
      }
      for (int32_t o : ties_) out->push_back({o, static_cast<int32_t>(threshold)});
    }
    std::sort(out->begin(), out->end(), HitBefore);
  }

  // Keeps the best k hits seen so far in a heap whose top is the worst of
  // them.  O(candidates log k) time, O(k) memory, any max_score.
  //
  // After an overflow the objects come in ascending order, so once the heap
  // holds k hits a later object must score above the worst of them: a block
  // whose maximum does not is skipped (as the tile order's selection does),
  // and the counters are reset by one fill.
  void SelectByHeap(std::vector<Hit>* out) {
    const auto offer = [&](int32_t o, Counter c) {
      const Hit hit{o, static_cast<int32_t>(c)};
      if (out->size() < k_) {
        out->push_back(hit);
        std::push_heap(out->begin(), out->end(), HitBefore);
      } else if (HitBefore(hit, out->front())) {
        std::pop_heap(out->begin(), out->end(), HitBefore);
        out->back() = hit;
        std::push_heap(out->begin(), out->end(), HitBefore);
      }
    };
    if (overflow_) {
      Counter* counters = counters_.data();
      for (std::size_t first = 0; first < n_; first += kScanBlock) {
        const std::size_t end = std::min(n_, first + kScanBlock);
        const Counter top = BlockMax(counters + first, end - first);
        if (top == 0 || (out->size() == k_ && static_cast<int32_t>(top) <= out->front().score))
          continue;
        for (std::size_t o = first; o < end; ++o)
          if (counters[o] != 0) offer(static_cast<int32_t>(o), counters[o]);
      }
      std::fill(counters_.begin(), counters_.end(), Counter{0});
    } else {
      ForEachCandidate(offer);
    }
    std::sort_heap(out->begin(), out->end(), HitBefore);
  }

  const InvertedIndex& index_;
  const CompiledBatch& compiled_;
  const int32_t base_;
  const CancelCheck cancel_;
  int64_t since_poll_ = 0;  // postings scanned since the last poll
  const std::size_t k_;
  const std::size_t n_;
  const bool keep_;
  bool clean_ = true;  // every counter zero: no query begun, or the last completed
  std::vector<Counter> counters_;
  std::vector<int32_t> touched_;
  std::size_t n_touched_ = 0;
  bool overflow_ = false;
  std::vector<uint32_t> histogram_;
  std::vector<int32_t> ties_;
  std::vector<Counter> block_max_;  // after an overflow, each block's largest counter
};

template <typename Counter>
void RunWorker(PartWork* work) noexcept {
  work->failure.Guard("a CPU engine worker", [work] {
    QueryScorer<Counter> scorer(*work);
    const int32_t n_queries = work->compiled->num_queries();
    while (!work->failure.failed()) {
      const int32_t q = work->next_query.fetch_add(1);
      if (q >= n_queries) break;
      if (work->cancel.requested() ||
          !scorer.Score(q, &(*work->per_query)[static_cast<std::size_t>(q)])) {
        return work->failure.Record(Status::Cancelled());
      }
    }
  });
}

template <typename Counter>
Status RunPart(PartWork* work, int32_t threads) {
  RunOnThreads(threads, [work] { RunWorker<Counter>(work); });
  return work->failure.Take();
}

// Searches the objects [base, base + size) with a batch whose slices hold
// only postings of those objects.  Hits carry ids relative to base.
Status SearchObjects(const InvertedIndex& index, const CompiledBatch& compiled, int32_t base,
                     int32_t size, int32_t k, int32_t threads, int64_t tile_option,
                     const PackedPostings* packed, const CancelCheck& cancel, TopKResults* out) {
  const int32_t n_queries = compiled.num_queries();
  std::vector<std::vector<Hit>> per_query(static_cast<std::size_t>(n_queries));
  if (size > 0 && compiled.total_postings > 0) {
    const std::size_t k_part =
        std::min<std::size_t>(static_cast<std::size_t>(k), static_cast<std::size_t>(size));
    const int64_t max_score =
        compiled.max_score.empty()
            ? 0
            : *std::max_element(compiled.max_score.begin(), compiled.max_score.end());
    const int width = CounterWidth(max_score);
    const int64_t tile =
        ChooseTileObjects(tile_option, n_queries, compiled.total_postings, size, width);
    if (tile > 0) {
      // A thread costs only a tile's counters; give each a few slices'
      // work.  A query's tiles are counted one after another, so a thread
      // more than the queries would only wait.
      const int64_t by_work = std::max<int64_t>(1, compiled.total_postings / 65536);
      const auto used = static_cast<int32_t>(
          std::max<int64_t>(1, std::min<int64_t>({threads, n_queries, by_work})));
      GENIE_RETURN_IF_ERROR(SearchObjectsByTiles(index, compiled, base, size,
                                                 static_cast<int32_t>(k_part), used, tile, width,
                                                 packed, cancel, &per_query));
    } else {
      PartWork work;
      work.index = &index;
      work.compiled = &compiled;
      work.base = base;
      work.size = size;
      work.k = k_part;
      work.per_query = &per_query;
      work.cancel = cancel;
      // A thread costs an array of size counters, zeroed: give each enough
      // postings to be worth that (and small batches no extra memory).
      const int64_t min_work = std::max<int64_t>(size / 16, 256);
      const int64_t by_work = std::max<int64_t>(1, compiled.total_postings / min_work);
      const auto used = static_cast<int32_t>(
          std::max<int64_t>(1, std::min<int64_t>({threads, n_queries, by_work})));
      work.keep_scratch = used == 1;
      Status status;
      switch (width) {
        case 1:
          status = RunPart<uint8_t>(&work, used);
          break;
        case 2:
          status = RunPart<uint16_t>(&work, used);
          break;
        default:
          status = RunPart<uint32_t>(&work, used);
          break;
      }
      GENIE_RETURN_IF_ERROR(status);
    }
  }

  TopKResults results;
  std::size_t total = 0;
  for (const auto& hits : per_query) total += hits.size();
  results.hits.reserve(total);
  results.query_offsets.reserve(static_cast<std::size_t>(n_queries) + 1);
  for (auto& hits : per_query) {
    results.hits.insert(results.hits.end(), hits.begin(), hits.end());
    results.query_offsets.push_back(static_cast<int64_t>(results.hits.size()));
    hits = {};
  }
  *out = std::move(results);
  return Status::Ok();
}

// The batch restricted to the postings of objects [begin, end).  A slice
// may span several keywords' lists; within each list object ids ascend, so
// the slice is cut at list boundaries and each piece narrowed by binary
// search.  This is multiple loading without copying the index: the CPU
// engine already shares the caller's host copy, and slicing a copy per part
// (InvertedIndex::SliceObjects) would cost a pass over every keyword of the
// index per part, where this costs only the lists the batch reads.
CompiledBatch RestrictToObjects(const InvertedIndex& index, const CompiledBatch& whole,
                                int32_t begin, int32_t end) {
  const Span<int64_t> offsets = index.keyword_offsets();
  const int32_t* postings = index.postings().data();
  CompiledBatch part;
  part.max_score = whole.max_score;  // still bounds every object of the part
  part.query_slice_offsets.reserve(whole.query_slice_offsets.size());
  part.slices.reserve(whole.slices.size());
  for (int32_t q = 0; q < whole.num_queries(); ++q) {
    for (int64_t s = whole.query_slice_offsets[q]; s < whole.query_slice_offsets[q + 1]; ++s) {
      const ListSlice& slice = whole.slices[static_cast<std::size_t>(s)];
      // The list holding slice.begin (lists are never empty), then each
      // following list the slice reaches.
      const int64_t* list = std::upper_bound(offsets.begin(), offsets.end(), slice.begin) - 1;
      for (int64_t b = slice.begin; b < slice.end; b = *++list) {
        const int32_t* first = postings + b;
        const int32_t* last = postings + std::min(list[1], slice.end);
        if (*first >= end || last[-1] < begin) continue;
        const int32_t* from = *first >= begin ? first : std::lower_bound(first, last, begin);
        const int32_t* to = last[-1] < end ? last : std::lower_bound(from, last, end);
        if (from == to) continue;
        part.slices.push_back({from - postings, to - postings, slice.weight});
        part.total_postings += to - from;
      }
    }
    part.query_slice_offsets.push_back(static_cast<int64_t>(part.slices.size()));
  }
  return part;
}

class CpuEngine final : public HostIndexEngine {
 public:
  explicit CpuEngine(const EngineOptions& options)
      : budget_(options.memory_budget_bytes),
        tile_option_(options.cpu_tile_objects),
        packed_option_(options.cpu_packed_postings),
        cancel_(options.cancel) {
    int32_t threads = options.threads;
    threads_ = ResolveThreads(threads);
    match_cancel_ = options.cancel;
  }

  genie_engine_kind kind() const override { return GENIE_ENGINE_CPU; }

  Status Upload(std::shared_ptr<const InvertedIndex> index) override {
    packed_.reset();
    return HostIndexEngine::Upload(std::move(index));
  }
  Status Drop() override {
    packed_.reset();
    return HostIndexEngine::Drop();
  }

  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    return SearchCancellable(batch, k, cancel_, out);
  }

  // Searches run concurrently, so each polls its own cancel check.
  Status SearchCancellable(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                           TopKResults* out) override {
    GENIE_RETURN_IF_ERROR(CheckSearch(k, out));
    try {
      return SearchChecked(batch, k, cancel, out);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the CPU engine");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("CPU engine failed: ") + e.what());
    }
  }

 private:
  Status SearchChecked(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                       TopKResults* out) {
    const InvertedIndex& index = *index_;
    // Compiling against the whole index validates the batch and checks the
    // score bound once, whatever the number of parts.
    CompiledBatch compiled;
    GENIE_RETURN_IF_ERROR(CompileBatchParallel(index, batch, threads_, &compiled, cancel));
    if (cancel.requested()) return Status::Cancelled();

    int32_t parts = 1;
    GENIE_RETURN_IF_ERROR(PlanParts(index, compiled, &parts));
    if (parts == 1) {
      const PackedPostings* packed = nullptr;
      GENIE_RETURN_IF_ERROR(PreparePacked(index, compiled, cancel, &packed));
      return SearchObjects(index, compiled, 0, index.num_objects(), k, threads_, tile_option_,
                           packed, cancel, out);
    }

    const auto ranges = PlanObjectParts(index.num_objects(), parts);
    // Merged part by part, so only one part's state and results are held.
    TopKResults merged;
    merged.query_offsets.assign(static_cast<std::size_t>(batch.n_queries) + 1, 0);
    for (const auto& range : ranges) {
      if (cancel.requested()) return Status::Cancelled();
      const CompiledBatch part_batch = RestrictToObjects(index, compiled, range.first, range.second);
      std::vector<TopKResults> pair(2);
      GENIE_RETURN_IF_ERROR(SearchObjects(index, part_batch, range.first,
                                          range.second - range.first, k, threads_, tile_option_,
                                          nullptr, cancel, &pair[1]));
      pair[0] = std::move(merged);
      MergePartResults(pair, {{0, 0}, range}, k, &merged);
    }
    *out = std::move(merged);
    return Status::Ok();
  }

  // With EngineOptions::cpu_packed_postings, the index's packed postings,
  // built the first time a batch over the whole index takes the tile order
  // with tiles of whole pack tiles, and kept with the index; *packed gets
  // them, or nullptr.  Searches may run concurrently (the genie service's
  // runners), so the one that builds them holds packed_mutex_ meanwhile.
  Status PreparePacked(const InvertedIndex& index, const CompiledBatch& compiled,
                       const CancelCheck& cancel, const PackedPostings** packed_out) {
    *packed_out = nullptr;
    if (!packed_option_ || !PackingPays(index)) return Status::Ok();
    std::lock_guard<std::mutex> lock(packed_mutex_);
    if (packed_ != nullptr) {
      *packed_out = packed_.get();
      return Status::Ok();
    }
    const int64_t max_score =
        *std::max_element(compiled.max_score.begin(), compiled.max_score.end());
    const int64_t tile = ChooseTileObjects(tile_option_, compiled.num_queries(),
                                           compiled.total_postings, index.num_objects(),
                                           CounterWidth(max_score));
    if (tile == 0 || tile % kPackObjects != 0) return Status::Ok();
    auto packed = std::make_unique<PackedPostings>();
    GENIE_RETURN_IF_ERROR(BuildPackedPostings(index, threads_, cancel, packed.get()));
    packed_ = std::move(packed);
    *packed_out = packed_.get();
    return Status::Ok();
  }

  // The fewest parts whose footprint fits the budget:
  //   ceil(index bytes / parts) + threads * PerThreadBytes(ceil(n / parts)).
  // This is GENIE's multiple-loading model (a part of the index plus the
  // part's search state), so a budget splits the CPU and GPU engines alike.
  // The CPU engine scans the shared index in place, so what it allocates is
  // only the second term.  Both terms shrink as parts grow, so a binary
  // search finds the fewest parts.
  Status PlanParts(const InvertedIndex& index, const CompiledBatch& compiled, int32_t* parts) const {
    *parts = 1;
    const int32_t n = index.num_objects();
    if (budget_ == 0 || n <= 1 || compiled.total_postings == 0) return Status::Ok();
    const int64_t max_score =
        *std::max_element(compiled.max_score.begin(), compiled.max_score.end());
    const int width = CounterWidth(max_score);
    const uint64_t histogram = max_score <= kMaxHistogramScore ? uint64_t(max_score) + 1 : 0;
    const uint64_t threads =
        static_cast<uint64_t>(std::max(1, std::min(threads_, compiled.num_queries())));
    const uint64_t index_bytes = index.MemoryBytes();
    auto footprint = [&](int64_t p) {
      const uint64_t objects = (uint64_t(n) + uint64_t(p) - 1) / uint64_t(p);
      return (index_bytes + uint64_t(p) - 1) / uint64_t(p) +
             threads * PerThreadBytes(objects, width, histogram);
    };
    if (footprint(1) <= budget_) return Status::Ok();
    if (footprint(n) > budget_) {
      return Status::OutOfMemory(
          "memory budget of " + std::to_string(budget_) + " bytes is too small for the CPU engine: " +
          "even one object per part needs " + std::to_string(footprint(n)) + " bytes");
    }
    int64_t lo = 2, hi = n;  // footprint(hi) fits
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (footprint(mid) <= budget_) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    *parts = static_cast<int32_t>(hi);
    return Status::Ok();
  }

  uint64_t budget_;
  int64_t tile_option_;
  bool packed_option_;
  std::mutex packed_mutex_;                 // packed_, while searches run
  std::unique_ptr<PackedPostings> packed_;  // of index_, or nullptr
  CancelCheck cancel_;
  int32_t threads_ = 1;
};

}  // namespace

std::unique_ptr<Engine> MakeCpuEngine(const EngineOptions& options) {
  return std::make_unique<CpuEngine>(options);
}

}  // namespace genie

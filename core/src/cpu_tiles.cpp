// The CPU engine's batch order (cpu_tiles.hpp).
//
// One query at a time, a query scatters its postings over counters for all
// the objects: 4.5 MB a thread at 4.5M objects, more than a core's L2, so
// every increment goes to the last-level cache.  On the 16-core GPU host
// (2 MB of L2 a core, 300 MB of L3) that ran at 5.2 G postings/s, against
// 8.7 G/s at 1M objects, whose counters fit the L2.  Here the objects are
// cut in tiles whose counters fit the L2, and every query of the batch
// counts its postings in one tile before any query moves to the next, so a
// query's state between tiles is small (a cursor per list and its best k
// hits) and no thread needs counters for all the objects.  Measured on that
// host (engine_bench, 1,024 LSH queries, 4.5M objects, 16 threads): 5.37 s
// one query at a time; tiles of 64K objects 3.08 s, 256K 2.75 s, 1M 3.22 s,
// 2M 3.95 s.  Smaller tiles would let queries share a tile's postings from
// the L3, but cut each list into short pieces the prefetchers follow
// poorly: on this project's 2-core machine tiles of 8K objects took three
// times as long as one query at a time.
//
// With EngineOptions::cpu_packed_postings a tile of whole pack tiles reads
// the packed postings (2 bytes each; the pack directory bounds each list's
// piece of the tile): 2.67 s against 3.48 s for the 4-byte ids in one run
// on that host (bench/engine-results.md).
//
// Each query keeps a cursor per run (its postings of one list; ids ascend)
// and its best k hits so far.  After a tile, the tile's counters are
// scanned for scores above the k-th best, which only rises; since tiles
// come in ascending object order, an object that only ties the k-th best
// comes after it and is never taken, which is the exact tie rule.
#include "cpu_tiles.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <thread>

#include "genie/packed_postings.hpp"
#include "genie/parallel.hpp"

namespace genie {
namespace {

// One thread's counters for a tile: in a core's L2 beside the streams of
// postings (256K objects of 1-byte counters; see above).
constexpr int64_t kTileCounterBytes = int64_t{256} << 10;
constexpr std::size_t kPrefetchRuns = 4;

// Postings [next, end) of one list, of one weight, and the id at next
// (kExhausted at end), so that a tile passes a run it has not reached
// without reading the index.
struct Run {
  int64_t next;
  int64_t end;
  int32_t weight;
  int32_t next_id;
  int32_t list;  // the keyword whose list holds the run
};
constexpr int32_t kExhausted = INT32_MAX;

struct QueryState {
  std::vector<Run> runs;
  // The best hits so far, at most k, as a heap by HitBefore: its front is
  // the worst of them.
  std::vector<Hit> best;
  // Tiles counted; the next tile of this query waits for it (another
  // thread may still count the one before).
  std::atomic<int64_t> tiles_done{0};
};

struct TileWork {
  const InvertedIndex* index;
  const CompiledBatch* compiled;
  int32_t base;
  int64_t size;
  std::size_t k;
  int64_t tile;
  int64_t tiles;
  const PackedPostings* packed;  // nullptr: read the 4-byte ids
  CancelCheck cancel;
  std::unique_ptr<QueryState[]> queries;
  // Work items in order: tile t's queries, then tile t + 1's.  A thread
  // takes the next one, so threads stay within about a tile of each other.
  std::atomic<int64_t> next_item{0};
  FirstFailure failure;
};

// The query's slices cut at list boundaries into runs of ascending ids.
// The slices of one list that CompileBatch cut at its split length are
// joined again: a tile then visits a query's runs, not its thousands of
// slices.
void BuildRuns(const InvertedIndex& index, const CompiledBatch& compiled, int32_t q,
               std::vector<Run>* runs) {
  const Span<int64_t> offsets = index.keyword_offsets();
  const int32_t* postings = index.postings().data();
  for (int64_t s = compiled.query_slice_offsets[q]; s < compiled.query_slice_offsets[q + 1]; ++s) {
    const ListSlice& slice = compiled.slices[static_cast<std::size_t>(s)];
    const int64_t* list = std::upper_bound(offsets.begin(), offsets.end(), slice.begin) - 1;
    for (int64_t b = slice.begin; b < slice.end; b = *++list) {
      const int64_t e = std::min(list[1], slice.end);
      if (!runs->empty() && runs->back().end == b && b != *list &&
          runs->back().weight == slice.weight) {
        runs->back().end = e;  // the same list, continued
      } else {
        runs->push_back({b, e, slice.weight, postings[b],
                         static_cast<int32_t>(list - offsets.begin())});
      }
    }
  }
}

template <typename Counter>
class TileCounter {
 public:
  explicit TileCounter(const TileWork& work)
      : work_(work), postings_(work.index->postings().data()), counters_(work.tile, 0) {}

  // Counts query state's postings in tile t, takes the objects that beat
  // its k-th best, and leaves the counters zero.
  void Count(int64_t t, QueryState* state) {
    const int64_t t0 = t * work_.tile;
    const int64_t width = std::min(work_.tile, work_.size - t0);
    const int64_t counted = work_.packed != nullptr ? CountPacked(t0, width, state)
                                                    : CountFull(t0, width, state);
    if (counted > 0) Select(t0, width, state);
  }

 private:
  // Visits the query's runs and returns the postings they advanced over.  A
  // run's piece of a tile is a short stream the hardware prefetchers pick
  // up late: a later run's first lines (in data, the ids the loop reads)
  // are asked for now.
  template <typename Id, typename Visit>
  static int64_t ForEachRun(QueryState* state, const Id* data, Visit&& visit) {
    int64_t counted = 0;
    Run* runs = state->runs.data();
    const std::size_t n_runs = state->runs.size();
    for (std::size_t r = 0; r < n_runs; ++r) {
      if (r + kPrefetchRuns < n_runs) {
        const Id* ahead = data + runs[r + kPrefetchRuns].next;
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + 64 / sizeof(Id));
      }
      Run& run = runs[r];
      const int64_t before = run.next;
      visit(run);
      counted += run.next - before;
    }
    return counted;
  }

  int64_t CountFull(int64_t t0, int64_t width, QueryState* state) {
    const int64_t first = int64_t{work_.base} + t0;
    const int64_t limit = first + width;
    Counter* counters = counters_.data();
    const int32_t* postings = postings_;
    return ForEachRun(state, postings, [&](Run& run) {
      if (run.next_id >= limit) return;
      // Fits: the weight is at most max_score, which picked Counter.
      const auto weight = static_cast<Counter>(run.weight);
      int64_t i = run.next;
      for (; i < run.end && postings[i] < limit; ++i) {
        Counter& c = counters[postings[i] - first];
        c = static_cast<Counter>(c + weight);
      }
      run.next = i;
      run.next_id = i < run.end ? postings[i] : kExhausted;
    });
  }

  // The same over packed postings: the tile is whole pack tiles (base 0),
  // and the pack directory says where each run leaves each of them, so the
  // loop reads 2 bytes a posting and compares nothing but its position.
  int64_t CountPacked(int64_t t0, int64_t width, QueryState* state) {
    const PackedPostings& packed = *work_.packed;
    const uint16_t* low = packed.low.data();
    const Span<int64_t> offsets = work_.index->keyword_offsets();
    const std::size_t row = static_cast<std::size_t>(packed.pack_tiles) + 1;
    const int64_t p0 = t0 >> kPackShift;
    const int64_t p1 = (t0 + width + kPackObjects - 1) >> kPackShift;
    Counter* counters = counters_.data();
    return ForEachRun(state, low, [&](Run& run) {
      if (run.next >= run.end) return;
      const auto weight = static_cast<Counter>(run.weight);
      const uint32_t* leaves = packed.directory.data() + static_cast<std::size_t>(run.list) * row;
      const int64_t list_begin = offsets[static_cast<std::size_t>(run.list)];
      int64_t i = run.next;
      for (int64_t p = p0; p < p1 && i < run.end; ++p) {
        const int64_t stop = std::min(run.end, list_begin + int64_t{leaves[p + 1]});
        Counter* pack_counters = counters + ((p - p0) << kPackShift);
        for (; i < stop; ++i) {
          Counter& c = pack_counters[low[i]];
          c = static_cast<Counter>(c + weight);
        }
      }
      run.next = i;
    });
  }

  void Select(int64_t t0, int64_t width, QueryState* state) {
    Counter* counters = counters_.data();
    std::vector<Hit>& best = state->best;
    const std::size_t k = work_.k;
    auto threshold = [&] { return best.size() < k ? 0 : best.front().score; };
    int32_t above = threshold();
    constexpr int64_t kChunk = 64;
    for (int64_t c0 = 0; c0 < width; c0 += kChunk) {
      const int64_t c1 = std::min(c0 + kChunk, width);
      Counter top = 0;  // a loop the compiler vectorises
      for (int64_t o = c0; o < c1; ++o) top = std::max(top, counters[o]);
      if (static_cast<int32_t>(top) <= above) continue;
      for (int64_t o = c0; o < c1; ++o) {
        const auto score = static_cast<int32_t>(counters[o]);
        if (score <= above) continue;
        const Hit hit{static_cast<int32_t>(t0 + o), score};
        if (best.size() < k) {
          best.push_back(hit);
          std::push_heap(best.begin(), best.end(), HitBefore);
        } else {
          std::pop_heap(best.begin(), best.end(), HitBefore);
          best.back() = hit;
          std::push_heap(best.begin(), best.end(), HitBefore);
        }
        above = threshold();
      }
    }
    std::fill(counters, counters + width, Counter{0});
  }

  const TileWork& work_;
  const int32_t* postings_;
  std::vector<Counter> counters_;
};

template <typename Counter>
void RunTileWorker(TileWork* work) noexcept {
  work->failure.Guard("a CPU engine worker", [work] {
    TileCounter<Counter> counter(*work);
    const int32_t n_queries = work->compiled->num_queries();
    const int64_t items = work->tiles * n_queries;
    while (!work->failure.failed()) {
      const int64_t item = work->next_item.fetch_add(1, std::memory_order_relaxed);
      if (item >= items) break;
      const int64_t t = item / n_queries;
      const auto q = static_cast<int32_t>(item % n_queries);
      QueryState& state = work->queries[static_cast<std::size_t>(q)];
      // Item (t - 1, q) was taken before this one and is being counted.
      while (state.tiles_done.load(std::memory_order_acquire) != t) {
        if (work->failure.failed()) return;
        std::this_thread::yield();
      }
      // An item counts about 6 postings an object of a tile (LSH): tens of
      // microseconds between polls.
      if (work->cancel.requested()) return work->failure.Record(Status::Cancelled());
      if (t == 0) BuildRuns(*work->index, *work->compiled, q, &state.runs);
      counter.Count(t, &state);
      state.tiles_done.store(t + 1, std::memory_order_release);
    }
  });
}

}  // namespace

int64_t DefaultTileObjects(int counter_width) { return kTileCounterBytes / counter_width; }

// The engine's own choice.  Tile by tile pays for queries that touch a good
// share of the objects (LSH: 6 postings an object a query), whose counters
// leave a core's L2.  A query of few postings is cheaper one at a time,
// where only the counters it touched are read back and reset (the tile
// order scans every counter of each tile the query reaches).  And a batch
// needs some queries to keep the threads busy, since a query's tiles are
// counted one after another.
int64_t ChooseTileObjects(int64_t option, int32_t n_queries, int64_t total_postings, int32_t size,
                          int counter_width) {
  constexpr int32_t kMinTiledQueries = 8;
  constexpr int64_t kMaxObjectsPerPosting = 8;  // a query's postings, at least size / 8
  if (option < 0) return 0;
  if (option > 0) return (option + 63) / 64 * 64;
  const int64_t tile = DefaultTileObjects(counter_width);
  const bool dense = total_postings * kMaxObjectsPerPosting >= int64_t{size} * n_queries;
  return n_queries >= kMinTiledQueries && dense && size >= 2 * tile ? tile : 0;
}

Status SearchObjectsByTiles(const InvertedIndex& index, const CompiledBatch& compiled,
                            int32_t base, int32_t size, int32_t k, int32_t threads,
                            int64_t tile_objects, int counter_width,
                            const PackedPostings* packed, const CancelCheck& cancel,
                            std::vector<std::vector<Hit>>* per_query) {
  const int32_t n_queries = compiled.num_queries();
  TileWork work;
  work.index = &index;
  work.compiled = &compiled;
  work.base = base;
  work.size = size;
  work.k = static_cast<std::size_t>(k);
  work.tile = std::max<int64_t>(64, tile_objects);
  work.tiles = (int64_t{size} + work.tile - 1) / work.tile;
  const bool packable = base == 0 && work.tile % kPackObjects == 0;
  work.packed = packable ? packed : nullptr;
  work.cancel = cancel;
  work.queries.reset(new QueryState[static_cast<std::size_t>(n_queries)]);
  for (int32_t q = 0; q < n_queries; ++q) work.queries[q].best.reserve(work.k);
  switch (counter_width) {
    case 1:
      RunOnThreads(threads, [&work] { RunTileWorker<uint8_t>(&work); });
      break;
    case 2:
      RunOnThreads(threads, [&work] { RunTileWorker<uint16_t>(&work); });
      break;
    default:
      RunOnThreads(threads, [&work] { RunTileWorker<uint32_t>(&work); });
      break;
  }
  GENIE_RETURN_IF_ERROR(work.failure.Take());
  for (int32_t q = 0; q < n_queries; ++q) {
    std::vector<Hit>& best = work.queries[q].best;
    std::sort_heap(best.begin(), best.end(), HitBefore);
    (*per_query)[static_cast<std::size_t>(q)] = std::move(best);
  }
  return Status::Ok();
}

}  // namespace genie

// The GPU engine's class and the host-side pieces its files share.  Internal
// to gpu/src.  The engine is split by role:
//   gpu_engine.cpp           the driver: creation, upload, search, planning of
//                            query groups, the design notes (invariants)
//   host_stage.cpp           a call's host work: queries compiled and
//                            prepared, before the call takes the device
//   multiple_loading.cpp     parts of the index copied on a second stream
//   packed_postings.cpp      the packed device form of the List Array (tiled)
//   pipeline.cpp             large resident tiled batches, compiled piece by
//                            piece beside the device work
//   query_groups.cpp         a group's device work and the selection tail
//                            (sort, emit, fetch) shared by the matchers
//   matcher_faithful.cpp     faithful c-PQ    (kernels: matcher_faithful.cu)
//   matcher_tiled.cpp        tiled c-PQ       (kernels: matcher_tiled.cu)
//   matcher_count_table.cpp  the count table  (kernels: matcher_count_table.cu)
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "genie/engine.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/gpu_stats.hpp"
#include "genie/index.hpp"
#include "genie/packed_postings.hpp"
#include "genie/parallel.hpp"
#include "genie/query.hpp"
#include "kernels.hpp"
#include "profiler.hpp"

namespace genie {
namespace gpu {

using Matcher = GpuMatcher;

inline const char* MatcherName(Matcher m) {
  switch (m) {
    case Matcher::kTiled: return "tiled";
    case Matcher::kFaithful: return "faithful";
    case Matcher::kCountTable: return "count-table";
  }
  return "?";
}

// GpuEngineOptions, checked (the hash-table slots a power of two).
struct Config {
  Matcher matcher = Matcher::kTiled;
  bool exact_ties = true;
  uint32_t forced_ht_slots = 0;
  int32_t tile_words = kDefaultTileWords;
  GpuPostings postings = GpuPostings::kAuto;
  bool profile = false;
  int64_t set_match_min_postings = int64_t{1} << 14;
};

constexpr uint64_t kGroupFixedBytes = 16ull << 20;  // CUB temp slack, small arrays
constexpr std::size_t kMaxGroupQueries = 32768;
constexpr int64_t kMaxParts = 1 << 16;
// Resident tiled searches of at least 2 x this many queries are pipelined,
// the host compiling piece i + 1 while the device matches piece i
// (pipeline.cpp): a first piece of kPipelineFirst queries, more while they
// hold fewer than kPipelineFirstRanges ranges (at most a quarter of
// kPipelineQueries), then twice as many each time up to this many (the
// last piece up to half as many again).
constexpr int32_t kPipelineQueries = 256;
constexpr int32_t kPipelineFirst = 16;
constexpr int64_t kPipelineFirstRanges = 4096;
// Host work of at most this many keyword ranges (compiling) or slices
// (preparing) runs on the calling thread, not on the pool.
constexpr int64_t kInlineHostWork = 1024;
// The tiled matcher's list mode keeps tiles * k entries a query: up to 8 MiB.
constexpr int64_t kListModeMaxSlots = int64_t{1} << 20;

inline int32_t BitsFor(int64_t max_score) {
  int32_t b = 1;
  while (b < 31 && ((int64_t{1} << b) - 1) < max_score) ++b;
  return b;
}

// The tiled matcher's counter width: BitsFor rounded up to a power of two,
// so that its kernel finds a counter by shifts (a tile then holds as many
// objects as with the exact width, or at most a third fewer).
inline int32_t TiledBitsFor(int64_t max_score) {
  int32_t bits = 1;
  while (bits < BitsFor(max_score)) bits *= 2;
  return bits;
}

inline uint64_t NextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The index (or one part of it) as the device sees it: the 4-byte List
// Array, or (resident, tiled matcher) the packed one, or both.
struct DeviceIndexView {
  const int32_t* postings = nullptr;  // device List Array, 4-byte ids (nullptr: not on the device)
  const uint16_t* packed = nullptr;   // device List Array, packed (genie/packed_postings.hpp), or nullptr
  const uint32_t* pack_dir = nullptr; // device pack directory (with packed)
  int32_t pack_tiles = 0;
  int32_t num_objects = 0;
  Span<int64_t> keyword_offsets;      // host Position Map (tiled matcher cuts slices at lists)
};

// A run of one keyword list (list) with one weight: List Array positions [begin, end).
struct Segment {
  int64_t begin;
  int64_t end;
  int64_t list;
  int32_t weight;
};

// The tiled matcher's object tile for counters of `bits` bits.  With packed
// postings a tile must lie inside one 65,536-object pack tile: its object
// count is then the largest power of two <= 65,536 that the words hold, and
// the words are cut to what it needs (a multiple of 512, one row per warp lane).
struct TileGeometry {
  int32_t tile_words;
  int32_t tile_objects;
};
inline TileGeometry TileFor(int32_t config_words, int32_t bits, bool packed) {
  const int32_t per_word = 32 / bits;
  if (!packed) return {config_words, config_words * per_word};
  int32_t objects = 1;
  while (objects < (1 << 16) && static_cast<int64_t>(objects) * 2 <= int64_t{config_words} * per_word) {
    objects *= 2;
  }
  const int32_t words = static_cast<int32_t>(RoundUp((objects + per_word - 1) / per_word, 512));
  return {words, objects};
}

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
// split_length: CompileBatch's (GpuEngine::SplitLength).
Status CompileQueries(const InvertedIndex& index, const genie_query_batch& batch,
                      int64_t split_length, int threads, const CancelCheck& cancel,
                      CompiledQueries* out);
// The same for queries [q_begin, q_end) of a batch whose offsets are
// checked (ValidateBatchOffsets): each chunk's CompileBatch checks the rest.
Status CompileQueryRange(const InvertedIndex& index, const genie_query_batch& batch,
                         int32_t q_begin, int32_t q_end, int64_t split_length, int threads,
                         const CancelCheck& cancel, CompiledQueries* out);

// How many queries a host task takes when work (ranges or slices) over
// queries is shared by threads: a few tasks a thread, none too small, none
// so large that a cancel (checked between tasks) waits long for it.
int64_t QueriesPerTask(int64_t queries, int64_t work, int threads);

// Per query: the score bound the counters are sized from, and (tiled) the
// list runs.  The bound is min(CompileBatch's, the sum of the run weights):
// an object occurs at most once in a run, so both bound every score.
// The list runs of every query (tiled), flat in query order as the device
// takes them (arrays of the Segment fields).
struct FlatRuns {
  std::vector<int64_t> offsets;     // per query: its first run (num_queries + 1)
  std::vector<int64_t> begin;       // List Array position
  std::vector<int32_t> length;      // postings
  std::vector<int32_t> weight;
  std::vector<int64_t> list;        // the keyword list
  std::vector<int64_t> list_begin;  // where that list starts (packed: its directory's base)
};
struct Prepared {
  std::vector<int64_t> max_score;
  std::vector<int64_t> num_runs;
  FlatRuns runs;  // keep_runs only
};
Status Prepare(const CompiledQueries& cq, Span<int64_t> offs, bool keep_runs, int threads,
               const CancelCheck& cancel, Prepared* out);

// The lock of CUDA ordinal device's calls, one a device for the process.
std::timed_mutex& DeviceCallLock(int device);

class GpuEngine final : public Engine {
 public:
  GpuEngine(int device, const EngineOptions& options, const Config& config)
      : device_(device),
        budget_option_(options.memory_budget_bytes),
        config_(config),
        threads_(std::min(ResolveThreads(options.threads), 64)),
        engine_cancel_(options.cancel),
        device_lock_(DeviceCallLock(device)),
        cancel_(options.cancel),
        profile_(config.profile ? ProfileMode::kPhases : ProfileMode::kOff) {}

  ~GpuEngine() override;

  Status Init();

  genie_engine_kind kind() const override { return GENIE_ENGINE_GPU; }

  Status Upload(std::shared_ptr<const InvertedIndex> index) override;

  Status Drop() override;

  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    return SearchWith(batch, k, engine_cancel_, out);
  }
  // Search polling the call's own check instead of the engine's (a device
  // group passes each call's own down, so that one withdrawn call stops
  // while another goes on).
  Status SearchCancellable(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                           TopKResults* out) override {
    return SearchWith(batch, k, cancel, out);
  }
  // Calls may come from several threads at once: each does its host stage
  // (HostStage) on its own, then takes the device one call at a time
  // (device_lock_), so that a call queued behind another is ready to
  // launch when the device is free.
  bool ConcurrentSearches() const override { return true; }
  // Set predicates (set_match.cu): on the device for long lists.
  Status MatchSet(SetPredicate predicate, Span<int32_t> keywords, Span<int32_t> object_sizes,
                  std::vector<int32_t>* out) override;

  // (Under the device's lock: another thread's search may be writing them.)
  SearchStats stats() const {
    std::lock_guard<std::timed_mutex> device(device_lock_);
    return stats_;
  }
  void set_profile(ProfileMode mode) {
    std::lock_guard<std::timed_mutex> device(device_lock_);
    profile_ = mode;
  }
  void set_set_match_min_postings(int64_t postings) {
    std::lock_guard<std::timed_mutex> device(device_lock_);
    config_.set_match_min_postings = postings;
  }

 private:
  void ReleaseAll();

  void ReleaseParts();

  // Status::Cancelled() when the caller's cancel callback asks (polled between
  // query groups, between object parts and before blocking synchronisations).
  Status CheckCancel() const { return cancel_.requested() ? Status::Cancelled() : Status::Ok(); }

  // The device-memory budget for the index plus a batch's state.
  Status EffectiveBudget(uint64_t* budget);

  // A resident tiled call's host work, done before it takes the device:
  // its queries compiled and prepared (at 64 draws a query, 55% of a
  // 32-query call: bench/batch-draws-h200.txt).  Reads only the index,
  // resident_, the matcher and threads_, which change only in Upload and
  // Drop, never beside a search.
  struct HostStage {
    bool ready = false;
    CompiledQueries compiled;
    Prepared prep;
    double compile_ms = 0, prepare_ms = 0;  // for the profile
  };
  // Whether a call of n queries takes the resident tiled path whose host
  // work HostStage holds (below the pipelined search's size).
  bool TakesHostStage(int32_t n_queries) const;
  // threads: threads_, or 1 for a call beside others (CallUnderWay)
  Status RunHostStage(const genie_query_batch& batch, int threads, const CancelCheck& cancel,
                      HostStage* out) const;

  Status SearchWith(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel, TopKResults* out);
  // The device's lock for a call whose check is cancel: Cancelled() when
  // the check asks while the call waits for another's device work (polled
  // every few milliseconds: a pipelined or streamed call holds it long).
  Status TakeDevice(const CancelCheck& cancel, std::unique_lock<std::timed_mutex>* lock);
  Status SearchImpl(const genie_query_batch& batch, int32_t k, HostStage* host, TopKResults* out);

  static void Assemble(int32_t nq, std::vector<std::vector<Hit>>* per_query, TopKResults* out);

  // ---- multiple loading ----------------------------------------------------

  static uint64_t PartPostings(const InvertedIndex& index, int32_t begin, int32_t end);

  Status SearchParts(const genie_query_batch& batch, int32_t k, uint64_t avail,
                     TopKResults* out);
  // SearchParts in one form: packed parts (2 bytes a posting, as the
  // resident packed form) or 4-byte ones.
  Status SearchPartsAs(const genie_query_batch& batch, int32_t k, uint64_t avail, bool packed,
                       TopKResults* out);
  // Whether this engine holds postings packed where it can (the tiled
  // matcher, and GpuPostings::kPacked, or kAuto where packing pays).
  bool PacksPostings(const InvertedIndex& index) const;

  // ---- planning ------------------------------------------------------------

  Matcher RouteOf(int64_t max_score) const {
    if (config_.matcher == Matcher::kCountTable || max_score > kCpqMaxScore) {
      return Matcher::kCountTable;
    }
    return config_.matcher;
  }

  // Tiles for the widest counters among the batch's c-PQ queries (packed: of
  // the resident packed postings' geometry).
  // tile_words: the call's (SmallGridTileWords), 0 for the configured one.
  int32_t TileCount(int32_t n, const std::vector<int64_t>& max_score, bool packed,
                    int32_t tile_words = 0) const;
  // The tiled matcher's words a tile for this call: the configured size,
  // halved while a small call's grid and lists stay small (list mode).
  int32_t SmallGridTileWords(int32_t n, const Prepared& prep, const std::vector<int32_t>& cpq, bool packed,
                             int32_t k) const;

  // The 4-byte List Array on the device beside the packed one, for the
  // queries the count table takes: uploaded on first need and kept (its
  // bytes then come off *avail); GENIE_DEVICE_OUT_OF_MEMORY when both forms
  // would take more than ResidentLimit of the budget.
  Status EnsureFullPostings(DeviceIndexView* view, uint64_t* avail);

  // Upload of the packed form (Upload chose it).
  Status UploadPacked();

  // The largest device form kept resident under `budget` (EffectiveBudget's):
  // ResidentIndexLimit with an explicit budget, else half of it.
  uint64_t ResidentLimit(uint64_t budget) const {
    return budget_option_ > 0 ? ResidentIndexLimit(budget) : budget / 2;
  }

  uint64_t ResidentBytes() const {
    return resident_postings_.bytes() + packed_postings_.bytes() + pack_dir_.bytes();
  }

  // list: the tiled matcher's list mode (TiledParams::list_mode), tiles * k
  // slots a query.
  uint32_t HtCapacity(Matcher m, int32_t k, int64_t max_score, int32_t tiles, bool list = false) const;

  uint64_t QueryBytes(const CompiledQueries& cq, const Prepared& prep, int32_t q, int32_t n,
                      int32_t k, int32_t tiles, Matcher route, bool list = false) const;

  // Whether the tiled matcher runs in list mode (TiledParams::list_mode):
  // unless the lists of tiles * k slots a query would be too long, where
  // the Gate's threshold keeps the tables short.
  bool ListMode(int32_t tiles, int32_t k) const;

  Status PlanGroups(const std::vector<int32_t>& queries, const std::vector<uint64_t>& bytes,
                    uint64_t avail, std::vector<std::vector<int32_t>>* groups);

  // ---- one (part of the) index, all queries ----------------------------------

  Status RunQueries(const DeviceIndexView& view, const CompiledQueries& cq, int32_t k,
                    uint64_t avail, std::vector<std::vector<Hit>>* per_query);

  // RunQueries after Prepare.
  Status RunPrepared(const DeviceIndexView& index_view, const CompiledQueries& cq,
                     const Prepared& prep, int32_t k, uint64_t avail,
                     std::vector<std::vector<Hit>>* per_query);

  // How CompileBatch cuts the lists: the tiled matcher takes whole spans
  // (it cuts them at its tiles, and Prepare would only join the slices
  // again: at 4.5M objects the index's 4,096-posting slices made 17 per
  // keyword); the others balance blocks over split_length slices (III-B).
  int64_t SplitLength(const InvertedIndex& index) const {
    return config_.matcher == Matcher::kTiled ? kUnsplitSlices
                                              : static_cast<int64_t>(index.split_length());
  }

  // Slices reach the scan kernels at most this long (BuildWork cuts them):
  // the index's split_length, since the tiled matcher's compilation leaves
  // spans whole, and a block takes at most kSlicesPerBlock slices.
  int64_t DeviceSliceLength() const {
    return std::min<int64_t>(kMaxDevSlice, std::max<int32_t>(index_->split_length(), 1));
  }

  // The resident index's view (SearchImpl, SearchPipelined).
  DeviceIndexView ResidentView() const;

  // Multiple loading, in the room the resident index leaves, for a batch one
  // of whose queries' state does not fit beside the index whole.
  Status SearchPartsBesideResident(const genie_query_batch& batch, int32_t k, uint64_t budget,
                                   TopKResults* out);
  // Resident, tiled, a large batch: compilation overlapped with the device
  // work, piece by piece (pipeline.cpp).
  Status SearchPipelined(const genie_query_batch& batch, int32_t k, uint64_t budget,
                         TopKResults* out);

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

  Status UploadWork(const Work& work, DeviceWork* out);

  Status BuildWork(const CompiledQueries& cq, const std::vector<int32_t>& group, Work* work);

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
  // may_defer: as FetchHits's.
  Status SortEmitFetch(Candidates* cand, const std::vector<int32_t>& group, int32_t k,
                       std::vector<std::vector<Hit>>* per_query, bool may_defer = false);
  // A group's answers on the device: each query's hit count, then k hits a
  // query at hits_at, the layout of the pinned slot they are copied into, so
  // that one copy brings both back (a small call's copies are their fixed cost).
  struct DeviceHits {
    DeviceMemory memory;
    std::size_t hits_at = 0;
    Status Allocate(int32_t num_queries, int32_t k) {
      const std::size_t count_bytes = static_cast<std::size_t>(num_queries) * sizeof(int32_t);
      hits_at = (count_bytes + 15) / 16 * 16;
      return memory.Allocate(hits_at + static_cast<std::size_t>(num_queries) * k * sizeof(DevHit), "results");
    }
    int32_t* counts() const { return static_cast<int32_t*>(memory.get()); }
    DevHit* hits() const { return reinterpret_cast<DevHit*>(static_cast<char*>(memory.get()) + hits_at); }
  };
  // Each query's first k hits (group order) from the device into per_query.
  // may_defer: the group's hits are final (no query of it is redone by the
  // count table after an overflow), so that while defer_fetch_ is set they
  // may land after the call returns (CollectHits).
  Status FetchHits(const DeviceHits& found, const std::vector<int32_t>& group, int32_t k,
                   std::vector<std::vector<Hit>>* per_query, bool may_defer = false);

  Status FetchOverflow(const DeviceArray<int32_t>& overflow, const std::vector<int32_t>& group,
                       std::vector<int32_t>* overflowed);

  // A group's hits on their way back: the copies queued into a pinned slot,
  // read into per_query by CollectHits.  While defer_fetch_ is set (the
  // pipelined search), FetchHits leaves them pending, so that the host
  // queues the next piece's work before it waits for this one's.
  struct PendingHits {
    PinnedSlot* slot = nullptr;  // counts at 0, hits at hits_at
    std::size_t hits_at = 0;
    std::vector<int32_t> group;
    int32_t k = 0;
    std::vector<std::vector<Hit>>* per_query = nullptr;
  };
  // Waits for the first count pending fetches (oldest first) and fills their
  // per_query.
  Status CollectHits(std::size_t count);
  // Drops every pending fetch (after an error: the caller synchronizes first).
  void DiscardHits();
  Status Deliver(PendingHits* pending);

  // The c-PQ state every c-PQ matcher has: ZipperArrays, AuditThresholds,
  // hash tables, overflow flags.
  struct GateBuffers {
    DeviceArray<QueryParams> queries;
    DeviceArray<int32_t> za, at, overflow;
    DeviceArray<unsigned long long> ht;
  };

  // The Gate's buffers for a group.  d_params: the group's QueryParams
  // already on the device (nullptr: uploaded here).  with_gate false (the
  // tiled list mode with its one-block selection): only the tables, which
  // the kernels then use without ZipperArray, AuditThreshold or overflow,
  // and uncleared (the tiled kernel writes every slot the selection reads).
  Status AllocateGate(GateBuffers* gb, const std::vector<QueryParams>& params, int64_t za_total,
                      int64_t ht_total, int32_t k, GateState* gate, const QueryParams* d_params = nullptr,
                      bool with_gate = true);

  Status RunFaithfulGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                          const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                          std::vector<std::vector<Hit>>* per_query,
                          std::vector<int32_t>* overflowed);

  Status RunTiledGroup(const DeviceIndexView& view, const Prepared& prep,
                       const std::vector<int32_t>& group, int32_t k, bool list, int32_t tile_words,
                       std::vector<std::vector<Hit>>* per_query,
                       std::vector<int32_t>* overflowed);

  Status RunCountGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                       const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                       std::vector<std::vector<Hit>>* per_query);
  // Slices a query of a count-table group of g queries over n objects is
  // selected on (LaunchCountSelectSpread), or 1: a block a query.
  int32_t CountSlices(int32_t n, int32_t g) const;

  const int device_;
  const uint64_t budget_option_;
  Config config_;  // set_match_min_postings may change (SetSetMatchMinPostings)
  const int threads_;  // host threads for compiling and preparing batches
  const CancelCheck engine_cancel_;  // the engine's (EngineOptions::cancel)
  // The device's call lock (DeviceCallLock), held by Upload, Drop,
  // MatchSet, a search past its host stage and the setters: one call at a
  // time on the device, whichever engine of the process makes it (each
  // sizes its state from the memory the device has free, and its scope's
  // end waits for the whole device).  index_ and resident_ are read
  // outside it: only Upload and Drop write them, never beside a search (the
  // C API's and a device group's exclusive locks).
  std::timed_mutex& device_lock_;
  CancelCheck cancel_;  // the check of the call holding device_lock_
  std::shared_ptr<const InvertedIndex> index_;
  DeviceArray<int32_t> resident_postings_;
  DeviceArray<uint16_t> packed_postings_;  // genie/packed_postings.hpp (empty: not packed)
  DeviceArray<uint32_t> pack_dir_;
  DeviceArray<int32_t> set_sizes_;  // object sizes for kContainedBy, uploaded on first need
  bool resident_ = false;
  // Multiple loading: the parts of the index (host, page-locked), cached,
  // and, for packed parts, each part's packed postings (page-locked; the
  // 4-byte part then only serves EnsureFullPostings).
  int32_t part_count_ = 0;
  bool parts_packed_ = false;
  std::vector<std::pair<int32_t, int32_t>> part_ranges_;
  std::vector<std::unique_ptr<InvertedIndex>> parts_;
  std::vector<PackedPostings> part_packed_;
  std::vector<HostRegistration> part_pins_;
  // The packed part being matched (else nullptr), and its 4-byte ids on the
  // device when a query needs them (EnsureFullPostings; freed after the part).
  const InvertedIndex* current_part_ = nullptr;
  DeviceArray<int32_t> part_postings_;
  Stream compute_stream_, copy_stream_;
  int32_t sm_count_ = 1;  // the device's multiprocessors
  // EffectiveBudget's last cudaMemGetInfo, when and with what resident
  uint64_t mem_info_free_ = 0, mem_info_total_ = 0, mem_info_ours_ = ~uint64_t{0};
  std::chrono::steady_clock::time_point mem_info_time_{};
  Event copy_done_[2], compute_done_[2];
  PinnedPool pinned_;  // staging of uploads and of fetched hits
  std::vector<PendingHits> pending_hits_;
  bool defer_fetch_ = false;
  SearchStats stats_;
  ProfileMode profile_;  // how the following searches are timed
  Profiler prof_;
};

}  // namespace gpu
}  // namespace genie

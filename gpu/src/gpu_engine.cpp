// The CUDA engine: device-resident List Array, c-PQ matchers (faithful and
// tiled), the count-table baseline, and multiple loading.  This file is the
// driver (creation, upload, search, query groups); gpu_engine_impl.hpp lists
// the files of the other roles, one per matcher.
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
//   The tiled matcher rounds b up to a power of two (TiledBitsFor), so that
//   its count loop finds a counter by shifts and masks.
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
//   CPU engines' hit for hit.  exact_ties = false keeps the paper's pure
//   selection instead (entries >= AT - 1, ties arbitrary).  Tiled: each tile
//   inserts its own top-k (lowest ids first among ties) restricted to counts
//   >= AT - 1, which provably contains the global top-k with its exact
//   tie-breaking; the entries >= max(AT - 1, 1) are sorted.  Count table:
//   radix selection of the k-th count T, then everything above T and the
//   first ties at T in id order.  All three sort their candidates by (score
//   desc, object asc) with CUB's segmented sort and cut to k.
//
// * Packed postings (genie/packed_postings.hpp).  With the tiled matcher the
//   resident index is held as 16-bit ids local to 65,536-object pack tiles
//   plus each list's pack directory, where that pays; a kernel tile then lies
//   inside one pack tile.  The 4-byte List Array is uploaded beside it only
//   when a query needs the count table (EnsureFullPostings).
//
// * Pipelined search (pipeline.cpp).  A resident tiled search of at least
//   2 x kPipelineQueries queries is matched piece by piece while a helper
//   thread compiles the next piece; only the calling thread touches the device.
//   A piece's work is queued before the host waits for the previous piece's
//   hits (list mode: no query is redone after an overflow), so the device
//   runs the pieces back to back.
//
// * The host's side of a call.  Uploads and fetched hits go through pinned
//   slots the engine keeps (PinnedPool): a copy from pageable memory blocks
//   the host until the stream ahead of it drains, and pinning per call costs
//   milliseconds.  A small batch (kInlineHostWork) compiles and prepares on
//   the calling thread: waking the pool costs more than the work.
//
// * Calls side by side (host_stage.cpp).  A resident tiled call below the
//   pipelined size compiles and prepares its queries before it takes the
//   device (DeviceCallLock, one for the process a device), so that calls
//   from several threads (the genie service's runners) overlap one call's
//   host work with another's kernels; everything that touches the device
//   or the engine's mutable state runs under the lock, one call at a time,
//   with that call's cancel check, which is also polled while it waits.
//   A call that starts beside others on its device compiles on its own
//   thread, not the pool (CallUnderWay).
//
// * Multiple loading.  The index is uploaded when it leaves the room a
//   batch's state needs (ResidentLimit: under an explicit budget an eighth
//   of it, 24 MiB to half, ResidentIndexLimit; query groups fit a batch into
//   it, and streaming copies the whole index every call, so a resident index
//   with small groups is the faster of the two; else half of the budget,
//   most of the free memory).  Otherwise (or when one query's state does not
//   fit beside it: then in the room the index leaves, and a query whose state
//   does not fit beside even a small part gets the device's out-of-memory) the
//   objects are split into parts (PlanObjectParts + SliceObjects, cached, page
//   locked), part i + 1 is copied on a second stream while part i is matched,
//   and the per-part top-k are merged (MergePartResults).  Query groups are
//   sized so that the index (or two part buffers) plus the groups' state fit
//   the budget.  All device memory is RAII: freed after each group, on every
//   error path, on Drop and on destruction.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/gpu_stats.hpp"
#include "genie/multi_device.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"
#include "kernels.hpp"
#include "genie/packed_postings.hpp"

namespace genie {
namespace gpu {

GpuEngine::~GpuEngine() {
  DeviceGuard guard;
  (void)guard.Enter(device_);
  ReleaseAll();
  DiscardHits();
  pinned_.Reset();
  copy_done_[0].Reset();
  copy_done_[1].Reset();
  compute_done_[0].Reset();
  compute_done_[1].Reset();
  copy_stream_.Reset();
  compute_stream_.Reset();
}

Status GpuEngine::Init() {
  DeviceGuard guard;
  GENIE_RETURN_IF_ERROR(guard.Enter(device_));
  GENIE_RETURN_IF_ERROR(compute_stream_.Create());
  GENIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  GENIE_RETURN_IF_ERROR(copy_stream_.Create());
  for (int i = 0; i < 2; ++i) {
    GENIE_RETURN_IF_ERROR(copy_done_[i].Create());
    GENIE_RETURN_IF_ERROR(compute_done_[i].Create());
  }
  return Status::Ok();
}

Status GpuEngine::Upload(std::shared_ptr<const InvertedIndex> index) {
  if (index == nullptr) return Status::InvalidArgument("cannot upload a NULL index");
  try {
    std::unique_lock<std::timed_mutex> device;
    GENIE_RETURN_IF_ERROR(TakeDevice(engine_cancel_, &device));
    cancel_ = engine_cancel_;
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    ReleaseAll();
    GENIE_RETURN_IF_ERROR(CheckCancel());
    index_ = std::move(index);
    std::shared_ptr<const InvertedIndex> kept = index_;
    const Span<int32_t> postings = index_->postings();
    const uint64_t bytes = postings.size() * sizeof(int32_t);
    uint64_t budget = 0;
    GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
    resident_ = false;
    const bool pack = bytes > 0 && PacksPostings(*index_);
    const uint64_t packed_bytes =
        pack ? postings.size() * sizeof(uint16_t) + PackDirectoryEntries(*index_) * 4 : 0;
    if (bytes == 0) {
      resident_ = true;
    } else if (pack && packed_bytes <= ResidentLimit(budget)) {
      Status status = UploadPacked();
      if (status.code() == GENIE_DEVICE_OUT_OF_MEMORY) {
        ReleaseAll();  // multiple loading
        index_ = std::move(kept);
        return Status::Ok();
      }
      if (!status.ok()) {
        ReleaseAll();
        return status;
      }
      resident_ = true;
    } else if (!pack && bytes <= ResidentLimit(budget)) {
      Status status = resident_postings_.Allocate(postings.size(), "the List Array");
      if (status.code() == GENIE_DEVICE_OUT_OF_MEMORY) return Status::Ok();  // multiple loading
      GENIE_RETURN_IF_ERROR(status);
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(resident_postings_.get(), postings.data(), bytes,
                                                 cudaMemcpyHostToDevice,
                                                 compute_stream_.get()));
      if (cancel_.requested()) {
        ReleaseAll();  // waits for the copy before the device memory goes
        return Status::Cancelled();
      }
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

Status GpuEngine::Drop() {
  try {
    std::lock_guard<std::timed_mutex> device(device_lock_);
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    ReleaseAll();
    return Status::Ok();
  } catch (...) {
    return Status::Internal("unexpected exception dropping the index");
  }
}

namespace {

// What the process keeps a CUDA ordinal: its call lock and its search calls
// under way (ordinals beyond the table share an entry: correct, only less
// parallel).
struct DeviceCalls {
  std::timed_mutex lock;
  std::atomic<int32_t> under_way{0};
};

DeviceCalls& CallsOn(int device) {
  static DeviceCalls table[64];
  return table[static_cast<unsigned>(device) % 64];
}

// A search call of the process's GPU engines on one device, from its start
// to its end; others: how many were under way on the device when it
// started.  A call beside others does its host stage on its own thread:
// the calls are the parallelism then (the genie service's runners), and
// waking pool threads for each one's few hundred microseconds cost the
// loaded host more CPU than it saved (bench/service-inline-h200.txt: every
// host stage inline; bench/service-under-way-h200.txt: this rule).  A lone
// call, or one per device of a batch split over a device group, keeps the
// pool.  (Read once, at the start: a call that starts just before another
// ends stays on its thread.)
class CallUnderWay {
 public:
  explicit CallUnderWay(int device)
      : count_(CallsOn(device).under_way), others_(count_.fetch_add(1, std::memory_order_relaxed)) {}
  ~CallUnderWay() { count_.fetch_sub(1, std::memory_order_relaxed); }
  CallUnderWay(const CallUnderWay&) = delete;
  CallUnderWay& operator=(const CallUnderWay&) = delete;
  int32_t others() const { return others_; }

 private:
  std::atomic<int32_t>& count_;
  int32_t others_;
};

}  // namespace

std::timed_mutex& DeviceCallLock(int device) { return CallsOn(device).lock; }

Status GpuEngine::TakeDevice(const CancelCheck& cancel, std::unique_lock<std::timed_mutex>* lock) {
  std::unique_lock<std::timed_mutex> held(device_lock_, std::defer_lock);
  while (!held.try_lock_for(std::chrono::milliseconds(5))) {
    if (cancel.requested()) return Status::Cancelled();
  }
  *lock = std::move(held);
  return Status::Ok();
}

Status GpuEngine::SearchWith(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                             TopKResults* out) {
  if (out == nullptr) return Status::InvalidArgument("results output is NULL");
  GENIE_RETURN_IF_ERROR(ValidateK(k));
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded to the engine");
  const auto start = std::chrono::steady_clock::now();
  try {
    // Before the device is ours: another call's kernels may be running.
    const CallUnderWay under_way(device_);
    HostStage host;
    if (TakesHostStage(batch.n_queries))
      GENIE_RETURN_IF_ERROR(RunHostStage(batch, under_way.others() > 0 ? 1 : threads_, cancel, &host));
    std::unique_lock<std::timed_mutex> device;
    GENIE_RETURN_IF_ERROR(TakeDevice(cancel, &device));
    cancel_ = cancel;
    stats_ = SearchStats();
    stats_.matcher = MatcherName(config_.matcher);
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    DeviceBlockScope blocks;  // the search's transient buffers are reused
    DeviceMemory::ResetPeak();
    prof_.Start(profile_, compute_stream_.get());
    if (host.ready) {
      prof_.Add("compile", host.compile_ms);
      prof_.Add("prepare", host.prepare_ms);
    }
    stats_.index_device_bytes = ResidentBytes();
    TopKResults results;
    Status status = SearchImpl(batch, k, &host, &results);
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

void GpuEngine::ReleaseAll() {
  resident_postings_.Reset();
  packed_postings_.Reset();
  pack_dir_.Reset();
  set_sizes_.Reset();
  resident_ = false;
  ReleaseParts();
  index_.reset();
}

bool GpuEngine::PacksPostings(const InvertedIndex& index) const {
  return config_.matcher == Matcher::kTiled &&
         (config_.postings == GpuPostings::kPacked ||
          (config_.postings == GpuPostings::kAuto && PackingPays(index)));
}

void GpuEngine::ReleaseParts() {
  part_pins_.clear();
  part_postings_.Reset();
  current_part_ = nullptr;
  part_packed_.clear();
  parts_packed_ = false;
  parts_.clear();
  part_ranges_.clear();
  part_count_ = 0;
}

Status GpuEngine::EffectiveBudget(uint64_t* budget) {
  if (budget_option_ > 0) {
    *budget = budget_option_;
    return Status::Ok();
  }
  // cudaMemGetInfo costs microseconds, a small search's whole budget of
  // host time: its answer is kept for 100 ms while what we hold stays the
  // same (an out-of-memory error lowers the budget the multiple-loading way
  // in any case).
  const uint64_t ours = ResidentBytes();
  const auto now = std::chrono::steady_clock::now();
  if (ours != mem_info_ours_ || now - mem_info_time_ > std::chrono::milliseconds(100)) {
    size_t free_bytes = 0, total_bytes = 0;
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    mem_info_free_ = free_bytes;
    mem_info_total_ = total_bytes;
    mem_info_ours_ = ours;
    mem_info_time_ = now;
  }
  // Most of the free memory (what we hold ourselves counts as ours), less
  // a reserve for the CUDA context, CUB and fragmentation.
  const uint64_t usable = mem_info_free_ + ours;
  const uint64_t reserve = std::max<uint64_t>(512ull << 20, mem_info_total_ / 20);
  *budget = usable > reserve ? (usable - reserve) / 10 * 9 : 0;
  return Status::Ok();
}

DeviceIndexView GpuEngine::ResidentView() const {
  DeviceIndexView view;
  view.postings = resident_postings_.get();
  if (packed_postings_.size() > 0) {
    view.packed = packed_postings_.get();
    view.pack_dir = pack_dir_.get();
    view.pack_tiles = PackTiles(index_->num_objects());
  }
  view.num_objects = index_->num_objects();
  view.keyword_offsets = index_->keyword_offsets();
  return view;
}

Status GpuEngine::SearchImpl(const genie_query_batch& batch, int32_t k, HostStage* host, TopKResults* out) {
  const InvertedIndex& index = *index_;
  uint64_t budget = 0;
  GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
  if (resident_ && config_.matcher == Matcher::kTiled &&
      batch.n_queries >= 2 * kPipelineQueries && index.num_objects() > 0) {
    // the ranges and weights are checked piece by piece as they compile
    GENIE_RETURN_IF_ERROR(ValidateBatchOffsets(batch));
    prof_.Mark("validate");
    Status status = SearchPipelined(batch, k, budget, out);
    if (status.code() != GENIE_DEVICE_OUT_OF_MEMORY || index.num_objects() < 2) return status;
    return SearchPartsBesideResident(batch, k, budget, out);
  }
  if (resident_) {
    CompiledQueries compiled;
    const CompiledQueries* cq = &host->compiled;
    if (!host->ready) {
      GENIE_RETURN_IF_ERROR(CompileQueries(index, batch, SplitLength(index), threads_, cancel_, &compiled));
      prof_.Mark("compile");
      cq = &compiled;
    }
    const int32_t nq = cq->num_queries();
    const uint64_t held = ResidentBytes();
    const uint64_t avail = budget > held ? budget - held : 0;
    const DeviceIndexView view = ResidentView();
    std::vector<std::vector<Hit>> per_query;
    Status status = host->ready ? RunPrepared(view, *cq, host->prep, k, avail, &per_query)
                                : RunQueries(view, *cq, k, avail, &per_query);
    if (status.ok()) {
      stats_.parts = 1;
      Assemble(nq, &per_query, out);
      return Status::Ok();
    }
    if (status.code() != GENIE_DEVICE_OUT_OF_MEMORY || index.num_objects() < 2) return status;
    // One query's state does not fit beside the index (or the 4-byte array
    // beside the packed one): multiple loading.
    return SearchPartsBesideResident(batch, k, budget, out);
  }
  return SearchParts(batch, k, budget, out);
}

void GpuEngine::Assemble(int32_t nq, std::vector<std::vector<Hit>>* per_query, TopKResults* out) {
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

int32_t GpuEngine::TileCount(int32_t n, const std::vector<int64_t>& max_score, bool packed,
                             int32_t tile_words) const {
  int64_t widest = 1;
  for (int64_t m : max_score) {
    if (m <= kCpqMaxScore) widest = std::max(widest, m);
  }
  const int32_t words = tile_words > 0 ? tile_words : config_.tile_words;
  const int32_t per_tile = TileFor(words, TiledBitsFor(widest), packed).tile_objects;
  return static_cast<int32_t>((static_cast<int64_t>(n) + per_tile - 1) / per_tile);
}

int32_t GpuEngine::SmallGridTileWords(int32_t n, const Prepared& prep, const std::vector<int32_t>& cpq,
                                      bool packed, int32_t k) const {
  int32_t words = config_.tile_words;
  if (config_.matcher != Matcher::kTiled || config_.forced_ht_slots > 0 || cpq.empty()) return words;
  int64_t widest = 1;
  for (int32_t q : cpq) widest = std::max(widest, prep.max_score[static_cast<std::size_t>(q)]);
  const int32_t bits = TiledBitsFor(widest);
  const auto tiles_of = [&](int32_t w) {
    const int64_t per_tile = TileFor(w, bits, packed).tile_objects;
    return (static_cast<int64_t>(n) + per_tile - 1) / per_tile;
  };
  // Halve the tiles while the grid stays within about one wave (three
  // 512-thread blocks an SM) and the lists within the one-block selection:
  // a small call's time is one block's, which is in proportion to its tile.
  // H100, 1M objects, k = 100: 1 query 0.095 -> 0.080 ms, 8: 0.110 -> 0.098
  // (bench/batch_bench --tile-words); a tile past the selection's 4,096
  // slots costs more than it saves.
  for (;;) {
    const int32_t half = TileFor(words, bits, packed).tile_words / 2;
    // the kernel's warps take tile_words / 16 words each, 32 at a time
    if (half < 512 || half % 512 != 0) break;
    const int64_t tiles = tiles_of(half);
    if (tiles * static_cast<int64_t>(cpq.size()) > 3 * static_cast<int64_t>(sm_count_) ||
        tiles * k > static_cast<int64_t>(kListSelectSlots)) {
      break;
    }
    words = half;
  }
  return words;
}

uint32_t GpuEngine::HtCapacity(Matcher m, int32_t k, int64_t max_score, int32_t tiles, bool list) const {
  if (config_.forced_ht_slots > 0) return config_.forced_ht_slots;
  uint64_t want;
  if (m == Matcher::kTiled && list) {
    want = static_cast<uint64_t>(k) * static_cast<uint64_t>(std::max(tiles, 1));
  } else if (m == Matcher::kTiled) {
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

uint64_t GpuEngine::QueryBytes(const CompiledQueries& cq, const Prepared& prep, int32_t q, int32_t n,
                               int32_t k, int32_t tiles, Matcher route, bool list) const {
  const std::size_t qi = static_cast<std::size_t>(q);
  const int64_t max_score = prep.max_score[qi];
  // Device slices after BuildWork's cut (the count table and faithful c-PQ
  // read them; tiled c-PQ counts its runs instead).
  uint64_t slices = static_cast<uint64_t>(cq.count[qi]);
  if (route != Matcher::kTiled && config_.matcher == Matcher::kTiled) {
    // (Other matchers compile slices at split_length: already cut.)
    slices = 0;
    const int64_t cut = DeviceSliceLength();
    for (const ListSlice& slice : cq.Slices(q)) {
      if (slice.end > slice.begin) slices += static_cast<uint64_t>((slice.end - slice.begin + cut - 1) / cut);
    }
  }
  const uint64_t common = static_cast<uint64_t>(k) * 8 + 128;
  const uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(max_score, 1));
  if (route == Matcher::kCountTable) {
    return common + slices * 28 + static_cast<uint64_t>(RoundUp(n, 4)) * 4 +
           static_cast<uint64_t>(k) * 24;
  }
  const uint64_t cap = HtCapacity(route, k, max_score, tiles, list && route == Matcher::kTiled);
  if (route == Matcher::kFaithful) {
    const int32_t per_word = 32 / BitsFor(max_score);
    const uint64_t words = static_cast<uint64_t>(RoundUp((n + per_word - 1) / per_word, 4));
    return common + slices * 28 + words * 4 + (ms + 2) * 4 + cap * 8 + (cap + k) * 24;
  }
  // A run: begin, length, weight, and (packed) its list and the list's start.
  const uint64_t runs = static_cast<uint64_t>(prep.num_runs[qi]);
  return common + (ms + 2) * 4 + cap * 8 + cap * 24 +
         runs * (40 + (static_cast<uint64_t>(tiles) + 1) * 4);
}

Status GpuEngine::PlanGroups(const std::vector<int32_t>& queries, const std::vector<uint64_t>& bytes,
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

bool GpuEngine::ListMode(int32_t tiles, int32_t k) const {
  // A forced table size is the overflow tests' hook: they need the Gate.
  // Measured on the H100 (bench/batch_bench, bench/engine_bench at 1M
  // objects, k = 100): the lists beat the Gate from 1 to 1,024 queries (1
  // to 41 waves of blocks), the tag workload by 1.6-2.8x and the LSH batch
  // by about 5%; the Gate's hash probing is what a small call paid for.
  return config_.matcher == Matcher::kTiled && config_.forced_ht_slots == 0 &&
         static_cast<int64_t>(tiles) * k <= kListModeMaxSlots;
}

Status GpuEngine::RunQueries(const DeviceIndexView& view, const CompiledQueries& cq, int32_t k,
                             uint64_t avail, std::vector<std::vector<Hit>>* per_query) {
  Prepared prep;
  GENIE_RETURN_IF_ERROR(Prepare(cq, view.keyword_offsets, config_.matcher == Matcher::kTiled,
                                threads_, cancel_, &prep));
  return RunPrepared(view, cq, prep, k, avail, per_query);
}

Status GpuEngine::RunPrepared(const DeviceIndexView& index_view, const CompiledQueries& cq,
                              const Prepared& prep, int32_t k, uint64_t avail_in,
                              std::vector<std::vector<Hit>>* per_query) {
  DeviceIndexView view = index_view;  // EnsureFullPostings may add the 4-byte array
  uint64_t avail = avail_in;          // and then takes its bytes from avail
  const int32_t nq = cq.num_queries();
  per_query->assign(static_cast<std::size_t>(nq), {});
  const int32_t n = view.num_objects;
  if (n <= 0 || nq == 0) return Status::Ok();
  const int32_t k_eff = std::min(k, n);
  std::vector<int32_t> cpq, count;
  for (int32_t q = 0; q < nq; ++q) {
    const int64_t m = prep.max_score[static_cast<std::size_t>(q)];
    if (m <= 0) continue;  // no postings: no hits
    (RouteOf(m) == Matcher::kCountTable ? count : cpq).push_back(q);
  }
  const int32_t tile_words = SmallGridTileWords(n, prep, cpq, view.packed != nullptr, k_eff);
  const int32_t tiles = TileCount(n, prep.max_score, view.packed != nullptr, tile_words);
  bool list = ListMode(tiles, k_eff);
  std::vector<uint64_t> bytes(static_cast<std::size_t>(nq), 0);
  for (int pass = 0; pass < 2; ++pass) {
    bool fits = true;
    for (int32_t q : cpq) {
      const std::size_t qi = static_cast<std::size_t>(q);
      bytes[qi] = QueryBytes(cq, prep, q, n, k_eff, tiles, config_.matcher, list);
      fits = fits && kGroupFixedBytes + bytes[qi] <= avail;
    }
    // the lists take more memory than the Gate's tables: where a query's
    // do not fit the budget (multiple loading plans with the Gate's), the Gate
    if (fits || !list) break;
    list = false;
  }
  prof_.Mark("prepare");
  std::vector<int32_t> overflowed;
  if (!cpq.empty()) {
    std::vector<std::vector<int32_t>> groups;
    GENIE_RETURN_IF_ERROR(PlanGroups(cpq, bytes, avail, &groups));
    if (config_.matcher != Matcher::kTiled) GENIE_RETURN_IF_ERROR(EnsureFullPostings(&view, &avail));
    for (const auto& group : groups) {
      GENIE_RETURN_IF_ERROR(CheckCancel());
      if (config_.matcher == Matcher::kTiled) {
        GENIE_RETURN_IF_ERROR(
            RunTiledGroup(view, prep, group, k_eff, list, tile_words, per_query, &overflowed));
      } else {
        GENIE_RETURN_IF_ERROR(
            RunFaithfulGroup(view, cq, prep, group, k_eff, per_query, &overflowed));
      }
      ++stats_.query_groups;
    }
    stats_.cpq_queries += static_cast<int32_t>(cpq.size());
    if (list) stats_.list_queries += static_cast<int32_t>(cpq.size());
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
    GENIE_RETURN_IF_ERROR(EnsureFullPostings(&view, &avail));
    GENIE_RETURN_IF_ERROR(PlanGroups(count, bytes, avail, &groups));
    for (const auto& group : groups) {
      GENIE_RETURN_IF_ERROR(CheckCancel());
      for (int32_t q : group) (*per_query)[static_cast<std::size_t>(q)].clear();
      GENIE_RETURN_IF_ERROR(RunCountGroup(view, cq, prep, group, k_eff, per_query));
      ++stats_.query_groups;
    }
    stats_.count_queries += static_cast<int32_t>(count.size());
  }
  return Status::Ok();
}

namespace {

static_assert(GpuEngineOptions().tile_words == kDefaultTileWords,
              "the public default tile size is the kernels' default");

// GpuEngineOptions checked and turned into the engine's Config.
Status ConfigFromOptions(const GpuEngineOptions& options, Config* config) {
  switch (options.matcher) {
    case GpuMatcher::kTiled:
    case GpuMatcher::kFaithful:
    case GpuMatcher::kCountTable:
      break;
    default:
      return Status::InvalidArgument("unknown GPU matcher " +
                                     std::to_string(static_cast<int>(options.matcher)));
  }
  if (options.hash_table_slots > (1u << 30)) {
    return Status::InvalidArgument("hash_table_slots must be at most 2^30, not " +
                                   std::to_string(options.hash_table_slots));
  }
  if (options.tile_words < 512 || options.tile_words > 49152 || options.tile_words % 512 != 0) {
    return Status::InvalidArgument("tile_words must be a multiple of 512 in [512, 49152], not " +
                                   std::to_string(options.tile_words));
  }
  config->matcher = options.matcher;
  config->exact_ties = options.exact_ties;
  config->forced_ht_slots =
      options.hash_table_slots > 0 ? static_cast<uint32_t>(NextPow2(options.hash_table_slots)) : 0;
  switch (options.postings) {
    case GpuPostings::kAuto:
    case GpuPostings::kPacked:
    case GpuPostings::kFull:
      break;
    default:
      return Status::InvalidArgument("unknown GPU postings form " +
                                     std::to_string(static_cast<int>(options.postings)));
  }
  config->tile_words = options.tile_words;
  config->postings = options.postings;
  config->profile = options.profile;
  if (options.set_match_min_postings < 0) {
    return Status::InvalidArgument("set_match_min_postings must not be negative");
  }
  config->set_match_min_postings = options.set_match_min_postings;
  return Status::Ok();
}

std::unique_ptr<Engine> Make(const EngineOptions& options, const GpuEngineOptions& gpu_options,
                             Status* status) {
  Status local;
  Status* st = status != nullptr ? status : &local;
  *st = Status::Ok();
  try {
    Config config;
    *st = ConfigFromOptions(gpu_options, &config);
    if (!st->ok()) return nullptr;
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

// A device group's setting is each of its GPU engines' (genie/multi_device.hpp).
template <typename Set>
bool ForEachGpuEngine(Engine* engine, const Set& set) {
  if (auto* gpu = dynamic_cast<GpuEngine*>(engine)) {
    set(gpu);
    return true;
  }
  auto* group = dynamic_cast<MultiDeviceEngine*>(engine);
  if (group == nullptr) return false;
  bool any = false;
  for (int32_t i = 0; group->member(i) != nullptr; ++i) any = ForEachGpuEngine(group->member(i), set) || any;
  return any;
}

bool SetProfile(Engine* engine, bool enabled) {
  const ProfileMode mode = enabled ? ProfileMode::kPhases : ProfileMode::kOff;
  return ForEachGpuEngine(engine, [mode](GpuEngine* gpu) { gpu->set_profile(mode); });
}

bool SetTimeline(Engine* engine, bool enabled) {
  const ProfileMode mode = enabled ? ProfileMode::kTimeline : ProfileMode::kOff;
  return ForEachGpuEngine(engine, [mode](GpuEngine* gpu) { gpu->set_profile(mode); });
}

bool SetSetMatchMinPostings(Engine* engine, int64_t postings) {
  if (postings < 0) return false;
  return ForEachGpuEngine(engine, [postings](GpuEngine* gpu) { gpu->set_set_match_min_postings(postings); });
}

}  // namespace gpu

std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options,
                                      const GpuEngineOptions& gpu_options, Status* status) {
  return gpu::Make(options, gpu_options, status);
}

std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options, Status* status) {
  return gpu::Make(options, GpuEngineOptions(), status);
}

std::unique_ptr<Engine> MakeGpuCountTableEngine(const EngineOptions& options, Status* status) {
  GpuEngineOptions gpu_options;
  gpu_options.matcher = GpuMatcher::kCountTable;
  return gpu::Make(options, gpu_options, status);
}

}  // namespace genie

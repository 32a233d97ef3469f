// Several devices behind one engine (GENIE's multi-GPU section): an index is
// either replicated (a whole copy on every device; a batch's queries are
// split among them) or sharded (contiguous object ranges, one a device;
// every device answers every query for its range and the per-shard top-k
// are merged exactly, score then id, as one engine would answer).  The
// members are any engines: GPU engines on their ordinals in production, CPU
// engines standing in for devices in the CPU-only tests.  Plain C++, no
// CUDA.
//
// A member whose device fails (DeviceError or DeviceUnavailable, at upload
// or in a search) is dropped for good, and its work is redone: a replica's
// queries by the members left (or a host engine when none is), a shard by a
// host engine over that shard.  Any other failure (a cancel, bad input, out
// of device memory) goes to the caller, as from a single engine.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "genie/engine.hpp"

namespace genie {

// genie.placement: how an index is spread over the devices of a group.
enum class Placement : int32_t {
  kAuto = 0,       // replicated when it fits the smallest device, else sharded
  kReplicate = 1,  // a whole copy a device (each streams it if it must)
  kShard = 2,      // contiguous object ranges, one a device
};

// Which placement an index of index_bytes gets on devices of these
// capacities, and its object ranges: one range [0, n) a member when
// replicated, PlanObjectParts(n, devices) when sharded.
struct PlacementPlan {
  bool sharded = false;
  std::vector<std::pair<int32_t, int32_t>> ranges;
};
PlacementPlan PlanPlacement(Placement requested, uint64_t index_bytes, int32_t n_objects,
                            const std::vector<uint64_t>& capacities);

// The contiguous query ranges a replicated batch of n_queries is split
// into among `members` devices (empty ranges dropped).
std::vector<std::pair<int32_t, int32_t>> SplitQueries(int32_t n_queries, int32_t members);

// Queries [first, end) of batch as a batch of their own: offsets rebased
// into *storage (which must outlive the returned batch), items and ranges
// read in place.
struct QueryBatchSlice {
  std::vector<int64_t> query_offsets;
  std::vector<int64_t> item_offsets;
};
genie_query_batch SliceQueryBatch(const genie_query_batch& batch, int32_t first, int32_t end,
                                  QueryBatchSlice* storage);

// Runs fn(i) for i in [0, n) at once, i = 0 on the calling thread and each
// other on a thread of its own (signals blocked; inline when no thread can
// be started); returns each one's Status.  For work that waits on a device
// most of its time, which the CPU pool must not be held for.
std::vector<Status> RunEachConcurrently(int32_t n, const std::function<Status(int32_t)>& fn);

// True for the failures that take a device out of a group.
inline bool DeviceFailed(const Status& status) {
  return status.code() == GENIE_DEVICE_ERROR || status.code() == GENIE_DEVICE_UNAVAILABLE;
}

// A scan's rows (offsets, objects, distances: the vector and string scans'
// results) over shards merged into one: each part's objects are local to
// its shard, first_object[p] its first id; at most k rows a query are kept,
// as one scan over every object gives.  before(a, b) orders two (distance,
// global id) rows as the scan does: the vectors by distance then id (the
// default), the strings by distance, length, id.
template <typename Rows, typename Before = std::less<>>
void MergeScanShards(const std::vector<Rows>& parts, const std::vector<int32_t>& first_object, int32_t k, Rows* out,
                     Before before = Before()) {
  using Distance = typename decltype(Rows::distances)::value_type;
  Rows merged;
  const std::size_t n_queries = parts.empty() ? 0 : parts[0].offsets.size() - 1;
  std::vector<std::pair<Distance, int32_t>> rows;
  for (std::size_t q = 0; q < n_queries; ++q) {
    rows.clear();
    for (std::size_t p = 0; p < parts.size(); ++p)
      for (int64_t i = parts[p].offsets[q]; i < parts[p].offsets[q + 1]; ++i)
        rows.emplace_back(parts[p].distances[static_cast<std::size_t>(i)],
                          parts[p].objects[static_cast<std::size_t>(i)] + first_object[p]);
    const std::size_t keep = std::min(rows.size(), static_cast<std::size_t>(std::max(k, 0)));
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(), before);
    for (std::size_t i = 0; i < keep; ++i) {
      merged.distances.push_back(rows[i].first);
      merged.objects.push_back(rows[i].second);
    }
    merged.offsets.push_back(static_cast<int64_t>(merged.objects.size()));
  }
  *out = std::move(merged);
}

// Rows of consecutive query ranges (a replicated batch's pieces) joined in order.
template <typename Rows>
void JoinQueryRanges(const std::vector<Rows>& parts, Rows* out) {
  Rows joined;
  for (const Rows& part : parts) {
    const auto base = static_cast<int64_t>(joined.objects.size());
    joined.objects.insert(joined.objects.end(), part.objects.begin(), part.objects.end());
    joined.distances.insert(joined.distances.end(), part.distances.begin(), part.distances.end());
    for (std::size_t q = 1; q < part.offsets.size(); ++q) joined.offsets.push_back(base + part.offsets[q]);
  }
  *out = std::move(joined);
}

// The calls in a member's engine: searches side by side, up to a limit
// (an engine whose searches run concurrently: a GPU engine does one call's
// host stage while another's kernels run, genie/gpu_engine.hpp), or one
// exclusive call (a split or sharded batch, a set match, dropping it).  An
// exclusive caller waiting keeps new searches out, so that a stream of
// small searches cannot starve it.
class MemberSeats {
 public:
  // A search's seat if fewer than `below` are taken and no exclusive call
  // holds or waits for the member.
  bool TryTake(int32_t below);
  // A search's seat once fewer than `limit` are taken; false (no seat) when
  // cancel asks while it waits (polled every few milliseconds).
  bool Take(int32_t limit, const CancelCheck& cancel);
  void Release();
  // The member alone once every search in it has left; false (nothing
  // taken) when cancel asks while it waits.
  bool TakeExclusive(const CancelCheck& cancel);
  void ReleaseExclusive();

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int32_t taken_ = 0;  // searches in it
  bool exclusive_ = false;
  int32_t exclusive_waiting_ = 0;
};

// A seat held for a scope: a search's, or with exclusive, the member alone.
class SeatHold {
 public:
  SeatHold() = default;
  SeatHold(MemberSeats* seats, bool exclusive) : seats_(seats), exclusive_(exclusive) {}
  SeatHold(const SeatHold&) = delete;
  SeatHold& operator=(const SeatHold&) = delete;
  SeatHold(SeatHold&& other) noexcept : seats_(other.seats_), exclusive_(other.exclusive_) { other.seats_ = nullptr; }
  SeatHold& operator=(SeatHold&& other) noexcept {
    if (this != &other) {
      Leave();
      seats_ = other.seats_;
      exclusive_ = other.exclusive_;
      other.seats_ = nullptr;
    }
    return *this;
  }
  ~SeatHold() { Leave(); }
  // The member alone (TakeExclusive) into *hold; false when cancel asked.
  static bool Exclusive(MemberSeats* seats, const CancelCheck& cancel, SeatHold* hold) {
    if (!seats->TakeExclusive(cancel)) return false;
    *hold = SeatHold(seats, true);
    return true;
  }
  void Leave() {
    if (seats_ == nullptr) return;
    if (exclusive_) seats_->ReleaseExclusive();
    else seats_->Release();
    seats_ = nullptr;
  }

 private:
  MemberSeats* seats_ = nullptr;
  bool exclusive_ = false;
};

// One device of a group.
struct DeviceMember {
  int32_t device = 0;           // its CUDA ordinal (in reports)
  uint64_t capacity_bytes = 0;  // what an index copy may take on it (0: no limit)
  std::unique_ptr<Engine> engine;
};

// What a group says of each device (genie_service_stats' device rows).
struct DeviceReport {
  int32_t device = 0;
  bool dropped = false;          // failed; its work goes elsewhere
  std::string failure;           // why, when dropped
  bool sharded = false;
  int32_t first_object = 0;      // its range of the uploaded index
  int32_t end_object = 0;
  uint64_t index_bytes = 0;      // host bytes of what it was given
  uint64_t searches = 0;         // engine calls it answered
  double seconds = 0;            // time in them
};

class MultiDeviceEngine final : public Engine {
 public:
  using HostEngineMaker = std::function<std::unique_ptr<Engine>()>;
  // members: at least one, each on its own device.  make_host: the engine
  // that takes over a dropped member's work (the CPU engine).
  // threads: the host threads that merge shards' results (0: every core);
  // cancel: polled by Upload once the shards are cut (the members poll their own).
  MultiDeviceEngine(std::vector<DeviceMember> members, HostEngineMaker make_host, Placement placement,
                    int32_t threads = 0, CancelCheck cancel = CancelCheck());

  genie_engine_kind kind() const override;
  Status Upload(std::shared_ptr<const InvertedIndex> index) override;
  Status Drop() override;
  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override;
  // Each member polls the call's own check (calls run side by side).
  Status SearchCancellable(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                           TopKResults* out) override;
  Status MatchSet(SetPredicate predicate, Span<int32_t> keywords, Span<int32_t> object_sizes,
                  std::vector<int32_t>* out) override;
  // Searches run side by side on different devices (the genie service's
  // runners): a replicated batch of fewer than kSplitQueries queries runs
  // whole on the first free device (preferring one no group of the process
  // is searching on), while another search is under way; otherwise it is
  // split among them all.  A sharded batch takes every device.  A member
  // whose engine searches concurrently takes kCallsPerMember whole batches
  // at once, where every member has one (the second's host stage runs
  // while the first's kernels do).
  bool ConcurrentSearches() const override { return true; }
  static constexpr int32_t kSplitQueries = 256;
  static constexpr int32_t kCallsPerMember = 2;

  std::vector<DeviceReport> Report() const;
  bool sharded() const;
  // Member i's engine (for its own statistics and profile); null beyond them.
  Engine* member(int32_t i) const {
    return i >= 0 && i < static_cast<int32_t>(slots_.size()) ? slots_[static_cast<std::size_t>(i)].member.engine.get()
                                                              : nullptr;
  }

 private:
  struct Slot {
    DeviceMember member;
    std::shared_ptr<const InvertedIndex> part;  // what it searches
    std::pair<int32_t, int32_t> range{0, 0};
    std::unique_ptr<Engine> host;               // its shard's host engine, once dropped
    DeviceReport report;
    // Taken by whoever calls its engine (or host): a whole replicated
    // batch takes a seat (SeatsOf), anything else the member alone.  A
    // caller that holds several took them in slot order.
    MemberSeats seats;
    std::atomic<bool> dropped{false};  // report.dropped, read without report_mutex_
  };
  // Called holding the slot alone (or mutex_, exclusively).
  void DropMember(Slot* slot, const Status& why);
  Status HostFor(Slot* slot, Engine** out);
  Status HostSearch(Slot* slot, const genie_query_batch& batch, int32_t k, const CancelCheck* cancel,
                    TopKResults* out);
  // cancel: the call's own check, or null for the members' own
  Status SearchWith(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel, TopKResults* out);
  Status SearchReplicated(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel, TopKResults* out);
  Status SearchSharded(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel, TopKResults* out);
  Status SearchOnHost(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel, TopKResults* out);
  // nullptr when cancel asked while every member was full.
  Slot* TakeFreeMember(const std::vector<Slot*>& live, const CancelCheck& cancel, SeatHold* hold);
  // Every one of slots alone, in their order, into *holds; Cancelled()
  // (none held) when cancel asks while it waits.
  static Status TakeAlone(const std::vector<Slot*>& slots, const CancelCheck& cancel, std::vector<SeatHold>* holds);
  // The call's check, or the group's own for a call without one.
  const CancelCheck& CheckOf(const CancelCheck* cancel) const { return cancel != nullptr ? *cancel : cancel_; }
  // The searches a member takes at once.
  static int32_t SeatsOf(const Slot& slot) {
    return slot.member.engine != nullptr && slot.member.engine->ConcurrentSearches() ? kCallsPerMember : 1;
  }

  // Shared by searches and set matches, exclusive for Upload and Drop.
  mutable std::shared_mutex mutex_;
  mutable std::mutex report_mutex_;  // the slots' reports (see Report)
  std::mutex host_mutex_;            // making whole_host_
  std::atomic<int32_t> searching_{0};
  std::atomic<uint32_t> next_member_{0};
  std::deque<Slot> slots_;  // (a deque: slots neither move nor copy)
  HostEngineMaker make_host_;
  Placement placement_;
  int32_t threads_;
  CancelCheck cancel_;
  std::atomic<bool> sharded_{false};
  std::shared_ptr<const InvertedIndex> index_;
  std::unique_ptr<Engine> whole_host_;  // a replicated index's, once every member dropped
};

}  // namespace genie

// Several devices behind one engine: placement, the split of a batch among
// replicas, the exact merge of shards, and what happens when a device fails
// (see genie/multi_device.hpp).
#include "genie/multi_device.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "genie/parallel.hpp"

namespace genie {

PlacementPlan PlanPlacement(Placement requested, uint64_t index_bytes, int32_t n_objects,
                            const std::vector<uint64_t>& capacities) {
  PlacementPlan plan;
  const int32_t devices = static_cast<int32_t>(capacities.size());
  uint64_t smallest = 0;
  bool limited = false;
  for (uint64_t c : capacities) {
    if (c == 0) continue;  // no limit
    smallest = limited ? std::min(smallest, c) : c;
    limited = true;
  }
  plan.sharded = devices > 1 && (requested == Placement::kShard ||
                                 (requested == Placement::kAuto && limited && index_bytes > smallest));
  if (plan.sharded) {
    plan.ranges = PlanObjectParts(n_objects, devices);
  } else {
    plan.ranges.assign(static_cast<std::size_t>(std::max(devices, 1)), {0, std::max(n_objects, 0)});
  }
  return plan;
}

std::vector<std::pair<int32_t, int32_t>> SplitQueries(int32_t n_queries, int32_t members) {
  if (n_queries <= 0) return {};
  return PlanObjectParts(n_queries, members);
}

genie_query_batch SliceQueryBatch(const genie_query_batch& batch, int32_t first, int32_t end,
                                  QueryBatchSlice* storage) {
  const int64_t item0 = batch.query_offsets[first];
  const int64_t item_end = batch.query_offsets[end];
  const int64_t range0 = batch.item_offsets[item0];
  storage->query_offsets.resize(static_cast<std::size_t>(end - first) + 1);
  for (int32_t q = first; q <= end; ++q)
    storage->query_offsets[static_cast<std::size_t>(q - first)] = batch.query_offsets[q] - item0;
  storage->item_offsets.resize(static_cast<std::size_t>(item_end - item0) + 1);
  for (int64_t i = item0; i <= item_end; ++i)
    storage->item_offsets[static_cast<std::size_t>(i - item0)] = batch.item_offsets[i] - range0;
  genie_query_batch slice;
  slice.n_queries = end - first;
  slice.query_offsets = storage->query_offsets.data();
  slice.item_offsets = storage->item_offsets.data();
  slice.item_weights = batch.item_weights != nullptr ? batch.item_weights + item0 : nullptr;
  slice.ranges_lo = batch.ranges_lo + range0;
  slice.ranges_hi = batch.ranges_hi + range0;
  return slice;
}

std::vector<Status> RunEachConcurrently(int32_t n, const std::function<Status(int32_t)>& fn) {
  std::vector<Status> statuses(static_cast<std::size_t>(std::max(n, 0)));
  auto run = [&](int32_t i) noexcept {
    try {
      statuses[static_cast<std::size_t>(i)] = fn(i);
    } catch (const std::bad_alloc&) {
      statuses[static_cast<std::size_t>(i)] = Status::OutOfMemory("out of host memory on a device's thread");
    } catch (const std::exception& e) {
      statuses[static_cast<std::size_t>(i)] = Status::Internal(std::string("a device's thread failed: ") + e.what());
    } catch (...) {
      statuses[static_cast<std::size_t>(i)] = Status::Internal("a device's thread failed");
    }
  };
  if (n <= 0) return statuses;
  {
    std::vector<JoinedThread> threads(static_cast<std::size_t>(n - 1));
    std::vector<int32_t> inline_too;
    for (int32_t i = 1; i < n; ++i)
      if (!threads[static_cast<std::size_t>(i - 1)].Start([&run, i] { run(i); })) inline_too.push_back(i);
    run(0);
    for (int32_t i : inline_too) run(i);
  }  // joined here
  return statuses;
}

MultiDeviceEngine::MultiDeviceEngine(std::vector<DeviceMember> members, HostEngineMaker make_host,
                                     Placement placement, int32_t threads, CancelCheck cancel)
    : make_host_(std::move(make_host)), placement_(placement), threads_(ResolveThreads(threads)),
      cancel_(cancel) {
  for (DeviceMember& m : members) {
    slots_.emplace_back();
    slots_.back().member = std::move(m);
    slots_.back().report.device = slots_.back().member.device;
  }
}

genie_engine_kind MultiDeviceEngine::kind() const {
  return slots_.empty() || slots_[0].member.engine == nullptr ? GENIE_ENGINE_CPU : slots_[0].member.engine->kind();
}

bool MultiDeviceEngine::sharded() const { return sharded_.load(); }

// Reports are written and read holding report_mutex_: the genie service
// reads them between its batches while other batches search.
std::vector<DeviceReport> MultiDeviceEngine::Report() const {
  std::lock_guard<std::mutex> lock(report_mutex_);
  std::vector<DeviceReport> out;
  for (const Slot& s : slots_) out.push_back(s.report);
  return out;
}

void MultiDeviceEngine::DropMember(Slot* slot, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(report_mutex_);
    slot->report.dropped = true;
    slot->report.failure = why.message();
  }
  slot->dropped.store(true);
  if (slot->member.engine != nullptr) (void)slot->member.engine->Drop();  // frees what it can
}

Status MultiDeviceEngine::Upload(std::shared_ptr<const InvertedIndex> index) {
  if (index == nullptr) return Status::InvalidArgument("cannot upload a NULL index");
  if (slots_.empty()) return Status::InvalidArgument("a device group needs at least one device");
  std::unique_lock<std::shared_mutex> lock(mutex_);
  std::vector<uint64_t> capacities;
  std::vector<Slot*> live;
  for (Slot& s : slots_) {
    if (s.dropped.load()) continue;
    live.push_back(&s);
    capacities.push_back(s.member.capacity_bytes);
  }
  const PlacementPlan plan = PlanPlacement(placement_, index->MemoryBytes(), index->num_objects(),
                                           std::vector<uint64_t>(capacities.begin(), capacities.end()));
  // a device dropped before gets no part: the plan spreads the index over
  // the members left
  index_ = index;
  sharded_ = plan.sharded;
  whole_host_.reset();
  const std::size_t n_ranges = plan.ranges.size();
  for (Slot& s : slots_) {
    s.part.reset();
    s.host.reset();
    s.range = {0, 0};
    std::lock_guard<std::mutex> lock(report_mutex_);
    s.report.sharded = plan.sharded;
    s.report.first_object = s.report.end_object = 0;
    s.report.index_bytes = 0;
  }
  // the shards are cut at once, each on a thread of its own (a quarter of a
  // 4.5M-object index is about a gigabyte of postings)
  const auto n_parts = static_cast<int32_t>(std::min(live.size(), n_ranges));
  const std::vector<Status> cut = RunEachConcurrently(n_parts, [&](int32_t i) {
    Slot* s = live[static_cast<std::size_t>(i)];
    s->range = plan.ranges[static_cast<std::size_t>(i)];
    s->part = plan.sharded
                  ? std::make_shared<const InvertedIndex>(index->SliceObjects(s->range.first, s->range.second))
                  : index;
    return Status::Ok();
  });
  for (const Status& st : cut) GENIE_RETURN_IF_ERROR(st);
  if (cancel_.requested()) {
    index_.reset();
    return Status::Cancelled();
  }
  for (int32_t i = 0; i < n_parts; ++i) {
    Slot* s = live[static_cast<std::size_t>(i)];
    std::lock_guard<std::mutex> lock(report_mutex_);
    s->report.first_object = s->range.first;
    s->report.end_object = s->range.second;
    s->report.index_bytes = s->part->MemoryBytes();
  }
  std::vector<Slot*> given;
  for (Slot* s : live)
    if (s->part != nullptr) given.push_back(s);
  const std::vector<Status> statuses = RunEachConcurrently(
      static_cast<int32_t>(given.size()), [&](int32_t i) { return given[static_cast<std::size_t>(i)]->member.engine->Upload(given[static_cast<std::size_t>(i)]->part); });
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (statuses[i].ok()) continue;
    if (!DeviceFailed(statuses[i])) {
      for (Slot* s : given) (void)s->member.engine->Drop();
      index_.reset();
      return statuses[i];
    }
    DropMember(given[i], statuses[i]);
  }
  return Status::Ok();
}

Status MultiDeviceEngine::Drop() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  Status first;
  for (Slot& s : slots_) {
    if (!s.dropped.load() && s.part != nullptr) {
      Status st = s.member.engine->Drop();
      if (!st.ok() && first.ok()) first = st;
    }
    s.part.reset();
    s.host.reset();
  }
  whole_host_.reset();
  index_.reset();
  return first;
}

// The host engine that takes over a dropped member's part.
Status MultiDeviceEngine::HostFor(Slot* slot, Engine** out) {
  if (slot->host == nullptr) {
    std::unique_ptr<Engine> host = make_host_();
    if (host == nullptr) return Status::Internal("no host engine to take over a failed device");
    GENIE_RETURN_IF_ERROR(host->Upload(slot->part));
    slot->host = std::move(host);
  }
  *out = slot->host.get();
  return Status::Ok();
}

Status MultiDeviceEngine::HostSearch(Slot* slot, const genie_query_batch& batch, int32_t k,
                                     const CancelCheck* cancel, TopKResults* out) {
  Engine* host = nullptr;
  GENIE_RETURN_IF_ERROR(HostFor(slot, &host));
  return cancel != nullptr ? host->SearchCancellable(batch, k, *cancel, out) : host->Search(batch, k, out);
}

namespace {

// Searches under way on each device ordinal, over every group of the
// process (indexes of the genie service share the GPUs): a free member on
// an idle device is taken first.
std::atomic<int32_t> device_searches[64];

std::atomic<int32_t>* DeviceCount(int32_t device) {
  return device >= 0 && device < 64 ? &device_searches[device] : nullptr;
}

// A member's engine call: counted on its device while it runs.
Status MemberSearch(const DeviceMember& member, const genie_query_batch& batch, int32_t k,
                    const CancelCheck* cancel, TopKResults* out) {
  struct Counted {
    std::atomic<int32_t>* count;
    explicit Counted(std::atomic<int32_t>* c) : count(c) {
      if (count != nullptr) count->fetch_add(1);
    }
    ~Counted() {
      if (count != nullptr) count->fetch_sub(1);
    }
  } counted(DeviceCount(member.device));
  return cancel != nullptr ? member.engine->SearchCancellable(batch, k, *cancel, out)
                           : member.engine->Search(batch, k, out);
}

bool DeviceIdle(int32_t device) {
  const std::atomic<int32_t>* count = DeviceCount(device);
  return count == nullptr || count->load() == 0;
}

}  // namespace

// Every member dropped: the host engine answers (it searches concurrently).
Status MultiDeviceEngine::SearchOnHost(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel,
                                       TopKResults* out) {
  Engine* host = nullptr;
  {
    std::lock_guard<std::mutex> lock(host_mutex_);
    if (whole_host_ == nullptr) {
      std::unique_ptr<Engine> made = make_host_();
      if (made == nullptr) return Status::Internal("no host engine to take over the failed devices");
      GENIE_RETURN_IF_ERROR(made->Upload(index_));
      whole_host_ = std::move(made);
    }
    host = whole_host_.get();
  }
  return cancel != nullptr ? host->SearchCancellable(batch, k, *cancel, out) : host->Search(batch, k, out);
}

bool MemberSeats::TryTake(int32_t below) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (exclusive_ || exclusive_waiting_ > 0 || taken_ >= below) return false;
  ++taken_;
  return true;
}

namespace {

// Waits on freed under lock while blocked() holds, polling cancel every
// 5 ms (outside the lock: the check is the caller's code); false when it
// asked while still blocked.
template <typename Blocked>
bool WaitWhile(std::unique_lock<std::mutex>* lock, std::condition_variable* freed, Blocked blocked,
               const CancelCheck& cancel) {
  while (blocked()) {
    freed->wait_for(*lock, std::chrono::milliseconds(5));
    if (!blocked()) break;
    lock->unlock();
    const bool asked = cancel.requested();
    lock->lock();
    if (asked && blocked()) return false;
  }
  return true;
}

}  // namespace

bool MemberSeats::Take(int32_t limit, const CancelCheck& cancel) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!WaitWhile(&lock, &freed_, [&] { return exclusive_ || exclusive_waiting_ > 0 || taken_ >= limit; }, cancel))
    return false;
  ++taken_;
  return true;
}

void MemberSeats::Release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --taken_;
  }
  freed_.notify_all();
}

bool MemberSeats::TakeExclusive(const CancelCheck& cancel) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++exclusive_waiting_;
  const bool taken = WaitWhile(&lock, &freed_, [&] { return exclusive_ || taken_ > 0; }, cancel);
  --exclusive_waiting_;
  if (!taken) {
    lock.unlock();
    freed_.notify_all();  // the searches it kept out may come in again
    return false;
  }
  exclusive_ = true;
  return true;
}

void MemberSeats::ReleaseExclusive() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exclusive_ = false;
  }
  freed_.notify_all();
}

// A seat in the first member no call holds, on a device no search of the
// process is using if there is one, from a turn that moves on each time;
// then one with a seat left (SeatsOf); when none has, a seat in the one
// whose turn it is, once free.
MultiDeviceEngine::Slot* MultiDeviceEngine::TakeFreeMember(const std::vector<Slot*>& live, const CancelCheck& cancel,
                                                           SeatHold* hold) {
  const std::size_t n = live.size();
  const std::size_t start = next_member_.fetch_add(1) % n;
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t j = 0; j < n; ++j) {
      Slot* s = live[(start + j) % n];
      if (pass == 0 && !DeviceIdle(s->member.device)) continue;
      if (s->seats.TryTake(pass < 2 ? 1 : SeatsOf(*s))) {
        *hold = SeatHold(&s->seats, false);
        return s;
      }
    }
  }
  Slot* s = live[start];
  if (!s->seats.Take(SeatsOf(*s), cancel)) return nullptr;
  *hold = SeatHold(&s->seats, false);
  return s;
}

Status MultiDeviceEngine::TakeAlone(const std::vector<Slot*>& slots, const CancelCheck& cancel,
                                    std::vector<SeatHold>* holds) {
  holds->clear();
  holds->reserve(slots.size());
  for (Slot* s : slots) {
    SeatHold hold;
    if (!SeatHold::Exclusive(&s->seats, cancel, &hold)) {
      holds->clear();  // the ones taken, given back
      return Status::Cancelled();
    }
    holds->push_back(std::move(hold));
  }
  return Status::Ok();
}

Status MultiDeviceEngine::SearchReplicated(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel,
                                           TopKResults* out) {
  // Whether another search was under way when this one came: then a small
  // batch takes one free device whole, so that the calls run side by side
  // (one call's fixed cost each, where a split batch pays it on every device).
  struct InFlight {
    std::atomic<int32_t>* count;
    bool alone;
    explicit InFlight(std::atomic<int32_t>* c) : count(c), alone(c->fetch_add(1) == 0) {}
    ~InFlight() { count->fetch_sub(1); }
  } flight(&searching_);
  for (;;) {
    std::vector<Slot*> live;
    for (Slot& s : slots_)
      if (!s.dropped.load() && s.part != nullptr) live.push_back(&s);
    if (live.empty()) return SearchOnHost(batch, k, cancel, out);
    const bool split = live.size() > 1 && batch.n_queries > 1 &&
                       (batch.n_queries >= kSplitQueries || flight.alone);
    if (!split) {
      // one member: no threads, no copies (the floor of a lone query)
      SeatHold seat;
      Slot* s = TakeFreeMember(live, CheckOf(cancel), &seat);
      if (s == nullptr) return Status::Cancelled();
      if (s->dropped.load()) continue;  // dropped by a call before ours
      const auto t0 = std::chrono::steady_clock::now();
      Status st = MemberSearch(s->member, batch, k, cancel, out);
      if (DeviceFailed(st)) {
        // dropped alone: a search beside ours may still be in its engine
        // (on a failed device it fails soon: the wait is not cancelled)
        seat.Leave();
        SeatHold alone;
        (void)SeatHold::Exclusive(&s->seats, CancelCheck(), &alone);
        if (!s->dropped.load()) DropMember(s, st);
        continue;
      }
      std::lock_guard<std::mutex> report(report_mutex_);
      s->report.searches += 1;
      s->report.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return st;
    }
    // every member, taken in slot order (live is in it)
    std::vector<SeatHold> locks;
    GENIE_RETURN_IF_ERROR(TakeAlone(live, CheckOf(cancel), &locks));
    bool dropped = false;
    for (Slot* s : live) dropped = dropped || s->dropped.load();
    if (dropped) continue;  // dropped by a call before ours: plan again
    const auto pieces = SplitQueries(batch.n_queries, static_cast<int32_t>(live.size()));
    std::vector<QueryBatchSlice> storage(pieces.size());
    std::vector<TopKResults> parts(pieces.size());
    std::vector<double> seconds(pieces.size(), 0.0);
    const std::vector<Status> statuses =
        RunEachConcurrently(static_cast<int32_t>(pieces.size()), [&](int32_t i) {
          const auto t0 = std::chrono::steady_clock::now();
          const auto u = static_cast<std::size_t>(i);
          const genie_query_batch slice = SliceQueryBatch(batch, pieces[u].first, pieces[u].second, &storage[u]);
          Status st = MemberSearch(live[u]->member, slice, k, cancel, &parts[u]);
          seconds[u] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          return st;
        });
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      if (DeviceFailed(statuses[i])) {
        DropMember(live[i], statuses[i]);
        dropped = true;
      }
    }
    for (const Status& st : statuses)
      if (!st.ok() && !DeviceFailed(st)) return st;
    if (dropped) continue;  // the whole batch again on the members left: simple, and rare
    TopKResults merged;
    merged.query_offsets.reserve(static_cast<std::size_t>(batch.n_queries) + 1);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const int64_t base = static_cast<int64_t>(merged.hits.size());
      merged.hits.insert(merged.hits.end(), parts[i].hits.begin(), parts[i].hits.end());
      for (std::size_t q = 1; q < parts[i].query_offsets.size(); ++q)
        merged.query_offsets.push_back(base + parts[i].query_offsets[q]);
      std::lock_guard<std::mutex> lock(report_mutex_);
      live[i]->report.searches += 1;
      live[i]->report.seconds += seconds[i];
    }
    *out = std::move(merged);
    return Status::Ok();
  }
}

Status MultiDeviceEngine::SearchSharded(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel,
                                        TopKResults* out) {
  std::vector<Slot*> shards;
  for (Slot& s : slots_)
    if (s.part != nullptr) shards.push_back(&s);
  // every shard's device (or host engine), taken in slot order
  std::vector<SeatHold> locks;
  GENIE_RETURN_IF_ERROR(TakeAlone(shards, CheckOf(cancel), &locks));
  std::vector<TopKResults> parts(shards.size());
  std::vector<double> seconds(shards.size(), 0.0);
  auto search = [&](int32_t i) {
    const auto u = static_cast<std::size_t>(i);
    Slot* s = shards[u];
    const auto t0 = std::chrono::steady_clock::now();
    Status st = s->dropped.load() ? HostSearch(s, batch, k, cancel, &parts[u]) : MemberSearch(s->member, batch, k, cancel, &parts[u]);
    seconds[u] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return st;
  };
  std::vector<Status> statuses = RunEachConcurrently(static_cast<int32_t>(shards.size()), search);
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (DeviceFailed(statuses[i]) && !shards[i]->dropped.load()) {
      DropMember(shards[i], statuses[i]);
      statuses[i] = search(static_cast<int32_t>(i));  // its shard on the host
    }
  }
  locks.clear();  // the devices are free while the host merges
  for (const Status& st : statuses) GENIE_RETURN_IF_ERROR(st);
  std::vector<std::pair<int32_t, int32_t>> ranges;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    ranges.push_back(shards[i]->range);
    std::lock_guard<std::mutex> lock(report_mutex_);
    shards[i]->report.searches += 1;
    shards[i]->report.seconds += seconds[i];
  }
  MergePartResults(parts, ranges, k, out, threads_);
  return Status::Ok();
}

Status MultiDeviceEngine::Search(const genie_query_batch& batch, int32_t k, TopKResults* out) {
  return SearchWith(batch, k, nullptr, out);
}

Status MultiDeviceEngine::SearchCancellable(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                                            TopKResults* out) {
  return SearchWith(batch, k, &cancel, out);
}

Status MultiDeviceEngine::SearchWith(const genie_query_batch& batch, int32_t k, const CancelCheck* cancel,
                                     TopKResults* out) {
  if (out == nullptr) return Status::InvalidArgument("NULL results");
  GENIE_RETURN_IF_ERROR(ValidateK(k));
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded");
  if (batch.n_queries < 0) return Status::InvalidArgument("negative number of queries");
  if (batch.n_queries > 0 && (batch.query_offsets == nullptr || batch.item_offsets == nullptr))
    return Status::InvalidArgument("NULL query offsets");
  return sharded_ ? SearchSharded(batch, k, cancel, out) : SearchReplicated(batch, k, cancel, out);
}

Status MultiDeviceEngine::MatchSet(SetPredicate predicate, Span<int32_t> keywords, Span<int32_t> object_sizes,
                                   std::vector<int32_t>* out) {
  if (out == nullptr) return Status::InvalidArgument("NULL output");
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded");
  out->clear();
  // replicated, one member answers for all: a live one where there is one
  Slot* first_live = nullptr;
  for (Slot& s : slots_)
    if (first_live == nullptr && s.part != nullptr && !s.dropped.load()) first_live = &s;
  for (Slot& s : slots_) {
    if (s.part == nullptr) continue;
    if (!sharded_ && first_live != nullptr && &s != first_live) continue;
    SeatHold alone;  // one slot at a time: no order to keep
    if (!SeatHold::Exclusive(&s.seats, cancel_, &alone)) return Status::Cancelled();
    const int32_t first = s.range.first;
    const std::size_t count = static_cast<std::size_t>(s.range.second - first);
    Span<int32_t> sizes;
    if (object_sizes.size() > 0) {
      if (object_sizes.size() < static_cast<std::size_t>(s.range.second))
        return Status::InvalidArgument("object sizes shorter than the index");
      sizes = Span<int32_t>(object_sizes.data() + first, count);
    }
    std::vector<int32_t> found;
    Status st = s.dropped.load() ? Status::DeviceUnavailable("dropped") : s.member.engine->MatchSet(predicate, keywords, sizes, &found);
    if (DeviceFailed(st)) {
      if (!s.dropped.load()) DropMember(&s, st);
      Engine* host = nullptr;
      GENIE_RETURN_IF_ERROR(HostFor(&s, &host));
      st = host->MatchSet(predicate, keywords, sizes, &found);
    }
    GENIE_RETURN_IF_ERROR(st);
    for (int32_t id : found) out->push_back(id + first);
    if (!sharded_) return Status::Ok();  // one replica answers for all
  }
  return Status::Ok();
}

}  // namespace genie

// A device group (genie/multi_device.hpp) with CPU engines standing in for
// the devices: replicated and sharded answers equal one CPU engine's hit
// for hit (ties at the k-th score, k beyond a shard), a device that fails
// at upload or mid-batch leaves every answer exact, and concurrent callers
// use the devices side by side, each device one call at a time or, where
// its engine searches concurrently, two whole batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "genie/multi_device.hpp"
#include "genie/set_match.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::MakeIndex;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;
using Ranges = std::vector<std::pair<int32_t, int32_t>>;

// A CPU engine that fails like a lost GPU: at upload, or from its nth search on.
class FailingEngine final : public Engine {
 public:
  // concurrent: its searches run side by side (as a GPU engine's do)
  FailingEngine(int fail_upload, int fail_from_search, Status failure = Status::DeviceError("the device fell off the bus"),
                bool concurrent = false)
      : inner_(testing::MakeCpu(1)), fail_upload_(fail_upload), fail_from_(fail_from_search), failure_(std::move(failure)),
        concurrent_(concurrent) {}
  genie_engine_kind kind() const override { return GENIE_ENGINE_GPU; }
  bool ConcurrentSearches() const override { return concurrent_; }
  Status Upload(std::shared_ptr<const InvertedIndex> index) override {
    if (fail_upload_) return failure_;
    return inner_->Upload(std::move(index));
  }
  Status Drop() override { return inner_->Drop(); }
  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    if (fail_from_ >= 0 && searches_++ >= fail_from_) return failure_;
    return inner_->Search(batch, k, out);
  }
  Status MatchSet(SetPredicate p, Span<int32_t> keywords, Span<int32_t> sizes, std::vector<int32_t>* out) override {
    if (fail_from_ >= 0 && searches_++ >= fail_from_) return failure_;
    return inner_->MatchSet(p, keywords, sizes, out);
  }

 private:
  std::unique_ptr<Engine> inner_;
  int fail_upload_;
  int fail_from_;
  std::atomic<int> searches_{0};
  Status failure_;
  const bool concurrent_;
};

std::unique_ptr<MultiDeviceEngine> Group(int32_t devices, Placement placement, std::vector<std::unique_ptr<Engine>> engines = {}) {
  std::vector<DeviceMember> members;
  for (int32_t d = 0; d < devices; ++d) {
    DeviceMember m;
    m.device = d;
    m.engine = d < static_cast<int32_t>(engines.size()) && engines[static_cast<std::size_t>(d)] != nullptr
                   ? std::move(engines[static_cast<std::size_t>(d)])
                   : testing::MakeCpu(1);
    members.push_back(std::move(m));
  }
  return std::make_unique<MultiDeviceEngine>(std::move(members), [] { return testing::MakeCpu(1); }, placement);
}

// A batch of n random queries.
QueryBatch Queries(uint32_t seed, int32_t n) {
  QuerySpec spec;
  spec.queries = n;
  return RandomBatch(seed, spec);
}

// A CPU engine that counts the calls in it at once, and its group's.
struct CallCounts {
  std::atomic<int> in_group{0};
  std::atomic<int> group_max{0};
};

void RaiseTo(std::atomic<int>* max, int value) {
  int seen = max->load();
  while (value > seen && !max->compare_exchange_weak(seen, value)) {
  }
}

class ProbeEngine final : public Engine {
 public:
  // concurrent: its searches run side by side, as a GPU engine's do (its
  // host work; the device one at a time); else one at a time
  ProbeEngine(CallCounts* counts, bool concurrent)
      : inner_(testing::MakeCpu(1)), counts_(counts), concurrent_(concurrent) {}
  genie_engine_kind kind() const override { return GENIE_ENGINE_GPU; }
  bool ConcurrentSearches() const override { return concurrent_; }
  Status Upload(std::shared_ptr<const InvertedIndex> index) override { return inner_->Upload(std::move(index)); }
  Status Drop() override { return inner_->Drop(); }
  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    Enter();
    Status st = inner_->Search(batch, k, out);
    Leave();
    return st;
  }
  Status SearchCancellable(const genie_query_batch& batch, int32_t k, const CancelCheck& cancel,
                           TopKResults* out) override {
    Enter();
    Status st = inner_->SearchCancellable(batch, k, cancel, out);
    Leave();
    return st;
  }
  Status MatchSet(SetPredicate p, Span<int32_t> keywords, Span<int32_t> sizes, std::vector<int32_t>* out) override {
    Enter();
    Status st = inner_->MatchSet(p, keywords, sizes, out);
    Leave();
    return st;
  }
  int max_active() const { return max_active_.load(); }
  int calls() const { return calls_.load(); }

 private:
  void Enter() {
    RaiseTo(&max_active_, ++active_);
    RaiseTo(&counts_->group_max, ++counts_->in_group);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a device call's time
  }
  void Leave() {
    --counts_->in_group;
    --active_;
    ++calls_;
  }
  std::unique_ptr<Engine> inner_;
  CallCounts* counts_;
  const bool concurrent_;
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
  std::atomic<int> calls_{0};
};

TEST(PlanPlacement, ReplicatesWhatFitsAndShardsTheRest) {
  PlacementPlan p = PlanPlacement(Placement::kAuto, 100, 10, {1000, 1000});
  EXPECT_FALSE(p.sharded);
  EXPECT_EQ(p.ranges, (Ranges{{0, 10}, {0, 10}}));
  p = PlanPlacement(Placement::kAuto, 1500, 10, {1000, 2000});  // beyond the smallest
  EXPECT_TRUE(p.sharded);
  EXPECT_EQ(p.ranges, (Ranges{{0, 5}, {5, 10}}));
  p = PlanPlacement(Placement::kShard, 1, 9, {0, 0, 0});
  EXPECT_TRUE(p.sharded);
  EXPECT_EQ(p.ranges, (Ranges{{0, 3}, {3, 6}, {6, 9}}));
  p = PlanPlacement(Placement::kReplicate, 5000, 9, {1000, 1000});  // each streams it
  EXPECT_FALSE(p.sharded);
  p = PlanPlacement(Placement::kAuto, 1ull << 40, 9, {0, 0});  // no limits: fits
  EXPECT_FALSE(p.sharded);
  p = PlanPlacement(Placement::kShard, 5000, 9, {1000});  // one device: nothing to shard over
  EXPECT_FALSE(p.sharded);
  p = PlanPlacement(Placement::kShard, 10, 2, {0, 0, 0, 0});  // fewer objects than devices
  EXPECT_EQ(p.ranges, (Ranges{{0, 1}, {1, 2}}));
}

TEST(SliceQueryBatch, SlicesSearchedApartEqualTheWholeBatch) {
  Csr csr = RandomCsr(5, DataSpec{});
  auto index = MakeIndex(csr);
  QuerySpec spec;
  spec.queries = 17;
  spec.max_weight = 3;
  QueryBatch batch = RandomBatch(6, spec);
  auto reference = MakeReferenceEngine();
  TopKResults whole = testing::Search(*reference, index, batch.View(), 7);
  for (int32_t pieces : {1, 2, 5, 17}) {
    TopKResults joined;
    for (auto [first, end] : SplitQueries(17, pieces)) {
      QueryBatchSlice storage;
      TopKResults part = testing::Search(*reference, index, SliceQueryBatch(batch.View(), first, end, &storage), 7);
      const auto base = static_cast<int64_t>(joined.hits.size());
      for (std::size_t q = 1; q < part.query_offsets.size(); ++q) joined.query_offsets.push_back(base + part.query_offsets[q]);
      joined.hits.insert(joined.hits.end(), part.hits.begin(), part.hits.end());
    }
    EXPECT_TRUE(SameResults(whole, joined)) << pieces << " pieces";
  }
  EXPECT_TRUE(SplitQueries(0, 4).empty());
}

// Every placement and number of devices against one CPU engine: skewed
// data over few keywords (many ties at the k-th score), k from 1 to beyond
// a shard's objects, batches of 0, 1 and many queries, weights.
TEST(MultiDeviceEngine, EqualsOneEngineHitForHit) {
  DataSpec data;
  data.objects = 997;
  data.universe = 40;
  Csr csr = RandomCsr(11, data);
  auto index = MakeIndex(csr, 64);
  auto one = testing::MakeCpu(2);
  for (int32_t queries : {0, 1, 3, 40}) {
    QuerySpec spec;
    spec.queries = queries;
    spec.max_weight = 3;
    spec.lo_max = 40;
    QueryBatch batch = RandomBatch(12 + queries, spec);
    for (int32_t k : {1, 10, 300, 2000}) {
      TopKResults expected = testing::Search(*one, index, batch.View(), k);
      for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
        for (int32_t devices : {1, 2, 3, 4}) {
          auto group = Group(devices, placement);
          TopKResults got = testing::Search(*group, index, batch.View(), k);
          EXPECT_TRUE(SameResults(expected, got)) << "queries " << queries << " k " << k << " devices " << devices
                                                  << (placement == Placement::kShard ? " sharded" : " replicated");
          EXPECT_EQ(group->sharded(), placement == Placement::kShard && devices > 1);
        }
      }
    }
  }
}

TEST(MultiDeviceEngine, ShardsWhenTheIndexOutgrowsADevice) {
  Csr csr = RandomCsr(21, DataSpec{});
  auto index = MakeIndex(csr);
  std::vector<DeviceMember> members;
  for (int32_t d = 0; d < 3; ++d) {
    DeviceMember m;
    m.device = d;
    m.capacity_bytes = index->MemoryBytes() / 2;  // a third of it fits each
    m.engine = testing::MakeCpu(1);
    members.push_back(std::move(m));
  }
  MultiDeviceEngine group(std::move(members), [] { return testing::MakeCpu(1); }, Placement::kAuto);
  ASSERT_TRUE(group.Upload(index).ok());
  EXPECT_TRUE(group.sharded());
  const auto report = group.Report();
  ASSERT_EQ(report.size(), 3u);
  EXPECT_EQ(report[0].first_object, 0);
  EXPECT_EQ(report[2].end_object, index->num_objects());
  EXPECT_EQ(report[1].first_object, report[0].end_object);
  for (const auto& r : report) EXPECT_LT(r.index_bytes, index->MemoryBytes());
}

// A device lost at upload, at the first search or at a later one: the
// answers stay those of one engine, and the group says which device went.
TEST(MultiDeviceEngine, AFailedDeviceIsDroppedAndItsWorkRedone) {
  Csr csr = RandomCsr(31, DataSpec{});
  auto index = MakeIndex(csr);
  QueryBatch batch = Queries(32, 25);
  auto one = testing::MakeCpu(1);
  TopKResults expected = testing::Search(*one, index, batch.View(), 10);
  for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
    for (int fail_upload : {0, 1}) {
      for (int fail_from : {0, 1}) {
        if (fail_upload && fail_from) continue;
        std::vector<std::unique_ptr<Engine>> engines;
        engines.push_back(nullptr);
        engines.push_back(std::make_unique<FailingEngine>(fail_upload, fail_upload ? -1 : fail_from));
        engines.push_back(nullptr);
        auto group = Group(3, placement, std::move(engines));
        ASSERT_TRUE(group->Upload(index).ok());
        for (int round = 0; round < 3; ++round) {
          TopKResults got;
          ASSERT_TRUE(group->Search(batch.View(), 10, &got).ok());
          EXPECT_TRUE(SameResults(expected, got)) << "round " << round;
        }
        const auto report = group->Report();
        EXPECT_TRUE(report[1].dropped);
        EXPECT_FALSE(report[0].dropped);
        EXPECT_NE(report[1].failure.find("bus"), std::string::npos);
      }
    }
  }
  // every device lost: the host answers alone
  for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (int d = 0; d < 2; ++d) engines.push_back(std::make_unique<FailingEngine>(0, 0, Status::DeviceUnavailable("gone")));
    auto group = Group(2, placement, std::move(engines));
    TopKResults got = testing::Search(*group, index, batch.View(), 10);
    EXPECT_TRUE(SameResults(expected, got));
    for (const auto& r : group->Report()) EXPECT_TRUE(r.dropped);
    // the host engines poll a call's own cancel check too
    CancelCheck asks;
    asks.fn = [](void*) { return 1; };
    EXPECT_EQ(group->SearchCancellable(batch.View(), 10, asks, &got).code(), GENIE_CANCELLED);
  }
}

TEST(MultiDeviceEngine, OtherFailuresGoToTheCaller) {
  Csr csr = RandomCsr(41, DataSpec{});
  auto index = MakeIndex(csr);
  QueryBatch batch = RandomBatch(42, QuerySpec{});
  for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(std::make_unique<FailingEngine>(0, 0, Status::Cancelled()));
    auto group = Group(2, placement, std::move(engines));
    ASSERT_TRUE(group->Upload(index).ok());
    TopKResults got;
    EXPECT_EQ(group->Search(batch.View(), 5, &got).code(), GENIE_CANCELLED);
    EXPECT_FALSE(group->Report()[0].dropped);
    EXPECT_EQ(group->Search(batch.View(), 0, &got).code(), GENIE_INVALID_ARGUMENT);
  }
  // a cancel asked while the shards are cut stops the upload
  std::vector<DeviceMember> members(2);
  for (auto& m : members) m.engine = testing::MakeCpu(1);
  MultiDeviceEngine cancelled(std::move(members), [] { return testing::MakeCpu(1); }, Placement::kShard, 1,
                              CancelCheck{[](void*) { return 1; }, nullptr});
  EXPECT_EQ(cancelled.Upload(index).code(), GENIE_CANCELLED);
  TopKResults none;
  EXPECT_EQ(cancelled.Search(batch.View(), 5, &none).code(), GENIE_INVALID_ARGUMENT);  // nothing uploaded
  auto empty = Group(2, Placement::kShard);
  TopKResults got;
  EXPECT_EQ(empty->Search(batch.View(), 5, &got).code(), GENIE_INVALID_ARGUMENT);  // nothing uploaded
}

TEST(MultiDeviceEngine, SetPredicatesEqualOneIndex) {
  DataSpec data;
  data.objects = 601;
  data.universe = 30;
  Csr csr = RandomCsr(51, data);
  auto index = MakeIndex(csr);
  std::vector<int32_t> sizes;
  ASSERT_TRUE(ObjectSizes(*index, CancelCheck(), &sizes).ok());
  const std::vector<std::vector<int32_t>> queries = {{}, {-50}, {-50, -49}, {-48, -40, -30, -49, -50, -47}};
  for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
    for (int fail : {-1, 0}) {
      // the first member fails: a replicated group asks it first
      std::vector<std::unique_ptr<Engine>> engines;
      engines.push_back(std::make_unique<FailingEngine>(0, fail));
      auto group = Group(3, placement, std::move(engines));
      ASSERT_TRUE(group->Upload(index).ok());
      for (const auto& q : queries) {
        for (SetPredicate p : {SetPredicate::kContains, SetPredicate::kOverlaps, SetPredicate::kContainedBy}) {
          std::vector<int32_t> expected, got;
          ASSERT_TRUE(MatchSet(*index, p, Span<int32_t>(q.data(), q.size()), Span<int32_t>(sizes.data(), sizes.size()),
                               CancelCheck(), &expected).ok());
          ASSERT_TRUE(group->MatchSet(p, Span<int32_t>(q.data(), q.size()), Span<int32_t>(sizes.data(), sizes.size()), &got).ok());
          EXPECT_EQ(expected, got) << "predicate " << static_cast<int>(p) << " of " << q.size() << " keywords";
        }
      }
      EXPECT_EQ(group->Report()[0].dropped, fail >= 0);
    }
  }
}

TEST(MultiDeviceEngine, ConcurrentCallersUseTheDevicesSideBySide) {
  Csr csr = RandomCsr(41, DataSpec{});
  auto index = MakeIndex(csr);
  QueryBatch small = Queries(42, 8);
  QueryBatch large = Queries(43, MultiDeviceEngine::kSplitQueries);
  auto one = testing::MakeCpu(1);
  const TopKResults small_expected = testing::Search(*one, index, small.View(), 10);
  const TopKResults large_expected = testing::Search(*one, index, large.View(), 10);
  for (int round = 0; round < 4; ++round) {
    const Placement placement = round % 2 == 0 ? Placement::kReplicate : Placement::kShard;
    const bool concurrent = round >= 2;
    SCOPED_TRACE(placement == Placement::kShard ? "sharded" : "replicated");
    SCOPED_TRACE(concurrent ? "members search side by side" : "members search one at a time");
    CallCounts counts;
    std::vector<ProbeEngine*> probes;
    std::vector<std::unique_ptr<Engine>> engines;
    for (int d = 0; d < 2; ++d) {
      auto probe = std::make_unique<ProbeEngine>(&counts, concurrent);
      probes.push_back(probe.get());
      engines.push_back(std::move(probe));
    }
    auto group = Group(2, placement, std::move(engines));
    EXPECT_TRUE(group->ConcurrentSearches());
    ASSERT_TRUE(group->Upload(index).ok());
    // A lone caller: a small batch and a large one each split over both.
    TopKResults got;
    ASSERT_TRUE(group->Search(small.View(), 10, &got).ok());
    EXPECT_TRUE(SameResults(small_expected, got));
    ASSERT_TRUE(group->Search(large.View(), 10, &got).ok());
    EXPECT_TRUE(SameResults(large_expected, got));
    EXPECT_EQ(probes[0]->calls(), 2);
    EXPECT_EQ(probes[1]->calls(), 2);
    // The call's own cancel check reaches the devices.
    CancelCheck asks;
    asks.fn = [](void*) { return 1; };
    EXPECT_EQ(group->SearchCancellable(small.View(), 10, asks, &got).code(), GENIE_CANCELLED);
    EXPECT_TRUE(group->SearchCancellable(small.View(), 10, CancelCheck(), &got).ok());
    EXPECT_TRUE(SameResults(small_expected, got));
    const int before = probes[0]->calls() + probes[1]->calls();
    // Four callers at once, small batches and large (the views made here:
    // View() fills the batch's own arrays).
    const genie_query_batch small_view = small.View();
    const genie_query_batch large_view = large.View();
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&, c] {
        for (int i = 0; i < 30; ++i) {
          const bool big = (i + c) % 10 == 0;
          TopKResults mine;
          Status st = group->Search(big ? large_view : small_view, 10, &mine);
          if (!st.ok() || !SameResults(big ? large_expected : small_expected, mine)) ++wrong;
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    if (concurrent && placement == Placement::kReplicate) {
      // four callers, two devices: whole batches double up, never more
      EXPECT_LE(probes[0]->max_active(), MultiDeviceEngine::kCallsPerMember);
      EXPECT_LE(probes[1]->max_active(), MultiDeviceEngine::kCallsPerMember);
      EXPECT_EQ(std::max(probes[0]->max_active(), probes[1]->max_active()), MultiDeviceEngine::kCallsPerMember)
          << "a device took a second batch while one ran";
    } else {
      // (a sharded call takes each device alone)
      EXPECT_EQ(probes[0]->max_active(), 1) << "a device takes one call at a time";
      EXPECT_EQ(probes[1]->max_active(), 1);
    }
    if (placement == Placement::kReplicate) {
      EXPECT_GE(counts.group_max.load(), 2) << "calls ran on both devices at once";
      // a small batch of a caller beside another goes whole to one device
      EXPECT_LT(probes[0]->calls() + probes[1]->calls() - before, 2 * 4 * 30);
    } else {
      EXPECT_EQ(probes[0]->calls() + probes[1]->calls() - before, 2 * 4 * 30);  // every shard in every call
    }
  }
  // A device that fails while callers share the group: every answer exact
  // (where it takes two batches at once, the one that fails first drops
  // it once the other has left).
  for (bool concurrent : {false, true}) {
    SCOPED_TRACE(concurrent ? "failing member searches side by side" : "failing member searches one at a time");
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(nullptr);
    engines.push_back(std::make_unique<FailingEngine>(0, 5, Status::DeviceError("the device fell off the bus"), concurrent));
    auto group = Group(2, Placement::kReplicate, std::move(engines));
    ASSERT_TRUE(group->Upload(index).ok());
    const genie_query_batch small_view = small.View();
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&] {
        for (int i = 0; i < 20; ++i) {
          TopKResults mine;
          Status st = group->Search(small_view, 10, &mine);
          if (!st.ok() || !SameResults(small_expected, mine)) ++wrong;
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_TRUE(group->Report()[1].dropped);
  }
}

// A call waiting for a member's seat stops when its own check asks, and an
// exclusive caller that gives up lets searches in again.
TEST(MemberSeats, AWaitStopsWhenItsCallIsCancelled) {
  using Clock = std::chrono::steady_clock;
  struct Ask {
    std::atomic<bool> now{false};
    Clock::time_point at;
  } ask;
  CancelCheck check;
  check.fn = [](void* arg) { return static_cast<Ask*>(arg)->now.load() ? 1 : 0; };
  check.arg = &ask;
  const auto ask_after = [&ask](int ms) {
    return std::thread([&ask, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      ask.at = Clock::now();
      ask.now = true;
    });
  };
  // The contract is 100 ms from the ask; the bound leaves a loaded CI
  // machine room (the waits poll every 5 ms).
  const auto since_ask_ms = [&ask] { return std::chrono::duration<double, std::milli>(Clock::now() - ask.at).count(); };
  MemberSeats seats;
  ASSERT_TRUE(seats.TakeExclusive(CancelCheck()));
  std::thread asker = ask_after(30);
  EXPECT_FALSE(seats.Take(2, check)) << "no seat while the member is held alone";
  asker.join();
  EXPECT_LT(since_ask_ms(), 250.0) << "the wait stopped soon after its check asked";
  seats.ReleaseExclusive();

  ask.now = false;
  ASSERT_TRUE(seats.Take(2, CancelCheck()));  // a search in the member
  asker = ask_after(30);
  EXPECT_FALSE(seats.TakeExclusive(check));
  asker.join();
  EXPECT_LT(since_ask_ms(), 250.0);
  EXPECT_TRUE(seats.TryTake(2)) << "searches come in again once the exclusive caller gave up";
  seats.Release();
  seats.Release();
  EXPECT_TRUE(seats.TakeExclusive(CancelCheck()));
  seats.ReleaseExclusive();
}

}  // namespace
}  // namespace genie

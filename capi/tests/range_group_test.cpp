// A range search's pass over a device group (capi/src/range_group.hpp) with
// stand-in passes: the plan's shares read every member of the plan exactly
// once, in balanced parts (cut inside an item, or whole queries); the
// group's candidates are one pass's; a GPU that fails is dropped and its
// share read by another; with none left, or on a cancel, the failure goes
// to the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <tuple>
#include <vector>

#include "genie/multi_device.hpp"
#include "range_group.hpp"

namespace genie {
namespace {

using capi::GroupRangePass;
using capi::RangeGroupGpu;
using capi::RangePlanShare;
using capi::SplitRangePlan;

// A plan of n_queries as PlanRangeSearch makes them: items query by query,
// runs of the list's members, then (sometimes) the objects past the list.
RangePlan RandomPlan(std::mt19937* rng, int32_t n_queries, int32_t max_count) {
  RangePlan plan;
  for (int32_t q = 0; q < n_queries; ++q) {
    const int32_t items = static_cast<int32_t>((*rng)() % 5);
    int64_t begin = (*rng)() % 100;
    for (int32_t i = 0; i < items; ++i) {
      const int32_t count = 1 + static_cast<int32_t>((*rng)() % static_cast<uint32_t>(max_count));
      plan.items.push_back(RangeItem{q, count, begin, true});
      begin += count + static_cast<int64_t>((*rng)() % 50);
    }
    if ((*rng)() % 3 == 0) plan.items.push_back(RangeItem{q, 1 + static_cast<int32_t>((*rng)() % 40), 5000, false});
  }
  return plan;
}

// Every (query, listed, position) a plan reads.
using Read = std::tuple<int32_t, bool, int64_t>;
std::vector<Read> Reads(const RangePlan& plan, int32_t first_query = 0) {
  std::vector<Read> out;
  for (const RangeItem& item : plan.items)
    for (int64_t i = 0; i < item.count; ++i) out.emplace_back(first_query + item.query, item.listed, item.begin + i);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t Members(const RangePlan& plan) {
  int64_t n = 0;
  for (const RangeItem& item : plan.items) n += item.count;
  return n;
}

TEST(SplitRangePlan, SharesReadThePlanOnceInBalancedParts) {
  std::mt19937 rng(5);
  for (int32_t trial = 0; trial < 120; ++trial) {
    const int32_t nq = 1 + static_cast<int32_t>(rng() % 40);
    const RangePlan plan = RandomPlan(&rng, nq, trial % 2 == 0 ? 30 : 300);
    const int64_t total = Members(plan);
    for (int32_t shares : {1, 2, 3, 4}) {
      for (bool cut : {true, false}) {
        for (int64_t min_members : {int64_t{0}, int64_t{50}, total}) {
          const std::vector<RangePlanShare> split = SplitRangePlan(plan, shares, cut, min_members);
          int64_t wanted = shares;
          if (min_members > 0) wanted = std::min(wanted, total / min_members);
          wanted = std::max<int64_t>(wanted, 1);
          ASSERT_LE(static_cast<int64_t>(split.size()), wanted);
          if (total > 0) {
            ASSERT_GE(split.size(), 1u);
          }
          std::vector<Read> reads;
          int32_t last_query = -1;
          for (const RangePlanShare& s : split) {
            ASSERT_FALSE(s.plan.items.empty());
            // in query order; a share's queries counted from its first
            EXPECT_GE(s.first_query, cut ? std::max(last_query, 0) : last_query + 1);
            for (const RangeItem& item : s.plan.items) {
              EXPECT_GE(item.query, 0);
              EXPECT_LT(item.query, s.n_queries);
              EXPECT_GT(item.count, 0);
            }
            EXPECT_LE(s.first_query + s.n_queries, nq);
            last_query = s.first_query + s.n_queries - 1;
            const std::vector<Read> mine = Reads(s.plan, s.first_query);
            reads.insert(reads.end(), mine.begin(), mine.end());
            // cut: each share within one member of its equal part
            if (cut && static_cast<int64_t>(split.size()) == wanted) {
              EXPECT_LE(std::llabs(Members(s.plan) - total / wanted), 1) << "trial " << trial;
            }
          }
          std::sort(reads.begin(), reads.end());
          EXPECT_EQ(reads, Reads(plan)) << "trial " << trial << " shares " << shares << " cut " << cut;
        }
      }
    }
  }
}

TEST(SplitRangePlan, OneQueryIsCutOnlyWhenAllowedAndLargeEnough) {
  RangePlan plan;
  plan.items.push_back(RangeItem{0, 100000, 0, false});  // a query over every object, no list
  EXPECT_EQ(SplitRangePlan(plan, 2, true, 32768).size(), 2u);
  EXPECT_EQ(SplitRangePlan(plan, 4, true, 32768).size(), 3u);  // 100,000 / 32,768
  EXPECT_EQ(SplitRangePlan(plan, 2, false, 32768).size(), 1u);
  plan.items[0].count = 40000;
  EXPECT_EQ(SplitRangePlan(plan, 2, true, 32768).size(), 1u);  // below two shares' minimum
  EXPECT_TRUE(SplitRangePlan(RangePlan(), 2, true, 32768).empty());
}

// A stand-in GPU: a candidate for every member its items name (NaN
// distance: the CPU computes it), the queries counted from first_query.
struct FakeGpu {
  Status failure = Status::Ok();  // every pass fails so
  std::atomic<int32_t> passes{0};
  std::atomic<bool> dropped{false};
};

// Its candidates' objects name the query they were read for, counted from
// the batch (first_query + the item's), so a share given the wrong first
// query reads the wrong rows, as a real GPU would.
RangeGroupGpu Member(FakeGpu* gpu) {
  return RangeGroupGpu{[gpu](int32_t first_query, int32_t n_queries, const RangePlan& plan,
                             std::vector<RangeCandidate>* out, capi::RangePassRead*) {
                         ++gpu->passes;
                         if (!gpu->failure.ok()) return gpu->failure;
                         for (const RangeItem& item : plan.items) {
                           if (item.query < 0 || item.query >= n_queries) return Status::Internal("query out of range");
                           for (int64_t i = 0; i < item.count; ++i)
                             out->push_back(RangeCandidate{
                                 item.query,
                                 static_cast<int32_t>((first_query + item.query) * 100000 +
                                                      (item.listed ? 0 : 50000) + item.begin + i),
                                 std::nan("")});
                         }
                         return Status::Ok();
                       },
                       &gpu->dropped};
}

std::vector<std::pair<int32_t, int32_t>> Pairs(const std::vector<RangeCandidate>& c, int32_t first_query) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const RangeCandidate& x : c) out.emplace_back(x.query, x.object);
  std::sort(out.begin(), out.end());
  for (auto& p : out) p.first += first_query;
  return out;
}

TEST(GroupRangePass, CandidatesAreOnePasssAndALostGpuIsReplaced) {
  std::mt19937 rng(8);
  for (int32_t trial = 0; trial < 50; ++trial) {
    const int32_t nq = 1 + static_cast<int32_t>(rng() % 30);
    const RangePlan plan = RandomPlan(&rng, nq, 500);
    const int32_t first_query = static_cast<int32_t>(rng() % 7);  // the batch's place in the search
    FakeGpu alone;
    std::vector<RangeCandidate> expected;
    capi::RangePassRead expected_read;
    expected_read.computed = Members(plan);
    ASSERT_TRUE(Member(&alone).pass(first_query, nq, plan, &expected, &expected_read).ok());
    // three GPUs; in odd trials the second is lost at its first pass
    std::vector<std::unique_ptr<FakeGpu>> gpus;
    std::vector<RangeGroupGpu> members;
    for (int32_t i = 0; i < 3; ++i) {
      gpus.push_back(std::make_unique<FakeGpu>());
      members.push_back(Member(gpus.back().get()));
    }
    if (trial % 2 == 1) gpus[1]->failure = Status::DeviceError("lost");
    std::atomic<uint32_t> turn{0};
    const capi::RangeDevicePass pass = GroupRangePass(members, trial % 4 < 2, 10, &turn);
    std::vector<RangeCandidate> got;
    capi::RangePassRead read;
    read.computed = -1;
    read.on_gpu = false;
    ASSERT_TRUE(pass(first_query, nq, plan, &got, &read).ok());
    EXPECT_EQ(Pairs(got, 0), Pairs(expected, 0)) << "trial " << trial;
    EXPECT_EQ(read.computed, Members(plan));
    EXPECT_TRUE(read.on_gpu);  // the GPUs left read every share
    EXPECT_EQ(gpus[1]->dropped.load(), trial % 2 == 1 && gpus[1]->passes.load() > 0);
    // a lost GPU gets no share of the next batch
    const int32_t before = gpus[1]->passes.load();
    const bool lost = gpus[1]->dropped.load();
    got.clear();
    ASSERT_TRUE(pass(first_query, nq, plan, &got, &read).ok());
    EXPECT_EQ(Pairs(got, 0), Pairs(expected, 0));
    if (lost) {
      EXPECT_EQ(gpus[1]->passes.load(), before);
    }
  }
}

TEST(GroupRangePass, FailuresGoToTheCaller) {
  RangePlan plan;
  plan.items.push_back(RangeItem{0, 1000, 0, true});
  plan.items.push_back(RangeItem{1, 1000, 0, true});
  std::atomic<uint32_t> turn{0};
  FakeGpu a, b;
  a.failure = Status::DeviceError("lost");
  b.failure = Status::DeviceUnavailable("gone");
  std::vector<RangeCandidate> got;
  capi::RangePassRead computed;
  // every GPU lost: a device's failure, and both out for good
  EXPECT_TRUE(DeviceFailed(GroupRangePass({Member(&a), Member(&b)}, true, 10, &turn)(0, 2, plan, &got, &computed)));
  EXPECT_TRUE(a.dropped.load());
  EXPECT_TRUE(b.dropped.load());
  EXPECT_EQ(GroupRangePass({Member(&a), Member(&b)}, true, 10, &turn)(0, 2, plan, &got, &computed).code(),
            GENIE_DEVICE_UNAVAILABLE);
  // a cancel is the caller's, and drops no GPU
  FakeGpu c, d;
  d.failure = Status::Cancelled();
  EXPECT_EQ(GroupRangePass({Member(&c), Member(&d)}, true, 10, &turn)(0, 2, plan, &got, &computed).code(),
            GENIE_CANCELLED);
  EXPECT_FALSE(c.dropped.load());
  EXPECT_FALSE(d.dropped.load());
}

// Batches too small to split (one share) go to the GPUs in turn, the turn
// shared by every pass over the group (as every session's searches share it).
TEST(GroupRangePass, OneShareBatchesTakeTheGpusInTurn) {
  RangePlan plan;
  plan.items.push_back(RangeItem{0, 5, 0, true});
  std::atomic<uint32_t> turn{0};
  FakeGpu a, b, c;
  for (int32_t call = 0; call < 6; ++call) {
    // a pass made anew each call, as each search makes its own
    std::vector<RangeCandidate> got;
    capi::RangePassRead computed;
    ASSERT_TRUE(
        GroupRangePass({Member(&a), Member(&b), Member(&c)}, true, 1000, &turn)(0, 1, plan, &got, &computed).ok());
    EXPECT_EQ(got.size(), 5u);
  }
  EXPECT_EQ(a.passes.load(), 2);
  EXPECT_EQ(b.passes.load(), 2);
  EXPECT_EQ(c.passes.load(), 2);
}

}  // namespace
}  // namespace genie

// A range search's pass over a sharded device group (capi/src/range_group.hpp)
// with stand-in passes: each shard's plan reads exactly the plan's objects
// that are its own, each once; the shards' candidates, in the set's ids, are
// one pass's over the whole set; a GPU that fails, or is out from the start,
// has its shard read on the host (ReadShardOnHost, exact distances against
// L2Distance); other failures go to the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/vectors.hpp"
#include "cluster_list.hpp"
#include "range_group.hpp"

namespace genie {
namespace {

using capi::RangeShard;
using capi::RangeShardMembers;
using capi::ShardedRangePass;
using capi::ShardMembers;
using capi::ShardRangePlan;

// A list over the first list_n of n objects (its members a permutation of
// them), and a plan as PlanRangeSearch makes one: per query runs of the
// members, then sometimes the objects past the list.
struct Fixture {
  int32_t n = 0;
  int32_t list_n = 0;
  std::vector<int32_t> members;
  RangePlan plan;
};

Fixture RandomFixture(std::mt19937* rng, int32_t n_queries) {
  Fixture f;
  f.n = 1 + static_cast<int32_t>((*rng)() % 3000);
  f.list_n = static_cast<int32_t>((*rng)() % static_cast<uint32_t>(f.n + 1));
  f.members.resize(static_cast<std::size_t>(f.list_n));
  std::iota(f.members.begin(), f.members.end(), 0);
  std::shuffle(f.members.begin(), f.members.end(), *rng);
  for (int32_t q = 0; q < n_queries; ++q) {
    int64_t begin = f.list_n > 0 ? (*rng)() % static_cast<uint32_t>(f.list_n) : 0;
    for (int32_t i = 0; i < 4 && begin < f.list_n; ++i) {
      const int32_t count = 1 + static_cast<int32_t>((*rng)() % static_cast<uint32_t>(f.list_n - begin));
      f.plan.items.push_back(RangeItem{q, count, begin, true});
      begin += count + static_cast<int64_t>((*rng)() % 40);
    }
    if (f.list_n < f.n && (*rng)() % 2 == 0) f.plan.items.push_back(RangeItem{q, f.n - f.list_n, f.list_n, false});
  }
  return f;
}

// Contiguous shards of [0, n), as PlanPlacement cuts them (some may be empty).
std::vector<std::pair<int32_t, int32_t>> Cut(std::mt19937* rng, int32_t n, int32_t shards) {
  std::vector<int32_t> ends;
  for (int32_t i = 0; i + 1 < shards; ++i)
    ends.push_back(static_cast<int32_t>((*rng)() % static_cast<uint32_t>(n + 1)));
  std::sort(ends.begin(), ends.end());
  ends.push_back(n);
  std::vector<std::pair<int32_t, int32_t>> out;
  int32_t first = 0;
  for (int32_t end : ends) {
    out.emplace_back(first, end);
    first = end;
  }
  return out;
}

// Every (query, object id) a plan reads; members: the list's (ids from first) or NULL.
using Read = std::pair<int32_t, int32_t>;
std::vector<Read> Reads(const RangePlan& plan, const std::vector<int32_t>& members, int32_t first) {
  std::vector<Read> out;
  for (const RangeItem& item : plan.items)
    for (int64_t at = item.begin; at < item.begin + item.count; ++at)
      out.emplace_back(item.query,
                       first + (item.listed ? members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at)));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShardRangePlan, EachShardReadsItsOwnObjectsOnce) {
  std::mt19937 rng(31);
  for (int32_t trial = 0; trial < 200; ++trial) {
    const Fixture f = RandomFixture(&rng, 1 + static_cast<int32_t>(rng() % 12));
    const std::vector<Read> whole = Reads(f.plan, f.members, 0);
    for (int32_t shards : {1, 2, 3, 4}) {
      std::vector<Read> joined;
      for (const auto& [first, end] : Cut(&rng, f.n, shards)) {
        RangeShardMembers m;
        ASSERT_TRUE(ShardMembers(Span<int32_t>(f.members), first, end, &m).ok());
        ASSERT_EQ(m.before.size(), f.members.size() + 1);
        for (int32_t o : m.members) {
          ASSERT_GE(o, 0);
          ASSERT_LT(o, end - first);
        }
        const RangePlan mine = ShardRangePlan(f.plan, &m, first, end);
        for (const RangeItem& item : mine.items) ASSERT_GT(item.count, 0);
        const std::vector<Read> reads = Reads(mine, m.members, first);
        for (const Read& r : reads) {
          ASSERT_GE(r.second, first);
          ASSERT_LT(r.second, end);
        }
        joined.insert(joined.end(), reads.begin(), reads.end());
      }
      std::sort(joined.begin(), joined.end());
      EXPECT_EQ(joined, whole) << "trial " << trial << " shards " << shards;
    }
  }
}

// A stand-in distance of a query and an object; within the radius 0.5 for
// about half the pairs.
double FakeDistance(int32_t query, int32_t object) { return ((query * 7919 + object * 104729) % 1000) / 1000.0; }

// FakeDistance as a query's metric; *made counts the metrics made (one an
// item the host reads).
class FakeMetric : public QueryMetric {
 public:
  explicit FakeMetric(int32_t query) : query_(query) {}
  double Distance(int32_t object, double) override { return FakeDistance(query_, object); }

 private:
  int32_t query_;
};
capi::RangeShardHost FakeHost(std::atomic<int32_t>* made) {
  capi::RangeShardHost host;
  host.metrics = [made](int32_t q) -> std::unique_ptr<QueryMetric> {
    ++*made;
    return std::make_unique<FakeMetric>(q);
  };
  host.radius = 0.5;
  host.threads = 2;
  return host;
}

// What a GPU's pass over its shard finds: the reads within 0.5, ids counted from the shard's first.
struct FakeShard {
  const std::vector<int32_t>* members = nullptr;  // the shard's, from first
  int32_t first = 0;
  Status failure = Status::Ok();
  std::atomic<bool> dropped{false};
  std::atomic<int32_t> passes{0};
  Status Pass(int32_t first_query, const RangePlan& plan, std::vector<RangeCandidate>* out) {
    ++passes;
    if (!failure.ok()) return failure;
    for (const RangeItem& item : plan.items)
      for (int64_t at = item.begin; at < item.begin + item.count; ++at) {
        const int32_t local = item.listed ? (*members)[static_cast<std::size_t>(at)] : static_cast<int32_t>(at);
        const double d = FakeDistance(first_query + item.query, first + local);
        if (d <= 0.5) out->push_back(RangeCandidate{item.query, local, d});
      }
    return Status::Ok();
  }
};

// A stand-in GPU a shard of the cut, each with its members of f's list and
// a pass bound to it (the members, GPUs and shards appended in cut order).
void AddFakeShards(const Fixture& f, const std::vector<std::pair<int32_t, int32_t>>& cut,
                   std::vector<std::shared_ptr<RangeShardMembers>>* members,
                   std::vector<std::unique_ptr<FakeShard>>* fakes, std::vector<RangeShard>* shards) {
  for (const auto& [first, end] : cut) {
    members->push_back(std::make_shared<RangeShardMembers>());
    ASSERT_TRUE(ShardMembers(Span<int32_t>(f.members), first, end, members->back().get()).ok());
    fakes->push_back(std::make_unique<FakeShard>());
    FakeShard* fake = fakes->back().get();
    fake->members = &members->back()->members;
    fake->first = first;
    RangeShard shard;
    shard.first = first;
    shard.end = end;
    shard.members = members->back();
    shard.dropped = &fake->dropped;
    shard.pass = [fake](int32_t fq, int32_t, const RangePlan& plan, std::vector<RangeCandidate>* out,
                        capi::RangePassRead*) { return fake->Pass(fq, plan, out); };
    shards->push_back(std::move(shard));
  }
}

std::vector<std::tuple<int32_t, int32_t, double>> Sorted(const std::vector<RangeCandidate>& c) {
  std::vector<std::tuple<int32_t, int32_t, double>> out;
  for (const RangeCandidate& x : c) out.emplace_back(x.query, x.object, x.distance);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShardedRangePass, ShardsAnswerAsOnePassAndALostGpuIsReadOnTheHost) {
  std::mt19937 rng(32);
  int32_t lost_reads = 0;
  for (int32_t trial = 0; trial < 60; ++trial) {
    const int32_t nq = 1 + static_cast<int32_t>(rng() % 10);
    const Fixture f = RandomFixture(&rng, nq);
    const int32_t first_query = static_cast<int32_t>(rng() % 5);
    FakeShard alone;
    alone.members = &f.members;
    std::vector<RangeCandidate> expected;
    ASSERT_TRUE(alone.Pass(first_query, f.plan, &expected).ok());
    const auto cut = Cut(&rng, f.n, 1 + trial % 4);
    std::vector<std::shared_ptr<RangeShardMembers>> members;
    std::vector<std::unique_ptr<FakeShard>> fakes;
    std::vector<RangeShard> shards;
    ASSERT_NO_FATAL_FAILURE(AddFakeShards(f, cut, &members, &fakes, &shards));
    // in odd trials the last shard's GPU is lost; in every fourth the
    // first's is out from the start (no pass); the host reads them
    const bool lose = trial % 2 == 1;
    const bool out_from_start = trial % 4 == 0 && shards.size() > 1;
    if (lose) fakes.back()->failure = Status::DeviceError("lost");
    if (out_from_start) shards.front().pass = nullptr;
    std::atomic<int32_t> host_metrics{0};
    const capi::RangeDevicePass pass = ShardedRangePass(shards, FakeHost(&host_metrics));
    for (int32_t round = 0; round < 2; ++round) {
      std::vector<RangeCandidate> got;
      capi::RangePassRead read;
      read.computed = -1;
      read.on_gpu = false;  // (set by the pass, not left as it came)
      read.on_host = true;
      ASSERT_TRUE(pass(first_query, nq, f.plan, &got, &read).ok());
      EXPECT_EQ(Sorted(got), Sorted(expected)) << "trial " << trial << " round " << round;
      int64_t plan_members = 0;  // each member of the plan read once, by a GPU or the host
      for (const RangeItem& item : f.plan.items) plan_members += item.count;
      EXPECT_EQ(read.computed, plan_members);
      // where the parts were read: a GPU's, the host's (a lost or out GPU's shard)
      bool gpu_read = false, host_read = false;
      for (std::size_t i = 0; i < shards.size(); ++i) {
        const bool part = !capi::ShardRangePlan(f.plan, members[i].get(), shards[i].first, shards[i].end).items.empty();
        const bool gpu_out = (i == 0 && out_from_start) || (i + 1 == shards.size() && lose);
        gpu_read = gpu_read || (part && !gpu_out);
        host_read = host_read || (part && gpu_out);
      }
      EXPECT_EQ(read.on_gpu, gpu_read) << "trial " << trial << " round " << round;
      EXPECT_EQ(read.on_host, host_read) << "trial " << trial << " round " << round;
    }
    const bool lost_read = lose && fakes.back()->passes.load() > 0;
    lost_reads += lost_read ? 1 : 0;
    EXPECT_EQ(fakes.back()->dropped.load(), lost_read);
    // a dropped shard is not asked again
    if (lost_read) {
      EXPECT_EQ(fakes.back()->passes.load(), 1);
    }
    if (out_from_start) {
      EXPECT_EQ(fakes.front()->passes.load(), 0);
    }
    if (!lost_read && !out_from_start) {
      EXPECT_EQ(host_metrics.load(), 0);
    }
  }
  EXPECT_GT(lost_reads, 10);  // the lost GPU's branch ran, not only empty shards
}

TEST(ShardedRangePass, OtherFailuresGoToTheCaller) {
  Fixture f;
  f.n = 100;
  f.plan.items.push_back(RangeItem{0, 100, 0, false});
  std::vector<std::unique_ptr<FakeShard>> fakes;
  std::vector<RangeShard> shards;
  for (int32_t i = 0; i < 2; ++i) {
    fakes.push_back(std::make_unique<FakeShard>());
    FakeShard* fake = fakes.back().get();
    fake->first = i * 50;
    RangeShard shard;
    shard.first = i * 50;
    shard.end = i * 50 + 50;
    shard.dropped = &fake->dropped;
    shard.pass = [fake](int32_t fq, int32_t, const RangePlan& plan, std::vector<RangeCandidate>* out,
                        capi::RangePassRead*) { return fake->Pass(fq, plan, out); };
    shards.push_back(std::move(shard));
  }
  fakes[1]->failure = Status::Cancelled();
  std::atomic<int32_t> host_metrics{0};
  const capi::RangeDevicePass pass = ShardedRangePass(shards, FakeHost(&host_metrics));
  std::vector<RangeCandidate> got;
  capi::RangePassRead read;
  EXPECT_EQ(pass(0, 1, f.plan, &got, &read).code(), GENIE_CANCELLED);
  EXPECT_EQ(host_metrics.load(), 0);
  EXPECT_FALSE(fakes[1]->dropped.load());
}

TEST(ShardedRangePass, EveryGpuLostIsTheHostsRead) {
  // every shard's GPU fails mid-search (or is out from the start): the
  // host reads every shard, the rows are the same, and the pass says no
  // GPU read them, so that the search's results name the CPU
  std::mt19937 rng(34);
  for (int32_t trial = 0; trial < 12; ++trial) {
    const Fixture f = RandomFixture(&rng, 3);
    FakeShard alone;
    alone.members = &f.members;
    std::vector<RangeCandidate> expected;
    ASSERT_TRUE(alone.Pass(0, f.plan, &expected).ok());
    std::vector<std::shared_ptr<RangeShardMembers>> members;
    std::vector<std::unique_ptr<FakeShard>> fakes;
    std::vector<RangeShard> shards;
    ASSERT_NO_FATAL_FAILURE(AddFakeShards(f, Cut(&rng, f.n, 1 + trial % 3), &members, &fakes, &shards));
    for (std::size_t i = 0; i < shards.size(); ++i) {
      fakes[i]->failure = Status::DeviceError("lost");
      if (trial % 2 != 0) shards[i].pass = nullptr;  // out from the start
    }
    std::atomic<int32_t> host_metrics{0};
    const capi::RangeDevicePass pass = ShardedRangePass(shards, FakeHost(&host_metrics));
    std::vector<RangeCandidate> got;
    capi::RangePassRead read;
    ASSERT_TRUE(pass(0, 3, f.plan, &got, &read).ok());
    EXPECT_EQ(Sorted(got), Sorted(expected)) << "trial " << trial;
    EXPECT_FALSE(read.on_gpu) << "trial " << trial;
    EXPECT_EQ(read.on_host, !f.plan.items.empty()) << "trial " << trial;
  }
}

TEST(RangeSearchHandle, TheResultsNameTheEngineThatReadTheRows) {
  // a search over a sharded group of two: both GPUs answering, one lost
  // (the other still reads: GPU), both lost (the host reads both: CPU);
  // the rows are the same each time
  const int32_t n = 2000, nq = 3;
  genie_range_scan scan{};
  scan.n_queries = nq;
  scan.radius = 0.5;
  std::vector<std::vector<std::tuple<int32_t, int32_t, double>>> rows;
  for (int32_t lost = 0; lost <= 2; ++lost) {
    std::vector<std::unique_ptr<FakeShard>> fakes;
    std::vector<RangeShard> shards;
    for (int32_t i = 0; i < 2; ++i) {
      fakes.push_back(std::make_unique<FakeShard>());
      FakeShard* fake = fakes.back().get();
      fake->first = i * (n / 2);
      if (i < lost) fake->failure = Status::DeviceError("lost");
      RangeShard shard;
      shard.first = i * (n / 2);
      shard.end = (i + 1) * (n / 2);
      shard.dropped = &fake->dropped;
      shard.pass = [fake](int32_t fq, int32_t, const RangePlan& plan, std::vector<RangeCandidate>* out,
                          capi::RangePassRead*) { return fake->Pass(fq, plan, out); };
      shards.push_back(std::move(shard));
    }
    std::atomic<int32_t> host_metrics{0};
    const capi::RangeShardHost host = FakeHost(&host_metrics);
    genie_range_results* res = nullptr;
    ASSERT_TRUE(capi::RangeSearchHandle(n, host.metrics, GENIE_ENGINE_GPU, nullptr, &scan,
                                        ShardedRangePass(shards, host), nullptr, &res)
                    .ok());
    EXPECT_EQ(res->device, lost == 2 ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU) << lost << " lost";
    std::vector<std::tuple<int32_t, int32_t, double>> got;
    for (int32_t q = 0; q < nq; ++q)
      for (int64_t r = res->query_offsets[q]; r < res->query_offsets[q + 1]; ++r)
        got.emplace_back(q, res->objects[r], res->distances[r]);
    genie_range_results_free(res);
    EXPECT_GT(got.size(), 0u);
    rows.push_back(got);
  }
  EXPECT_EQ(rows[1], rows[0]);
  EXPECT_EQ(rows[2], rows[0]);
}

TEST(RangeSearchHandle, ABatchReadNowhereLeavesTheLabelToTheOthers) {
  // 600 queries are two batches of the pipeline (512, then 88): the
  // first read on the host (every GPU lost), the second read nowhere (a
  // sharded group's plan with nothing in it), on the host or on a GPU;
  // the rows are the same each time
  const int32_t n = 300, nq = 600;
  genie_range_scan scan{};
  scan.n_queries = nq;
  scan.radius = 0.5;
  struct Case {
    capi::RangePassRead first, second;
    genie_engine_kind label;
  };
  capi::RangePassRead host, nowhere, gpu;
  host.on_gpu = false;
  host.on_host = true;
  nowhere.on_gpu = false;
  gpu.on_gpu = true;
  const Case cases[] = {{host, nowhere, GENIE_ENGINE_CPU},
                        {host, host, GENIE_ENGINE_CPU},
                        {host, gpu, GENIE_ENGINE_GPU},
                        {nowhere, nowhere, GENIE_ENGINE_GPU}};
  std::vector<std::tuple<int32_t, int32_t, double>> first_rows;
  for (const Case& c : cases) {
    FakeShard whole;  // the rows, wherever the pass says it read them
    int32_t batches = 0;
    const capi::RangeDevicePass pass = [&](int32_t fq, int32_t, const RangePlan& plan,
                                           std::vector<RangeCandidate>* out, capi::RangePassRead* read) {
      const capi::RangePassRead& said = fq == 0 ? c.first : c.second;
      read->on_gpu = said.on_gpu;
      read->on_host = said.on_host;
      ++batches;
      return whole.Pass(fq, plan, out);
    };
    std::atomic<int32_t> host_metrics{0};
    genie_range_results* res = nullptr;
    const QueryMetricFactory metrics = FakeHost(&host_metrics).metrics;
    ASSERT_TRUE(capi::RangeSearchHandle(n, metrics, GENIE_ENGINE_GPU, nullptr, &scan, pass, nullptr, &res).ok());
    EXPECT_EQ(batches, 2);
    EXPECT_EQ(res->device, c.label);
    std::vector<std::tuple<int32_t, int32_t, double>> got;
    for (int32_t q = 0; q < nq; ++q)
      for (int64_t r = res->query_offsets[q]; r < res->query_offsets[q + 1]; ++r)
        got.emplace_back(q, res->objects[r], res->distances[r]);
    genie_range_results_free(res);
    if (first_rows.empty()) first_rows = got;
    EXPECT_EQ(got, first_rows);
  }
  EXPECT_GT(first_rows.size(), 0u);
}

TEST(ShardedRangePass, ComputedIsTheShardsSum) {
  // a pass that reads other than its plan's members (the strings' length
  // windows) says so; the others count their plan's
  RangePlan plan;
  plan.items.push_back(RangeItem{0, 100, 0, false});
  std::atomic<bool> dropped[2] = {{false}, {false}};
  std::vector<RangeShard> shards(2);
  for (int32_t i = 0; i < 2; ++i) {
    shards[static_cast<std::size_t>(i)].first = i * 30;
    shards[static_cast<std::size_t>(i)].end = i == 0 ? 30 : 100;
    shards[static_cast<std::size_t>(i)].dropped = &dropped[i];
  }
  shards[0].pass = [](int32_t, int32_t, const RangePlan&, std::vector<RangeCandidate>*, capi::RangePassRead* read) {
    EXPECT_EQ(read->computed, 30);
    read->computed = 7;
    return Status::Ok();
  };
  shards[1].pass = [](int32_t, int32_t, const RangePlan&, std::vector<RangeCandidate>*, capi::RangePassRead* read) {
    EXPECT_EQ(read->computed, 70);
    return Status::Ok();
  };
  std::atomic<int32_t> host_metrics{0};
  const capi::RangeDevicePass pass = ShardedRangePass(shards, FakeHost(&host_metrics));
  std::vector<RangeCandidate> got;
  capi::RangePassRead read;
  read.on_gpu = false;
  read.on_host = true;
  ASSERT_TRUE(pass(0, 1, plan, &got, &read).ok());
  EXPECT_EQ(read.computed, 77);
  EXPECT_TRUE(read.on_gpu);
  EXPECT_FALSE(read.on_host);
}

TEST(ReadShardOnHost, TheShardsRowsWithinTheRadiusByL2Distance) {
  std::mt19937 rng(33);
  const int32_t n = 900, dim = 5, nq = 4;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostArray<float> values(static_cast<std::size_t>(n) * dim);
  for (float& v : values) v = normal(rng);
  std::vector<float> queries(static_cast<std::size_t>(nq) * dim);
  for (float& v : queries) v = normal(rng);
  VectorSet set;
  ASSERT_TRUE(BuildVectorSet(dim, n, std::move(values), &set).ok());
  // a list of the first 600 objects, in a shuffled order; the rest past it
  std::vector<int32_t> members(600);
  std::iota(members.begin(), members.end(), 0);
  std::shuffle(members.begin(), members.end(), rng);
  RangePlan plan;
  for (int32_t q = 0; q < nq; ++q) {
    plan.items.push_back(RangeItem{q, 250, q * 50, true});
    plan.items.push_back(RangeItem{q, n - 600, 600, false});
  }
  const int32_t first_query = 1;  // queries 1 .. 4 of a batch of 5
  std::vector<float> batch(static_cast<std::size_t>(dim), 0.0f);
  batch.insert(batch.end(), queries.begin(), queries.end());
  capi::RangeShardHost host;
  host.metrics = VectorQueryMetrics(set, batch.data());
  host.radius = 2.5;
  host.threads = 2;
  for (const auto& [first, end] : {std::pair<int32_t, int32_t>{0, n}, {0, 300}, {300, 700}, {700, n}}) {
    RangeShardMembers m;
    ASSERT_TRUE(ShardMembers(Span<int32_t>(members), first, end, &m).ok());
    std::vector<RangeCandidate> got;
    ASSERT_TRUE(
        capi::ReadShardOnHost(host, first_query, ShardRangePlan(plan, &m, first, end), &m, first, &got).ok());
    std::vector<std::tuple<int32_t, int32_t, double>> expected;
    for (const RangeItem& item : plan.items)
      for (int64_t at = item.begin; at < item.begin + item.count; ++at) {
        const int32_t o = item.listed ? members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at);
        if (o < first || o >= end) continue;
        const double d = L2Distance(batch.data() + static_cast<std::size_t>(first_query + item.query) * dim,
                                    set.row(o), dim);
        if (d <= host.radius) expected.emplace_back(item.query, o, d);
      }
    std::sort(expected.begin(), expected.end());
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(Sorted(got), expected) << first << ".." << end;
  }
}

}  // namespace
}  // namespace genie

// The C API's device-group template (capi/src/device_group.hpp) with
// stand-ins for a set and its GPU copies: replicated and sharded scans equal
// one scan of the whole set, row for row; a GPU that fails to take its copy,
// or fails mid-scan, is dropped and its part scanned on the CPU (the rows
// said to be the CPU's when no GPU answered a part); other failures go to
// the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "device_group.hpp"

namespace genie {
namespace {

// Objects are integers; a query's distance to one is their difference.
struct IntSet {
  std::vector<int32_t> values;
  int32_t size() const { return static_cast<int32_t>(values.size()); }
};

struct FakeGpu {
  int32_t device = 0;
  bool fails = false;  // every scan fails as a lost GPU does
  int32_t scans = 0;
  std::size_t device_bytes() const { return 64; }
};

struct IntRows {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
  std::vector<int32_t> distances;
};

using Group = capi::DeviceGroup<IntSet, FakeGpu>;

// The k nearest of queries [q0, q1) among rows, by (distance, id).
IntRows Brute(const IntSet& rows, const std::vector<int32_t>& queries, int32_t q0, int32_t q1, int32_t k) {
  IntRows out;
  for (int32_t q = q0; q < q1; ++q) {
    std::vector<std::pair<int32_t, int32_t>> all;
    for (int32_t i = 0; i < rows.size(); ++i)
      all.emplace_back(std::abs(rows.values[static_cast<std::size_t>(i)] - queries[static_cast<std::size_t>(q)]), i);
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size() && i < static_cast<std::size_t>(k); ++i) {
      out.distances.push_back(all[i].first);
      out.objects.push_back(all[i].second);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

struct Fixture {
  IntSet set;
  std::vector<int32_t> queries;
  std::atomic<int32_t> cpu_scans{0};  // shards scan on threads of their own

  Fixture() {
    std::mt19937 rng(5);
    for (int i = 0; i < 1003; ++i) set.values.push_back(static_cast<int32_t>(rng() % 50));  // many ties
    for (int i = 0; i < 37; ++i) queries.push_back(static_cast<int32_t>(rng() % 60));
  }

  Status Make(int32_t placement, std::vector<int32_t> fail_at_creation, std::vector<int32_t> fail_scans,
              std::shared_ptr<Group>* group) {
    group->reset();
    EngineOptions options;
    options.device_mask = 7;
    options.placement = placement;
    std::vector<capi::GroupDevice> devices = {{0, 0}, {1, 0}, {2, 0}};
    auto slice = [this](int32_t first, int32_t end, IntSet* rows) {
      rows->values.assign(set.values.begin() + first, set.values.begin() + end);
      return Status::Ok();
    };
    auto make_gpu = [&](const IntSet&, int32_t ordinal, uint64_t, std::unique_ptr<FakeGpu>* gpu) {
      if (std::count(fail_at_creation.begin(), fail_at_creation.end(), ordinal) > 0)
        return Status::DeviceError("the GPU would not take its copy");
      *gpu = std::make_unique<FakeGpu>();
      (*gpu)->device = ordinal;
      (*gpu)->fails = std::count(fail_scans.begin(), fail_scans.end(), ordinal) > 0;
      return Status::Ok();
    };
    return capi::EnsureDeviceGroup(set, set.size(), uint64_t{4} * set.values.size(), devices, options, slice, make_gpu,
                                 group);
  }

  Status Scan(Group* g, int32_t k, IntRows* out, bool* on_gpu = nullptr) {
    auto scan = [&](FakeGpu* gpu, const IntSet& rows, int32_t, int32_t q0, int32_t q1, IntRows* part) {
      if (gpu != nullptr) {
        ++gpu->scans;
        if (gpu->fails) return Status::DeviceError("the GPU fell off the bus");
      } else {
        ++cpu_scans;
      }
      *part = Brute(rows, queries, q0, q1, k);
      return Status::Ok();
    };
    return capi::ScanDeviceGroup(set, g, static_cast<int32_t>(queries.size()), k, scan, std::less<>(), out, on_gpu);
  }
};

void ExpectSame(const IntRows& a, const IntRows& b) {
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.objects, b.objects);
  EXPECT_EQ(a.distances, b.distances);
}

TEST(DeviceGroup, ReplicatedAndShardedEqualOneScan) {
  Fixture f;
  for (int32_t placement : {GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
    for (int32_t k : {1, 7, 400, 2000}) {
      std::shared_ptr<Group> g;
      ASSERT_TRUE(f.Make(placement, {}, {}, &g).ok());
      EXPECT_EQ(g->sharded, placement == GENIE_PLACEMENT_SHARD);
      IntRows got;
      f.cpu_scans = 0;
      bool on_gpu = false;
      ASSERT_TRUE(f.Scan(g.get(), k, &got, &on_gpu).ok());
      ExpectSame(Brute(f.set, f.queries, 0, static_cast<int32_t>(f.queries.size()), k), got);
      EXPECT_EQ(f.cpu_scans, 0);
      EXPECT_TRUE(on_gpu);
      for (const auto& c : g->copies) EXPECT_EQ(c->gpu->scans, 1);  // every GPU took part
      EXPECT_EQ(g->device_bytes(), 3u * 64u);
    }
  }
}

TEST(DeviceGroup, FailedGpusAreDroppedAndTheirPartsRedone) {
  Fixture f;
  const IntRows expected = Brute(f.set, f.queries, 0, static_cast<int32_t>(f.queries.size()), 9);
  for (int32_t placement : {GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
    // GPU 1 will not take its copy; GPU 2 fails in its first scan
    std::shared_ptr<Group> g;
    ASSERT_TRUE(f.Make(placement, {1}, {2}, &g).ok());
    EXPECT_TRUE(g->copies[1]->dropped);
    for (int round = 0; round < 2; ++round) {
      IntRows got;
      bool on_gpu = false;
      ASSERT_TRUE(f.Scan(g.get(), 9, &got, &on_gpu).ok());
      ExpectSame(expected, got);
      EXPECT_TRUE(on_gpu);  // GPU 0 answered its part
    }
    EXPECT_TRUE(g->copies[2]->dropped);
    EXPECT_FALSE(g->copies[0]->dropped);
    EXPECT_EQ(g->copies[2]->gpu->scans, 1);  // dropped after its failure, never asked again
    // every GPU lost: the CPU answers alone
    ASSERT_TRUE(f.Make(placement, {0, 1, 2}, {}, &g).ok());
    f.cpu_scans = 0;
    IntRows got;
    bool on_gpu = true;
    ASSERT_TRUE(f.Scan(g.get(), 9, &got, &on_gpu).ok());
    ExpectSame(expected, got);
    EXPECT_GE(f.cpu_scans, 1);
    EXPECT_FALSE(on_gpu);  // the rows are labelled as the CPU's
    // every GPU fails mid-scan: the CPU redoes every part, and says so
    ASSERT_TRUE(f.Make(placement, {}, {0, 1, 2}, &g).ok());
    f.cpu_scans = 0;
    on_gpu = true;
    ASSERT_TRUE(f.Scan(g.get(), 9, &got, &on_gpu).ok());
    ExpectSame(expected, got);
    EXPECT_GE(f.cpu_scans, 1);
    EXPECT_FALSE(on_gpu);
    for (const auto& c : g->copies) EXPECT_TRUE(c->dropped);
  }
}

TEST(DeviceGroup, OtherFailuresGoToTheCaller) {
  Fixture f;
  EngineOptions options;
  options.device_mask = 3;
  std::shared_ptr<Group> g;
  auto slice = [](int32_t, int32_t, IntSet*) { return Status::Ok(); };
  auto out_of_memory = [](const IntSet&, int32_t, uint64_t, std::unique_ptr<FakeGpu>*) {
    return Status::DeviceOutOfMemory("too large");
  };
  EXPECT_EQ(capi::EnsureDeviceGroup(f.set, f.set.size(), 4, {{0, 0}, {1, 0}}, options, slice, out_of_memory, &g).code(),
            GENIE_DEVICE_OUT_OF_MEMORY);
  ASSERT_TRUE(f.Make(GENIE_PLACEMENT_SHARD, {}, {}, &g).ok());
  auto cancelled = [](FakeGpu*, const IntSet&, int32_t, int32_t, int32_t, IntRows*) { return Status::Cancelled(); };
  IntRows got;
  EXPECT_EQ(capi::ScanDeviceGroup(f.set, g.get(), 5, 3, cancelled, std::less<>(), &got).code(), GENIE_CANCELLED);
  for (const auto& c : g->copies) EXPECT_FALSE(c->dropped);
}

}  // namespace
}  // namespace genie

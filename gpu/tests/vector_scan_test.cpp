// The GPU vector scan against the CPU engine and the brute-force oracle:
// the same rows, order and float64 distances (to the bit) for every shape
// of data (ties, duplicates, underflow, overflow), dimensions around the
// float4 padding and the 16-dimension stages, batches larger than one
// distance group, single queries, excluded vectors, k beyond the set,
// multiple loading through a small memory budget, and cancel.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genie/gpu_vector_scan.hpp"
#include "genie/vector_fixture.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

using testing::BruteForceVectors;
using testing::ExpectSameVectorRows;
using testing::MakeSet;
using testing::NearbyQueries;
using testing::RandomVectors;
using testing::VectorShape;

class GpuVectorScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  }
  static bool GpuAvailable() {
    const VectorSet set = MakeSet(1, 1, {0.0f});
    std::unique_ptr<GpuVectorSet> gpu;
    return GpuVectorSet::Create(set, 0, 0, &gpu).ok();
  }
};

struct Case {
  VectorShape shape;
  int32_t n, dim, nq, k;
};

void Check(const Case& c, uint64_t budget, std::mt19937* rng, bool brute_force) {
  const std::vector<float> data = RandomVectors(rng, c.shape, c.n, c.dim);
  const std::vector<float> queries = NearbyQueries(rng, data, c.n, c.dim, c.nq, 0.05f);
  const VectorSet set = MakeSet(c.dim, c.n, data);
  std::unique_ptr<GpuVectorSet> gpu;
  Status s = GpuVectorSet::Create(set, 0, budget, &gpu);
  ASSERT_TRUE(s.ok()) << s.message();
  for (bool with_excluded : {false, true}) {
    std::vector<uint8_t> excluded;
    VectorScanRequest request;
    request.n_queries = c.nq;
    request.queries = queries.data();
    request.k = c.k;
    if (with_excluded) {
      excluded.resize(static_cast<std::size_t>(c.n));
      for (auto& e : excluded) e = (*rng)() % 4 == 0;
      request.excluded = excluded;
    }
    const std::string what = std::string(testing::ShapeName(c.shape)) + " n=" + std::to_string(c.n) +
                             " dim=" + std::to_string(c.dim) + " nq=" + std::to_string(c.nq) +
                             " k=" + std::to_string(c.k) + " parts=" + std::to_string(gpu->parts()) +
                             (with_excluded ? " excluded" : "");
    VectorScanResult on_gpu, on_cpu;
    s = gpu->Scan(set, request, &on_gpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    s = CpuVectorScan(set, request, 0, &on_cpu);
    ASSERT_TRUE(s.ok()) << s.message();
    ExpectSameVectorRows(on_cpu, on_gpu, what + " (GPU vs CPU)");
    if (brute_force) ExpectSameVectorRows(BruteForceVectors(set, request), on_gpu, what + " (GPU vs brute force)");
  }
}

TEST_F(GpuVectorScanTest, EqualsCpuAndBruteForce) {
  std::mt19937 rng(20261125);
  const Case cases[] = {
      {VectorShape::kGaussian, 3000, 16, 70, 10},     {VectorShape::kGaussian, 2500, 784, 130, 5},
      {VectorShape::kGaussian, 9000, 9, 1, 7},        {VectorShape::kGaussian, 5000, 1, 3, 3},
      {VectorShape::kGaussian, 4000, 17, 2, 100},     {VectorShape::kSmallIntegers, 3000, 8, 20, 10},
      {VectorShape::kSmallIntegers, 6000, 3, 5, 25},  {VectorShape::kDuplicates, 2000, 12, 9, 10},
      {VectorShape::kTiny, 1500, 7, 8, 5},            {VectorShape::kHuge, 1500, 33, 8, 5},
      {VectorShape::kGaussian, 50, 5, 6, 80},         {VectorShape::kGaussian, 1, 1, 3, 1},
      {VectorShape::kGaussian, 0, 4, 2, 3},           {VectorShape::kGaussian, 700, 130, 1, 1},
      // groups of 1 to 8 queries take the small-group kernel (a warp a
      // vector); 8 queries of 2,000 dimensions do not fit its shared memory
      {VectorShape::kGaussian, 3000, 784, 1, 10},     {VectorShape::kGaussian, 3000, 784, 4, 10},
      {VectorShape::kDuplicates, 2500, 784, 8, 20},   {VectorShape::kHuge, 2000, 96, 3, 7},
      {VectorShape::kGaussian, 1500, 2000, 3, 5},     {VectorShape::kGaussian, 1500, 2000, 8, 5},
      {VectorShape::kSmallIntegers, 5000, 5, 1, 50},
      // groups of 9 to 64 Gaussian queries (no value near 0) take the
      // tensor cores' 32- and 64-query tiles
      {VectorShape::kGaussian, 3000, 784, 20, 10},    {VectorShape::kGaussian, 4000, 33, 50, 10},
      {VectorShape::kGaussian, 300, 130, 64, 300},
      // more than 64 queries with k beyond BestKernel's 256 (the host's
      // sort) and beyond the set (every row, in order)
      {VectorShape::kGaussian, 2000, 16, 100, 500},   {VectorShape::kGaussian, 300, 16, 100, 1000},
  };
  for (const Case& c : cases) Check(c, 0, &rng, true);
}

TEST_F(GpuVectorScanTest, LargeBatchesSpanSeveralGroups) {
  std::mt19937 rng(5);
  // the default budget: one group of all the queries
  Check({VectorShape::kGaussian, 200000, 32, 1000, 10}, 0, &rng, false);
  Check({VectorShape::kSmallIntegers, 100000, 4, 400, 5}, 0, &rng, false);
  // a 1 GB budget: a 256 MB distance buffer holds 335 queries of 200,000
  // vectors, rounded to two whole tiles (256): groups of 256, 256, 256, 232
  Check({VectorShape::kGaussian, 200000, 32, 1000, 10}, 1ull << 30, &rng, false);
  // 64 MB: 16 MB of distances, groups of 20 queries (less than a tile)
  Check({VectorShape::kGaussian, 200000, 32, 300, 10}, 64ull << 20, &rng, false);
  // a single query's select over 245 blocks; duplicates beyond the gather's room
  Check({VectorShape::kGaussian, 1000000, 8, 1, 10}, 0, &rng, false);
  Check({VectorShape::kDuplicates, 300000, 4, 5, 10}, 0, &rng, false);
}

// Small scans go up in one pinned copy with host-computed norms (at most 64
// queries) and find their k-th bound over several blocks a query (fewer than
// 32); one set scanned again and again, also from two threads at once,
// must keep answering exactly (the select's bins and tickets are reused).
TEST_F(GpuVectorScanTest, SmallScansOfOneSetRepeatedAndConcurrent) {
  std::mt19937 rng(20261128);
  const int32_t n = 60000, dim = 100;
  const VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kSmallIntegers, n, dim));
  std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, 65, 0.05f);
  // the noise around a 0 is about 1e-31: 0 instead, so that groups of 9 to
  // 65 take the tensor cores' tiles (values below 2^-32 keep them off)
  for (float& x : queries)
    if (std::fabs(x) < 0x1p-32f) x = 0.0f;
  std::unique_ptr<GpuVectorSet> gpu;
  ASSERT_TRUE(GpuVectorSet::Create(set, 0, 0, &gpu).ok());
  auto scan = [&](int32_t nq, int32_t k, const std::string& what) {
    VectorScanRequest request;
    request.n_queries = nq;
    request.queries = queries.data();
    request.k = k;
    VectorScanResult on_gpu, on_cpu;
    const Status s = gpu->Scan(set, request, &on_gpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    ASSERT_TRUE(CpuVectorScan(set, request, 1, &on_cpu).ok());
    ExpectSameVectorRows(on_cpu, on_gpu, what);
  };
  for (int round = 0; round < 2; ++round)
    for (int32_t nq : {1, 2, 3, 8, 9, 31, 32, 40, 64, 65})
      for (int32_t k : {1, 10, 300})
        scan(nq, k, "round " + std::to_string(round) + " nq=" + std::to_string(nq) + " k=" + std::to_string(k));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) scan(1 + (i + t) % 9, 10, "thread " + std::to_string(t) + " call " + std::to_string(i));
    });
  for (auto& th : threads) th.join();
}

// The k-th bound's select at its edges, over many blocks a query: every
// bound equal (all rows the same vector), k = n, and a k-th bound of +inf
// (all but 100 rows excluded, k 300).
TEST_F(GpuVectorScanTest, SelectAtItsEdges) {
  std::mt19937 rng(7);
  auto check = [&](const VectorSet& set, int32_t nq, int32_t k, const std::vector<uint8_t>& excluded,
                   const std::string& what) {
    const std::vector<float> queries = NearbyQueries(&rng, set.values, set.size(), set.dim, nq, 0.05f);
    std::unique_ptr<GpuVectorSet> gpu;
    ASSERT_TRUE(GpuVectorSet::Create(set, 0, 0, &gpu).ok());
    VectorScanRequest request;
    request.n_queries = nq;
    request.queries = queries.data();
    request.k = k;
    request.excluded = excluded;
    for (int round = 0; round < 3; ++round) {
      VectorScanResult on_gpu, on_cpu;
      const Status s = gpu->Scan(set, request, &on_gpu);
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
      ASSERT_TRUE(CpuVectorScan(set, request, 1, &on_cpu).ok());
      ExpectSameVectorRows(on_cpu, on_gpu, what + " round " + std::to_string(round));
    }
  };
  const int32_t n = 40000, dim = 16;
  std::vector<float> same(static_cast<std::size_t>(n) * dim);
  for (std::size_t i = 0; i < same.size(); ++i) same[i] = static_cast<float>(i % dim);
  check(MakeSet(dim, n, same), 5, 10, {}, "every row the same vector");
  const VectorSet gaussian = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  check(MakeSet(dim, 5000, std::vector<float>(gaussian.values.begin(), gaussian.values.begin() + 5000 * dim)), 2,
        5000, {}, "k = n");
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 1);
  for (int32_t i = 0; i < 100; ++i) excluded[static_cast<std::size_t>(i) * 397 % n] = 0;
  check(gaussian, 3, 300, excluded, "all but 100 rows excluded, k 300");
}

TEST_F(GpuVectorScanTest, MultipleLoadingThroughASmallBudget) {
  std::mt19937 rng(9);
  // 4 MB: 1 MB of distances and 3 MB of vectors, 6,144 vectors of 128 floats a part
  const Case c{VectorShape::kGaussian, 40000, 128, 50, 10};
  Check(c, 4ull << 20, &rng, false);
  const VectorSet set = MakeSet(c.dim, c.n, RandomVectors(&rng, c.shape, c.n, c.dim));
  std::unique_ptr<GpuVectorSet> gpu;
  ASSERT_TRUE(GpuVectorSet::Create(set, 0, 4ull << 20, &gpu).ok());
  EXPECT_GT(gpu->parts(), 1);
  Check({VectorShape::kDuplicates, 30000, 20, 7, 15}, 2ull << 20, &rng, false);
  // 24 MB of Fashion-MNIST-wide vectors: 6 MB of distances, three parts of
  // 5,888 rows, groups of 256, 256 and 88 queries; on Hopper each takes the
  // warpgroup tiles, its queries rounded to TF32 before each launch
  Check({VectorShape::kGaussian, 12000, 784, 600, 10}, 24ull << 20, &rng, false);
}

TEST_F(GpuVectorScanTest, HonoursCancel) {
  std::mt19937 rng(13);
  const VectorSet set = MakeSet(64, 50000, RandomVectors(&rng, VectorShape::kGaussian, 50000, 64));
  const std::vector<float> queries = NearbyQueries(&rng, set.values, 50000, 64, 10, 0.1f);
  std::unique_ptr<GpuVectorSet> gpu;
  ASSERT_TRUE(GpuVectorSet::Create(set, 0, 0, &gpu).ok());
  VectorScanRequest request;
  request.n_queries = 10;
  request.queries = queries.data();
  request.k = 5;
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  VectorScanResult out;
  EXPECT_EQ(gpu->Scan(set, request, &out, cancel).code(), GENIE_CANCELLED);
}

// A query value that is NaN or infinite is refused as the CPU engine
// refuses it, whichever way the queries are staged: checked on the host
// for a few, while they are copied on several threads for many (the bad
// value in the first query, the middle one or the last one), and for a
// set with no vectors; the set's device copy then still answers.
TEST_F(GpuVectorScanTest, RefusesValuesThatAreNotFinite) {
  std::mt19937 rng(20261203);
  const int32_t dim = 300;
  const VectorSet set = MakeSet(dim, 4000, RandomVectors(&rng, VectorShape::kGaussian, 4000, dim));
  const VectorSet empty = MakeSet(dim, 0, {});
  std::unique_ptr<GpuVectorSet> gpu, gpu_empty;
  ASSERT_TRUE(GpuVectorSet::Create(set, 0, 0, &gpu).ok());
  ASSERT_TRUE(GpuVectorSet::Create(empty, 0, 0, &gpu_empty).ok());
  for (int32_t nq : {5, 64, 65, 3000}) {
    for (int32_t bad_query : {0, nq / 2, nq - 1}) {
      for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
        std::vector<float> queries = NearbyQueries(&rng, set.values, 4000, dim, nq, 0.05f);
        queries[static_cast<std::size_t>(bad_query) * dim + static_cast<std::size_t>(rng() % dim)] = bad;
        VectorScanRequest request;
        request.n_queries = nq;
        request.queries = queries.data();
        request.k = 10;
        const std::string what = "nq=" + std::to_string(nq) + " bad query " + std::to_string(bad_query) + " " +
                                 std::to_string(bad);
        VectorScanResult on_gpu, on_cpu;
        const Status cpu = CpuVectorScan(set, request, 0, &on_cpu);
        ASSERT_EQ(cpu.code(), GENIE_INVALID_ARGUMENT) << what;
        const Status s = gpu->Scan(set, request, &on_gpu);
        EXPECT_EQ(s.code(), GENIE_INVALID_ARGUMENT) << what;
        EXPECT_EQ(s.message(), cpu.message()) << what;
        EXPECT_EQ(gpu_empty->Scan(empty, request, &on_gpu).code(), GENIE_INVALID_ARGUMENT) << what << " (empty set)";
      }
    }
  }
  // the same copy answers finite queries afterwards, as the CPU engine
  const std::vector<float> queries = NearbyQueries(&rng, set.values, 4000, dim, 200, 0.05f);
  VectorScanRequest request;
  request.n_queries = 200;
  request.queries = queries.data();
  request.k = 10;
  VectorScanResult on_gpu, on_cpu;
  ASSERT_TRUE(gpu->Scan(set, request, &on_gpu).ok());
  ASSERT_TRUE(CpuVectorScan(set, request, 0, &on_cpu).ok());
  ExpectSameVectorRows(on_cpu, on_gpu, "finite queries after refused ones");
}

}  // namespace
}  // namespace genie

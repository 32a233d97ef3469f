// Tests of the vector scan: L2Distance against a long double reference, the
// float32 filter's bound on adversarial data, CpuVectorScan against the
// brute-force oracle (every shape, dimensions around the SIMD width,
// batches and single queries split in stripes, excluded vectors, k beyond
// the set), re-ranking, bad input and cancel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

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

TEST(L2Distance, MatchesLongDoubleReference) {
  std::mt19937 rng(20261125);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int32_t dim : {1, 2, 7, 64, 784}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> a(dim), b(dim);
      for (int32_t j = 0; j < dim; ++j) a[j] = normal(rng), b[j] = normal(rng);
      long double ref = 0;
      for (int32_t j = 0; j < dim; ++j) {
        const long double d = static_cast<long double>(a[j]) - b[j];
        ref += d * d;
      }
      const double got = L2Distance(a.data(), b.data(), dim);
      EXPECT_NEAR(got, std::sqrt(static_cast<double>(ref)), 1e-12 * std::sqrt(static_cast<double>(ref)) + 1e-300);
      EXPECT_EQ(L2Distance(a.data(), a.data(), dim), 0.0);
    }
  }
  const float x[] = {3.0f, 0.0f}, y[] = {0.0f, 4.0f};
  EXPECT_EQ(L2Distance(x, y, 2), 5.0);
}

// Several rows at once: the very numbers of L2Distance, one row at a time,
// for every count around the blocks of 8 and 4, with magnitudes from
// underflow to 1e30, and either side of the subtraction.
TEST(L2Distances, EqualsL2DistanceBitForBit) {
  std::mt19937 rng(20261128);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 100);
  for (int32_t dim : {1, 3, 8, 33, 784}) {
    for (int64_t count : {0, 1, 3, 4, 5, 7, 8, 9, 12, 13, 17, 40}) {
      std::vector<float> query(static_cast<std::size_t>(dim));
      std::vector<std::vector<float>> data(static_cast<std::size_t>(count), std::vector<float>(query.size()));
      for (auto& v : query) v = std::ldexp(unit(rng), exponent(rng));
      std::vector<const float*> rows;
      for (auto& row : data) {
        for (auto& v : row) v = std::ldexp(unit(rng), exponent(rng));
        rows.push_back(row.data());
      }
      std::vector<double> got(static_cast<std::size_t>(count));
      L2Distances(query.data(), rows.data(), count, dim, got.data());
      for (int64_t j = 0; j < count; ++j) {
        const std::size_t i = static_cast<std::size_t>(j);
        EXPECT_EQ(got[i], L2Distance(rows[i], query.data(), dim)) << "dim " << dim << " count " << count << " row " << j;
        EXPECT_EQ(got[i], L2Distance(query.data(), rows[i], dim)) << "dim " << dim << " count " << count << " row " << j;
      }
    }
  }
}

// The float32 distance of any order stays within the bound the threshold
// assumes, including near-cancellation, underflow and the extremes.
TEST(FilterThreshold, BoundsTheFloat32Error) {
  std::mt19937 rng(7);
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kSmallIntegers, VectorShape::kTiny}) {
    for (int32_t dim : {1, 3, 8, 9, 100, 784}) {
      const std::vector<float> v = RandomVectors(&rng, shape, 64, dim);
      const std::vector<float> q = NearbyQueries(&rng, v, 64, dim, 16, 1e-4f);
      for (int32_t qi = 0; qi < 16; ++qi) {
        for (int32_t r = 0; r < 64; ++r) {
          const float* a = v.data() + static_cast<std::size_t>(r) * dim;
          const float* b = q.data() + static_cast<std::size_t>(qi) * dim;
          const double exact = std::pow(L2Distance(a, b, dim), 2.0);
          const float s32 = SquaredL2Float32(a, b, dim);
          // the vector itself, as the k-th, is always within its own threshold
          EXPECT_LE(static_cast<double>(s32), FilterThreshold(dim, s32));
          const double e = (dim + 2.0) * 0x1p-24, slack = (dim + 1.0) * 0x1p-149;
          EXPECT_LE(std::fabs(static_cast<double>(s32) - exact), e * exact * 1.000001 + slack)
              << testing::ShapeName(shape) << " dim " << dim;
        }
      }
    }
  }
  EXPECT_TRUE(std::isinf(FilterThreshold(4, std::numeric_limits<float>::infinity())));
}

struct ScanCase {
  VectorShape shape;
  int32_t n, dim, nq, k;
  int32_t threads;
};

// One query's float32 distance is the group's for that query, bit for bit
// (the header's contract), with and without a tail beyond 8 dimensions.
TEST(SquaredL2Float32, EqualsTheGroupsBitForBit) {
  std::mt19937 rng(11);
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kSmallIntegers, VectorShape::kHuge}) {
    for (int32_t dim : {1, 3, 8, 9, 37, 100, 784}) {
      const std::vector<float> v = RandomVectors(&rng, shape, 16, dim);
      const std::vector<float> q = NearbyQueries(&rng, v, 16, dim, 4, 0.1f);
      const float* group[kDistanceGroup];
      for (int g = 0; g < kDistanceGroup; ++g) group[g] = q.data() + static_cast<std::size_t>(g) * dim;
      for (int32_t r = 0; r < 16; ++r) {
        const float* row = v.data() + static_cast<std::size_t>(r) * dim;
        float out[kDistanceGroup];
        SquaredL2Float32Group(row, group, dim, out);
        for (int g = 0; g < kDistanceGroup; ++g) {
          const float one = SquaredL2Float32(row, group[g], dim);
          EXPECT_EQ(std::memcmp(&one, &out[g], sizeof(float)), 0)
              << testing::ShapeName(shape) << " dim " << dim << ": " << one << " vs " << out[g];
        }
      }
    }
  }
}

TEST(CpuVectorScan, EqualsBruteForce) {
  std::mt19937 rng(20261126);
  const ScanCase cases[] = {
      {VectorShape::kGaussian, 2000, 16, 37, 10, 4},   {VectorShape::kGaussian, 3000, 784, 5, 5, 3},
      {VectorShape::kGaussian, 9000, 9, 1, 7, 4},      {VectorShape::kSmallIntegers, 3000, 8, 20, 10, 2},
      {VectorShape::kSmallIntegers, 5000, 3, 1, 25, 4}, {VectorShape::kDuplicates, 1500, 12, 9, 10, 2},
      {VectorShape::kTiny, 1500, 7, 8, 5, 2},         {VectorShape::kHuge, 1500, 33, 8, 5, 2},
      {VectorShape::kGaussian, 50, 5, 6, 80, 2},      {VectorShape::kGaussian, 1, 1, 3, 1, 1},
      {VectorShape::kGaussian, 0, 4, 2, 3, 1},        {VectorShape::kSmallIntegers, 12000, 2, 3, 1000, 4},
  };
  for (const ScanCase& c : cases) {
    const std::vector<float> data = RandomVectors(&rng, c.shape, c.n, c.dim);
    const std::vector<float> queries = NearbyQueries(&rng, data, c.n, c.dim, c.nq, 0.05f);
    const VectorSet set = MakeSet(c.dim, c.n, data);
    for (bool with_excluded : {false, true}) {
      std::vector<uint8_t> excluded;
      VectorScanRequest request;
      request.n_queries = c.nq;
      request.queries = queries.data();
      request.k = c.k;
      if (with_excluded) {
        excluded.resize(static_cast<std::size_t>(c.n));
        for (auto& e : excluded) e = rng() % 3 == 0;
        request.excluded = excluded;
      }
      VectorScanResult got;
      Status s = CpuVectorScan(set, request, c.threads, &got);
      ASSERT_TRUE(s.ok()) << s.message();
      ExpectSameVectorRows(BruteForceVectors(set, request), got,
                           std::string(testing::ShapeName(c.shape)) + " n=" + std::to_string(c.n) +
                               " dim=" + std::to_string(c.dim) + " k=" + std::to_string(c.k) +
                               (with_excluded ? " excluded" : ""));
    }
  }
}

TEST(RerankVectors, RanksGivenCandidatesOnly) {
  std::mt19937 rng(3);
  const int32_t n = 500, dim = 6;
  const std::vector<float> data = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
  const VectorSet set = MakeSet(dim, n, data);
  const std::vector<float> queries = NearbyQueries(&rng, data, n, dim, 2, 0.1f);
  // query 0: ids 0..99 with duplicates and out-of-range ids; query 1: none
  std::vector<int32_t> cands;
  for (int32_t i = 0; i < 100; ++i) cands.push_back(i);
  cands.push_back(5);
  cands.push_back(-1);
  cands.push_back(n + 3);
  std::vector<int64_t> offsets = {0, static_cast<int64_t>(cands.size()), static_cast<int64_t>(cands.size())};
  std::vector<uint8_t> excluded(n, 0);
  excluded[0] = 1;
  VectorScanResult got;
  ASSERT_TRUE(RerankVectors(set, queries.data(), 2, 10, offsets, cands, excluded, 2, &got).ok());
  ASSERT_EQ(got.offsets, (std::vector<int64_t>{0, 10, 10}));
  // the oracle over ids 1..99
  std::vector<uint8_t> only(n, 1);
  for (int32_t i = 1; i < 100; ++i) only[i] = 0;
  VectorScanRequest request;
  request.n_queries = 1;
  request.queries = queries.data();
  request.k = 10;
  request.excluded = only;
  const VectorScanResult want = BruteForceVectors(set, request);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(got.objects[i], want.objects[i]);
    EXPECT_EQ(got.distances[i], want.distances[i]);
  }
}

// Re-ranking by objects: blocks of queries (a wide dimension makes several
// blocks of 400 queries), objects chosen by many queries, short groups,
// duplicates, ids out of range, excluded vectors and queries with no
// candidate; one query of many candidates on several threads.  Each query
// against the oracle over its own candidates.
TEST(RerankVectors, EqualsBruteForceOverEachQuerysCandidates) {
  std::mt19937 rng(5);
  struct Shape {
    int32_t n, dim, nq, per_query, k, threads;
  };
  // the last: 200 pairs over 100,000 objects, sorted rather than counted
  for (const Shape& sh : {Shape{300, 3000, 400, 40, 10, 2}, Shape{5000, 8, 1, 4000, 20, 2},
                          Shape{200, 9, 37, 150, 5, 3}, Shape{100000, 2, 20, 10, 5, 2}}) {
    const std::vector<float> data = RandomVectors(&rng, VectorShape::kGaussian, sh.n, sh.dim);
    const VectorSet set = MakeSet(sh.dim, sh.n, data);
    const std::vector<float> queries = NearbyQueries(&rng, data, sh.n, sh.dim, sh.nq, 0.1f);
    std::vector<uint8_t> excluded(static_cast<std::size_t>(sh.n), 0);
    for (int32_t i = 0; i < sh.n; i += 11) excluded[static_cast<std::size_t>(i)] = 1;
    std::uniform_int_distribution<int32_t> id(-2, sh.n + 1);
    std::vector<int64_t> offsets{0};
    std::vector<int32_t> cands;
    for (int32_t q = 0; q < sh.nq; ++q) {
      if (q % 9 != 4)
        for (int32_t c = 0; c < sh.per_query; ++c) cands.push_back(id(rng));
      offsets.push_back(static_cast<int64_t>(cands.size()));
    }
    VectorScanResult got;
    ASSERT_TRUE(RerankVectors(set, queries.data(), sh.nq, sh.k, offsets, cands, excluded, sh.threads, &got).ok());
    ASSERT_EQ(got.offsets.size(), static_cast<std::size_t>(sh.nq) + 1);
    for (int32_t q = 0; q < sh.nq; ++q) {
      // the oracle: every vector but this query's valid candidates excluded
      std::vector<uint8_t> only(static_cast<std::size_t>(sh.n), 1);
      for (int64_t c = offsets[q]; c < offsets[q + 1]; ++c) {
        const int32_t i = cands[static_cast<std::size_t>(c)];
        if (i >= 0 && i < sh.n && excluded[static_cast<std::size_t>(i)] == 0) only[static_cast<std::size_t>(i)] = 0;
      }
      VectorScanRequest request;
      request.n_queries = 1;
      request.queries = queries.data() + static_cast<std::size_t>(q) * static_cast<std::size_t>(sh.dim);
      request.k = sh.k;
      request.excluded = only;
      const VectorScanResult want = BruteForceVectors(set, request);
      const std::vector<int32_t> have_ids(got.objects.begin() + got.offsets[q], got.objects.begin() + got.offsets[q + 1]);
      const std::vector<double> have_d(got.distances.begin() + got.offsets[q], got.distances.begin() + got.offsets[q + 1]);
      ASSERT_EQ(have_ids, want.objects) << "n " << sh.n << " query " << q;
      ASSERT_EQ(have_d, want.distances) << "n " << sh.n << " query " << q;
    }
  }
}

TEST(CpuVectorScan, RejectsBadInput) {
  VectorSet set;
  EXPECT_EQ(BuildVectorSet(0, 0, {}, &set).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(BuildVectorSet(2, 2, {1, 2, 3}, &set).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(BuildVectorSet(2, 1, {1, std::nanf("")}, &set).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(BuildVectorSet(2, 1, {1, std::numeric_limits<float>::infinity()}, &set).code(),
            GENIE_INVALID_ARGUMENT);
  set = MakeSet(2, 2, {0, 0, 1, 1});
  const float bad[] = {std::nanf(""), 0};
  const float good[] = {0, 0};
  VectorScanRequest request;
  request.n_queries = 1;
  request.queries = bad;
  VectorScanResult out;
  EXPECT_EQ(CpuVectorScan(set, request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  request.queries = good;
  request.k = 0;
  EXPECT_EQ(CpuVectorScan(set, request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  request.k = 1;
  const std::vector<uint8_t> wrong(3, 0);
  request.excluded = wrong;
  EXPECT_EQ(CpuVectorScan(set, request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
}

TEST(CpuVectorScan, HonoursCancel) {
  std::mt19937 rng(11);
  const int32_t n = 20000, dim = 64;
  const VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, 3, 0.1f);
  VectorScanRequest request;
  request.n_queries = 3;
  request.queries = queries.data();
  request.k = 5;
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  VectorScanResult out;
  EXPECT_EQ(CpuVectorScan(set, request, 2, &out, cancel).code(), GENIE_CANCELLED);
}

// CheckFinite screens blocks of 4,096 values: a NaN or an infinity is found
// wherever it sits (block edges, the last value, a short tail), every finite
// value (extremes, subnormals, -0) passes, and the message names the kind.
TEST(CheckFinite, FindsEveryNonFiniteValue) {
  const std::size_t n = 3 * 4096 + 17;
  std::vector<float> values(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1e6f, 1e6f);
  for (float& v : values) v = uniform(rng);
  values[1] = std::numeric_limits<float>::max();
  values[2] = -std::numeric_limits<float>::max();
  values[3] = std::numeric_limits<float>::denorm_min();
  values[4] = -0.0f;
  EXPECT_TRUE(CheckFinite(values.data(), n, "a vector").ok());
  EXPECT_TRUE(CheckFinite(values.data(), 0, "a vector").ok());
  for (std::size_t at : {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, std::size_t{8191},
                         std::size_t{3 * 4096}, n - 1}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      std::vector<float> copy = values;
      copy[at] = bad;
      const Status status = CheckFinite(copy.data(), n, "a vector");
      ASSERT_FALSE(status.ok()) << at;
      EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT);
      EXPECT_NE(status.message().find(std::isnan(bad) ? "NaN" : "infinite"), std::string::npos)
          << status.message();
      // a count that stops before the bad value does not see it
      EXPECT_TRUE(CheckFinite(copy.data(), at, "a vector").ok()) << at;
    }
  }
}

}  // namespace
}  // namespace genie

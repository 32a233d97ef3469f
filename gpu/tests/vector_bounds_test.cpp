// The premise of the exact GPU vector scan, tested directly: for every
// (query, vector) pair, the float32 pass's upper bound U and error bound e
// (U = s32 + e) bracket the true squared distance s, s <= U and
// U (1 - 2^-22) - 2e <= s (the lower bound the gather takes), for each of
// the distance kernels: the tensor cores' TF32 tiles (groups of more
// than 8 queries of values within [2^-32, 2^32]; on compute capability 9.0
// groups of more than 64 take Hopper's warpgroup tiles, tested beside the
// warp tiles), the float32 tiles (such
// groups of other values) and the small-group kernel (8 queries at most).  s is
// computed in long double from the float values.  The largest
// |s32 - s| / e is printed: how much of the bound the arithmetic used.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "genie/gpu_vector_scan.hpp"
#include "genie/vector_fixture.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

using testing::MakeSet;
using testing::NearbyQueries;
using testing::RandomVectors;
using testing::VectorShape;

bool GpuAvailable() {
  const VectorSet set = MakeSet(1, 1, {0.0f});
  std::unique_ptr<GpuVectorSet> gpu;
  return GpuVectorSet::Create(set, 0, 0, &gpu).ok();
}

// Compute capability 9.0, where large TF32 groups take Hopper's warpgroup
// tiles (when the build has them, as the GPU host's builds do).
bool DeviceIsHopper() {
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess && major == 9 &&
         minor == 0;
}

// Checks every pair; returns the largest |s32 - s| / e over finite bounds.
// warpgroup: Hopper's warpgroup tiles allowed, which then must take a TF32
// group of more than 64 queries on a device of compute capability 9.0.
double CheckBounds(const VectorSet& set, const std::vector<float>& queries, int32_t nq, bool tf32,
                   bool want_tf32, const std::string& what, bool warpgroup = true) {
  GpuVectorBounds bounds;
  const Status st = GpuVectorUpperBounds(set, queries.data(), nq, 0, tf32, &bounds, warpgroup);
  EXPECT_TRUE(st.ok()) << what << ": " << st.message();
  if (!st.ok()) return 0;
  EXPECT_EQ(bounds.tf32, want_tf32) << what;
  EXPECT_EQ(bounds.warpgroup, warpgroup && want_tf32 && nq > 64 && DeviceIsHopper()) << what;
  const int32_t n = set.size(), dim = set.dim;
  double worst = 0;
  int64_t failures = 0;
  for (int32_t q = 0; q < nq; ++q)
    for (int32_t r = 0; r < n; ++r) {
      long double s = 0;
      for (int32_t j = 0; j < dim; ++j) {
        const long double d = static_cast<long double>(queries[static_cast<std::size_t>(q) * dim + j]) -
                              static_cast<long double>(set.values[static_cast<std::size_t>(r) * dim + j]);
        s += d * d;
      }
      const std::size_t at = static_cast<std::size_t>(q) * n + r;
      const double upper = bounds.upper[at], e = bounds.error[at];
      if (std::isinf(upper)) continue;  // always a candidate, never the k-th bound's undoing
      const double lower = upper * (1.0 - 0x1p-22) - 2.0 * e;
      const bool ok = s <= static_cast<long double>(upper) && static_cast<long double>(lower) <= s;
      if (!ok && ++failures <= 5)
        ADD_FAILURE() << what << ": query " << q << " vector " << r << ": s " << static_cast<double>(s) << " U "
                      << upper << " e " << e;
      if (e > 0) worst = std::max(worst, std::fabs(static_cast<double>(static_cast<long double>(upper - e) - s)) / e);
    }
  EXPECT_EQ(failures, 0) << what;
  return worst;
}

// A scan of the k = 10 nearest on the GPU equals the CPU engine's.
void ExpectScanEqualsCpu(const VectorSet& set, const std::vector<float>& queries, int32_t nq,
                         const std::string& what) {
  std::unique_ptr<GpuVectorSet> gpu;
  ASSERT_TRUE(GpuVectorSet::Create(set, 0, 0, &gpu).ok());
  VectorScanRequest request;
  request.n_queries = nq;
  request.queries = queries.data();
  request.k = 10;
  VectorScanResult on_gpu, on_cpu;
  const Status s = gpu->Scan(set, request, &on_gpu);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  ASSERT_TRUE(CpuVectorScan(set, request, 1, &on_cpu).ok());
  testing::ExpectSameVectorRows(on_cpu, on_gpu, what);
}

TEST(GpuVectorBounds, BracketTheTrueDistanceForEveryKernel) {
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  std::mt19937 rng(20261128);
  struct Case {
    VectorShape shape;
    int32_t n, dim;
    float noise;  // of the queries around vectors: small means cancellation
    bool tf32_safe;
  };
  const Case cases[] = {
      {VectorShape::kGaussian, 1500, 784, 0.05f, true},  {VectorShape::kGaussian, 1500, 784, 1e-4f, true},
      {VectorShape::kGaussian, 3000, 17, 0.05f, true},   {VectorShape::kGaussian, 2000, 130, 0.0f, true},
      {VectorShape::kSmallIntegers, 2000, 64, 0.05f, true}, {VectorShape::kDuplicates, 1000, 300, 0.01f, true},
      {VectorShape::kGaussian, 700, 2000, 0.05f, true},  {VectorShape::kTiny, 1000, 33, 0.05f, false},
      {VectorShape::kHuge, 1000, 33, 0.05f, false},
  };
  for (const Case& c : cases) {
    const VectorSet set = MakeSet(c.dim, c.n, RandomVectors(&rng, c.shape, c.n, c.dim));
    const std::string what = std::string(testing::ShapeName(c.shape)) + " n=" + std::to_string(c.n) +
                             " dim=" + std::to_string(c.dim) + " noise=" + std::to_string(c.noise);
    for (int32_t nq : {3, 20, 40, 150}) {
      std::vector<float> queries = NearbyQueries(&rng, set.values, c.n, c.dim, nq, c.noise);
      // the queries' noise around a 0 is about 1e-31: 0 instead, so that the
      // tensor cores' tiles may take these sets (the next test has values
      // they may not take)
      if (c.tf32_safe)
        for (float& x : queries)
          if (std::fabs(x) < 0x1p-32f) x = 0.0f;
      for (bool tf32 : {true, false}) {
        const bool want_tf32 = tf32 && c.tf32_safe && nq > 8;
        // a large TF32 group on both tensor-core tiles where there are two
        for (bool warpgroup : {true, false}) {
          if (!warpgroup && !(want_tf32 && nq > 64 && DeviceIsHopper())) continue;
          const std::string case_name = what + " nq=" + std::to_string(nq) +
                                        (!want_tf32 ? " float32" : warpgroup && nq > 64 && DeviceIsHopper()
                                                                       ? " TF32 warpgroup"
                                                                       : " TF32");
          const double worst = CheckBounds(set, queries, nq, tf32, want_tf32, case_name, warpgroup);
          std::cout << "[ bounds   ] " << case_name << ": largest |s32 - s| / e " << worst << "\n";
        }
      }
    }
  }
}

// The tensor tiles round each value to TF32 (to nearest, ties away from
// zero), a relative change of up to 2^-11.  Values of 1 + 2^-11 times a
// power of two are all ties: each rounds up by the most, so every product
// of a query with a vector of the same signs is too large by about 2^-10,
// the errors add up instead of cancelling, and a query equal to a vector
// (s = 0) meets the rounding part of the bound almost exactly.  The rest of
// e (the accumulator and the norms, growing with dim) is the margin: an
// H200 used 0.97 of e at dim 8, 0.75 at 32 and 0.21 at 784.
TEST(GpuVectorBounds, RoundingTiesAllOneWay) {
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  std::mt19937 rng(20261202);
  for (int32_t dim : {8, 32, 784}) {
    for (int32_t nq : {40, 150}) {  // the warp tiles, and on Hopper the warpgroup tiles
      const int32_t n = 600;
      std::vector<float> values(static_cast<std::size_t>(n) * dim);
      for (int32_t j = 0; j < dim; ++j) {
        const float sign = j % 3 == 0 ? -1.0f : 1.0f;  // one sign a dimension: products all positive
        for (int32_t r = 0; r < n; ++r)
          values[static_cast<std::size_t>(r) * dim + j] =
              sign * std::ldexp(1.0f + 0x1p-11f, static_cast<int>(rng() % 7) - 3);
      }
      const VectorSet set = MakeSet(dim, n, values);
      // the first half of the queries equal vectors, the rest ties of their own
      std::vector<float> queries(static_cast<std::size_t>(nq) * dim);
      for (int32_t q = 0; q < nq; ++q)
        for (int32_t j = 0; j < dim; ++j)
          queries[static_cast<std::size_t>(q) * dim + j] =
              q < nq / 2 ? values[static_cast<std::size_t>(rng() % n) * dim + j]
                         : (j % 3 == 0 ? -1.0f : 1.0f) * std::ldexp(1.0f + 0x1p-11f, static_cast<int>(rng() % 7) - 3);
      const std::string what = "ties dim=" + std::to_string(dim) + " nq=" + std::to_string(nq);
      const double worst = CheckBounds(set, queries, nq, true, true, what);
      std::cout << "[ bounds   ] " << what << ": largest |s32 - s| / e " << worst << "\n";
      if (dim <= 32) {
        EXPECT_GT(worst, 0.5) << what << ": the rounding should use most of the bound here";
      }
      ExpectScanEqualsCpu(set, queries, nq, what);
    }
  }
}

// Values the tensor cores' tiles may not take (beyond [2^-32, 2^32], here
// 2^-40 and 2^40 among ordinary ones, in the set or in one query of 150)
// send a large group to the float32 tiles, and the bounds still hold.
// Rows of 1e38 among ordinary ones: an ordinary query's float32 distance
// to them is NaN (its dot product and the row's squared norm both
// overflow), which must make U infinite (always a candidate), not 0
// (fmaxf's answer for NaN), which lowered the k-th bound below the
// ordinary rows' distances and lost them.
TEST(GpuVectorBounds, ValuesBeyondTheTensorRangeAndHugeRows) {
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  std::mt19937 rng(3);
  const int32_t n = 2000, dim = 48, nq = 100;
  for (float odd : {0x1p-40f, 0x1p40f}) {
    std::vector<float> values = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
    values[static_cast<std::size_t>(n / 2) * dim + 5] = odd;
    const VectorSet set = MakeSet(dim, n, values);
    const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq, 0.05f);
    CheckBounds(set, queries, nq, true, false, "one value " + std::to_string(odd) + " in the set");
  }
  {
    // a set the tensor tiles may take, 150 queries one of which holds 2^-40:
    // both tiles launched, the float32 ones chosen by the device flag, as
    // the gather's terms
    const VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
    std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, 150, 0.05f);
    for (float& x : queries)
      if (std::fabs(x) < 0x1p-32f) x = 0.0f;
    CheckBounds(set, queries, 150, true, true, "150 ordinary queries");
    queries[static_cast<std::size_t>(77) * dim + 3] = 0x1p-40f;
    CheckBounds(set, queries, 150, true, false, "150 queries, one value 2^-40");
    ExpectScanEqualsCpu(set, queries, 150, "150 queries, one value 2^-40");
  }
  std::vector<float> values = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
  for (int32_t r = 0; r < n; r += 97)
    for (int32_t j = 0; j < dim; ++j) values[static_cast<std::size_t>(r) * dim + j] = 1e38f;
  const VectorSet set = MakeSet(dim, n, values);
  for (int32_t nq2 : {1, 20, 100}) {
    const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq2, 0.05f);
    ExpectScanEqualsCpu(set, queries, nq2, "huge rows among ordinary ones, nq=" + std::to_string(nq2));
  }
}

// The device's norms of the queries (a warp reading 32 vectors at a
// time) are the float64 sum of the squares in order, rounded to float, to
// the bit, for every width around the warp's 32 dimensions and counts
// around its 32 vectors; and the range flag is raised by one value
// anywhere, in the last vector and the last dimension included.
TEST(GpuVectorBounds, QueryNormsAreTheOrderedFloat64Sums) {
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  std::mt19937 rng(20261203);
  for (int32_t dim : {1, 3, 31, 32, 33, 64, 100, 784}) {
    const VectorSet set = MakeSet(dim, 50, RandomVectors(&rng, VectorShape::kGaussian, 50, dim));
    for (int32_t nq : {1, 31, 32, 33, 129, 300}) {
      std::vector<float> queries = RandomVectors(&rng, VectorShape::kGaussian, nq, dim);
      for (std::size_t i = 0; i < queries.size(); i += 7) queries[i] *= 1e3f;  // magnitudes that round differently
      const std::string what = "dim " + std::to_string(dim) + ", " + std::to_string(nq) + " queries";
      GpuVectorBounds bounds;
      ASSERT_TRUE(GpuVectorUpperBounds(set, queries.data(), nq, 0, true, &bounds).ok()) << what;
      ASSERT_EQ(bounds.query_squared.size(), static_cast<std::size_t>(nq)) << what;
      EXPECT_FALSE(bounds.query_outside) << what;
      for (int32_t q = 0; q < nq; ++q) {
        double sum = 0;
        for (int32_t j = 0; j < dim; ++j) {
          const double x = queries[static_cast<std::size_t>(q) * dim + j];
          sum += x * x;
        }
        ASSERT_EQ(bounds.query_squared[q], static_cast<float>(sum)) << what << ", query " << q;
        ASSERT_EQ(bounds.query_length[q], static_cast<float>(std::sqrt(sum))) << what << ", query " << q;
      }
      queries.back() = 0x1p-40f;
      ASSERT_TRUE(GpuVectorUpperBounds(set, queries.data(), nq, 0, true, &bounds).ok()) << what;
      EXPECT_TRUE(bounds.query_outside) << what << ", 2^-40 in the last place";
    }
  }
}

}  // namespace
}  // namespace genie

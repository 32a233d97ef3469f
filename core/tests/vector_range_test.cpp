// CpuVectorRangeScan (vector_range.cpp) against an oracle of its own: every
// object not excluded whose exact L2Distance is within the radius, sorted by
// (distance, object), and against CpuRangeSearch over the whole list (the
// path it replaces): vectors of every shape (ties at the radius from small
// integers, duplicates, tiny and huge values), radius 0, a radius equal to
// a row's distance, wider and infinite ones; 1, 3, 5 and 70 queries (a
// short group of four, more than one block of 64); one and two threads
// (stripes); fewer objects searched than the set holds; bad input; cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/vector_fixture.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

using testing::NearbyQueries;
using testing::RandomVectors;
using testing::VectorShape;

RangeResult Oracle(const std::vector<float>& values, int32_t dim, int32_t n, const std::vector<float>& queries,
                   int32_t nq, double r, const std::vector<uint8_t>& excluded) {
  RangeResult out;
  for (int32_t q = 0; q < nq; ++q) {
    std::vector<std::pair<double, int32_t>> rows;
    for (int32_t o = 0; o < n; ++o) {
      if (!excluded.empty() && excluded[static_cast<std::size_t>(o)] != 0) continue;
      const double d = L2Distance(queries.data() + static_cast<std::size_t>(q) * dim,
                                  values.data() + static_cast<std::size_t>(o) * dim, dim);
      if (d <= r) rows.emplace_back(d, o);
    }
    std::sort(rows.begin(), rows.end());
    for (const auto& row : rows) {
      out.objects.push_back(row.second);
      out.distances.push_back(row.first);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

void ExpectRows(const RangeResult& want, const RangeResult& got, const std::string& what) {
  ASSERT_EQ(want.offsets, got.offsets) << what;
  EXPECT_EQ(want.objects, got.objects) << what;
  EXPECT_EQ(want.distances, got.distances) << what;
}

TEST(CpuVectorRangeScan, EqualsTheOracleAndTheWholeListSearch) {
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kSmallIntegers, VectorShape::kDuplicates,
                            VectorShape::kTiny, VectorShape::kHuge}) {
    std::mt19937 rng(900u + static_cast<uint32_t>(shape));
    // 9,000: two stripes of rows on two threads for a block of queries
    const int32_t n = 9000, dim = shape == VectorShape::kGaussian ? 37 : 12;
    std::vector<float> values = RandomVectors(&rng, shape, n, dim);
    VectorSet set;
    ASSERT_TRUE(BuildVectorSet(dim, n, {values.begin(), values.end()}, &set).ok());
    std::vector<float> queries = NearbyQueries(&rng, values, n, dim, 70, 0.05f);
    std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
    for (int32_t i = 0; i < n; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
    std::vector<double> all;
    for (int32_t o = 0; o < n; ++o) all.push_back(L2Distance(queries.data(), values.data() + o * dim, dim));
    std::sort(all.begin(), all.end());
    for (double r : {0.0, all[5], all[300], std::numeric_limits<double>::infinity()}) {
      for (int32_t nq : {1, 3, 5, 70}) {
        for (int32_t threads : {1, 2}) {
          const std::string what = std::string(testing::ShapeName(shape)) + " radius " + std::to_string(r) +
                                   " queries " + std::to_string(nq) + " threads " + std::to_string(threads);
          RangeRequest request;
          request.n_queries = nq;
          request.radius = r;
          request.excluded = excluded;
          RangeResult scanned, listed;
          ASSERT_TRUE(CpuVectorRangeScan(set, queries.data(), request, threads, &scanned).ok()) << what;
          ExpectRows(Oracle(values, dim, n, queries, nq, r, excluded), scanned, what);
          ASSERT_TRUE(CpuRangeSearch(WholeList(n), VectorQueryMetrics(set, queries.data()), request, threads,
                                     &listed).ok());
          ExpectRows(listed, scanned, what + " (whole list)");
          EXPECT_EQ(listed.distances_computed, scanned.distances_computed) << what;
        }
      }
    }
    // fewer objects searched than the set holds (no excluded flags)
    RangeRequest head;
    head.n_queries = 5;
    head.radius = all[300];
    head.n_objects = n - 1000;
    RangeResult scanned;
    ASSERT_TRUE(CpuVectorRangeScan(set, queries.data(), head, 2, &scanned).ok());
    ExpectRows(Oracle(values, dim, n - 1000, queries, 5, all[300], {}), scanned, "the first objects");
    EXPECT_EQ(scanned.distances_computed, int64_t{5} * (n - 1000));
  }
}

TEST(CpuVectorRangeScan, RejectsBadInputAndHonoursCancel) {
  std::mt19937 rng(3);
  const int32_t n = 5000, dim = 8;
  std::vector<float> values = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
  VectorSet set;
  ASSERT_TRUE(BuildVectorSet(dim, n, {values.begin(), values.end()}, &set).ok());
  std::vector<float> queries(values.begin(), values.begin() + 4 * dim);
  RangeResult out;
  RangeRequest request;
  request.n_queries = 4;
  for (double bad : {-1.0, std::nan("")}) {
    request.radius = bad;
    EXPECT_EQ(CpuVectorRangeScan(set, queries.data(), request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  }
  request.radius = 1;
  std::vector<uint8_t> short_flags(10, 0);
  request.excluded = short_flags;
  EXPECT_EQ(CpuVectorRangeScan(set, queries.data(), request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  request.excluded = {};
  request.n_objects = n + 1;
  EXPECT_EQ(CpuVectorRangeScan(set, queries.data(), request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  request.n_objects = -1;
  EXPECT_EQ(CpuVectorRangeScan(set, nullptr, request, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(CpuVectorRangeScan(set, queries.data(), request, 1, nullptr).code(), GENIE_INVALID_ARGUMENT);
  // no queries: no rows
  request.n_queries = 0;
  ASSERT_TRUE(CpuVectorRangeScan(set, queries.data(), request, 1, &out).ok());
  EXPECT_EQ(out.offsets, std::vector<int64_t>{0});
  // cancel, asked from the start: polled between tiles
  request.n_queries = 4;
  const CancelCheck always{[](void*) { return 1; }, nullptr};
  EXPECT_EQ(CpuVectorRangeScan(set, queries.data(), request, 2, &out, always).code(), GENIE_CANCELLED);
  // a cancel heard at any poll (the scan's tiles, then the rows gathered,
  // sorted and handed out query by query) stops the scan, else it answers
  // in full: a radius that takes in every row, 70 queries (two blocks)
  std::vector<float> many(values.begin(), values.begin() + 70 * dim);
  request.n_queries = 70;
  request.radius = std::numeric_limits<double>::infinity();
  const RangeResult want = Oracle(values, dim, n, many, 70, request.radius, {});
  int64_t polls = 0;
  const CancelCheck counting{[](void* arg) { return ++*static_cast<int64_t*>(arg) > 1000000 ? 1 : 0; }, &polls};
  ASSERT_TRUE(CpuVectorRangeScan(set, many.data(), request, 1, &out, counting).ok());
  ExpectRows(want, out, "counted");
  const int64_t total = polls;
  ASSERT_GT(total, 10);
  for (int64_t after : {int64_t{0}, total / 3, total / 2, total - 5, total - 1, total}) {
    struct Budget {
      int64_t left;
    } budget{after};
    const CancelCheck later{[](void* arg) { return static_cast<Budget*>(arg)->left-- <= 0 ? 1 : 0; }, &budget};
    const Status st = CpuVectorRangeScan(set, many.data(), request, 1, &out, later);
    if (after < total) {
      EXPECT_EQ(st.code(), GENIE_CANCELLED) << "cancelled after " << after << " of " << total << " polls";
    } else {
      ASSERT_TRUE(st.ok());
      ExpectRows(want, out, "not cancelled");
    }
  }
}

}  // namespace
}  // namespace genie

// CpuVectorListKnn (list_knn.cpp) against an independent oracle (every
// vector by (L2Distance, id), BruteForceVectors) and against CpuVectorScan:
// vectors of every shape (ties at the k-th distance from small integers and
// duplicates, tiny and huge values), lists with and without superclusters,
// objects past the list (pending rows), excluded objects, k of 1, 10, 200
// and more than the objects, one query and batches on one and three
// threads (a query's clusters shared by threads), the rows in list order or
// gathered by id; that it reads less than every object where the data has
// clusters; bad input and cancel.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "genie/cluster_list.hpp"
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

TEST(CpuVectorListKnn, EqualsBruteForceAndTheExactScan) {
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kSmallIntegers, VectorShape::kDuplicates,
                            VectorShape::kTiny, VectorShape::kHuge}) {
    for (int32_t supercluster_clusters : {0, 4}) {
      std::mt19937 rng(20261129u + static_cast<uint32_t>(shape) * 3u + static_cast<uint32_t>(supercluster_clusters));
      const int32_t n = 1800, dim = shape == VectorShape::kGaussian ? 23 : 10, nq = 24;
      VectorSet set = MakeSet(dim, n, RandomVectors(&rng, shape, n, dim));
      const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq, 0.05f);
      // the list of the first 1,500 objects; the last 300 are read one by one
      const int32_t listed = 1500;
      std::vector<uint8_t> unlisted(static_cast<std::size_t>(listed), 0);
      for (int32_t i = 5; i < listed; i += 17) unlisted[static_cast<std::size_t>(i)] = 1;
      auto metric = VectorObjectMetric(set);
      ClusterList list;
      ASSERT_TRUE(BuildClusterList(*metric, listed, unlisted, 16, supercluster_clusters, ClusterCentres::kSum, 2, &list).ok());
      HostArray<float> rows;
      ASSERT_TRUE(MemberRows(set, list, &rows).ok());
      // objects left out of the list at build are dead: excluded now
      std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
      for (int32_t i = 0; i < listed; ++i) excluded[static_cast<std::size_t>(i)] = unlisted[static_cast<std::size_t>(i)];
      for (int32_t i = 2; i < n; i += 13) excluded[static_cast<std::size_t>(i)] = 1;
      for (int32_t k : {1, 10, 200, n + 5}) {
        for (int32_t batch : {1, 2, nq}) {
          for (int32_t threads : {1, 3}) {
            for (bool in_list_order : {true, false}) {
              const std::string what = std::string(testing::ShapeName(shape)) + " N " +
                                       std::to_string(supercluster_clusters) + " k " + std::to_string(k) +
                                       " queries " + std::to_string(batch) + " threads " +
                                       std::to_string(threads) + (in_list_order ? " listed rows" : " by id");
              VectorScanRequest request;
              request.n_queries = batch;
              request.queries = queries.data();
              request.k = k;
              request.excluded = excluded;
              VectorScanResult got, exact;
              int64_t computed = -1;
              ASSERT_TRUE(CpuVectorListKnn(set, list, in_list_order ? rows.data() : nullptr, request, threads, &got,
                                           &computed)
                              .ok())
                  << what;
              ExpectSameVectorRows(BruteForceVectors(set, request), got, what);
              ASSERT_TRUE(CpuVectorScan(set, request, threads, &exact).ok());
              ExpectSameVectorRows(exact, got, what);
              EXPECT_GT(computed, 0) << what;
            }
          }
        }
      }
    }
  }
}

TEST(CpuVectorListKnn, ReadsLessThanEveryObjectOnClusteredData) {
  std::mt19937 rng(31);
  const int32_t n = 20000, dim = 8, nq = 40;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq, 0.01f);
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 64, 8, ClusterCentres::kSum, 0, &list).ok());
  VectorScanRequest request;
  request.n_queries = nq;
  request.queries = queries.data();
  request.k = 10;
  VectorScanResult got;
  int64_t computed = 0;
  ASSERT_TRUE(CpuVectorListKnn(set, list, nullptr, request, 2, &got, &computed).ok());
  ExpectSameVectorRows(BruteForceVectors(set, request), got, "clustered");
  // the Gaussian components are far apart: a query reads a few of them
  EXPECT_LT(computed, static_cast<int64_t>(n) * nq / 4) << computed;
}

TEST(CpuVectorListKnn, BadInputAndCancel) {
  std::mt19937 rng(8);
  const int32_t n = 3000, dim = 16;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 16, 4, ClusterCentres::kSum, 2, &list).ok());
  VectorScanRequest request;
  request.n_queries = 4;
  request.queries = set.values.data();
  request.k = 5;
  VectorScanResult got;
  EXPECT_EQ(CpuVectorListKnn(set, list, nullptr, request, 2, nullptr, nullptr).code(), GENIE_INVALID_ARGUMENT);
  request.k = 0;
  EXPECT_EQ(CpuVectorListKnn(set, list, nullptr, request, 2, &got, nullptr).code(), GENIE_INVALID_ARGUMENT);
  request.k = 5;
  // a list of more objects than the set holds
  VectorSet smaller = MakeSet(dim, n - 1, std::vector<float>(set.values.begin(), set.values.end() - dim));
  EXPECT_EQ(CpuVectorListKnn(smaller, list, nullptr, request, 2, &got, nullptr).code(), GENIE_INVALID_ARGUMENT);
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  for (int32_t nq : {1, 4}) {
    request.n_queries = nq;
    EXPECT_EQ(CpuVectorListKnn(set, list, nullptr, request, 2, &got, nullptr, cancel).code(), GENIE_CANCELLED);
  }
  // no queries: no rows
  request.n_queries = 0;
  ASSERT_TRUE(CpuVectorListKnn(set, list, nullptr, request, 2, &got, nullptr).ok());
  EXPECT_EQ(got.offsets, std::vector<int64_t>{0});
}

}  // namespace
}  // namespace genie

#include <gtest/gtest.h>

#include <vector>

#include "genie/engine.hpp"
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

TEST(PlanObjectParts, NearEqualContiguousRanges) {
  EXPECT_EQ(PlanObjectParts(10, 3), (Ranges{{0, 3}, {3, 6}, {6, 10}}));
  EXPECT_EQ(PlanObjectParts(10, 1), (Ranges{{0, 10}}));
  EXPECT_EQ(PlanObjectParts(4, 4), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  for (int32_t n : {1, 2, 7, 100, 1001}) {
    for (int32_t parts : {1, 2, 3, 8, 100}) {
      Ranges ranges = PlanObjectParts(n, parts);
      ASSERT_EQ(ranges.size(), static_cast<std::size_t>(std::min(parts, n)));
      EXPECT_EQ(ranges.front().first, 0);
      EXPECT_EQ(ranges.back().second, n);
      int32_t smallest = n, largest = 0;
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        if (i > 0) {
          EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
        }
        smallest = std::min(smallest, ranges[i].second - ranges[i].first);
        largest = std::max(largest, ranges[i].second - ranges[i].first);
      }
      EXPECT_GE(smallest, 1);
      EXPECT_LE(largest - smallest, 1);
    }
  }
}

TEST(PlanObjectParts, Clamps) {
  EXPECT_EQ(PlanObjectParts(5, 0), (Ranges{{0, 5}}));
  EXPECT_EQ(PlanObjectParts(5, -3), (Ranges{{0, 5}}));
  EXPECT_EQ(PlanObjectParts(2, 9), (Ranges{{0, 1}, {1, 2}}));
  EXPECT_EQ(PlanObjectParts(0, 4), (Ranges{{0, 0}}));
  Ranges big = PlanObjectParts(INT32_MAX, 3);
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big.back().second, INT32_MAX);
}

TopKResults Results(std::vector<std::vector<Hit>> per_query) {
  TopKResults r;
  for (const auto& hits : per_query) {
    r.hits.insert(r.hits.end(), hits.begin(), hits.end());
    r.query_offsets.push_back(static_cast<int64_t>(r.hits.size()));
  }
  return r;
}

TEST(MergePartResults, ShiftsSortsAndCuts) {
  // Two parts: objects [0, 3) and [3, 7); two queries.
  std::vector<TopKResults> parts = {
      Results({{{2, 5}, {0, 3}, {1, 3}}, {}}),
      Results({{{1, 5}, {0, 3}}, {{3, 1}}}),
  };
  Ranges ranges = {{0, 3}, {3, 7}};
  TopKResults merged;
  MergePartResults(parts, ranges, 4, &merged);
  EXPECT_TRUE(SameResults(Results({{{2, 5}, {4, 5}, {0, 3}, {1, 3}}, {{6, 1}}}), merged));
  MergePartResults(parts, ranges, 1, &merged);
  EXPECT_TRUE(SameResults(Results({{{2, 5}}, {{6, 1}}}), merged));
  MergePartResults(parts, ranges, 100, &merged);
  EXPECT_EQ(merged.Query(0).size(), 5u);

  MergePartResults({}, {}, 3, &merged);
  EXPECT_EQ(merged.num_queries(), 0);
}

TEST(MergePartResults, SlicedSearchEqualsWholeSearch) {
  DataSpec data;
  data.objects = 500;
  Csr csr = RandomCsr(81, data);
  auto index = MakeIndex(csr, 4);
  QuerySpec spec;
  spec.max_weight = 4;
  QueryBatch batch = RandomBatch(82, spec);
  auto reference = MakeReferenceEngine();
  for (int32_t k : {1, 10, 500}) {
    TopKResults whole = testing::Search(*reference, index, batch.View(), k);
    for (int32_t n_parts : {1, 2, 7, 64}) {
      Ranges ranges = PlanObjectParts(index->num_objects(), n_parts);
      std::vector<TopKResults> parts;
      for (auto [begin, end] : ranges) {
        auto part = std::make_shared<InvertedIndex>(index->SliceObjects(begin, end));
        parts.push_back(testing::Search(*reference, part, batch.View(), k));
      }
      for (int32_t threads : {1, 4}) {
        TopKResults merged;
        MergePartResults(parts, ranges, k, &merged, threads);
        EXPECT_TRUE(SameResults(whole, merged)) << "k " << k << ", parts " << n_parts << ", threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace genie

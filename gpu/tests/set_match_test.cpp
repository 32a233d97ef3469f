// Set predicates on the GPU engine (Engine::MatchSet on the device) against
// core's MatchSet on the host, id for id: both device forms of the List
// Array (4-byte: LR range contraction; packed: HS + LR), several pack tiles,
// random and skewed queries, and the edge cases (an empty query, a keyword
// the index lacks, repeated keywords, objects without keywords).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/set_match.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::MakeIndex;
using testing::RandomCsr;

bool GpuPresent() {
  for (const genie_device_info& d : ListGpuDevices()) {
    if (d.usable) return true;
  }
  return false;
}

std::unique_ptr<Engine> MakeSetEngine(GpuPostings form, int64_t min_postings, uint64_t budget = 0) {
  EngineOptions options;
  options.memory_budget_bytes = budget;
  GpuEngineOptions gpu;
  gpu.postings = form;
  gpu.set_match_min_postings = min_postings;
  Status status;
  auto engine = MakeGpuEngine(options, gpu, &status);
  EXPECT_NE(engine, nullptr) << status.message();
  return engine;
}

// The queries: random keywords of the data's range (popular and rare ones,
// some the index lacks), plus the edge cases.
std::vector<std::vector<int32_t>> Queries(uint32_t seed, const DataSpec& data, int count) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> queries{{}, {data.keyword_base}, {data.keyword_base, data.keyword_base},
                                            {data.keyword_base - 7}, {data.keyword_base, data.keyword_base + 1}};
  std::uniform_int_distribution<int32_t> size(1, 6);
  // skewed toward the popular (low-rank) keywords, so that intersections
  // are not empty
  std::geometric_distribution<int32_t> rank(0.15);
  for (int q = 0; q < count; ++q) {
    std::vector<int32_t> keywords;
    for (int32_t i = size(rng); i > 0; --i) {
      keywords.push_back(data.keyword_base + std::min(rank(rng), data.universe + 3));
    }
    queries.push_back(keywords);
  }
  return queries;
}

void ExpectSameMatches(const Csr& csr, const DataSpec& data, uint32_t seed, GpuPostings form,
                       int64_t min_postings) {
  auto index = MakeIndex(csr);
  std::vector<int32_t> sizes;
  ASSERT_TRUE(ObjectSizes(*index, CancelCheck(), &sizes).ok());
  auto engine = MakeSetEngine(form, min_postings);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->Upload(index).ok());
  int nonempty = 0;
  for (const auto& query : Queries(seed, data, 60)) {
    for (SetPredicate p : {SetPredicate::kContains, SetPredicate::kOverlaps, SetPredicate::kContainedBy}) {
      std::vector<int32_t> expected, actual;
      const Span<int32_t> keywords(query.data(), query.size());
      ASSERT_TRUE(MatchSet(*index, p, keywords, sizes, CancelCheck(), &expected).ok());
      const Status status = engine->MatchSet(p, keywords, sizes, &actual);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_EQ(expected, actual) << "predicate " << static_cast<int>(p) << ", " << query.size()
                                  << " keywords, first " << (query.empty() ? 0 : query[0]);
      nonempty += !expected.empty();
    }
  }
  EXPECT_GT(nonempty, 60) << "the queries match something";
}

class GpuSetMatch : public ::testing::TestWithParam<GpuPostings> {
 protected:
  void SetUp() override {
    if (!GpuPresent()) GTEST_SKIP() << "no usable GPU";
  }
};

TEST_P(GpuSetMatch, EqualsTheHostOnSkewedSets) {
  for (uint32_t seed : {1u, 2u}) {
    DataSpec data;
    data.objects = 300000;  // 5 pack tiles
    data.max_length = 8;
    data.universe = 400;
    data.zipf = seed == 1 ? 1.1 : 0.6;
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    ExpectSameMatches(RandomCsr(seed, data), data, seed * 10, GetParam(), 0);
  }
}

TEST_P(GpuSetMatch, SmallIndexesAndTheHostPath) {
  DataSpec data;
  data.objects = 700;
  data.universe = 40;
  const Csr csr = RandomCsr(3, data);
  ExpectSameMatches(csr, data, 30, GetParam(), 0);           // on the device
  ExpectSameMatches(csr, data, 31, GetParam(), INT64_MAX);   // on the host
}

INSTANTIATE_TEST_SUITE_P(Forms, GpuSetMatch,
                         ::testing::Values(GpuPostings::kFull, GpuPostings::kPacked),
                         [](const ::testing::TestParamInfo<GpuPostings>& info) {
                           return std::string(info.param == GpuPostings::kFull ? "full" : "packed");
                         });

// An index that is not resident (a budget too small: multiple loading)
// matches on the host, with the same answers.
TEST(GpuSetMatchApi, NotResidentMatchesOnTheHost) {
  if (!GpuPresent()) GTEST_SKIP() << "no usable GPU";
  DataSpec data;
  data.objects = 200000;
  data.max_length = 8;
  data.universe = 300;
  const Csr csr = RandomCsr(5, data);
  auto index = MakeIndex(csr);
  std::vector<int32_t> sizes;
  ASSERT_TRUE(ObjectSizes(*index, CancelCheck(), &sizes).ok());
  auto engine = MakeSetEngine(GpuPostings::kAuto, 0, index->postings().size() * 2);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->Upload(index).ok());
  for (const auto& query : Queries(50, data, 20)) {
    std::vector<int32_t> expected, actual;
    const Span<int32_t> keywords(query.data(), query.size());
    ASSERT_TRUE(MatchSet(*index, SetPredicate::kOverlaps, keywords, sizes, CancelCheck(), &expected).ok());
    ASSERT_TRUE(engine->MatchSet(SetPredicate::kOverlaps, keywords, sizes, &actual).ok());
    EXPECT_EQ(expected, actual);
  }
}

TEST(GpuSetMatchApi, BadOptionAndArguments) {
  if (!GpuPresent()) GTEST_SKIP() << "no usable GPU";
  GpuEngineOptions gpu;
  gpu.set_match_min_postings = -1;
  Status status;
  EXPECT_EQ(MakeGpuEngine(EngineOptions(), gpu, &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT);
  auto engine = MakeSetEngine(GpuPostings::kAuto, 0);
  ASSERT_NE(engine, nullptr);
  std::vector<int32_t> out;
  EXPECT_EQ(engine->MatchSet(SetPredicate::kOverlaps, Span<int32_t>(), Span<int32_t>(), &out).code(),
            GENIE_INVALID_ARGUMENT)
      << "no index uploaded";
}

}  // namespace
}  // namespace genie

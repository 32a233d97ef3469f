#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/set_match.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::RandomCsr;

// The predicate evaluated object by object on the sets themselves.
std::vector<int32_t> Oracle(const Csr& csr, SetPredicate p, const std::vector<int32_t>& query) {
  const std::set<int32_t> q(query.begin(), query.end());
  std::vector<int32_t> out;
  for (int32_t o = 0; o < csr.size(); o++) {
    const std::set<int32_t> s(csr.keywords.begin() + csr.offsets[static_cast<std::size_t>(o)],
                              csr.keywords.begin() + csr.offsets[static_cast<std::size_t>(o) + 1]);
    bool match = false;
    if (p == SetPredicate::kContains)
      match = std::includes(s.begin(), s.end(), q.begin(), q.end());
    else if (p == SetPredicate::kContainedBy)
      match = std::includes(q.begin(), q.end(), s.begin(), s.end());
    else
      match = std::any_of(q.begin(), q.end(), [&](int32_t k) { return s.count(k) > 0; });
    if (match) out.push_back(o);
  }
  return out;
}

TEST(SetMatch, EqualsTheSetsOnRandomSkewedData) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    DataSpec spec;
    spec.objects = 3000;
    spec.max_length = 10;
    spec.universe = 300;
    spec.zipf = 1.1;
    const Csr csr = RandomCsr(seed, spec);
    InvertedIndex index;
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
    std::vector<int32_t> sizes;
    ASSERT_TRUE(ObjectSizes(index, CancelCheck{}, &sizes).ok());
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> keyword(-60, 270);  // some the index lacks
    std::uniform_int_distribution<int> length(0, 40);
    for (int trial = 0; trial < 60; trial++) {
      std::vector<int32_t> query;
      const int n = trial < 3 ? trial : length(rng) / (trial % 3 == 0 ? 10 : 1);
      for (int i = 0; i < n; i++) query.push_back(keyword(rng));
      if (trial % 7 == 0 && !query.empty()) query.push_back(query.front());  // a repeat
      for (SetPredicate p : {SetPredicate::kContains, SetPredicate::kOverlaps, SetPredicate::kContainedBy}) {
        std::vector<int32_t> got;
        ASSERT_TRUE(MatchSet(index, p, query, sizes, CancelCheck{}, &got).ok());
        EXPECT_EQ(got, Oracle(csr, p, query)) << "seed " << seed << " trial " << trial << " predicate "
                                              << static_cast<int>(p);
      }
    }
  }
}

TEST(SetMatch, LongAndShortListsIntersectByGalloping) {
  // one keyword on every object, one on every 1000th, one on every 7th
  Csr csr;
  for (int32_t o = 0; o < 70000; o++) {
    std::vector<int32_t> object{1};
    if (o % 1000 == 0) object.push_back(2);
    if (o % 7 == 0) object.push_back(3);
    csr.Add(object);
  }
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  std::vector<int32_t> got;
  ASSERT_TRUE(MatchSet(index, SetPredicate::kContains, std::vector<int32_t>{3, 1, 2}, {}, CancelCheck{}, &got).ok());
  EXPECT_EQ(got, Oracle(csr, SetPredicate::kContains, {1, 2, 3}));
  EXPECT_EQ(got.size(), 10u);  // multiples of 7000
  ASSERT_TRUE(MatchSet(index, SetPredicate::kOverlaps, std::vector<int32_t>{2, 3}, {}, CancelCheck{}, &got).ok());
  EXPECT_EQ(got, Oracle(csr, SetPredicate::kOverlaps, {2, 3}));
  ASSERT_TRUE(MatchSet(index, SetPredicate::kContains, std::vector<int32_t>{}, {}, CancelCheck{}, &got).ok());
  EXPECT_EQ(got.size(), 70000u);
}

TEST(SetMatch, ContainedByNeedsTheSizesAndStopsOnCancel) {
  Csr csr;
  for (int32_t o = 0; o < 200000; o++) csr.Add({o % 5, 10 + o % 3});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  std::vector<int32_t> got;
  EXPECT_FALSE(MatchSet(index, SetPredicate::kContainedBy, std::vector<int32_t>{1}, {}, CancelCheck{}, &got).ok());
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  const Status s = MatchSet(index, SetPredicate::kOverlaps, std::vector<int32_t>{0, 1, 2, 3, 4}, {}, cancel, &got);
  EXPECT_EQ(s.code(), GENIE_CANCELLED);
  // an intersection of two long lists polls within them
  EXPECT_EQ(MatchSet(index, SetPredicate::kContains, std::vector<int32_t>{0, 10}, {}, cancel, &got).code(),
            GENIE_CANCELLED);
  std::vector<int32_t> sizes;
  EXPECT_EQ(ObjectSizes(index, cancel, &sizes).code(), GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

namespace genie {
namespace {

// Engine::MatchSet of the host engines is MatchSet on the uploaded index
// (the GPU engine's device path: gpu/tests/set_match_test.cpp), and polls
// the CPU engine's cancel.
TEST(SetMatch, HostEnginesMatchTheirIndex) {
  DataSpec data;
  data.objects = 2000;
  data.universe = 60;
  auto index = testing::MakeIndex(RandomCsr(9, data));
  std::vector<int32_t> sizes;
  ASSERT_TRUE(ObjectSizes(*index, CancelCheck(), &sizes).ok());
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(MakeReferenceEngine());
  engines.push_back(MakeCpuEngine(EngineOptions()));
  for (auto& engine : engines) {
    std::vector<int32_t> out;
    EXPECT_EQ(engine->MatchSet(SetPredicate::kOverlaps, Span<int32_t>(), sizes, &out).code(),
              GENIE_INVALID_ARGUMENT)
        << "no index uploaded";
    ASSERT_TRUE(engine->Upload(index).ok());
    const std::vector<int32_t> query{data.keyword_base, data.keyword_base + 3, data.keyword_base + 3};
    const Span<int32_t> keywords(query.data(), query.size());
    for (SetPredicate p : {SetPredicate::kContains, SetPredicate::kOverlaps, SetPredicate::kContainedBy}) {
      std::vector<int32_t> expected;
      ASSERT_TRUE(MatchSet(*index, p, keywords, sizes, CancelCheck(), &expected).ok());
      ASSERT_TRUE(engine->MatchSet(p, keywords, sizes, &out).ok());
      EXPECT_EQ(out, expected);
      EXPECT_FALSE(p == SetPredicate::kOverlaps && out.empty());
    }
  }
  EngineOptions cancelled;
  cancelled.cancel = CancelCheck{[](void*) { return 1; }, nullptr};
  auto cpu = MakeCpuEngine(cancelled);
  ASSERT_TRUE(cpu->Upload(index).ok());
  std::vector<int32_t> out;
  const std::vector<int32_t> all{data.keyword_base, data.keyword_base + 1};
  EXPECT_EQ(cpu->MatchSet(SetPredicate::kOverlaps, Span<int32_t>(all.data(), all.size()), sizes, &out)
                .code(),
            GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

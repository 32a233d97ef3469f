// Tests of the string scan: the prepared-pattern Myers distance against the
// reference dynamic programming (one to five words, caps, non-ASCII), and
// CpuStringScan against a brute-force scan (batches, single queries split in
// stripes, caps, excluded strings, k beyond the set, long queries), and
// cancel; the class-count lower bound the scan filters with.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "genie/myers_pattern.hpp"
#include "genie/sequence.hpp"
#include "genie/string_scan.hpp"
#include "genie/string_scan_fixture.hpp"

namespace genie {
namespace {

using testing::BruteForceScan;
using testing::MutateWord;
using testing::RandomWords;

std::vector<CodePoint> RandomText(std::mt19937* rng, int32_t len) {
  static const CodePoint kChars[] = {'a', 'b', 'c', 'd', 0xE9, 0xDF, 0x65E5, 0x1F600};
  std::uniform_int_distribution<int32_t> pick(0, 7);
  std::vector<CodePoint> s(static_cast<std::size_t>(len));
  for (CodePoint& c : s) c = kChars[pick(*rng)];
  return s;
}

TEST(PatternDistance, EqualsReferenceForOneToFourWords) {
  std::mt19937 rng(20261125);
  auto pattern = std::make_unique<kernel::MyersPattern>();
  const int32_t lengths[] = {0, 1, 2, 7, 63, 64, 65, 100, 127, 128, 129, 191, 192, 200, 255, 256};
  for (int32_t m : lengths) {
    for (int trial = 0; trial < 12; ++trial) {
      const std::vector<CodePoint> p = RandomText(&rng, m);
      std::vector<CodePoint> t = trial % 3 == 0
          ? RandomText(&rng, std::uniform_int_distribution<int32_t>(0, 300)(rng))
          : MutateWord(&rng, p, std::uniform_int_distribution<int32_t>(0, 1 + m / 3)(rng));
      ASSERT_TRUE(kernel::PreparePattern(p.data(), m, pattern.get()));
      const int32_t truth = LevenshteinReference(p, t);
      const CodePoint* td = t.data();
      auto text = [td](int32_t j) { return td[j]; };
      const int32_t n = static_cast<int32_t>(t.size());
      EXPECT_EQ(kernel::PatternDistance(*pattern, text, n, 1 << 20), truth) << "m=" << m << " n=" << n;
      for (int32_t cap : {0, 1, truth - 1, truth, truth + 1}) {
        if (cap < 0) continue;
        EXPECT_EQ(kernel::PatternDistance(*pattern, text, n, cap), std::min(truth, cap + 1))
            << "m=" << m << " n=" << n << " cap=" << cap;
      }
    }
  }
  const std::vector<CodePoint> too_long = RandomText(&rng, kernel::kPatternMaxLength + 1);
  EXPECT_FALSE(kernel::PreparePattern(too_long.data(), static_cast<int32_t>(too_long.size()),
                                      pattern.get()));
}

// The class-count bound never exceeds the distance (random texts with
// non-ASCII code points, mutated words, counts past saturation), and is
// what it must be on small cases.
TEST(StringSignature, BoundsTheDistanceFromBelow) {
  std::mt19937 rng(20261126);
  auto sig = [](const std::vector<CodePoint>& s) {
    return MakeStringSignature(Span<CodePoint>(s.data(), s.size()));
  };
  int32_t tight = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::vector<CodePoint> a = RandomText(&rng, std::uniform_int_distribution<int32_t>(0, 40)(rng));
    const std::vector<CodePoint> b = trial % 2 == 0
        ? RandomText(&rng, std::uniform_int_distribution<int32_t>(0, 40)(rng))
        : MutateWord(&rng, a, std::uniform_int_distribution<int32_t>(0, 8)(rng));
    const int32_t bound = StringSignatureBound(sig(a), sig(b));
    const int32_t truth = LevenshteinReference(a, b);
    ASSERT_LE(bound, truth);
    EXPECT_EQ(bound, StringSignatureBound(sig(b), sig(a)));
    tight += bound == truth ? 1 : 0;
  }
  EXPECT_GT(tight, 300);  // a bound that is always 0 would pass the above
  const std::vector<CodePoint> abc{'a', 'b', 'c'}, abd{'a', 'b', 'd'}, cab{'c', 'a', 'b'}, empty;
  EXPECT_EQ(StringSignatureBound(sig(abc), sig(abd)), 1);
  EXPECT_EQ(StringSignatureBound(sig(abc), sig(cab)), 0);  // an anagram: the bound is blind to order
  EXPECT_EQ(StringSignatureBound(sig(abc), sig(empty)), 3);
  // 300 'a' against 280 'a': the counts saturate at 255, the bound drops to 0, never above 20
  const std::vector<CodePoint> a300(300, 'a'), a280(280, 'a'), b300(300, 'b');
  EXPECT_EQ(StringSignatureBound(sig(a300), sig(a280)), 0);
  EXPECT_EQ(StringSignatureBound(sig(a300), sig(b300)), 255);
}

StringScanRequest RandomRequest(std::mt19937* rng, const CodePointStrings& words, int32_t nq,
                                int32_t k) {
  StringScanRequest request;
  request.k = k;
  for (int32_t q = 0; q < nq; ++q) {
    const int32_t base = std::uniform_int_distribution<int32_t>(0, words.size() - 1)(*rng);
    const Span<CodePoint> w = words.Get(base);
    std::vector<CodePoint> s(w.begin(), w.end());
    request.queries.Add(MutateWord(rng, s, std::uniform_int_distribution<int32_t>(0, 6)(*rng)));
  }
  return request;
}

void ExpectSameResult(const StringScanResult& got, const StringScanResult& want) {
  EXPECT_EQ(got.offsets, want.offsets);
  EXPECT_EQ(got.objects, want.objects);
  EXPECT_EQ(got.distances, want.distances);
}

TEST(CpuStringScan, BatchEqualsBruteForce) {
  std::mt19937 rng(7);
  const CodePointStrings words = RandomWords(&rng, 3000, 40);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  for (int32_t k : {1, 5, 37}) {
    for (int32_t threads : {1, 3}) {
      StringScanRequest request = RandomRequest(&rng, words, 40, k);
      StringScanResult got;
      ASSERT_TRUE(CpuStringScan(set, request, threads, &got).ok());
      ExpectSameResult(got, BruteForceScan(words, request));
    }
  }
}

TEST(CpuStringScan, SingleQueryInStripesEqualsBruteForce) {
  std::mt19937 rng(8);
  const CodePointStrings words = RandomWords(&rng, 70000, 30);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  for (int32_t k : {1, 5, 100}) {
    StringScanRequest request = RandomRequest(&rng, words, 1, k);
    StringScanResult got;
    ASSERT_TRUE(CpuStringScan(set, request, 4, &got).ok());
    ExpectSameResult(got, BruteForceScan(words, request));
  }
}

TEST(CpuStringScan, CapsExcludedAndKBeyondTheSet) {
  std::mt19937 rng(9);
  const CodePointStrings words = RandomWords(&rng, 500, 20);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::vector<uint8_t> excluded(500, 0);
  for (int32_t i = 0; i < 500; i += 3) excluded[static_cast<std::size_t>(i)] = 1;
  StringScanRequest request = RandomRequest(&rng, words, 20, 10);
  request.excluded = Span<uint8_t>(excluded);
  for (int32_t q = 0; q < 20; ++q) request.caps.push_back(q % 4 == 0 ? -1 : q % 4 - 1);
  StringScanResult got;
  ASSERT_TRUE(CpuStringScan(set, request, 2, &got).ok());
  ExpectSameResult(got, BruteForceScan(words, request));
  for (int32_t id : got.objects) EXPECT_EQ(excluded[static_cast<std::size_t>(id)], 0);

  // k beyond the set: every string that is not excluded, in order
  StringScanRequest all = RandomRequest(&rng, words, 3, 100000);
  all.excluded = Span<uint8_t>(excluded);
  ASSERT_TRUE(CpuStringScan(set, all, 2, &got).ok());
  ExpectSameResult(got, BruteForceScan(words, all));
  EXPECT_EQ(got.offsets[1], 500 - 167);
}

TEST(CpuStringScan, LongQueriesAndStringsUseTheBandedFallback) {
  std::mt19937 rng(10);
  CodePointStrings words;
  for (int32_t i = 0; i < 60; ++i) words.Add(RandomText(&rng, 240 + i * 3));
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  StringScanRequest request;
  request.k = 4;
  for (int32_t q = 0; q < 6; ++q) {
    const Span<CodePoint> w = words.Get(q * 9);
    request.queries.Add(MutateWord(&rng, std::vector<CodePoint>(w.begin(), w.end()), 20));
  }
  StringScanResult got;
  ASSERT_TRUE(CpuStringScan(set, request, 2, &got).ok());
  ExpectSameResult(got, BruteForceScan(words, request));
}

TEST(CpuStringScan, EmptySetEmptyQueryAndBadRequests) {
  StringSet empty;
  ASSERT_TRUE(BuildStringSet(CodePointStrings(), &empty).ok());
  StringScanRequest request;
  request.queries.Add(std::vector<CodePoint>{});
  request.k = 3;
  StringScanResult got;
  ASSERT_TRUE(CpuStringScan(empty, request, 2, &got).ok());
  EXPECT_EQ(got.offsets, (std::vector<int64_t>{0, 0}));

  std::mt19937 rng(11);
  const CodePointStrings words = RandomWords(&rng, 100, 10);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  ASSERT_TRUE(CpuStringScan(set, request, 2, &got).ok());
  ExpectSameResult(got, BruteForceScan(words, request));  // the empty query: shortest first

  request.k = 0;
  EXPECT_EQ(CpuStringScan(set, request, 2, &got).code(), GENIE_INVALID_ARGUMENT);
  request.k = 1;
  request.caps = {1, 2};
  EXPECT_EQ(CpuStringScan(set, request, 2, &got).code(), GENIE_INVALID_ARGUMENT);
}

int CancelNow(void*) { return 1; }

TEST(CpuStringScan, Cancel) {
  std::mt19937 rng(12);
  const CodePointStrings words = RandomWords(&rng, 20000, 20);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  StringScanRequest request = RandomRequest(&rng, words, 8, 5);
  StringScanResult got;
  CancelCheck cancel;
  cancel.fn = CancelNow;
  EXPECT_EQ(CpuStringScan(set, request, 2, &got, cancel).code(), GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

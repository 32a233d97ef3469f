// Tests of the Hamming scan: CpuCodeScan against the brute-force oracle
// (code lengths around the word size, planted neighbours, massive ties,
// batches and single queries split in stripes, excluded codes, k beyond
// the set), the k-th distance, bad input and cancel.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <vector>

#include "genie/code_fixture.hpp"
#include "genie/codes.hpp"

namespace genie {
namespace {

using testing::BruteForceCodes;
using testing::ExpectSameCodeRows;
using testing::MakeCodeSet;
using testing::PlantedQueries;
using testing::RandomCodes;

TEST(HammingDistance, CountsDifferingBits) {
  const uint64_t a[2] = {0xF0F0ull, 1ull << 63}, b[2] = {0x0FF0ull, 0};
  EXPECT_EQ(HammingDistance(a, b, 2), 8 + 1);
  EXPECT_EQ(HammingDistance(a, a, 2), 0);
}

TEST(LastWordMask, FollowsTheByteLayout) {
  EXPECT_EQ(LastWordMask(64), ~uint64_t{0});
  EXPECT_EQ(LastWordMask(128), ~uint64_t{0});
  EXPECT_EQ(LastWordMask(8), uint64_t{0xFF});
  EXPECT_EQ(LastWordMask(1), uint64_t{0x80});   // the first bit: the first byte's high bit
  EXPECT_EQ(LastWordMask(10), uint64_t{0xC0FF});
  EXPECT_EQ(LastWordMask(65), uint64_t{0x80});
  // every bit of a code lies in the mask, and the mask holds no other
  for (int32_t bits : {1, 7, 9, 63, 64, 100}) {
    uint64_t all = 0;
    for (int32_t i = (WordsForBits(bits) - 1) * 64; i < bits; ++i) all |= testing::CodeBit(i).second;
    EXPECT_EQ(all, LastWordMask(bits)) << bits;
  }
}

TEST(FindKthDistance, SplitsTheTies) {
  const uint32_t counts[5] = {1, 0, 3, 2, 0};
  KthDistance kth = FindKthDistance(counts, 4, 2);
  EXPECT_EQ(kth.distance, 2);
  EXPECT_EQ(kth.nearer, 1);
  EXPECT_EQ(kth.at, 1);
  kth = FindKthDistance(counts, 4, 4);
  EXPECT_EQ(kth.distance, 2);
  EXPECT_EQ(kth.at, 3);
  kth = FindKthDistance(counts, 4, 100);  // fewer than k: all six
  EXPECT_EQ(kth.nearer + kth.at, 6);
}

TEST(CpuCodeScan, MatchesBruteForce) {
  std::mt19937_64 rng(20261126);
  for (int32_t bits : {1, 7, 63, 64, 65, 128, 256, 512, 784}) {
    for (int ties : {0, 5}) {
      const std::vector<uint64_t> codes = RandomCodes(&rng, 3000, bits, ties);
      const CodeSet set = MakeCodeSet(bits, codes);
      for (int32_t nq : {1, 3, 9, 40}) {
        const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, bits, nq, std::max(1, bits / 20));
        for (int32_t k : {1, 10, 100, 5000}) {
          for (int32_t threads : {1, 4}) {
            CodeScanRequest request;
            request.n_queries = nq;
            request.queries = queries.data();
            request.k = k;
            CodeScanResult got;
            ASSERT_TRUE(CpuCodeScan(set, request, threads, &got).ok());
            SCOPED_TRACE("bits " + std::to_string(bits) + " ties " + std::to_string(ties) + " nq " +
                         std::to_string(nq) + " k " + std::to_string(k) + " threads " + std::to_string(threads));
            ExpectSameCodeRows(BruteForceCodes(set, queries.data(), nq, k), got);
          }
        }
      }
    }
  }
}

// The processor's fastest loop (AVX-512 VPOPCNTDQ or popcnt) against the
// portable one, on lengths with and without a partial last block of words.
TEST(CpuCodeScan, EveryLoopGivesTheSameRows) {
  std::mt19937_64 rng(77);
  for (int32_t bits : {200, 256, 512, 600, 784, 1024, 4000}) {
    const std::vector<uint64_t> codes = RandomCodes(&rng, 5000, bits, 0);
    const CodeSet set = MakeCodeSet(bits, codes);
    const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, bits, 11, bits / 30);
    CodeScanRequest request;
    request.n_queries = 11;
    request.queries = queries.data();
    request.k = 25;
    CodeScanResult fast, portable;
    ASSERT_TRUE(CpuCodeScan(set, request, 2, &fast).ok());
    ASSERT_EQ(setenv("GENIE_CODE_SCAN_PORTABLE", "1", 1), 0);
    const Status s = CpuCodeScan(set, request, 2, &portable);
    unsetenv("GENIE_CODE_SCAN_PORTABLE");
    ASSERT_TRUE(s.ok());
    SCOPED_TRACE("bits " + std::to_string(bits));
    ExpectSameCodeRows(portable, fast);
    ExpectSameCodeRows(BruteForceCodes(set, queries.data(), 11, 25), fast);
  }
}

TEST(CpuCodeScan, SkipsExcludedCodes) {
  std::mt19937_64 rng(3);
  const std::vector<uint64_t> codes = RandomCodes(&rng, 20000, 96, 40);
  const CodeSet set = MakeCodeSet(96, codes);
  std::vector<uint8_t> excluded(20000, 0);
  for (int i = 0; i < 20000; i += 3) excluded[i] = 1;
  const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, 96, 5, 0);
  CodeScanRequest request;
  request.n_queries = 5;
  request.queries = queries.data();
  request.k = 700;
  request.excluded = Span<uint8_t>(excluded.data(), excluded.size());
  CodeScanResult got;
  ASSERT_TRUE(CpuCodeScan(set, request, 2, &got).ok());
  ExpectSameCodeRows(BruteForceCodes(set, queries.data(), 5, 700, excluded), got);
  // every code excluded: no rows
  std::fill(excluded.begin(), excluded.end(), 1);
  ASSERT_TRUE(CpuCodeScan(set, request, 2, &got).ok());
  EXPECT_EQ(got.offsets, std::vector<int64_t>(6, 0));
}

TEST(CpuCodeScan, RefusesBadInput) {
  const CodeSet set = MakeCodeSet(10, std::vector<uint64_t>{0x40, 0x80FF, 0xC000});
  const uint64_t padded = uint64_t{1} << 13;  // a low-order bit of the last partial byte
  CodeScanRequest request;
  request.n_queries = 1;
  request.queries = &padded;
  CodeScanResult got;
  EXPECT_EQ(CpuCodeScan(set, request, 1, &got).code(), GENIE_INVALID_ARGUMENT);
  const uint64_t fine = 0x4001;
  request.queries = &fine;
  request.k = 0;
  EXPECT_EQ(CpuCodeScan(set, request, 1, &got).code(), GENIE_INVALID_ARGUMENT);
  CodeSet bad;
  EXPECT_FALSE(BuildCodeSet(10, 1, {padded}, &bad).ok());
  EXPECT_FALSE(BuildCodeSet(0, 0, {}, &bad).ok());
  EXPECT_FALSE(BuildCodeSet(kMaxCodeBits + 1, 0, {}, &bad).ok());
  EXPECT_FALSE(BuildCodeSet(64, 2, {1}, &bad).ok());
}

int CancelAfter(void* arg) { return static_cast<std::atomic<int>*>(arg)->fetch_sub(1) <= 0; }

TEST(CpuCodeScan, HonoursCancel) {
  std::mt19937_64 rng(9);
  const std::vector<uint64_t> codes = RandomCodes(&rng, 200000, 256);
  const CodeSet set = MakeCodeSet(256, codes);
  const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, 256, 16, 3);
  CodeScanRequest request;
  request.n_queries = 16;
  request.queries = queries.data();
  request.k = 10;
  std::atomic<int> polls{3};
  CodeScanResult got;
  EXPECT_EQ(CpuCodeScan(set, request, 2, &got, CancelCheck{CancelAfter, &polls}).code(), GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

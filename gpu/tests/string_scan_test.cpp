// The GPU string scan against the CPU engine (and both against brute force
// on small inputs): the same rows in the same order for batches and single
// queries, caps, excluded strings, k beyond the set, queries longer than
// the prepared pattern, and k-th distances beyond the device histogram.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "genie/gpu_string_scan.hpp"
#include "genie/string_scan.hpp"
#include "genie/string_scan_fixture.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::BruteForceScan;
using testing::MutateWord;
using testing::RandomWords;

StringScanRequest Queries(std::mt19937* rng, const CodePointStrings& words, int32_t nq, int32_t k,
                          int32_t max_edits) {
  StringScanRequest request;
  request.k = k;
  for (int32_t q = 0; q < nq; ++q) {
    const Span<CodePoint> w = words.Get(std::uniform_int_distribution<int32_t>(0, words.size() - 1)(*rng));
    request.queries.Add(MutateWord(rng, std::vector<CodePoint>(w.begin(), w.end()),
                                   std::uniform_int_distribution<int32_t>(0, max_edits)(*rng)));
  }
  return request;
}

void ExpectSame(const StringScanResult& got, const StringScanResult& want) {
  EXPECT_EQ(got.offsets, want.offsets);
  EXPECT_EQ(got.objects, want.objects);
  EXPECT_EQ(got.distances, want.distances);
}

class GpuStringScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
  }
  static bool GpuAvailable() {
    StringSet set;
    if (!BuildStringSet(CodePointStrings(), &set).ok()) return false;
    std::unique_ptr<GpuStringSet> gpu;
    return GpuStringSet::Create(set, 0, &gpu).ok();
  }
};

TEST_F(GpuStringScanTest, SmallSetsEqualBruteForceAndCpu) {
  std::mt19937 rng(31);
  const CodePointStrings words = RandomWords(&rng, 4000, 40);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu;
  ASSERT_TRUE(GpuStringSet::Create(set, 0, &gpu).ok());
  std::vector<uint8_t> excluded(4000, 0);
  for (int32_t i = 0; i < 4000; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
  for (int32_t k : {1, 5, 64}) {
    for (int variant = 0; variant < 3; ++variant) {
      StringScanRequest request = Queries(&rng, words, 50, k, 8);
      if (variant >= 1) request.excluded = Span<uint8_t>(excluded);
      if (variant == 2) {
        for (int32_t q = 0; q < 50; ++q) request.caps.push_back(q % 3 == 0 ? -1 : q % 5);
      }
      StringScanResult on_gpu, on_cpu;
      ASSERT_TRUE(gpu->Scan(set, request, 4, &on_gpu).ok());
      ASSERT_TRUE(CpuStringScan(set, request, 4, &on_cpu).ok());
      ExpectSame(on_gpu, on_cpu);
      ExpectSame(on_gpu, BruteForceScan(words, request));
    }
  }
}

TEST_F(GpuStringScanTest, LargeSetHeavyTyposEqualCpu) {
  std::mt19937 rng(32);
  const CodePointStrings words = RandomWords(&rng, 200000, 60);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu;
  ASSERT_TRUE(GpuStringSet::Create(set, 0, &gpu).ok());
  for (int32_t k : {1, 5, 100}) {
    StringScanRequest request = Queries(&rng, words, 300, k, 15);
    StringScanResult on_gpu, on_cpu;
    ASSERT_TRUE(gpu->Scan(set, request, 0, &on_gpu).ok());
    ASSERT_TRUE(CpuStringScan(set, request, 0, &on_cpu).ok());
    ExpectSame(on_gpu, on_cpu);
  }
  // a single query, and k beyond the set
  StringScanRequest one = Queries(&rng, words, 1, 10, 3);
  StringScanResult on_gpu, on_cpu;
  ASSERT_TRUE(gpu->Scan(set, one, 0, &on_gpu).ok());
  ASSERT_TRUE(CpuStringScan(set, one, 0, &on_cpu).ok());
  ExpectSame(on_gpu, on_cpu);
  one.k = 250000;
  ASSERT_TRUE(gpu->Scan(set, one, 0, &on_gpu).ok());
  ASSERT_TRUE(CpuStringScan(set, one, 0, &on_cpu).ok());
  ExpectSame(on_gpu, on_cpu);
  EXPECT_EQ(on_gpu.offsets[1], 200000);
}

TEST_F(GpuStringScanTest, LongStringsAndQueriesFallBackExactly) {
  std::mt19937 rng(33);
  CodePointStrings words;
  std::uniform_int_distribution<int32_t> ch(0, 5);
  for (int32_t i = 0; i < 300; ++i) {
    std::vector<CodePoint> s(static_cast<std::size_t>(i < 150 ? 20 + i : 1000 + i));
    for (CodePoint& c : s) c = static_cast<CodePoint>('a' + ch(rng));
    words.Add(s);
  }
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu;
  ASSERT_TRUE(GpuStringSet::Create(set, 0, &gpu).ok());
  StringScanRequest request = Queries(&rng, words, 20, 200, 30);  // k-th distances beyond 1022
  StringScanResult on_gpu, on_cpu;
  ASSERT_TRUE(gpu->Scan(set, request, 0, &on_gpu).ok());
  ASSERT_TRUE(CpuStringScan(set, request, 0, &on_cpu).ok());
  ExpectSame(on_gpu, on_cpu);
}

// Batch sizes that take the split kernels (1 to a few hundred queries) and
// the one-block kernel (a full batch), and queries whose k-th distance has
// more ties than the split pass may write (6,000 equal strings).
TEST_F(GpuStringScanTest, SplitAndOneBlockPathsAndManyTiesEqualCpu) {
  std::mt19937 rng(34);
  CodePointStrings words = RandomWords(&rng, 20000, 30);
  const std::vector<CodePoint> same{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  std::vector<CodePoint> near = same;
  near.back() = 'x';
  for (int32_t i = 0; i < 6000; ++i) words.Add(same);
  for (int32_t i = 0; i < 6000; ++i) words.Add(near);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu;
  ASSERT_TRUE(GpuStringSet::Create(set, 0, &gpu).ok());
  std::vector<uint8_t> excluded(static_cast<std::size_t>(words.size()), 0);
  for (std::size_t i = 0; i < excluded.size(); i += 5) excluded[i] = 1;
  for (int32_t nq : {1, 3, 40, 300, 1200}) {
    for (int32_t k : {1, 5, 20}) {
      StringScanRequest request = Queries(&rng, words, nq, k, 6);
      if (nq == 3) {  // the tie queries: t = 0 and t = 1 with 6,000 and 12,000 strings there
        std::vector<CodePoint> z = same;
        z.back() = 'z';
        request.queries = CodePointStrings();
        request.queries.Add(same);
        request.queries.Add(z);
        request.queries.Add(near);
      }
      if (nq == 40) request.excluded = Span<uint8_t>(excluded);
      StringScanResult on_gpu, on_cpu;
      ASSERT_TRUE(gpu->Scan(set, request, 0, &on_gpu).ok()) << nq << " " << k;
      ASSERT_TRUE(CpuStringScan(set, request, 0, &on_cpu).ok());
      ExpectSame(on_gpu, on_cpu);
      if (nq <= 40) ExpectSame(on_gpu, BruteForceScan(words, request));
    }
  }
}

}  // namespace
}  // namespace genie

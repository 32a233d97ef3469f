// The GPU Hamming scan against the CPU scan and the brute-force oracle:
// every code length around the word size and up to the longest, planted
// neighbours, massive ties (the k-th distance shared by thousands of
// codes), excluded codes, k beyond the set, single queries and batches that
// span several groups, and a budget too small for the set.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "genie/code_fixture.hpp"
#include "genie/codes.hpp"
#include "genie/engine.hpp"
#include "genie/ewh.hpp"
#include "genie/gpu_code_scan.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::BruteForceCodes;
using testing::ExpectSameCodeRows;
using testing::MakeCodeSet;
using testing::PlantedQueries;
using testing::RandomCodes;

CodeScanResult GpuScan(const CodeSet& set, const std::vector<uint64_t>& queries, int32_t k,
                       const std::vector<uint8_t>& excluded = {}, uint64_t budget = 0) {
  std::unique_ptr<GpuCodeSet> gpu;
  Status s = GpuCodeSet::Create(set, 0, budget, &gpu);
  EXPECT_TRUE(s.ok()) << s.message();
  CodeScanResult out;
  if (!s.ok()) return out;
  CodeScanRequest request;
  request.n_queries = static_cast<int32_t>(queries.size() / static_cast<std::size_t>(set.words));
  request.queries = queries.data();
  request.k = k;
  if (!excluded.empty()) request.excluded = Span<uint8_t>(excluded.data(), excluded.size());
  s = gpu->Scan(set, request, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(GpuCodeScan, MatchesTheCpuScan) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(20261126);
  for (int32_t bits : {1, 13, 64, 100, 256, 512, 784, 4096, 20000}) {
    for (int ties : {0, 7}) {
      const int32_t n = bits > 4096 ? 3000 : 50000;
      const std::vector<uint64_t> codes = RandomCodes(&rng, n, bits, ties);
      const CodeSet set = MakeCodeSet(bits, codes);
      for (int32_t nq : {1, 5, 33}) {
        const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, bits, nq, std::max(1, bits / 25));
        for (int32_t k : {1, 10, 1000, n + 5}) {
          SCOPED_TRACE("bits " + std::to_string(bits) + " ties " + std::to_string(ties) + " nq " +
                       std::to_string(nq) + " k " + std::to_string(k));
          CodeScanRequest request;
          request.n_queries = nq;
          request.queries = queries.data();
          request.k = k;
          CodeScanResult cpu;
          ASSERT_TRUE(CpuCodeScan(set, request, 0, &cpu).ok());
          ExpectSameCodeRows(cpu, GpuScan(set, queries, k));
          if (n <= 3000 && nq == 5) ExpectSameCodeRows(BruteForceCodes(set, queries.data(), nq, k), cpu);
        }
      }
    }
  }
}

TEST(GpuCodeScan, ExcludedCodesAndGroups) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(11);
  const int32_t n = 200000;
  const std::vector<uint64_t> codes = RandomCodes(&rng, n, 128, 50);
  const CodeSet set = MakeCodeSet(128, codes);
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 5) excluded[static_cast<std::size_t>(i)] = 1;
  const std::vector<uint64_t> queries = PlantedQueries(&rng, codes, 128, 300, 2);
  CodeScanRequest request;
  request.n_queries = 300;
  request.queries = queries.data();
  request.k = 100;
  request.excluded = Span<uint8_t>(excluded.data(), excluded.size());
  CodeScanResult cpu;
  ASSERT_TRUE(CpuCodeScan(set, request, 0, &cpu).ok());
  // a budget that holds the codes and a few queries' distances: many groups
  ExpectSameCodeRows(cpu, GpuScan(set, queries, 100, excluded, static_cast<uint64_t>(n) * 16 + (24u << 20)));
  ExpectSameCodeRows(cpu, GpuScan(set, queries, 100, excluded));
}

TEST(GpuCodeScan, RefusesASetBeyondTheBudget) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(5);
  const CodeSet set = MakeCodeSet(512, RandomCodes(&rng, 100000, 512));
  std::unique_ptr<GpuCodeSet> gpu;
  EXPECT_EQ(GpuCodeSet::Create(set, 0, 1u << 20, &gpu).code(), GENIE_DEVICE_OUT_OF_MEMORY);
}

}  // namespace
}  // namespace genie

namespace genie {
namespace {

// Error Weighted Hashing's weighted buckets on the GPU engine: the same
// candidates and scores as the CPU engine (which ewh_test.cpp checks
// against the paper's score), for e = 0 to 3 and a batch in several groups.
TEST(GpuEwh, CountsLikeTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  const int32_t bits = 512, m = 16, h = 16, n = 60000, nq = 300;
  std::mt19937_64 rng(31);
  const std::vector<uint64_t> codes = testing::RandomCodes(&rng, n, bits);
  const std::vector<uint64_t> queries = testing::PlantedQueries(&rng, codes, bits, nq, 30);
  const int32_t words = WordsForBits(bits);
  std::unique_ptr<EwhFunctions> f;
  ASSERT_TRUE(EwhFunctions::Create({bits, m, h, 5}, &f).ok());
  std::vector<int32_t> keywords(static_cast<std::size_t>(n) * m);
  std::vector<int64_t> offsets(n + 1);
  for (int32_t o = 0; o < n; ++o) {
    f->Keywords(codes.data() + static_cast<std::size_t>(o) * words, keywords.data() + static_cast<std::size_t>(o) * m);
    offsets[o + 1] = static_cast<int64_t>(o + 1) * m;
  }
  auto index = std::make_shared<InvertedIndex>();
  ASSERT_TRUE(InvertedIndex::Build(offsets, keywords, IndexOptions{}, index.get()).ok());
  Status status;
  auto gpu = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(gpu, nullptr) << status.message();
  auto cpu = MakeCpuEngine(EngineOptions());
  ASSERT_TRUE(gpu->Upload(index).ok());
  ASSERT_TRUE(cpu->Upload(index).ok());
  for (int32_t e = 0; e <= 3; ++e) {
    QueryBatch batch;
    for (int32_t q = 0; q < nq; ++q)
      ASSERT_TRUE(f->AddQuery(queries.data() + static_cast<std::size_t>(q) * words, e, EwhDefaultWeights(e), &batch).ok());
    for (int32_t k : {10, 1000}) {
      TopKResults want, got;
      ASSERT_TRUE(cpu->Search(batch.View(), k, &want).ok());
      ASSERT_TRUE(gpu->Search(batch.View(), k, &got).ok());
      ASSERT_EQ(want.query_offsets, got.query_offsets) << "e " << e << " k " << k;
      for (std::size_t i = 0; i < want.hits.size(); ++i) {
        ASSERT_EQ(want.hits[i].object, got.hits[i].object) << "e " << e << " k " << k << " hit " << i;
        ASSERT_EQ(want.hits[i].score, got.hits[i].score);
      }
    }
  }
}

}  // namespace
}  // namespace genie

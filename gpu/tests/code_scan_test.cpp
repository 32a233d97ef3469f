// The GPU Hamming scan against the CPU scan and the brute-force oracle:
// every code length around the word size and up to the longest, planted
// neighbours, massive ties (the k-th distance shared by thousands of
// codes), excluded codes, k beyond the set, single queries and batches that
// span several groups, and a budget too small for the set.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "genie/code_fixture.hpp"
#include "genie/codes.hpp"
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

// The GPU's permutation candidates against the CPU's and the full-sort
// oracle: permutant counts below, at and beyond a 16-byte step (one to nine
// steps), massive ties at the cut (few permutants), excluded objects, more
// candidates than objects, single queries and batches split in groups by a
// small budget; and through the C API, AUTO and GPU against CPU.  The rows
// themselves: vectors (ties from duplicated points) and strings (words, and
// long strings within and beyond the prepared patterns) against the CPU's
// bytes, whole and in pieces of a small budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "genie/genie.h"
#include "genie/gpu_permutation.hpp"
#include "genie/permutation.hpp"
#include "genie/permutation_fixture.hpp"
#include "genie/sequence.hpp"
#include "genie/string_scan_fixture.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::RandomPermutationTable;
using testing::ReferencePermutationSelect;

TEST(GpuPermutation, SelectionEqualsTheCpuAndTheOracle) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (int32_t m : {3, 16, 17, 64, kMaxPermutants}) {
    PermutationTable objects = RandomPermutationTable(&rng, m, 70001);
    std::unique_ptr<GpuPermutationRows> gpu;
    Status s = GpuPermutationRows::Create(objects.rows(), 0, &gpu);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<uint8_t> excluded(70001, 0);
    for (int i = 0; i < 70001; i += 5) excluded[static_cast<std::size_t>(i)] = 1;
    for (int32_t nq : {1, 13}) {
      PermutationTable queries = RandomPermutationTable(&rng, m, nq);
      for (int32_t candidates : {1, 100, 3500, 56000, 80000}) {
        for (bool with_excluded : {false, true}) {
          const Span<uint8_t> flags = with_excluded ? Span<uint8_t>(excluded) : Span<uint8_t>();
          PermutationCandidates want, got, grouped;
          ASSERT_TRUE(CpuPermutationSelect(objects.rows(), queries.rows(), flags, candidates, 4, &want).ok());
          s = gpu->Select(queries.rows(), flags, candidates, 0, &got);
          ASSERT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(got.offsets, want.offsets) << "m " << m << " nq " << nq << " candidates " << candidates;
          EXPECT_EQ(got.objects, want.objects) << "m " << m << " nq " << nq << " candidates " << candidates;
          // a budget of one query's footrules: every query its own group
          s = gpu->Select(queries.rows(), flags, candidates, 1, &grouped);
          ASSERT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(grouped.objects, want.objects);
          if (nq == 1 && candidates == 100) {
            std::vector<int32_t> oracle;
            ReferencePermutationSelect(objects.rows(), queries.row(0), flags, candidates, &oracle);
            EXPECT_EQ(got.objects, oracle);
          }
        }
      }
    }
  }
}

TEST(GpuPermutation, VectorRowsEqualTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  std::normal_distribution<float> g(0, 1);
  for (int32_t dim : {1, 7, 784}) {
    const int32_t n = dim == 784 ? 3000 : 20000, m = dim == 1 ? 5 : 64;
    std::vector<float> values(static_cast<std::size_t>(n) * dim);
    for (float& v : values) v = dim == 1 ? static_cast<float>(static_cast<int>(g(rng) * 3)) : g(rng);  // dim 1: ties
    VectorSet set;
    ASSERT_TRUE(BuildVectorSet(dim, n, {values.begin(), values.end()}, &set).ok());
    std::vector<int32_t> ids;
    ASSERT_TRUE(ChoosePermutants(n, {}, m, 4, &ids).ok());
    std::vector<float> pv;
    for (int32_t id : ids) pv.insert(pv.end(), set.row(id), set.row(id) + dim);
    VectorSet permutants;
    ASSERT_TRUE(BuildVectorSet(dim, m, {pv.begin(), pv.end()}, &permutants).ok());
    PermutationTable cpu, gpu, pieces;
    ASSERT_TRUE(MakePermutationTable(m, n, &cpu).ok());
    ASSERT_TRUE(MakePermutationTable(m, n, &gpu).ok());
    ASSERT_TRUE(MakePermutationTable(m, n, &pieces).ok());
    ASSERT_TRUE(VectorPermutations(set, permutants, 0, 4, cpu.rows()).ok());
    Status s = GpuVectorPermutations(set, permutants, 0, 0, gpu.rows());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(gpu.positions, cpu.positions) << "dim " << dim;
    s = GpuVectorPermutations(set, permutants, 0, 1 << 20, pieces.rows());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(pieces.positions, cpu.positions) << "dim " << dim << " in pieces";
  }
}

TEST(GpuPermutation, StringRowsEqualTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(24);
  CodePointStrings words = testing::RandomWords(&rng, 30000, 14);
  std::uniform_int_distribution<int32_t> letter(0, 3), length(0, 600);
  CodePointStrings long_strings;
  for (int32_t i = 0; i < 300; ++i) {
    std::vector<CodePoint> s(static_cast<std::size_t>(i < 3 ? 280 + i * 100 : length(rng)));
    for (CodePoint& c : s) c = static_cast<CodePoint>(i % 4 == 0 ? 0x3B1 + letter(rng) : 'a' + letter(rng));
    long_strings.Add(Span<CodePoint>(s.data(), s.size()));
  }
  for (const CodePointStrings* objects : {&words, &long_strings}) {
    const int32_t m = objects == &words ? 64 : 16;
    CodePointStrings permutants;
    for (int32_t j = 0; j < m; ++j) permutants.Add(objects->Get(j * 7));  // long: 0 and 7 beyond 256
    PermutationTable cpu, gpu, pieces;
    ASSERT_TRUE(MakePermutationTable(m, objects->size(), &cpu).ok());
    ASSERT_TRUE(MakePermutationTable(m, objects->size(), &gpu).ok());
    ASSERT_TRUE(MakePermutationTable(m, objects->size(), &pieces).ok());
    ASSERT_TRUE(StringPermutations(*objects, permutants, 0, 4, cpu.rows()).ok());
    Status s = GpuStringPermutations(*objects, permutants, 0, 0, gpu.rows());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(gpu.positions, cpu.positions) << objects->size() << " strings";
    s = GpuStringPermutations(*objects, permutants, 0, 4 << 20, pieces.rows());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(pieces.positions, cpu.positions) << objects->size() << " strings in pieces";
  }
}

TEST(GpuPermutation, CApiGpuAndAutoEqualCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  PermutationTable source = RandomPermutationTable(&rng, 32, 20000);
  PermutationTable queries = RandomPermutationTable(&rng, 32, 5);
  genie_permutation_rows* rows = nullptr;
  uint8_t* data = nullptr;
  genie_error err{};
  ASSERT_EQ(genie_permutation_rows_create(32, 20000, &rows, &data, &err), GENIE_OK) << err.message;
  std::copy(source.positions.begin(), source.positions.end(), data);
  genie_permutation_candidates* results[3] = {nullptr, nullptr, nullptr};
  const genie_engine_kind devices[3] = {GENIE_ENGINE_CPU, GENIE_ENGINE_GPU, GENIE_ENGINE_AUTO};
  for (int d = 0; d < 3; ++d) {
    ASSERT_EQ(genie_permutation_select(rows, devices[d], nullptr, nullptr, queries.positions.data(), 5, 700,
                                       &results[d], &err),
              GENIE_OK)
        << err.message;
  }
  EXPECT_EQ(results[1]->device, GENIE_ENGINE_GPU);
  EXPECT_EQ(results[2]->device, GENIE_ENGINE_GPU);
  EXPECT_GT(genie_permutation_rows_device_bytes(rows), 0u);
  for (int d = 1; d < 3; ++d) {
    ASSERT_EQ(results[d]->query_offsets[5], results[0]->query_offsets[5]);
    EXPECT_TRUE(std::equal(results[0]->objects, results[0]->objects + results[0]->query_offsets[5],
                           results[d]->objects));
  }
  for (auto* r : results) genie_permutation_candidates_free(r);
  genie_permutation_rows_free(rows);
}

}  // namespace
}  // namespace genie

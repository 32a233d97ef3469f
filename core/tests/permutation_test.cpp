// Tests of the permutation index's CPU side: the permutants drawn
// reproducibly, rows from distances (ties by permutant), the SAD footrule
// against the plain sum, the selection against a full sort (batches and
// single queries split in stripes, ties at the cut, excluded objects, more
// candidates than objects), the rows of vectors and strings against
// distances computed here, the re-rank of strings against brute force, and
// that the candidates of clustered data hold the true nearest neighbours.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "genie/permutation.hpp"
#include "genie/permutation_fixture.hpp"
#include "genie/string_scan.hpp"
#include "genie/string_scan_fixture.hpp"

namespace genie {
namespace {

using testing::RandomPermutationTable;
using testing::ReferencePermutationSelect;

TEST(Permutation, PermutantsAreReproducibleDistinctAndEligible) {
  std::vector<uint8_t> excluded(1000, 0);
  for (int i = 0; i < 1000; i += 3) excluded[static_cast<std::size_t>(i)] = 1;
  std::vector<int32_t> a, b, c;
  ASSERT_TRUE(ChoosePermutants(1000, excluded, 64, 42, &a).ok());
  ASSERT_TRUE(ChoosePermutants(1000, excluded, 64, 42, &b).ok());
  ASSERT_TRUE(ChoosePermutants(1000, excluded, 64, 43, &c).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()).size(), 64u);
  for (int32_t id : a) EXPECT_EQ(excluded[static_cast<std::size_t>(id)], 0) << id;
  std::vector<uint8_t> few(10, 1);
  few[3] = 0;
  EXPECT_EQ(ChoosePermutants(10, few, 2, 1, &a).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(ChoosePermutants(10, {}, 0, 1, &a).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(ChoosePermutants(1000, {}, kMaxPermutants + 1, 1, &a).code(), GENIE_INVALID_ARGUMENT);
  ASSERT_TRUE(ChoosePermutants(4, {}, 4, 7, &a).ok());
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(Permutation, PositionsRankByDistanceThenPermutant) {
  const double d[5] = {3.0, 1.0, 3.0, 0.5, 1.0};
  uint8_t row[5];
  PositionsFromDistances(d, 5, row);
  // order: 3 (0.5), 1 (1.0), 4 (1.0), 0 (3.0), 2 (3.0)
  EXPECT_EQ(row[3], 0);
  EXPECT_EQ(row[1], 1);
  EXPECT_EQ(row[4], 2);
  EXPECT_EQ(row[0], 3);
  EXPECT_EQ(row[2], 4);
}

// The ranks equal a sort of the indexes by (distance, index), on distances
// with many ties (small integers, as edit distances) and without.
TEST(Permutation, PositionsEqualASortByDistanceThenPermutant) {
  std::mt19937 rng(31);
  for (int32_t m = 1; m <= kMaxPermutants; ++m) {
    // small integers (edit distances: the counting sort), up to and past its
    // bound of 255, and fractions (squared distances: the pairwise count)
    for (int32_t spread : {1, 3, 255, 256, 1000000}) {
      std::uniform_int_distribution<int32_t> value(0, spread);
      double d[kMaxPermutants];
      for (int32_t j = 0; j < m; ++j) d[j] = spread == 1000000 ? value(rng) * 1e-3 : value(rng);
      int32_t order[kMaxPermutants];
      for (int32_t j = 0; j < m; ++j) order[j] = j;
      std::sort(order, order + m, [&d](int32_t a, int32_t b) { return d[a] < d[b] || (d[a] == d[b] && a < b); });
      uint8_t want[kMaxPermutants];
      for (int32_t r = 0; r < m; ++r) want[order[r]] = static_cast<uint8_t>(r);
      uint8_t row[kMaxPermutants];
      PositionsFromDistances(d, m, row);
      ASSERT_TRUE(std::equal(want, want + m, row)) << "m " << m << " spread " << spread;
    }
  }
}

TEST(Permutation, FootruleIsTheSumOfAbsoluteDifferences) {
  std::mt19937 rng(7);
  for (int32_t m : {1, 5, 16, 17, 64, 100, kMaxPermutants}) {
    PermutationTable t = RandomPermutationTable(&rng, m, 20);
    for (int32_t a = 0; a < 20; ++a) {
      for (int32_t b = 0; b < 20; ++b) {
        int32_t s = 0;
        for (int32_t j = 0; j < m; ++j) s += std::abs(t.row(a)[j] - t.row(b)[j]);
        ASSERT_EQ(Footrule(t.row(a), t.row(b), t.stride), s) << m;
        ASSERT_LE(s, MaxFootrule(m));
      }
    }
  }
}

void ExpectSelectionEqualsReference(PermutationTable& objects, PermutationTable& queries,
                                    const std::vector<uint8_t>& excluded, int32_t candidates,
                                    int32_t threads) {
  PermutationCandidates got;
  ASSERT_TRUE(CpuPermutationSelect(objects.rows(), queries.rows(), excluded, candidates, threads, &got).ok());
  ASSERT_EQ(got.offsets.size(), static_cast<std::size_t>(queries.n) + 1);
  for (int32_t q = 0; q < queries.n; ++q) {
    std::vector<int32_t> want;
    ReferencePermutationSelect(objects.rows(), queries.row(q), excluded, candidates, &want);
    std::vector<int32_t> have(got.objects.begin() + got.offsets[static_cast<std::size_t>(q)],
                              got.objects.begin() + got.offsets[static_cast<std::size_t>(q) + 1]);
    ASSERT_EQ(have, want) << "query " << q << " candidates " << candidates << " threads " << threads;
  }
}

TEST(Permutation, SelectionEqualsAFullSort) {
  std::mt19937 rng(11);
  // few permutants: many ties at the cut; 64: whole 32-byte steps (AVX2),
  // the others 16-byte ones; a batch of 9 on 2 threads: groups of 4 and 1
  for (int32_t m : {4, 16, 33, 64}) {
    // 50,003 objects: the collect pass's eight-object steps leave a tail
    PermutationTable objects = RandomPermutationTable(&rng, m, 50003);
    PermutationTable batch = RandomPermutationTable(&rng, m, 9);
    PermutationTable one = RandomPermutationTable(&rng, m, 1);
    std::vector<uint8_t> excluded(50003, 0);
    for (int i = 0; i < 50003; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
    for (int32_t candidates : {1, 10, 1000, 49000, 60000}) {
      ExpectSelectionEqualsReference(objects, batch, {}, candidates, 4);
      ExpectSelectionEqualsReference(objects, batch, excluded, candidates, 2);
      // one query on several threads: by stripes
      ExpectSelectionEqualsReference(objects, one, excluded, candidates, 4);
      ExpectSelectionEqualsReference(objects, one, {}, candidates, 1);
    }
  }
}

TEST(Permutation, SelectionRefusesBadArguments) {
  std::mt19937 rng(3);
  PermutationTable objects = RandomPermutationTable(&rng, 16, 10);
  PermutationTable other = RandomPermutationTable(&rng, 17, 1);
  PermutationCandidates out;
  EXPECT_EQ(CpuPermutationSelect(objects.rows(), other.rows(), {}, 5, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(CpuPermutationSelect(objects.rows(), objects.rows(), {}, 0, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  std::vector<uint8_t> short_excluded(3, 0);
  EXPECT_EQ(CpuPermutationSelect(objects.rows(), objects.rows(), short_excluded, 5, 1, &out).code(),
            GENIE_INVALID_ARGUMENT);
  CancelCheck cancel{[](void*) { return 1; }, nullptr};
  EXPECT_EQ(CpuPermutationSelect(objects.rows(), objects.rows(), {}, 5, 1, &out, cancel).code(), GENIE_CANCELLED);
}

TEST(Permutation, VectorRowsRankTheSquaredDistances) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0, 1);
  const int32_t dim = 13, n = 300, m = 20;
  std::vector<float> values(static_cast<std::size_t>(n * dim));
  for (float& v : values) v = g(rng);
  VectorSet set;
  ASSERT_TRUE(BuildVectorSet(dim, n, {values.begin(), values.end()}, &set).ok());
  std::vector<int32_t> ids;
  ASSERT_TRUE(ChoosePermutants(n, {}, m, 9, &ids).ok());
  std::vector<float> pv;
  for (int32_t id : ids) pv.insert(pv.end(), set.row(id), set.row(id) + dim);
  VectorSet permutants;
  ASSERT_TRUE(BuildVectorSet(dim, m, {pv.begin(), pv.end()}, &permutants).ok());
  PermutationTable t;
  ASSERT_TRUE(MakePermutationTable(m, n + 2, &t).ok());
  ASSERT_TRUE(VectorPermutations(set, permutants, 2, 2, t.rows()).ok());
  for (int32_t i = 0; i < n; ++i) {
    double d[kMaxPermutants];
    for (int32_t j = 0; j < m; ++j) d[j] = std::pow(L2Distance(set.row(i), permutants.row(j), dim), 2);
    for (int32_t a = 0; a < m; ++a)
      for (int32_t b = 0; b < m; ++b) {
        if (d[a] < d[b] * (1 - 1e-9)) {
          ASSERT_LT(t.row(i + 2)[a], t.row(i + 2)[b]) << i;
        }
      }
    for (int32_t j = m; j < t.stride; ++j) ASSERT_EQ(t.row(i + 2)[j], 0);
    // the very row of one plain sum a permutant, in element order (the
    // GPU's numbers), whatever sums the engine overlaps
    double plain[kMaxPermutants];
    for (int32_t j = 0; j < m; ++j) {
      double s = 0;
      for (int32_t e = 0; e < dim; ++e) {
        const double x = static_cast<double>(set.row(i)[e]) - static_cast<double>(permutants.row(j)[e]);
        s += x * x;
      }
      plain[j] = s;
    }
    uint8_t want[kMaxPermutants];
    PositionsFromDistances(plain, m, want);
    ASSERT_TRUE(std::equal(want, want + m, t.row(i + 2))) << i;
  }
  // a permutant is nearest to itself
  for (int32_t j = 0; j < m; ++j) EXPECT_EQ(t.row(ids[static_cast<std::size_t>(j)] + 2)[j], 0);
}

TEST(Permutation, StringRowsRankTheEditDistances) {
  std::mt19937 rng(6);
  CodePointStrings words = testing::RandomWords(&rng, 400, 12);
  std::vector<int32_t> ids;
  ASSERT_TRUE(ChoosePermutants(words.size(), {}, 16, 1, &ids).ok());
  CodePointStrings permutants;
  for (int32_t id : ids) permutants.Add(words.Get(id));
  PermutationTable t;
  ASSERT_TRUE(MakePermutationTable(16, words.size(), &t).ok());
  ASSERT_TRUE(StringPermutations(words, permutants, 0, 2, t.rows()).ok());
  for (int32_t i = 0; i < words.size(); ++i) {
    double d[kMaxPermutants];
    uint8_t want[kMaxPermutants];
    for (int32_t j = 0; j < 16; ++j) d[j] = LevenshteinReference(words.Get(i), permutants.Get(j));
    PositionsFromDistances(d, 16, want);
    ASSERT_TRUE(std::equal(want, want + 16, t.row(i))) << i;
  }
}

// Long strings: permutants within and beyond the prepared patterns' 256
// code points (blocks of Myers, and the banded DP), objects up to 400.
TEST(Permutation, LongStringRowsRankTheEditDistances) {
  std::mt19937 rng(16);
  std::uniform_int_distribution<int32_t> letter(0, 3), length(0, 400);
  CodePointStrings strings;
  for (int32_t i = 0; i < 40; ++i) {
    std::vector<CodePoint> s(static_cast<std::size_t>(i < 2 ? 300 + i * 50 : length(rng)));
    for (CodePoint& c : s) c = static_cast<CodePoint>(i % 5 == 0 ? 0x3B1 + letter(rng) : 'a' + letter(rng));
    strings.Add(Span<CodePoint>(s.data(), s.size()));
  }
  // permutants 0 and 1 are 300 and 350 code points: beyond the prepared patterns
  CodePointStrings permutants;
  for (int32_t j : {0, 1, 3, 7, 12, 20, 33, 38}) permutants.Add(strings.Get(j));
  PermutationTable t;
  ASSERT_TRUE(MakePermutationTable(8, strings.size(), &t).ok());
  ASSERT_TRUE(StringPermutations(strings, permutants, 0, 2, t.rows()).ok());
  for (int32_t i = 0; i < strings.size(); ++i) {
    double d[kMaxPermutants];
    uint8_t want[kMaxPermutants];
    for (int32_t j = 0; j < 8; ++j) d[j] = LevenshteinReference(strings.Get(i), permutants.Get(j));
    PositionsFromDistances(d, 8, want);
    ASSERT_TRUE(std::equal(want, want + 8, t.row(i))) << i;
  }
  // the re-rank of long strings: exact distances, the scan's order
  StringSet set;
  ASSERT_TRUE(BuildStringSet(strings, &set).ok());
  CodePointStrings queries;
  queries.Add(strings.Get(5));
  queries.Add(strings.Get(0));
  std::vector<int64_t> offsets{0, 40, 80};
  std::vector<int32_t> candidates;
  for (int r = 0; r < 2; ++r)
    for (int32_t i = 0; i < 40; ++i) candidates.push_back(i);
  StringScanResult got;
  ASSERT_TRUE(RerankStrings(set, queries, 5, offsets, candidates, {}, 2, &got).ok());
  for (int32_t q = 0; q < 2; ++q) {
    std::vector<std::tuple<int32_t, int32_t, int32_t>> all;
    for (int32_t i = 0; i < 40; ++i) all.emplace_back(LevenshteinReference(queries.Get(q), strings.Get(i)), set.length(i), i);
    std::sort(all.begin(), all.end());
    for (int32_t r = 0; r < 5; ++r) {
      EXPECT_EQ(got.objects[static_cast<std::size_t>(q * 5 + r)], std::get<2>(all[static_cast<std::size_t>(r)]));
      EXPECT_EQ(got.distances[static_cast<std::size_t>(q * 5 + r)], std::get<0>(all[static_cast<std::size_t>(r)]));
    }
  }
}

TEST(Permutation, StringRerankEqualsBruteForceOverTheCandidates) {
  std::mt19937 rng(8);
  CodePointStrings words = testing::RandomWords(&rng, 2000, 10);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  CodePointStrings queries;
  for (int q = 0; q < 6; ++q) queries.Add(words.Get(q * 100));
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> candidates;
  std::uniform_int_distribution<int32_t> pick(-2, 2001);
  for (int q = 0; q < 6; ++q) {
    for (int c = 0; c < 300; ++c) candidates.push_back(pick(rng));  // duplicates, out of range
    offsets.push_back(static_cast<int64_t>(candidates.size()));
  }
  std::vector<uint8_t> excluded(2000, 0);
  for (int i = 0; i < 2000; i += 5) excluded[static_cast<std::size_t>(i)] = 1;
  StringScanResult got;
  ASSERT_TRUE(RerankStrings(set, queries, 7, offsets, candidates, excluded, 2, &got).ok());
  for (int q = 0; q < 6; ++q) {
    std::set<std::tuple<int32_t, int32_t, int32_t>> all;
    for (int64_t c = offsets[static_cast<std::size_t>(q)]; c < offsets[static_cast<std::size_t>(q) + 1]; ++c) {
      const int32_t id = candidates[static_cast<std::size_t>(c)];
      if (id < 0 || id >= 2000 || excluded[static_cast<std::size_t>(id)]) continue;
      all.insert({LevenshteinReference(queries.Get(q), words.Get(id)), set.length(id), id});
    }
    auto it = all.begin();
    ASSERT_EQ(got.offsets[static_cast<std::size_t>(q) + 1] - got.offsets[static_cast<std::size_t>(q)],
              std::min<int64_t>(7, static_cast<int64_t>(all.size())));
    for (int64_t r = got.offsets[static_cast<std::size_t>(q)]; r < got.offsets[static_cast<std::size_t>(q) + 1]; ++r, ++it) {
      EXPECT_EQ(got.objects[static_cast<std::size_t>(r)], std::get<2>(*it));
      EXPECT_EQ(got.distances[static_cast<std::size_t>(r)], std::get<0>(*it));
    }
  }
}

// The method itself: on clustered vectors, 5% of the objects by footrule
// hold most true nearest neighbours.
TEST(Permutation, CandidatesOfClusteredVectorsHoldTheNearestNeighbours) {
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0, 1);
  const int32_t dim = 16, clusters = 50, per = 200, n = clusters * per, m = 32;
  std::vector<float> centres(static_cast<std::size_t>(clusters * dim));
  for (float& c : centres) c = 10 * g(rng);
  std::vector<float> values;
  for (int32_t c = 0; c < clusters; ++c)
    for (int32_t i = 0; i < per; ++i)
      for (int32_t e = 0; e < dim; ++e) values.push_back(centres[static_cast<std::size_t>(c * dim + e)] + g(rng));
  VectorSet set;
  ASSERT_TRUE(BuildVectorSet(dim, n, {values.begin(), values.end()}, &set).ok());
  std::vector<int32_t> ids;
  ASSERT_TRUE(ChoosePermutants(n, {}, m, 1, &ids).ok());
  std::vector<float> pv;
  for (int32_t id : ids) pv.insert(pv.end(), set.row(id), set.row(id) + dim);
  VectorSet permutants;
  ASSERT_TRUE(BuildVectorSet(dim, m, {pv.begin(), pv.end()}, &permutants).ok());
  PermutationTable objects;
  ASSERT_TRUE(MakePermutationTable(m, n, &objects).ok());
  ASSERT_TRUE(VectorPermutations(set, permutants, 0, 2, objects.rows()).ok());
  // queries: perturbed objects
  const int32_t nq = 100;
  std::vector<float> qv;
  for (int32_t q = 0; q < nq; ++q)
    for (int32_t e = 0; e < dim; ++e) qv.push_back(set.row(q * 97)[e] + 0.3f * g(rng));
  VectorSet qset;
  ASSERT_TRUE(BuildVectorSet(dim, nq, {qv.begin(), qv.end()}, &qset).ok());
  PermutationTable queries;
  ASSERT_TRUE(MakePermutationTable(m, nq, &queries).ok());
  ASSERT_TRUE(VectorPermutations(qset, permutants, 0, 2, queries.rows()).ok());
  PermutationCandidates cand;
  ASSERT_TRUE(CpuPermutationSelect(objects.rows(), queries.rows(), {}, n / 20, 2, &cand).ok());
  VectorScanResult approx, exact;
  ASSERT_TRUE(RerankVectors(set, qset.values.data(), nq, 10, cand.offsets, cand.objects, {}, 2, &approx).ok());
  VectorScanRequest req;
  req.n_queries = nq;
  req.queries = qset.values.data();
  req.k = 10;
  ASSERT_TRUE(CpuVectorScan(set, req, 2, &exact).ok());
  int64_t hits = 0;
  for (int32_t q = 0; q < nq; ++q) {
    std::set<int32_t> truth(exact.objects.begin() + exact.offsets[static_cast<std::size_t>(q)],
                            exact.objects.begin() + exact.offsets[static_cast<std::size_t>(q) + 1]);
    for (int64_t r = approx.offsets[static_cast<std::size_t>(q)]; r < approx.offsets[static_cast<std::size_t>(q) + 1]; ++r)
      hits += truth.count(approx.objects[static_cast<std::size_t>(r)]);
  }
  const double recall = static_cast<double>(hits) / (nq * 10);
  EXPECT_GE(recall, 0.9) << "recall@10 at 5% candidates";
}

}  // namespace
}  // namespace genie

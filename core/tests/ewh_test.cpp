// Tests of Error Weighted Hashing: the functions read h distinct bits each
// and nothing else, the keywords are one per function in its range, a
// query's buckets are exactly the values within e errors, the engine's
// weighted count equals the paper's score computed directly, the re-rank
// of a shortlist equals a brute force over it, and on planted neighbours
// the shortlist finds the exact k nearest (recall measured, not assumed).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "genie/code_fixture.hpp"
#include "genie/codes.hpp"
#include "genie/engine.hpp"
#include "genie/ewh.hpp"

namespace genie {
namespace {

using testing::BruteForceCodes;
using testing::CodeBit;
using testing::MakeCodeSet;
using testing::RandomCodes;

std::unique_ptr<EwhFunctions> Make(int32_t bits, int32_t m, int32_t h, uint64_t seed = 7) {
  std::unique_ptr<EwhFunctions> f;
  const Status s = EwhFunctions::Create({bits, m, h, seed}, &f);
  EXPECT_TRUE(s.ok()) << s.message();
  return f;
}

TEST(Ewh, RejectsBadParameters) {
  std::unique_ptr<EwhFunctions> f;
  EXPECT_FALSE(EwhFunctions::Create({0, 4, 4, 0}, &f).ok());
  EXPECT_FALSE(EwhFunctions::Create({64, 0, 4, 0}, &f).ok());
  EXPECT_FALSE(EwhFunctions::Create({8, 4, 9, 0}, &f).ok());    // h beyond the code
  EXPECT_FALSE(EwhFunctions::Create({512, 4, 25, 0}, &f).ok());  // h beyond 24
  EXPECT_FALSE(EwhFunctions::Create({512, 200, 24, 0}, &f).ok());  // m * 2^h beyond int32
  EXPECT_TRUE(EwhFunctions::Create({512, 127, 24, 0}, &f).ok());
  EXPECT_TRUE(EwhFunctions::Create({1, 1, 1, 0}, &f).ok());
}

TEST(Ewh, EachFunctionReadsExactlyItsHDistinctBits) {
  for (int32_t bits : {9, 64, 100, 512}) {
    const int32_t h = std::min(bits, 12), m = 6;
    auto f = Make(bits, m, h);
    std::mt19937_64 rng(bits);
    std::vector<uint64_t> code = RandomCodes(&rng, 1, bits);
    std::vector<int32_t> base(m), flipped(m);
    f->Keywords(code.data(), base.data());
    std::vector<int32_t> reads(m, 0);
    for (int32_t p = 0; p < bits; ++p) {
      std::vector<uint64_t> c = code;
      const auto at = CodeBit(p);
      c[at.first] ^= at.second;
      f->Keywords(c.data(), flipped.data());
      for (int32_t i = 0; i < m; ++i) {
        if (flipped[i] == base[i]) continue;
        ++reads[i];
        // one flipped bit changes one bit of the value
        EXPECT_EQ(__builtin_popcount(static_cast<uint32_t>(flipped[i] ^ base[i])), 1);
      }
    }
    for (int32_t i = 0; i < m; ++i) {
      EXPECT_EQ(reads[i], h) << "bits " << bits << " function " << i;
      EXPECT_EQ(base[i] >> h, i);  // keyword i * 2^h + value
    }
  }
}

TEST(Ewh, SameSeedSameKeywordsOtherSeedOthers) {
  std::mt19937_64 rng(3);
  const std::vector<uint64_t> codes = RandomCodes(&rng, 50, 256);
  auto a = Make(256, 8, 16, 11), b = Make(256, 8, 16, 11), c = Make(256, 8, 16, 12);
  std::vector<int32_t> ka(8), kb(8), kc(8);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    a->Keywords(codes.data() + i * 4, ka.data());
    b->Keywords(codes.data() + i * 4, kb.data());
    c->Keywords(codes.data() + i * 4, kc.data());
    EXPECT_EQ(ka, kb);
    differ += ka != kc;
  }
  EXPECT_GT(differ, 40);
}

TEST(Ewh, QueryBucketsAreTheValuesWithinEErrors) {
  auto f = Make(128, 3, 10);
  std::mt19937_64 rng(5);
  const std::vector<uint64_t> q = RandomCodes(&rng, 1, 128);
  for (int32_t e = 0; e <= 3; ++e) {
    const int64_t n = f->QueryBuckets(e);
    int64_t per = 0;
    for (int32_t r = 0; r <= e; ++r) per += EwhBinomial(10, r);
    ASSERT_EQ(n, 3 * per);
    std::vector<int32_t> kw(static_cast<std::size_t>(n));
    f->QueryKeywords(q.data(), e, kw.data());
    std::size_t at = 0;
    for (int32_t i = 0; i < 3; ++i) {
      const uint32_t own = f->Value(q.data(), i);
      std::set<int32_t> seen;
      for (int32_t r = 0; r <= e; ++r)
        for (int64_t j = 0; j < EwhBinomial(10, r); ++j, ++at) {
          if (j > 0) {
            EXPECT_LT(kw[at - 1], kw[at]);  // each group ascending
          }
          EXPECT_EQ(kw[at] >> 10, i);
          EXPECT_EQ(__builtin_popcount((static_cast<uint32_t>(kw[at]) & 1023u) ^ own), r);
          EXPECT_TRUE(seen.insert(kw[at]).second);  // no bucket twice
        }
    }
  }
}

// The paper's score of a code: sum over functions of weights[r] for r <= e errors.
int32_t DirectScore(const EwhFunctions& f, const uint64_t* code, const uint64_t* query, int32_t e,
                    const std::vector<int32_t>& weights) {
  int32_t score = 0;
  for (int32_t i = 0; i < f.params().functions; ++i) {
    const int r = __builtin_popcount(f.Value(code, i) ^ f.Value(query, i));
    if (r <= e) score += weights[static_cast<std::size_t>(r)];
  }
  return score;
}

TEST(Ewh, EngineCountIsThePapersScore) {
  const int32_t bits = 96, m = 12, h = 6, n = 3000, nq = 20;
  auto f = Make(bits, m, h);
  std::mt19937_64 rng(9);
  const std::vector<uint64_t> codes = RandomCodes(&rng, n, bits);
  const std::vector<uint64_t> queries = testing::PlantedQueries(&rng, codes, bits, nq, 8);
  const int32_t words = WordsForBits(bits);
  std::vector<int32_t> keywords(static_cast<std::size_t>(n) * m);
  std::vector<int64_t> offsets(n + 1);
  for (int32_t o = 0; o < n; ++o) {
    f->Keywords(codes.data() + static_cast<std::size_t>(o) * words, keywords.data() + static_cast<std::size_t>(o) * m);
    offsets[o + 1] = static_cast<int64_t>(o + 1) * m;
  }
  auto index = std::make_shared<InvertedIndex>();
  ASSERT_TRUE(InvertedIndex::Build(offsets, keywords, IndexOptions{}, index.get()).ok());
  for (int32_t e : {0, 2, 3}) {
    const std::vector<int32_t> weights = e == 2 ? std::vector<int32_t>{5, 3, 1} : EwhDefaultWeights(e);
    QueryBatch batch;
    for (int32_t q = 0; q < nq; ++q)
      ASSERT_TRUE(f->AddQuery(queries.data() + static_cast<std::size_t>(q) * words, e, weights, &batch).ok());
    auto engine = MakeCpuEngine(EngineOptions{});
    ASSERT_TRUE(engine->Upload(index).ok());
    TopKResults got;
    ASSERT_TRUE(engine->Search(batch.View(), n, &got).ok());
    for (int32_t q = 0; q < nq; ++q) {
      std::vector<Hit> want;
      for (int32_t o = 0; o < n; ++o) {
        const int32_t s = DirectScore(*f, codes.data() + static_cast<std::size_t>(o) * words,
                                      queries.data() + static_cast<std::size_t>(q) * words, e, weights);
        if (s > 0) want.push_back({o, s});
      }
      std::sort(want.begin(), want.end(), HitBefore);
      const Span<Hit> hits = got.Query(q);
      ASSERT_EQ(hits.size(), want.size()) << "e " << e << " query " << q;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(hits[i].object, want[i].object);
        EXPECT_EQ(hits[i].score, want[i].score);
      }
    }
  }
}

TEST(Ewh, ErrorsOutOfRangeAreClampedAlike) {
  auto f = Make(64, 3, 4);
  const uint64_t q = 0x0123456789ABCDEFull;
  for (int32_t e : {-5, -1, 0, 3, 4, 9}) {
    const int64_t n = f->QueryBuckets(e);
    // as many keywords written as counted (a guard beyond them stays untouched)
    std::vector<int32_t> kw(static_cast<std::size_t>(n) + 1, -7);
    f->QueryKeywords(&q, e, kw.data());
    EXPECT_EQ(kw.back(), -7) << "errors " << e;
    EXPECT_EQ(n, f->QueryBuckets(f->ErrorsAsked(e)));
  }
  EXPECT_EQ(f->ErrorsAsked(-1), 0);
  EXPECT_EQ(f->ErrorsAsked(9), 3);
  EXPECT_EQ(Make(64, 3, 2)->ErrorsAsked(3), 2);  // no more errors than bits
}

TEST(Ewh, AddQueryRejectsBadErrorsAndWeights) {
  auto f = Make(64, 2, 2);
  const uint64_t q = 0;
  QueryBatch batch;
  EXPECT_FALSE(f->AddQuery(&q, 3, std::vector<int32_t>{1, 1, 1, 1}, &batch).ok());  // more errors than h
  EXPECT_FALSE(f->AddQuery(&q, 1, std::vector<int32_t>{1}, &batch).ok());       // a weight missing
  EXPECT_FALSE(f->AddQuery(&q, 1, std::vector<int32_t>{2, 0}, &batch).ok());       // a weight below 1
  EXPECT_TRUE(f->AddQuery(&q, 2, std::vector<int32_t>{3, 2, 1}, &batch).ok());
  EXPECT_EQ(EwhDefaultWeights(2), (std::vector<int32_t>{3, 2, 1}));
}

TEST(RerankCodes, RanksTheCandidatesOnly) {
  std::mt19937_64 rng(13);
  const int32_t bits = 130, n = 400;
  const std::vector<uint64_t> codes = RandomCodes(&rng, n, bits, 50);  // ties
  const CodeSet set = MakeCodeSet(bits, codes);
  const std::vector<uint64_t> queries = testing::PlantedQueries(&rng, codes, bits, 3, 5);
  // query 0: every code twice and an id out of range; query 1: none; query 2: a few
  std::vector<int32_t> cands;
  for (int32_t o = 0; o < n; ++o) cands.push_back(o), cands.push_back(n - 1 - o);
  cands.push_back(n + 5);
  const int64_t first = static_cast<int64_t>(cands.size());
  for (int32_t o : {7, 3, 99, 250}) cands.push_back(o);
  const std::vector<int64_t> offsets{0, first, first, static_cast<int64_t>(cands.size())};
  std::vector<uint8_t> excluded(n, 0);
  excluded[3] = 1;
  CodeScanResult got;
  ASSERT_TRUE(RerankCodes(set, queries.data(), 3, 10, offsets, cands, excluded, 2, &got).ok());
  const CodeScanResult all = BruteForceCodes(set, queries.data(), 1, 10, excluded);
  ASSERT_EQ(got.offsets.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(got.objects.begin(), got.objects.begin() + got.offsets[1]), all.objects);
  EXPECT_EQ(got.offsets[2] - got.offsets[1], 0);
  // query 2: 7, 99 and 250 (3 is excluded) by (distance, id)
  std::vector<std::pair<int32_t, int32_t>> want;
  for (int32_t o : {7, 99, 250}) want.emplace_back(HammingDistance(set.row(o), queries.data() + 2 * set.words, set.words), o);
  std::sort(want.begin(), want.end());
  ASSERT_EQ(got.offsets[3] - got.offsets[2], 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got.objects[got.offsets[2] + i], want[i].second);
    EXPECT_EQ(got.distances[got.offsets[2] + i], want[i].first);
  }
  // bad input
  EXPECT_FALSE(RerankCodes(set, queries.data(), 3, 0, offsets, cands, excluded, 2, &got).ok());
  const std::vector<int64_t> short_offsets{0, 5};
  EXPECT_FALSE(RerankCodes(set, queries.data(), 3, 10, short_offsets, cands, excluded, 2, &got).ok());
}

TEST(Ewh, PlantedNeighboursAreFoundWithinTheShortlist) {
  // the paper's shape, scaled down: random 512-bit codes, each query a
  // stored code with 1 to 40 bits flipped; recall@10 of the re-ranked
  // shortlist against the exact scan
  const int32_t bits = 512, n = 20000, nq = 40, k = 10, m = 16, h = 16, e = 2;
  std::mt19937_64 rng(21);
  std::vector<uint64_t> codes = RandomCodes(&rng, n, bits);
  const int32_t words = WordsForBits(bits);
  // each query's ten planted neighbours at 1..40 errors
  std::vector<uint64_t> queries = RandomCodes(&rng, nq, bits);
  for (int32_t q = 0; q < nq; ++q)
    for (int32_t j = 0; j < k; ++j) {
      uint64_t* row = codes.data() + static_cast<std::size_t>(q * k + j) * 997 % n * words;
      std::copy_n(queries.data() + static_cast<std::size_t>(q) * words, words, row);
      const int32_t errors = 1 + static_cast<int32_t>(rng() % 40);
      for (int32_t x = 0; x < errors; ++x) {
        const auto at = CodeBit(static_cast<int32_t>(rng() % bits));
        row[at.first] ^= at.second;
      }
    }
  const CodeSet set = MakeCodeSet(bits, codes);
  auto f = Make(bits, m, h);
  std::vector<int32_t> keywords(static_cast<std::size_t>(n) * m);
  std::vector<int64_t> offsets(n + 1);
  for (int32_t o = 0; o < n; ++o) {
    f->Keywords(set.row(o), keywords.data() + static_cast<std::size_t>(o) * m);
    offsets[o + 1] = static_cast<int64_t>(o + 1) * m;
  }
  auto index = std::make_shared<InvertedIndex>();
  ASSERT_TRUE(InvertedIndex::Build(offsets, keywords, IndexOptions{}, index.get()).ok());
  QueryBatch batch;
  for (int32_t q = 0; q < nq; ++q)
    ASSERT_TRUE(f->AddQuery(queries.data() + static_cast<std::size_t>(q) * words, e, EwhDefaultWeights(e), &batch).ok());
  auto engine = MakeCpuEngine(EngineOptions{});
  ASSERT_TRUE(engine->Upload(index).ok());
  TopKResults counted;
  ASSERT_TRUE(engine->Search(batch.View(), 100, &counted).ok());
  std::vector<int32_t> cands;
  for (const Hit& hit : counted.hits) cands.push_back(hit.object);
  CodeScanResult got;
  ASSERT_TRUE(RerankCodes(set, queries.data(), nq, k, counted.query_offsets, cands, {}, 2, &got).ok());
  const CodeScanResult exact = BruteForceCodes(set, queries.data(), nq, k);
  int64_t found = 0;
  for (int32_t q = 0; q < nq; ++q) {
    std::set<int32_t> truth(exact.objects.begin() + exact.offsets[q], exact.objects.begin() + exact.offsets[q + 1]);
    for (int64_t i = got.offsets[q]; i < got.offsets[q + 1]; ++i) {
      found += truth.count(got.objects[i]);
      // every distance returned is the true one
      EXPECT_EQ(got.distances[i], HammingDistance(set.row(got.objects[i]), queries.data() + q * words, words));
    }
  }
  const double recall = static_cast<double>(found) / (nq * k);
  std::printf("EWH recall@10 on planted neighbours (m 16, h 16, e 2, 100 candidates): %.3f\n", recall);
  EXPECT_GE(recall, 0.95);
}

}  // namespace
}  // namespace genie

// Tests of the CUDA engines against the CPU reference engine.  They skip when
// no usable GPU is present (CI); run them on the GPU host.
//
// Every matcher variant runs every case: tiled c-PQ (the default), faithful
// c-PQ with exact ties, faithful c-PQ with the paper's tie selection, and
// the count table.  All but the paper-ties variant must equal the reference
// hit for hit; that one must have the same score multiset per query, sorted
// output, distinct objects, and every returned object's score correct.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <map>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genie/test_util.hpp"
#include "genie/gpu_stats.hpp"
#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/gpu_engine.hpp"
#include "genie/index.hpp"
#include "genie/query.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

// ---- data --------------------------------------------------------------------

using testing::Csr;
using testing::MakeIndex;

// Random objects with Zipf-distributed keyword popularity (so list lengths
// are Zipf), some empty objects and duplicate keywords.
Csr ZipfCsr(uint32_t seed, int32_t objects, int32_t universe, int32_t max_len, double s,
            double empty_fraction = 0.1) {
  std::mt19937 rng(seed);
  const testing::Zipf zipf(universe, s);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int32_t> len(0, max_len);
  Csr csr;
  for (int32_t o = 0; o < objects; ++o) {
    std::vector<int32_t> object;
    if (unit(rng) >= empty_fraction) {
      const int32_t l = len(rng);
      for (int32_t j = 0; j < l; ++j) {
        const int32_t kw = zipf(rng);
        object.push_back(kw * 3 - 40);  // gaps and negative keywords
        if (unit(rng) < 0.1) object.push_back(kw * 3 - 40);
      }
    }
    csr.Add(object);
  }
  return csr;
}

// LSH-shaped data: m functions with b buckets each, keyword i*b + h_i(o);
// objects come in clusters that share most buckets; queries are perturbed
// objects, each keyword its own item.
struct LshData {
  Csr csr;
  QueryBatch batch;
};

LshData MakeLsh(uint32_t seed, int32_t n, int32_t m, int32_t b, int32_t clusters, int32_t nq,
                double noise) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> bucket(0, b - 1);
  std::uniform_int_distribution<int32_t> cluster(0, clusters - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::vector<int32_t>> centres(static_cast<std::size_t>(clusters));
  for (auto& c : centres) {
    for (int32_t i = 0; i < m; ++i) c.push_back(bucket(rng));
  }
  LshData data;
  std::vector<int32_t> object(static_cast<std::size_t>(m));
  std::vector<std::vector<int32_t>> rows;
  for (int32_t o = 0; o < n; ++o) {
    const auto& c = centres[static_cast<std::size_t>(cluster(rng))];
    for (int32_t i = 0; i < m; ++i) {
      const int32_t h = unit(rng) < noise ? bucket(rng) : c[static_cast<std::size_t>(i)];
      object[static_cast<std::size_t>(i)] = i * b + h;
    }
    data.csr.Add(object);
    if (static_cast<int32_t>(rows.size()) < nq && o % std::max(1, n / nq) == 0) rows.push_back(object);
  }
  for (auto& row : rows) {
    for (int32_t i = 0; i < m; ++i) {
      if (unit(rng) < 0.2) row[static_cast<std::size_t>(i)] = i * b + bucket(rng);
    }
    data.batch.AddKeywordQuery(row);
  }
  return data;
}

QueryBatch RandomBatch(uint32_t seed, int32_t queries, int32_t max_items, int32_t max_ranges,
                       int32_t max_width, int32_t lo_min, int32_t lo_max, int32_t max_weight) {
  std::mt19937 rng(seed);
  auto pick = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  QueryBatch batch;
  for (int32_t q = 0; q < queries; ++q) {
    batch.BeginQuery();
    const int32_t items = pick(0, max_items);
    for (int32_t i = 0; i < items; ++i) {
      std::vector<KeywordRange> ranges;
      const int32_t n_ranges = pick(1, max_ranges);
      for (int32_t r = 0; r < n_ranges; ++r) {
        const int32_t lo = pick(lo_min, lo_max);
        ranges.push_back({lo, lo + pick(1, max_width) - 1});
      }
      batch.AddItem(ranges, pick(1, max_weight));
    }
  }
  return batch;
}

// The true score of object o for query q, straight from the objects.
int64_t ScoreOf(const Csr& csr, const genie_query_batch& batch, int32_t q, int32_t o) {
  std::vector<int32_t> kws(csr.keywords.begin() + csr.offsets[o], csr.keywords.begin() + csr.offsets[o + 1]);
  std::sort(kws.begin(), kws.end());
  kws.erase(std::unique(kws.begin(), kws.end()), kws.end());
  int64_t score = 0;
  for (int64_t item = batch.query_offsets[q]; item < batch.query_offsets[q + 1]; ++item) {
    const int64_t w = batch.item_weights ? batch.item_weights[item] : 1;
    for (int32_t kw : kws) {
      bool inside = false;
      for (int64_t r = batch.item_offsets[item]; r < batch.item_offsets[item + 1]; ++r) {
        inside = inside || (batch.ranges_lo[r] <= kw && kw <= batch.ranges_hi[r]);
      }
      if (inside) score += w;
    }
  }
  return score;
}

// ---- engines -------------------------------------------------------------------

// kTiled packs the postings where it pays (GpuPostings::kAuto); kTiledPacked
// always, kTiledFull never, so both device forms run every case.
enum class Variant { kTiled, kTiledPacked, kTiledFull, kFaithful, kFaithfulPaperTies, kCountTable };

bool IsTiled(Variant v) {
  return v == Variant::kTiled || v == Variant::kTiledPacked || v == Variant::kTiledFull;
}

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kTiled: return "tiled";
    case Variant::kTiledPacked: return "tiled_packed";
    case Variant::kTiledFull: return "tiled_full";
    case Variant::kFaithful: return "faithful";
    case Variant::kFaithfulPaperTies: return "faithful_paper_ties";
    case Variant::kCountTable: return "count_table";
  }
  return "?";
}

bool ExactTies(Variant v) { return v != Variant::kFaithfulPaperTies; }

struct EngineSpec {
  Variant variant = Variant::kTiled;
  uint64_t budget = 0;
  uint32_t ht_slots = 0;   // GpuEngineOptions::hash_table_slots (0: sized by the engine)
  int32_t tile_words = 0;  // GpuEngineOptions::tile_words (0: the default)
  CancelCheck cancel;      // EngineOptions::cancel
};

std::unique_ptr<Engine> MakeEngine(const EngineSpec& spec, Status* status) {
  GpuEngineOptions gpu_options;
  switch (spec.variant) {
    case Variant::kTiled: gpu_options.matcher = GpuMatcher::kTiled; break;
    case Variant::kTiledPacked:
      gpu_options.matcher = GpuMatcher::kTiled;
      gpu_options.postings = GpuPostings::kPacked;
      break;
    case Variant::kTiledFull:
      gpu_options.matcher = GpuMatcher::kTiled;
      gpu_options.postings = GpuPostings::kFull;
      break;
    case Variant::kFaithful:
    case Variant::kFaithfulPaperTies: gpu_options.matcher = GpuMatcher::kFaithful; break;
    case Variant::kCountTable: gpu_options.matcher = GpuMatcher::kCountTable; break;
  }
  gpu_options.exact_ties = spec.variant != Variant::kFaithfulPaperTies;
  gpu_options.hash_table_slots = spec.ht_slots;
  if (spec.tile_words > 0) gpu_options.tile_words = spec.tile_words;
  EngineOptions options;
  options.memory_budget_bytes = spec.budget;
  options.cancel = spec.cancel;
  return MakeGpuEngine(options, gpu_options, status);
}

std::string Describe(Span<Hit> hits, std::size_t max = 12) {
  std::ostringstream out;
  for (std::size_t i = 0; i < hits.size() && i < max; ++i) {
    out << "(" << hits[i].object << ":" << hits[i].score << ") ";
  }
  if (hits.size() > max) out << "... (" << hits.size() << " hits)";
  return out.str();
}

// Exact: hit for hit.  Otherwise: same score multiset, sorted, distinct
// objects, and each object's score is its true score.
::testing::AssertionResult Matches(const Csr& csr, const genie_query_batch& batch,
                                   const TopKResults& expected, const TopKResults& actual,
                                   bool exact) {
  if (expected.num_queries() != actual.num_queries()) {
    return ::testing::AssertionFailure() << "query counts differ: " << expected.num_queries()
                                         << " vs " << actual.num_queries();
  }
  int failures = 0;
  std::ostringstream msg;
  for (int32_t q = 0; q < expected.num_queries() && failures < 5; ++q) {
    Span<Hit> e = expected.Query(q), a = actual.Query(q);
    bool ok = e.size() == a.size();
    for (std::size_t i = 0; ok && i < e.size(); ++i) {
      ok = e[i].score == a[i].score && (!exact || e[i].object == a[i].object);
      if (i > 0) ok = ok && HitBefore(a[i - 1], a[i]);
    }
    if (ok && !exact) {
      for (const Hit& h : a) {
        if (ScoreOf(csr, batch, q, h.object) != h.score) {
          ok = false;
          break;
        }
      }
    }
    if (!ok) {
      ++failures;
      msg << "query " << q << "\n  expected " << Describe(e) << "\n  actual   " << Describe(a) << "\n";
    }
  }
  if (failures > 0) return ::testing::AssertionFailure() << msg.str();
  if (expected.hits.size() != actual.hits.size()) {
    return ::testing::AssertionFailure() << "hit arrays differ in size";
  }
  return ::testing::AssertionSuccess();
}

TopKResults ReferenceUncached(std::shared_ptr<const InvertedIndex> index,
                              const genie_query_batch& batch, int32_t k);

TopKResults Reference(std::shared_ptr<const InvertedIndex> index, const genie_query_batch& batch,
                      int32_t k, const std::string& cache_key = "") {
  // The large cases are shared by the four variants: compute them once.
  static std::map<std::string, TopKResults> cache;
  if (!cache_key.empty()) {
    auto it = cache.find(cache_key);
    if (it != cache.end()) return it->second;
  }
  TopKResults out = ReferenceUncached(std::move(index), batch, k);
  if (!cache_key.empty()) cache[cache_key] = out;
  return out;
}

TopKResults ReferenceUncached(std::shared_ptr<const InvertedIndex> index,
                              const genie_query_batch& batch, int32_t k) {
  auto engine = MakeReferenceEngine();
  TopKResults out;
  EXPECT_TRUE(engine->Upload(std::move(index)).ok());
  Status status = engine->Search(batch, k, &out);
  EXPECT_TRUE(status.ok()) << status.message();
  return out;
}

// The engines keep small device blocks for reuse while the process lives;
// freed at the end, so that compute-sanitizer's leak check sees only what
// a search failed to free.
class ReleaseBlockCache : public ::testing::Environment {
 public:
  void TearDown() override { ReleaseDeviceBlockCache(); }
};
::testing::Environment* const kReleaseBlockCache =
    ::testing::AddGlobalTestEnvironment(new ReleaseBlockCache);

class GpuEngineTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  // Runs the variant (with `spec`'s other settings) and compares.
  void Check(const Csr& csr, std::shared_ptr<const InvertedIndex> index, const QueryBatch& batch,
             int32_t k, EngineSpec spec = {}, gpu::SearchStats* stats = nullptr,
             const std::string& cache_key = "") {
    spec.variant = GetParam();
    const genie_query_batch view = batch.View();
    const TopKResults expected =
        Reference(index, view, k, cache_key.empty() ? "" : cache_key + "/k" + std::to_string(k));
    Status status;
    auto engine = MakeEngine(spec, &status);
    ASSERT_NE(engine, nullptr) << status.message();
    ASSERT_TRUE(engine->Upload(index).ok());
    TopKResults actual;
    status = engine->Search(view, k, &actual);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_TRUE(Matches(csr, view, expected, actual, ExactTies(GetParam())))
        << VariantName(GetParam()) << " k=" << k;
    if (stats != nullptr) {
      ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), stats));
    }
  }
};

TEST_P(GpuEngineTest, SmallRandomZipf) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Csr csr = ZipfCsr(seed, 700, 120, 14, 1.0);
    const QueryBatch batch = RandomBatch(seed + 100, 40, 6, 3, 4, -60, 330, 1);
    for (int32_t split : {kDefaultSplitLength, 7, 1}) {
      auto index = MakeIndex(csr, split);
      for (int32_t k : {1, 3, 10, 100, 700, 1000}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " split " << split << " k " << k);
        Check(csr, index, batch, k);
      }
    }
  }
}

TEST_P(GpuEngineTest, WeightsAndWideRanges) {
  // Items whose ranges span many keywords (slices cross list boundaries) and
  // weights up to 9.
  const Csr csr = ZipfCsr(7, 3000, 400, 20, 0.7);
  const QueryBatch batch = RandomBatch(8, 64, 5, 3, 40, -60, 1200, 9);
  for (int32_t split : {kDefaultSplitLength, 13}) {
    auto index = MakeIndex(csr, split);
    for (int32_t k : {1, 17, 256}) {
      SCOPED_TRACE(::testing::Message() << "split " << split << " k " << k);
      Check(csr, index, batch, k);
    }
  }
}

TEST_P(GpuEngineTest, EmptyListsQueriesAndObjects) {
  Csr csr;
  csr.Add({});
  csr.Add({5, 6});
  csr.Add({});
  csr.Add({6, 7, 7});
  csr.Add({100});
  QueryBatch batch;
  batch.BeginQuery();  // no items
  const std::vector<int32_t> missing{1000, 2000};
  batch.AddKeywordQuery(missing);  // keywords absent from the index
  const std::vector<int32_t> some{6, 7, 1000};
  batch.AddKeywordQuery(some);
  batch.BeginQuery();
  const KeywordRange wide{-1000000, 1000000};
  batch.AddItem(Span<KeywordRange>(&wide, 1), 3);
  auto index = MakeIndex(csr);
  for (int32_t k : {1, 2, 5, 50}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    Check(csr, index, batch, k);
  }
  // An index without objects, and one with objects but no postings.
  Check(Csr(), MakeIndex(Csr()), batch, 3);
  Csr empty_objects;
  for (int i = 0; i < 10; ++i) empty_objects.Add({});
  Check(empty_objects, MakeIndex(empty_objects), batch, 3);
}

TEST_P(GpuEngineTest, AllTies) {
  // Every object holds the same keywords: every score is equal, k < n keeps
  // the lowest ids (exact variants) across several tiles of the tiled matcher.
  Csr csr;
  for (int32_t o = 0; o < 100000; ++o) csr.Add({1, 2, 3});
  QueryBatch batch;
  for (int q = 0; q < 8; ++q) {
    const std::vector<int32_t> kws{1, 2, 3};
    batch.AddKeywordQuery(kws);
  }
  auto index = MakeIndex(csr);
  for (int32_t k : {1, 100, 5000, 100000, 200000}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    Check(csr, index, batch, k, EngineSpec{GetParam(), 0, 0, 512, CancelCheck()});
  }
}

// The tiled matcher's two modes on many tiles of ties (512-word tiles: 13
// to 25 of them, by counter width): list mode with its one-block selection
// (k = 1, 100: at most 4,096 slots), list mode through the hash-table
// collection and the segmented sort (k = 5,000), and the Gate (k = 100,000:
// over 2^20 slots, beyond the lists' bound); each equals the reference hit
// for hit.
TEST_P(GpuEngineTest, ListModeAndGate) {
  if (!IsTiled(GetParam())) {
    GTEST_SKIP() << "tiled only";
  }
  Csr csr;
  for (int32_t o = 0; o < 100000; ++o) csr.Add({o % 7, 7 + o % 3, 10 + o % 11});
  QueryBatch batch;
  batch.AddKeywordQuery(std::vector<int32_t>{1, 8, 12});
  batch.AddKeywordQuery(std::vector<int32_t>{0, 1, 2, 7, 10});
  batch.AddKeywordQuery(std::vector<int32_t>{3});
  auto index = MakeIndex(csr);
  for (int32_t k : {1, 7, 37, 100, 5000, 100000}) {  // (7, 37: the k-th inside a level)
    SCOPED_TRACE(::testing::Message() << "k " << k);
    gpu::SearchStats stats;
    Check(csr, index, batch, k, EngineSpec{GetParam(), 0, 0, 512, CancelCheck()}, &stats);
    EXPECT_EQ(stats.list_queries, k <= 5000 ? stats.cpq_queries : 0);
    EXPECT_GT(stats.cpq_queries, 0);
  }
}

TEST_P(GpuEngineTest, MaxScoreBoundaries) {
  // Scores at 2^b - 1 and 2^b for every bit width: counters must hold the
  // maximum without carrying into the neighbour (objects 0..3 share a word
  // at 8 bits; all of them score high).
  Csr csr;
  for (int32_t o = 0; o < 64; ++o) {
    std::vector<int32_t> object;
    for (int32_t kw = 0; kw < 4; ++kw) {
      if ((o >> kw) & 1) object.push_back(kw);
    }
    object.push_back(10);  // everyone has keyword 10
    csr.Add(object);
  }
  auto index = MakeIndex(csr);
  QueryBatch batch;
  for (int32_t b = 1; b <= 13; ++b) {
    for (int64_t target : {(int64_t{1} << b) - 1, int64_t{1} << b}) {
      // One item of weight target - 1 on keyword 10 plus one of weight 1 on
      // keyword 0: object with keyword 0 reaches exactly target.
      if (target < 2) continue;
      batch.BeginQuery();
      const KeywordRange r10{10, 10}, r0{0, 0};
      batch.AddItem(Span<KeywordRange>(&r10, 1), static_cast<int32_t>(target - 1));
      batch.AddItem(Span<KeywordRange>(&r0, 1), 1);
      // And spread over all four keywords: max = 4 weights.
      if (target < 5) continue;
      batch.BeginQuery();
      const int32_t w = static_cast<int32_t>(std::max<int64_t>(1, target / 5));
      const KeywordRange r1{1, 1}, r2{2, 2}, r3{3, 3};
      batch.AddItem(Span<KeywordRange>(&r0, 1), w);
      batch.AddItem(Span<KeywordRange>(&r1, 1), w);
      batch.AddItem(Span<KeywordRange>(&r2, 1), w);
      batch.AddItem(Span<KeywordRange>(&r3, 1), w);
      batch.AddItem(Span<KeywordRange>(&r10, 1), static_cast<int32_t>(target - 4 * w));
    }
  }
  for (int32_t k : {1, 5, 64}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    Check(csr, index, batch, k);
  }
}

TEST_P(GpuEngineTest, HugeWeightsUseCountTable) {
  const Csr csr = ZipfCsr(11, 2000, 100, 10, 1.0);
  const QueryBatch batch = RandomBatch(12, 16, 4, 2, 3, -40, 260, 10000000);
  gpu::SearchStats stats;
  Check(csr, MakeIndex(csr), batch, 20, {}, &stats);
  EXPECT_GT(stats.count_queries, 0);
}

// A few queries over 40,000 objects: the count table selects each query on
// slices of its counters (LaunchCountSelectSpread), with scores of one
// (the count_table variant only: the others take it to c-PQ), two and
// three 12-bit digits in one group, ties across slices at every k, and all
// positive counters taken (k 39,999; 50,000 runs as n); beside a query of
// no indexed keyword, which the engine answers without a search.  Exact
// against the reference, hit for hit.
TEST_P(GpuEngineTest, CountTableSlicedSelection) {
  Csr csr;
  for (int32_t o = 0; o < 40000; ++o) csr.Add({o % 5, 5 + o % 7, 12 + o % 3});
  auto index = MakeIndex(csr);
  const KeywordRange k0{0, 0}, k1{1, 1}, k5{5, 5}, k6{6, 6}, k7{7, 7}, k12{12, 12}, k13{13, 13}, none{20, 20};
  const auto add = [](QueryBatch* b, std::initializer_list<std::pair<KeywordRange, int32_t>> items) {
    b->BeginQuery();
    for (const auto& item : items) b->AddItem(Span<KeywordRange>(&item.first, 1), item.second);
  };
  QueryBatch one, all;
  add(&one, {{k1, 20000000}, {k7, 7}, {k12, 1}});
  add(&all, {{k0, 1}, {k5, 1}, {k12, 1}});
  add(&all, {{k0, 5000}, {k6, 3}, {k13, 1000000}});
  add(&all, {{k1, 20000000}, {k7, 7}, {k12, 1}});
  add(&all, {{none, 9}});
  for (int32_t k : {1, 10, 5000, 39999, 50000}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    gpu::SearchStats stats;
    Check(csr, index, one, k, {}, &stats);
    EXPECT_EQ(stats.count_queries, 1);
    Check(csr, index, all, k, {}, &stats);
    EXPECT_GE(stats.count_queries, 2);
  }
}

TEST_P(GpuEngineTest, LargeLsh) {
  // 250k objects x 32 functions = 8M postings, 1024 queries.
  const LshData data = MakeLsh(21, 250000, 32, 16, 300, 1024, 0.3);
  auto index = MakeIndex(data.csr);
  for (int32_t k : {1, 100}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    gpu::SearchStats stats;
    Check(data.csr, index, data.batch, k, {}, &stats, "LargeLsh");
    EXPECT_EQ(stats.parts, 1);
  }
}

TEST_P(GpuEngineTest, LargeZipfSplit) {
  // 1.5M objects, Zipf keyword lists (long lists split into many sublists).
  const Csr csr = ZipfCsr(31, 1500000, 5000, 8, 1.1, 0.05);
  const QueryBatch batch = RandomBatch(32, 1100, 8, 2, 3, -40, 15000, 2);
  Check(csr, MakeIndex(csr, 2048), batch, 50, {}, nullptr, "LargeZipfSplit");
}

TEST_P(GpuEngineTest, MultipleLoadingSmallBudget) {
  const LshData data = MakeLsh(41, 300000, 24, 16, 200, 256, 0.3);
  auto index = MakeIndex(data.csr);
  const uint64_t index_bytes = index->postings().size() * sizeof(int32_t);
  // What the engine would hold resident: tiled packs this index (2 bytes a
  // posting plus the pack directory) unless told not to.
  const bool packs = IsTiled(GetParam()) && GetParam() != Variant::kTiledFull;
  const uint64_t keywords = index->keyword_offsets().size() - 1;
  const uint64_t resident =
      packs ? index_bytes / 2 + keywords * ((300000 + 65535) / 65536 + 1) * 4 : index_bytes;
  // Budgets whose ResidentIndexLimit the resident form exceeds: it is never
  // resident; parts are streamed (packed where the engine packs, see
  // PackedParts).  The smaller ones force many parts and query groups.
  // The largest budget (in MiB steps) that leaves it streaming, then smaller.
  uint64_t largest = 2 * resident;
  while (largest > (1ull << 20) && ResidentIndexLimit(largest) >= resident) largest -= 1ull << 20;
  int tested = 0;
  for (uint64_t budget : {largest, std::min<uint64_t>(largest - (4ull << 20), index_bytes / 2 + (20ull << 20))}) {
    if (resident <= ResidentIndexLimit(budget)) continue;
    ++tested;
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    gpu::SearchStats stats;
    EngineSpec spec;
    spec.budget = budget;
    Check(data.csr, index, data.batch, 100, spec, &stats, "MultipleLoading");
    EXPECT_GT(stats.parts, 1);
    EXPECT_EQ(stats.parts_packed, packs);
  }
  EXPECT_EQ(tested, 2);
}

// An index that leaves the budget just ResidentIndexLimit's room (more than
// half the budget: multiple loading once took it) is resident, and the batch
// runs in query groups beside it; exact.
TEST_P(GpuEngineTest, ResidentUpToTheLimit) {
  const LshData data = MakeLsh(44, 600000, 24, 16, 200, 300, 0.3);
  auto index = MakeIndex(data.csr);
  const bool packs = IsTiled(GetParam()) && GetParam() != Variant::kTiledFull;
  const uint64_t keywords = index->keyword_offsets().size() - 1;
  const uint64_t postings = static_cast<uint64_t>(index->num_postings());
  const uint64_t resident =
      packs ? postings * 2 + keywords * ((600000 + 65535) / 65536 + 1) * 4 : postings * 4;
  EngineSpec spec;
  spec.budget = resident + kMinSearchRoomBytes;
  ASSERT_EQ(ResidentIndexLimit(spec.budget), resident);
  ASSERT_GT(resident, spec.budget / 2);
  gpu::SearchStats stats;
  Check(data.csr, index, data.batch, 100, spec, &stats, "ResidentUpToTheLimit");
  EXPECT_EQ(stats.parts, 1);
  EXPECT_EQ(stats.index_device_bytes, resident);
  EXPECT_GT(stats.query_groups, 1);
  // A byte less and it streams.
  spec.budget -= 1;
  Check(data.csr, index, data.batch, 100, spec, &stats, "ResidentUpToTheLimit");
  EXPECT_GT(stats.parts, 1);
}

// Multiple loading streams packed parts where the engine packs: 2 bytes a
// posting and the part's pack directory, so a budget takes parts of twice
// the objects.  A query whose hash table overflows in a packed part takes
// the count table over that part's own 4-byte ids.  Exact either way.
TEST_P(GpuEngineTest, PackedParts) {
  if (GetParam() != Variant::kTiled && GetParam() != Variant::kTiledPacked) {
    GTEST_SKIP() << "packed tiled only";
  }
  const LshData data = MakeLsh(41, 300000, 24, 16, 200, 256, 0.3);
  auto index = MakeIndex(data.csr);
  // A budget whose ResidentIndexLimit the packed index exceeds (so it is
  // not resident), with room beside two packed parts for a part's 4-byte ids.
  const uint64_t keywords = index->keyword_offsets().size() - 1;
  const uint64_t resident = index->postings().size() * sizeof(uint16_t) +
                            keywords * ((300000 + 65535) / 65536 + 1) * 4;
  EngineSpec spec;
  spec.budget = 2 * resident - (1ull << 20);
  ASSERT_GT(resident, ResidentIndexLimit(spec.budget));
  gpu::SearchStats packed, full;
  Check(data.csr, index, data.batch, 100, spec, &packed, "MultipleLoading");
  EXPECT_TRUE(packed.parts_packed);
  EXPECT_GT(packed.parts, 1);
  {
    EngineSpec full_spec = spec;
    full_spec.variant = Variant::kTiledFull;
    Status status;
    auto engine = MakeEngine(full_spec, &status);
    ASSERT_NE(engine, nullptr) << status.message();
    ASSERT_TRUE(engine->Upload(index).ok());
    TopKResults out;
    ASSERT_TRUE(engine->Search(data.batch.View(), 100, &out).ok());
    ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), &full));
    EXPECT_FALSE(full.parts_packed);
    EXPECT_LT(packed.parts, full.parts) << "packed parts hold more objects";
  }
  // Overflows in packed parts (4 hash-table slots).  The count table then
  // needs the part's 4-byte ids beside the two packed parts and a group's
  // 16 MiB of slack: an index large enough that the budget has that room.
  // (Where it has not, the search streams 4-byte parts instead: also exact.)
  // The budget leaves the packed form 22 MiB (ResidentIndexLimit keeps 24
  // MiB for search state): four parts, two of them a half of the index, and
  // the other half for a part's 4-byte ids and the slack.
  const LshData large = MakeLsh(43, 1600000, 24, 16, 200, 64, 0.3);
  auto large_index = MakeIndex(large.csr);
  const uint64_t large_resident = large_index->postings().size() * sizeof(uint16_t) +
                                  (large_index->keyword_offsets().size() - 1) *
                                      ((1600000 + 65535) / 65536 + 1) * 4;
  spec.budget = large_resident + (22ull << 20);
  ASSERT_GT(large_resident, ResidentIndexLimit(spec.budget));
  spec.ht_slots = 4;
  gpu::SearchStats overflowing;
  Check(large.csr, large_index, large.batch, 100, spec, &overflowing, "PackedPartsOverflow");
  EXPECT_GT(overflowing.parts, 1);
  EXPECT_TRUE(overflowing.parts_packed);
  EXPECT_GT(overflowing.overflow_queries, 0);
  EXPECT_GT(overflowing.count_queries, 0);
}

// Asks to cancel from the `after`-th poll on; counts the polls.
struct Canceller {
  std::atomic<int64_t> polls{0};
  std::atomic<int64_t> after{INT64_MAX};

  static int Poll(void* arg) {
    auto* self = static_cast<Canceller*>(arg);
    return self->polls.fetch_add(1) >= self->after ? 1 : 0;
  }
};

// Whenever a poll asked, the search returns GENIE_CANCELLED; when none did,
// it returns the exact results; either way the engine stays usable.  600
// queries take the tiled matcher's pipelined search (a helper thread
// compiling, and polling, beside the device work).
TEST_P(GpuEngineTest, CancelStopsAndLeavesTheEngineUsable) {
  for (int32_t nq : {128, 600}) {
  SCOPED_TRACE(::testing::Message() << nq << " queries");
  const LshData data = MakeLsh(43, 200000, 24, 16, 200, nq, 0.3);
  auto index = MakeIndex(data.csr);
  const genie_query_batch view = data.batch.View();
  const TopKResults expected = Reference(index, view, 50);
  const uint64_t index_bytes = index->postings().size() * sizeof(int32_t);
  // Resident index with several query groups, then multiple loading.
  for (uint64_t budget : {index_bytes * 2 + (20ull << 20), index_bytes / 2 + (20ull << 20)}) {
    Canceller c;
    EngineSpec spec;
    spec.variant = GetParam();
    spec.budget = budget;
    spec.cancel = CancelCheck{&Canceller::Poll, &c};
    Status status;
    auto engine = MakeEngine(spec, &status);
    ASSERT_NE(engine, nullptr) << status.message();
    ASSERT_TRUE(engine->Upload(index).ok());
    for (int64_t after : {0, 1, 2, 5, 20, 1000000}) {
      SCOPED_TRACE(::testing::Message() << "budget " << budget << " after " << after);
      c.polls = 0;
      c.after = after;
      TopKResults out;
      status = engine->Search(view, 50, &out);
      if (c.polls.load() > after) {
        EXPECT_EQ(status.code(), GENIE_CANCELLED) << status.message();
      } else {
        ASSERT_TRUE(status.ok()) << status.message();
        EXPECT_TRUE(Matches(data.csr, view, expected, out, ExactTies(GetParam())));
      }
      c.after = INT64_MAX;
      status = engine->Search(view, 50, &out);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_TRUE(Matches(data.csr, view, expected, out, ExactTies(GetParam())));
    }
    // A cancelled upload leaves no index; the next upload works.
    c.polls = 0;
    c.after = 0;
    EXPECT_EQ(engine->Upload(index).code(), GENIE_CANCELLED);
    TopKResults out;
    c.after = INT64_MAX;
    EXPECT_EQ(engine->Search(view, 50, &out).code(), GENIE_INVALID_ARGUMENT);
    ASSERT_TRUE(engine->Upload(index).ok());
    ASSERT_TRUE(engine->Search(view, 50, &out).ok());
    EXPECT_TRUE(Matches(data.csr, view, expected, out, ExactTies(GetParam())));
  }
  }
}

TEST_P(GpuEngineTest, QueryGroupsWithResidentIndex) {
  const LshData data = MakeLsh(43, 200000, 24, 16, 200, 512, 0.3);
  auto index = MakeIndex(data.csr);
  const uint64_t index_bytes = index->postings().size() * sizeof(int32_t);
  gpu::SearchStats stats;
  EngineSpec spec;
  spec.budget = 2 * index_bytes + (40ull << 20);
  Check(data.csr, index, data.batch, 64, spec, &stats, "QueryGroups");
  EXPECT_EQ(stats.parts, 1);
}

TEST_P(GpuEngineTest, HashTableOverflowFallsBack) {
  if (GetParam() == Variant::kCountTable) {
    GTEST_SKIP() << "no hash table";
  }
  const LshData data = MakeLsh(51, 100000, 16, 8, 50, 64, 0.4);
  auto index = MakeIndex(data.csr);
  gpu::SearchStats stats;
  EngineSpec spec;
  spec.ht_slots = 4;
  Check(data.csr, index, data.batch, 50, spec, &stats);
  EXPECT_GT(stats.overflow_queries, 0);
  EXPECT_GT(stats.count_queries, 0);
}

TEST_P(GpuEngineTest, TileSizes) {
  if (!IsTiled(GetParam())) {
    GTEST_SKIP() << "tiled only";
  }
  const LshData data = MakeLsh(61, 150000, 20, 12, 100, 200, 0.3);
  auto index = MakeIndex(data.csr);
  // two queries: a grid small enough for the engine to halve the tiles
  // (sizes that are no power of two times 512 stop halving where a warp's
  // share would stop being whole rows of 32 words)
  QueryBatch two;
  for (int32_t q = 0; q < 2; ++q) {
    const auto view = data.batch.View();
    std::vector<int32_t> kws;
    for (int64_t item = view.query_offsets[q]; item < view.query_offsets[q + 1]; ++item) {
      kws.push_back(view.ranges_lo[view.item_offsets[item]]);
    }
    two.AddKeywordQuery(kws);
  }
  for (int32_t words : {512, 1536, 4096, 16384, 32768, 49152}) {
    SCOPED_TRACE(::testing::Message() << "tile words " << words);
    EngineSpec spec;
    spec.tile_words = words;
    Check(data.csr, index, data.batch, 30, spec);
    Check(data.csr, index, two, 30, spec);
  }
}

// A batch large enough for the pipelined search (pieces of 256 queries,
// compiled beside the device work) equals the reference, also when its
// queries mix c-PQ and count-table routes and several query groups.
TEST_P(GpuEngineTest, PipelinedBatch) {
  const LshData data = MakeLsh(63, 120000, 20, 12, 80, 1300, 0.3);
  auto index = MakeIndex(data.csr);
  gpu::SearchStats stats;
  Check(data.csr, index, data.batch, 25, {}, &stats, "PipelinedBatch");
  const Csr csr = ZipfCsr(64, 5000, 300, 20, 1.0);
  const QueryBatch mixed = RandomBatch(65, 700, 6, 3, 40, -60, 330, 3000);
  Check(csr, MakeIndex(csr), mixed, 10, {}, &stats);
  if (IsTiled(GetParam())) {
    EXPECT_GT(stats.count_queries, 0);
    EXPECT_GT(stats.cpq_queries, 0);
  }
}

// Packed and resident, queries the count table must take (a heavy weight
// over a wide range) need the 4-byte List Array as well: uploaded once and
// kept for the next search; and where both forms would take more than
// ResidentIndexLimit of the budget, the search goes to multiple loading
// (4-byte parts) instead.
// Either way the answers are the reference's.
TEST_P(GpuEngineTest, CountTableQueriesBesidePackedPostings) {
  if (GetParam() != Variant::kTiledPacked) {
    GTEST_SKIP() << "packed tiled only";
  }
  LshData data = MakeLsh(67, 420000, 24, 16, 200, 600, 0.3);
  for (int32_t q = 0; q < 8; ++q) {
    data.batch.BeginQuery();
    const std::vector<KeywordRange> wide{{q * 20, q * 20 + 150}};
    data.batch.AddItem(wide, 5000);
  }
  auto index = MakeIndex(data.csr);
  gpu::SearchStats first, second;
  Check(data.csr, index, data.batch, 20, {}, &first, "CountBesidePacked");
  EXPECT_GT(first.count_queries, 0);
  // The same engine kept the 4-byte array: Check makes a new engine, so
  // search twice on one engine here.
  {
    EngineSpec spec;
    spec.variant = GetParam();
    Status status;
    auto engine = MakeEngine(spec, &status);
    ASSERT_NE(engine, nullptr) << status.message();
    ASSERT_TRUE(engine->Upload(index).ok());
    TopKResults out;
    ASSERT_TRUE(engine->Search(data.batch.View(), 20, &out).ok());
    ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), &first));
    ASSERT_TRUE(engine->Search(data.batch.View(), 20, &out).ok());
    ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), &second));
    const uint64_t full = static_cast<uint64_t>(index->num_postings()) * 4;
    EXPECT_EQ(second.index_device_bytes, first.index_device_bytes + full);
  }
  // A budget that keeps the packed form resident but not both forms.
  EngineSpec spec;
  spec.budget = first.index_device_bytes + (30ull << 20);
  ASSERT_LE(first.index_device_bytes, ResidentIndexLimit(spec.budget));
  ASSERT_GT(first.index_device_bytes + static_cast<uint64_t>(index->num_postings()) * 4,
            ResidentIndexLimit(spec.budget));
  gpu::SearchStats parts;
  Check(data.csr, index, data.batch, 20, spec, &parts, "CountBesidePacked");
  EXPECT_EQ(parts.index_device_bytes, first.index_device_bytes) << "the parts ran beside it";
  EXPECT_GT(parts.parts, 1);
  EXPECT_FALSE(parts.parts_packed) << "count-table queries stream 4-byte parts";
}

// The device form each tiled variant chose, from the index bytes it holds:
// packed is 2 bytes a posting plus keywords x (pack tiles + 1) x 4 of
// directory; kAuto packs this LSH-like index (long lists).
TEST_P(GpuEngineTest, PostingsForm) {
  if (!IsTiled(GetParam())) {
    GTEST_SKIP() << "tiled only";
  }
  const LshData data = MakeLsh(62, 200000, 16, 10, 50, 40, 0.3);
  auto index = MakeIndex(data.csr);
  gpu::SearchStats stats;
  Check(data.csr, index, data.batch, 20, {}, &stats);
  const uint64_t postings = static_cast<uint64_t>(index->num_postings());
  const uint64_t keywords = index->keyword_offsets().size() - 1;
  const uint64_t packed = postings * 2 + keywords * (200000 / 65536 + 2) * 4;
  EXPECT_EQ(stats.index_device_bytes, GetParam() == Variant::kTiledFull ? postings * 4 : packed);
}

INSTANTIATE_TEST_SUITE_P(Variants, GpuEngineTest,
                         ::testing::Values(Variant::kTiled, Variant::kTiledPacked,
                                           Variant::kTiledFull, Variant::kFaithful,
                                           Variant::kFaithfulPaperTies, Variant::kCountTable),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(VariantName(info.param));
                         });

// ---- API behaviour -------------------------------------------------------------

TEST(GpuEngineApi, ProfileOnRequest) {
  SKIP_WITHOUT_GPU();
  const LshData data = MakeLsh(73, 20000, 16, 8, 20, 8, 0.3);
  auto index = MakeIndex(data.csr);
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  ASSERT_TRUE(engine->Upload(index).ok());
  TopKResults out;
  gpu::SearchStats stats;
  ASSERT_TRUE(engine->Search(data.batch.View(), 10, &out).ok());
  ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), &stats));
  EXPECT_TRUE(stats.profile.empty()) << stats.profile;
  ASSERT_TRUE(gpu::SetProfile(engine.get(), true));
  ASSERT_TRUE(engine->Search(data.batch.View(), 10, &out).ok());
  ASSERT_TRUE(gpu::GetLastSearchStats(engine.get(), &stats));
  EXPECT_FALSE(stats.profile.empty());
  auto cpu = MakeCpuEngine(EngineOptions());
  EXPECT_FALSE(gpu::SetProfile(cpu.get(), true));
  GpuEngineOptions profiled;
  profiled.profile = true;
  auto engine2 = MakeGpuEngine(EngineOptions(), profiled, &status);
  ASSERT_NE(engine2, nullptr) << status.message();
  ASSERT_TRUE(engine2->Upload(index).ok());
  ASSERT_TRUE(engine2->Search(data.batch.View(), 10, &out).ok());
  ASSERT_TRUE(gpu::GetLastSearchStats(engine2.get(), &stats));
  EXPECT_FALSE(stats.profile.empty());
}

TEST(GpuEngineApi, TinyBudgetIsDeviceOutOfMemory) {
  SKIP_WITHOUT_GPU();
  const LshData data = MakeLsh(71, 20000, 16, 8, 20, 8, 0.3);
  Status status;
  EngineOptions options;
  options.memory_budget_bytes = 4096;
  auto engine = MakeGpuEngine(options, &status);
  ASSERT_NE(engine, nullptr) << status.message();
  ASSERT_TRUE(engine->Upload(MakeIndex(data.csr)).ok());
  TopKResults out;
  status = engine->Search(data.batch.View(), 10, &out);
  EXPECT_EQ(status.code(), GENIE_DEVICE_OUT_OF_MEMORY) << status.message();
}

}  // namespace
}  // namespace genie

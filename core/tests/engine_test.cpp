#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <thread>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/packed_postings.hpp"
#include "genie/test_util.hpp"
#include "cpu_tiles.hpp"

namespace genie {
namespace {

using testing::BruteForce;
using testing::Csr;
using testing::DataSpec;
using testing::MakeCpu;
using testing::MakeIndex;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;
using testing::Search;

// A budget that the CPU engine can only meet with about 2..2*fraction parts
// (see the accounting formula in cpu_engine.cpp): a fraction of the index and
// of the counters, plus the per-thread histogram, which parts do not shrink.
uint64_t SmallBudget(const InvertedIndex& index, const genie_query_batch& batch, int32_t threads,
                     uint64_t fraction) {
  CompiledBatch compiled;
  EXPECT_TRUE(CompileBatch(index, batch, &compiled).ok());
  int64_t max_score = 0;
  for (int64_t s : compiled.max_score) max_score = std::max(max_score, s);
  const uint64_t width = max_score <= 255 ? 1 : max_score <= 65535 ? 2 : 4;
  const uint64_t histogram = max_score <= 65535 ? 4 * static_cast<uint64_t>(max_score + 1) : 0;
  const auto n = static_cast<uint64_t>(index.num_objects());
  const auto used = static_cast<uint64_t>(std::max(1, std::min(threads, batch.n_queries)));
  const uint64_t index_share = index.MemoryBytes() / std::max<uint64_t>(1, std::min(fraction, n));
  return index_share + used * (histogram + 8 * 17 + (n / fraction + 1) * (width + 1));
}

// Every engine configuration against the expected results (the brute-force
// oracle, or the reference engine when the data is too large for it).
void ExpectEnginesMatch(const Csr& csr, const QueryBatch& batch, const std::vector<int32_t>& ks,
                        const std::vector<int32_t>& split_lengths, bool brute_force) {
  const genie_query_batch view = batch.View();
  for (int32_t split : split_lengths) {
    auto index = MakeIndex(csr, split);
    for (int32_t k : ks) {
      SCOPED_TRACE(::testing::Message() << "split_length " << split << ", k " << k);
      auto reference = MakeReferenceEngine();
      TopKResults from_reference = Search(*reference, index, view, k);
      TopKResults expected = brute_force ? BruteForce(csr, view, k) : from_reference;
      if (brute_force) {
        EXPECT_TRUE(SameResults(expected, from_reference)) << "reference engine";
      }
      for (int32_t threads : {1, 4}) {
        auto cpu = MakeCpu(threads);
        EXPECT_TRUE(SameResults(expected, Search(*cpu, index, view, k))) << "cpu, threads " << threads;
        // both orders whatever the batch: one query at a time (-1), and
        // tile by tile with tiles of 64 and of 200 (rounded to 256) objects
        for (int64_t tile : {int64_t{-1}, int64_t{64}, int64_t{200}}) {
          EngineOptions options;
          options.threads = threads;
          options.cpu_tile_objects = tile;
          auto ordered = MakeCpuEngine(options);
          EXPECT_TRUE(SameResults(expected, Search(*ordered, index, view, k)))
              << "cpu, cpu_tile_objects " << tile << ", threads " << threads;
        }
        if (csr.size() > 1 && !batch.ranges.empty()) {
          auto small = MakeCpu(threads, SmallBudget(*index, view, threads, 5));
          EXPECT_TRUE(SameResults(expected, Search(*small, index, view, k)))
              << "cpu with a small budget, threads " << threads;
          // parts of the objects (base > 0), each counted by tiles
          EngineOptions options;
          options.threads = threads;
          options.memory_budget_bytes = SmallBudget(*index, view, threads, 5);
          options.cpu_tile_objects = 64;
          auto small_tiled = MakeCpuEngine(options);
          EXPECT_TRUE(SameResults(expected, Search(*small_tiled, index, view, k)))
              << "cpu with a small budget, by tiles, threads " << threads;
        }
      }
      // Many queries, so that threads share the batch even when it is small.
      const QueryBatch repeated = testing::Repeat(batch, 8);
      const TopKResults expected_repeated = testing::Repeat(expected, 8);
      auto cpu = MakeCpu(3);
      EXPECT_TRUE(SameResults(expected_repeated, Search(*cpu, index, repeated.View(), k)))
          << "cpu, repeated batch";
      // tile by tile, threads taking the same query's consecutive tiles
      EngineOptions by_tiles;
      by_tiles.threads = 3;
      by_tiles.cpu_tile_objects = 64;
      auto tiled = MakeCpuEngine(by_tiles);
      EXPECT_TRUE(SameResults(expected_repeated, Search(*tiled, index, repeated.View(), k)))
          << "cpu by tiles, repeated batch";
      if (csr.size() > 1 && !batch.ranges.empty()) {
        auto small = MakeCpu(3, SmallBudget(*index, repeated.View(), 3, 4));
        EXPECT_TRUE(SameResults(expected_repeated, Search(*small, index, repeated.View(), k)))
            << "cpu with a small budget, repeated batch";
      }
    }
  }
}

TEST(Engines, ReferenceAndCpuMatchBruteForce) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    DataSpec data;
    data.objects = 150;
    data.universe = 80;
    data.zipf = seed % 2 ? 1.3 : 0.3;
    Csr csr = RandomCsr(seed, data);
    QuerySpec queries;
    queries.queries = 25;
    queries.max_weight = seed % 3 == 0 ? 1 : 6;
    QueryBatch batch = RandomBatch(seed * 101, queries);
    ExpectEnginesMatch(csr, batch, {1, 3, 10, 150, 1000}, {seed % 2 ? 1 : 3, kDefaultSplitLength},
                       true);
  }
}

TEST(Engines, CpuMatchesReferenceOnSkewedData) {
  for (uint32_t seed = 11; seed <= 13; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    DataSpec data;
    data.objects = 3000;
    data.max_length = 30;
    data.universe = 600;
    data.zipf = 1.1;
    data.keyword_base = -300;
    Csr csr = RandomCsr(seed, data);
    QuerySpec queries;
    queries.queries = 40;
    queries.max_items = 8;
    queries.lo_min = -320;
    queries.lo_max = 320;
    queries.max_weight = seed == 12 ? 3 : 1;
    QueryBatch batch = RandomBatch(seed * 7, queries);
    ExpectEnginesMatch(csr, batch, {1, 10, 100, 3000}, {64}, false);
  }
}

// Enough objects and queries that the engine's own choice is the tile
// order, with its default tiles: equal to the reference and to the order
// of one query at a time, for small and large k.
TEST(Engines, BatchesTakeTheTileOrder) {
  DataSpec data;
  data.objects = 2 * 262144 + 1000;
  data.max_length = 6;
  data.universe = 40;
  data.zipf = 0.8;
  Csr csr = RandomCsr(31, data);
  auto index = MakeIndex(csr);
  QuerySpec queries;
  queries.queries = 24;
  queries.max_items = 6;
  queries.max_weight = 3;
  QueryBatch batch = RandomBatch(32, queries);
  CompiledBatch compiled;
  ASSERT_TRUE(CompileBatch(*index, batch.View(), &compiled).ok());
  ASSERT_EQ(ChooseTileObjects(0, compiled.num_queries(), compiled.total_postings,
                              index->num_objects(), 1),
            DefaultTileObjects(1))
      << "the engine chooses the tile order";
  // and one query at a time for a small batch, or a sparse one
  EXPECT_EQ(ChooseTileObjects(0, 7, compiled.total_postings, index->num_objects(), 1), 0);
  EXPECT_EQ(ChooseTileObjects(0, 24, 1000, index->num_objects(), 1), 0);
  // k = every object: each posting's count shows, the last objects' too
  for (int32_t k : {1, 10, 1000, data.objects}) {
    SCOPED_TRACE(::testing::Message() << "k " << k);
    auto reference = MakeReferenceEngine();
    const TopKResults expected = Search(*reference, index, batch.View(), k);
    for (int32_t threads : {1, 4}) {
      for (int64_t tile : {int64_t{0}, int64_t{-1}}) {
        EngineOptions options;
        options.threads = threads;
        options.cpu_tile_objects = tile;
        auto cpu = MakeCpuEngine(options);
        EXPECT_TRUE(SameResults(expected, Search(*cpu, index, batch.View(), k)))
            << "threads " << threads << ", cpu_tile_objects " << tile;
      }
      // packed postings: the default tiles (4 pack tiles), tiles of one and
      // of two pack tiles, and tiles that are not whole pack tiles (read
      // the 4-byte ids)
      for (int64_t tile : {int64_t{0}, int64_t{65536}, int64_t{131072}, int64_t{100000}}) {
        EngineOptions options;
        options.threads = threads;
        options.cpu_tile_objects = tile;
        options.cpu_packed_postings = true;
        auto cpu = MakeCpuEngine(options);
        EXPECT_TRUE(SameResults(expected, Search(*cpu, index, batch.View(), k)))
            << "packed, threads " << threads << ", cpu_tile_objects " << tile;
      }
    }
  }
}

// The packed postings belong to the uploaded index: a new upload packs
// the new one (the same batch, other answers).
TEST(Engines, PackedPostingsFollowTheUpload) {
  DataSpec data;
  data.objects = 3 * 65536 + 77;
  data.max_length = 4;
  data.universe = 30;
  QuerySpec queries;
  queries.queries = 12;
  queries.max_items = 5;
  const QueryBatch batch = RandomBatch(42, queries);
  EngineOptions options;
  options.threads = 2;
  options.cpu_tile_objects = 65536;
  options.cpu_packed_postings = true;
  auto cpu = MakeCpuEngine(options);
  for (uint32_t seed : {40u, 41u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    auto index = MakeIndex(RandomCsr(seed, data));
    ASSERT_TRUE(PackingPays(*index));
    auto reference = MakeReferenceEngine();
    for (int32_t k : {20, data.objects}) {
      const TopKResults expected = Search(*reference, index, batch.View(), k);
      EXPECT_TRUE(SameResults(expected, Search(*cpu, index, batch.View(), k))) << "k " << k;
    }
  }
}

// The genie service's runners search one CPU engine from several threads
// at once: every concurrent answer equals the reference engine's, the
// packed postings (built once, by whichever search comes first) included.
TEST(Engines, ConcurrentSearchesOfOneCpuEngine) {
  DataSpec data;
  data.objects = 2 * 65536 + 501;
  data.max_length = 5;
  data.universe = 40;
  auto index = MakeIndex(RandomCsr(61, data));
  ASSERT_TRUE(PackingPays(*index));
  std::vector<QueryBatch> batches;
  std::vector<TopKResults> expected;
  auto reference = MakeReferenceEngine();
  for (uint32_t seed = 0; seed < 6; ++seed) {
    QuerySpec queries;
    queries.queries = 1 + int32_t(seed) * 3;
    queries.max_items = 4;
    batches.push_back(RandomBatch(100 + seed, queries));
    expected.push_back(Search(*reference, index, batches.back().View(), 10));
  }
  for (bool packed : {false, true}) {
    EngineOptions options;
    options.threads = 2;
    options.cpu_tile_objects = 65536;
    options.cpu_packed_postings = packed;
    auto cpu = MakeCpuEngine(options);
    ASSERT_TRUE(cpu->Upload(index).ok());
    // each thread searches views of its own copies (a view points into its batch)
    std::vector<QueryBatch> copies;
    copies.reserve(4 * batches.size());
    std::vector<std::vector<genie_query_batch>> views(4);
    for (auto& v : views) {
      for (const QueryBatch& b : batches) {
        copies.push_back(b);
        v.push_back(copies.back().View());
      }
    }
    std::atomic<int> wrong{0}, failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 5; ++round) {
          for (std::size_t i = 0; i < batches.size(); ++i) {
            const std::size_t b = (i + std::size_t(t)) % batches.size();
            TopKResults got;
            if (!cpu->Search(views[t][b], 10, &got).ok()) {
              failed++;
            } else if (!SameResults(expected[b], got)) {
              wrong++;
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failed.load(), 0) << "packed " << packed;
    EXPECT_EQ(wrong.load(), 0) << "packed " << packed;
  }
}

TEST(Engines, KeywordQueriesLikeLsh) {
  DataSpec data;
  data.objects = 400;
  data.universe = 100;
  Csr csr = RandomCsr(4, data);
  QueryBatch batch;
  std::mt19937 rng(9);
  for (int q = 0; q < 30; ++q) {
    std::vector<int32_t> keywords;
    for (int i = 0; i < 12; ++i) keywords.push_back(std::uniform_int_distribution<int32_t>(-60, 60)(rng));
    batch.AddKeywordQuery(keywords);  // with repeats, which count once
  }
  ExpectEnginesMatch(csr, batch, {1, 7, 400}, {kDefaultSplitLength}, true);
}

TEST(Engines, LargeWeightsUseWideCounters) {
  for (uint32_t seed = 21; seed <= 23; ++seed) {
    DataSpec data;
    data.objects = 300;
    data.universe = 50;
    Csr csr = RandomCsr(seed, data);
    QuerySpec queries;
    queries.queries = 20;
    queries.max_items = 3;
    queries.max_ranges = 1;
    queries.max_width = 2;
    queries.max_weight = seed == 23 ? 200000000 : 300;
    QueryBatch batch = RandomBatch(seed, queries);
    // A query with a small bound beside the large ones.
    batch.AddKeywordQuery(std::vector<int32_t>{-50, -49});
    ExpectEnginesMatch(csr, batch, {1, 5, 300}, {kDefaultSplitLength, 2}, true);
  }
}

TEST(Engines, NegativeAndExtremeKeywords) {
  DataSpec data;
  data.objects = 200;
  data.universe = 120;
  data.keyword_base = INT32_MIN;
  data.keyword_step = 36000000;  // spans the whole int32 range
  Csr csr = RandomCsr(31, data);
  Csr extremes;
  for (int32_t o = 0; o < csr.size(); ++o) {
    std::vector<int32_t> object = csr.Object(o);
    if (o % 7 == 0) object.push_back(INT32_MAX);
    if (o % 5 == 0) object.push_back(INT32_MIN);
    extremes.Add(object);
  }
  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{INT32_MIN, INT32_MAX}});
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{INT32_MAX, INT32_MAX}, {INT32_MIN, INT32_MIN}}, 2);
  batch.AddItem(std::vector<KeywordRange>{{INT32_MIN, 0}, {-5, 5}, {1, INT32_MAX}});
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{INT32_MIN, -1000000}}, 3);
  batch.AddItem(std::vector<KeywordRange>{{INT32_MIN, -1000000}}, 1);  // same keywords again
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{INT32_MAX - 10, INT32_MAX}});
  QuerySpec queries;
  queries.queries = 20;
  queries.lo_min = INT32_MIN;
  queries.lo_max = INT32_MAX - 400000000;
  queries.max_width = 400000000;
  QueryBatch random = RandomBatch(32, queries);
  ExpectEnginesMatch(extremes, batch, {1, 10, 200}, {1, kDefaultSplitLength}, true);
  ExpectEnginesMatch(extremes, random, {1, 10, 200}, {kDefaultSplitLength}, true);
}

// Objects reaching exactly 2^b - 1 and 2^b, and bounds at the counter width
// boundaries (uint8 up to 255, uint16 up to 65535).
TEST(Engines, MaxScoreBoundaries) {
  for (int b = 1; b <= 8; ++b) {
    for (int32_t s : {(1 << b) - 1, 1 << b}) {
      SCOPED_TRACE(::testing::Message() << "score " << s);
      Csr csr;
      std::vector<int32_t> all, most;
      for (int32_t kw = 0; kw < s; ++kw) all.push_back(kw);
      most.assign(all.begin(), all.end() - 1);
      csr.Add(all);   // scores s
      csr.Add({0});   // scores 1
      csr.Add(most);  // scores s - 1
      csr.Add({});
      csr.Add(all);   // ties with object 0
      QueryBatch batch;
      batch.BeginQuery();
      batch.AddItem(std::vector<KeywordRange>{{0, s - 1}});
      ExpectEnginesMatch(csr, batch, {1, 2, 5}, {kDefaultSplitLength, 3}, true);
      auto index = MakeIndex(csr);
      auto cpu = MakeCpu(2);
      TopKResults r = Search(*cpu, index, batch.View(), 1);
      ASSERT_EQ(r.hits.size(), 1u);
      EXPECT_EQ(r.hits[0].object, 0);
      EXPECT_EQ(r.hits[0].score, s);
    }
  }
  for (int32_t w : {254, 255, 256, 65534, 65535, 65536, INT32_MAX / 2, INT32_MAX}) {
    SCOPED_TRACE(::testing::Message() << "weight " << w);
    Csr csr;
    csr.Add({0});
    csr.Add({0, 1});
    csr.Add({1});
    QueryBatch batch;
    batch.BeginQuery();
    batch.AddItem(std::vector<KeywordRange>{{0, 0}}, w);
    batch.BeginQuery();  // 1 + (w - 1) reaches w on object 1 only
    batch.AddItem(std::vector<KeywordRange>{{0, 0}}, 1);
    batch.AddItem(std::vector<KeywordRange>{{1, 1}}, w > 1 ? w - 1 : 1);
    ExpectEnginesMatch(csr, batch, {1, 3}, {kDefaultSplitLength}, true);
  }
}

TEST(Engines, AllTies) {
  // Every object scores 1.  With many objects the touched list overflows and
  // selection scans counters in object order.
  for (int32_t n : {10, 1000}) {
    Csr csr;
    for (int32_t o = 0; o < n; ++o) csr.Add({7, o % 3 == 0 ? 8 : 9});
    QueryBatch batch;
    batch.AddKeywordQuery(std::vector<int32_t>{7});
    for (int32_t k : {1, 5, n - 1, n, n + 1}) {
      for (int32_t threads : {1, 4}) {
        auto cpu = MakeCpu(threads);
        TopKResults r = Search(*cpu, MakeIndex(csr), batch.View(), k);
        ASSERT_EQ(r.hits.size(), static_cast<std::size_t>(std::min(k, n)));
        for (std::size_t i = 0; i < r.hits.size(); ++i) {
          EXPECT_EQ(r.hits[i].object, static_cast<int32_t>(i));
          EXPECT_EQ(r.hits[i].score, 1);
        }
      }
    }
    ExpectEnginesMatch(csr, batch, {1, 5, n}, {kDefaultSplitLength, 1}, true);
  }
}

TEST(Engines, TiesFirstTouchedOutOfOrder) {
  // High ids are touched first (keyword 1's list), low ids later (keyword 2),
  // all scoring 1: the lowest ids must still win the ties.
  Csr csr;
  for (int32_t o = 0; o < 200; ++o) csr.Add({o < 100 ? 2 : 1});
  csr.Add({1, 2});  // object 200 scores 2
  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{1, 1}});
  batch.AddItem(std::vector<KeywordRange>{{2, 2}});
  ExpectEnginesMatch(csr, batch, {1, 2, 3, 50, 150, 201}, {kDefaultSplitLength, 7}, true);
}

TEST(Engines, TiesAtTheThresholdFromTheTouchedList) {
  // Few objects touched out of many, so selection works from the touched
  // list, which holds ids 1000.. before 0..: the low ids must win the ties.
  Csr csr;
  for (int32_t o = 0; o < 2000; ++o) {
    if (o < 20) {
      csr.Add({2});
    } else if (o >= 1000 && o < 1020) {
      csr.Add({1});
    } else {
      csr.Add({3});
    }
  }
  csr.Add({1, 2});
  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{1, 1}});
  batch.AddItem(std::vector<KeywordRange>{{2, 2}});
  ExpectEnginesMatch(csr, batch, {1, 2, 3, 10, 25, 41, 50}, {kDefaultSplitLength}, true);
}

TEST(Engines, SparseBlocksAfterAnOverflow) {
  // More objects touched than the touched list holds, spread so that most
  // 64-counter blocks are all zero or all below the threshold, some blocks
  // hold one hit at their last counter, and the last block is partial:
  // selection skips blocks and must still take every score above the
  // threshold and the lowest-numbered ties, with counters of each width.
  Csr csr;
  const int32_t n = 64 * 97 + 13;
  for (int32_t o = 0; o < n; ++o) {
    std::vector<int32_t> keywords;
    if (o % 5 == 0) keywords.push_back(1);                      // many score low
    if (o % 64 == 63 || o == n - 1) keywords.push_back(2);       // one per block
    if (o % 640 == 17) keywords.push_back(3);                    // a few score high
    if (keywords.empty()) keywords.push_back(4);
    csr.Add(keywords);
  }
  for (int32_t weight : {1, 200, 70000}) {
    SCOPED_TRACE(::testing::Message() << "weight " << weight);
    QueryBatch batch;
    batch.BeginQuery();
    batch.AddItem(std::vector<KeywordRange>{{1, 1}});
    batch.AddItem(std::vector<KeywordRange>{{2, 2}}, weight);
    batch.AddItem(std::vector<KeywordRange>{{3, 3}}, 2 * weight);
    batch.BeginQuery();  // only the one-per-block objects
    batch.AddItem(std::vector<KeywordRange>{{2, 2}}, weight);
    batch.BeginQuery();  // ties everywhere: every fifth object
    batch.AddItem(std::vector<KeywordRange>{{1, 1}});
    ExpectEnginesMatch(csr, batch, {1, 3, 11, 99, 500, n}, {kDefaultSplitLength}, true);
  }
}

TEST(Engines, EdgeCaseBatchesAndIndexes) {
  DataSpec data;
  data.objects = 60;
  Csr csr = RandomCsr(41, data);
  QueryBatch batch;
  batch.BeginQuery();  // no items
  batch.AddKeywordQuery(std::vector<int32_t>{100000, -100000});  // absent keywords
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{});  // an item with no ranges
  batch.AddKeywordQuery(std::vector<int32_t>{-50, -49, -48});
  ExpectEnginesMatch(csr, batch, {1, 60, 61}, {kDefaultSplitLength}, true);

  QueryBatch empty;
  ExpectEnginesMatch(csr, empty, {1, 5}, {kDefaultSplitLength}, true);
  auto cpu = MakeCpu(4);
  TopKResults r = Search(*cpu, MakeIndex(csr), empty.View(), 5);
  EXPECT_EQ(r.num_queries(), 0);
  EXPECT_TRUE(r.hits.empty());

  Csr no_objects;
  ExpectEnginesMatch(no_objects, batch, {1, 3}, {kDefaultSplitLength}, true);
  Csr empty_objects;
  for (int i = 0; i < 5; ++i) empty_objects.Add({});
  ExpectEnginesMatch(empty_objects, batch, {1, 3}, {kDefaultSplitLength}, true);
  Csr one;
  one.Add({-50});
  ExpectEnginesMatch(one, batch, {1, 3}, {kDefaultSplitLength, 1}, true);
}

TEST(Engines, RepeatedSearchesStartClean) {
  DataSpec data;
  data.objects = 500;
  Csr csr = RandomCsr(51, data);
  auto index = MakeIndex(csr);
  QuerySpec spec;
  QueryBatch a = RandomBatch(52, spec), b = RandomBatch(53, spec);
  auto reference = MakeReferenceEngine();
  TopKResults expected_a = Search(*reference, index, a.View(), 10);
  TopKResults expected_b = Search(*reference, index, b.View(), 10);
  auto cpu = MakeCpu(2);
  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(SameResults(expected_a, Search(*cpu, index, a.View(), 10)));
    EXPECT_TRUE(SameResults(expected_b, Search(*cpu, index, b.View(), 10)));
  }
}

TEST(Engines, ManyPartsWithATinyBudget) {
  DataSpec data;
  data.objects = 120;
  Csr csr = RandomCsr(61, data);
  auto index = MakeIndex(csr, 5);
  QuerySpec spec;
  spec.max_weight = 3;
  QueryBatch batch = RandomBatch(62, spec);
  const genie_query_batch view = batch.View();
  TopKResults expected = BruteForce(csr, view, 7);
  for (int32_t threads : {1, 3}) {
    // Down to one or two objects per part.
    for (uint64_t fraction : {2u, 30u, 120u}) {
      auto cpu = MakeCpu(threads, SmallBudget(*index, view, threads, fraction));
      EXPECT_TRUE(SameResults(expected, Search(*cpu, index, view, 7)))
          << "threads " << threads << ", fraction " << fraction;
    }
  }
}

TEST(Engines, ImpossibleBudgetIsOutOfMemory) {
  DataSpec data;
  data.objects = 100;
  Csr csr = RandomCsr(71, data);
  auto index = MakeIndex(csr);
  QueryBatch batch;
  batch.AddKeywordQuery(std::vector<int32_t>{-50, -49});
  auto cpu = MakeCpu(2, 1);
  ASSERT_TRUE(cpu->Upload(index).ok());
  TopKResults r;
  Status s = cpu->Search(batch.View(), 10, &r);
  EXPECT_EQ(s.code(), GENIE_OUT_OF_MEMORY);
  EXPECT_NE(s.message().find("budget"), std::string::npos) << s.message();
  // A generous budget is the same as none.
  auto roomy = MakeCpu(2, uint64_t(1) << 40);
  auto reference = MakeReferenceEngine();
  EXPECT_TRUE(SameResults(Search(*reference, index, batch.View(), 10), Search(*roomy, index, batch.View(), 10)));
}

TEST(Engines, Errors) {
  Csr csr;
  csr.Add({1, 2});
  csr.Add({2});
  auto index = MakeIndex(csr);
  QueryBatch batch;
  batch.AddKeywordQuery(std::vector<int32_t>{2});

  EXPECT_TRUE(ValidateK(1).ok());
  EXPECT_TRUE(ValidateK(INT32_MAX).ok());
  EXPECT_EQ(ValidateK(0).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(ValidateK(-3).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_NE(ValidateK(0).message().find("k must be at least 1"), std::string::npos);

  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(MakeReferenceEngine());
  engines.push_back(MakeCpu(2));
  engines.push_back(MakeCpu(1, 1 << 12));
  EXPECT_EQ(engines[0]->kind(), GENIE_ENGINE_CPU_REFERENCE);
  EXPECT_EQ(engines[1]->kind(), GENIE_ENGINE_CPU);
  for (auto& engine : engines) {
    TopKResults r;
    EXPECT_EQ(engine->Search(batch.View(), 1, &r).code(), GENIE_INVALID_ARGUMENT) << "no index";
    EXPECT_EQ(engine->Upload(nullptr).code(), GENIE_INVALID_ARGUMENT);
    ASSERT_TRUE(engine->Upload(index).ok());
    EXPECT_EQ(engine->Search(batch.View(), 0, &r).code(), GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(engine->Search(batch.View(), -1, &r).code(), GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(engine->Search(batch.View(), 1, nullptr).code(), GENIE_INVALID_ARGUMENT);
    genie_query_batch bad = batch.View();
    bad.n_queries = -1;
    EXPECT_EQ(engine->Search(bad, 1, &r).code(), GENIE_INVALID_ARGUMENT);
    QueryBatch overflow;
    overflow.BeginQuery();
    overflow.AddItem(std::vector<KeywordRange>{{1, 2}}, INT32_MAX);
    EXPECT_EQ(engine->Search(overflow.View(), 1, &r).code(), GENIE_INVALID_ARGUMENT);
    EXPECT_TRUE(engine->Search(batch.View(), INT32_MAX, &r).ok());
    EXPECT_EQ(r.hits.size(), 2u);
    EXPECT_TRUE(engine->Drop().ok());
    EXPECT_EQ(engine->Search(batch.View(), 1, &r).code(), GENIE_INVALID_ARGUMENT) << "after Drop";
    EXPECT_TRUE(engine->Drop().ok());
  }
}

TEST(Engines, UploadKeepsTheIndexAlive) {
  Csr csr;
  csr.Add({3});
  auto cpu = MakeCpu(0);  // hardware concurrency
  {
    auto index = MakeIndex(csr);
    ASSERT_TRUE(cpu->Upload(index).ok());
  }
  QueryBatch batch;
  batch.AddKeywordQuery(std::vector<int32_t>{3});
  TopKResults r;
  ASSERT_TRUE(cpu->Search(batch.View(), 5, &r).ok());
  ASSERT_EQ(r.hits.size(), 1u);
  EXPECT_EQ(r.hits[0].object, 0);
  EXPECT_EQ(r.hits[0].score, 1);
}

}  // namespace
}  // namespace genie

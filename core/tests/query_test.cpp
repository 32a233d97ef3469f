#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include "genie/engine.hpp"
#include "genie/query.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;

TEST(QueryBatch, KeywordQueriesDedupe) {
  QueryBatch batch;
  std::vector<int32_t> keywords = {5, 3, 5, -1, 3};
  batch.AddKeywordQuery(keywords);
  batch.AddKeywordQuery({});
  EXPECT_EQ(batch.num_queries(), 2);
  EXPECT_EQ(batch.query_offsets, (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ(batch.item_offsets, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batch.item_weights, (std::vector<int32_t>{1, 1, 1}));
  ASSERT_EQ(batch.ranges.size(), 3u);
  EXPECT_EQ(batch.ranges[0].lo, -1);
  EXPECT_EQ(batch.ranges[1].lo, 3);
  EXPECT_EQ(batch.ranges[2].hi, 5);
}

TEST(QueryBatch, ItemsAndView) {
  QueryBatch batch;
  // An item before any BeginQuery starts the first query.
  batch.AddItem(std::vector<KeywordRange>{{1, 2}, {7, 9}}, 4);
  batch.BeginQuery();
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{}, 2);
  batch.AddItem(std::vector<KeywordRange>{{INT32_MIN, INT32_MAX}});
  EXPECT_EQ(batch.num_queries(), 3);

  genie_query_batch view = batch.View();
  EXPECT_TRUE(ValidateBatch(view).ok());
  EXPECT_EQ(view.n_queries, 3);
  EXPECT_EQ(view.query_offsets[0], 0);
  EXPECT_EQ(view.query_offsets[1], 1);
  EXPECT_EQ(view.query_offsets[2], 1);
  EXPECT_EQ(view.query_offsets[3], 3);
  EXPECT_EQ(view.item_offsets[3], 3);
  EXPECT_EQ(view.item_weights[0], 4);
  EXPECT_EQ(view.item_weights[2], 1);
  EXPECT_EQ(view.ranges_lo[1], 7);
  EXPECT_EQ(view.ranges_hi[1], 9);
  EXPECT_EQ(view.ranges_lo[2], INT32_MIN);
  EXPECT_EQ(view.ranges_hi[2], INT32_MAX);

  QueryBatch empty;
  view = empty.View();
  EXPECT_EQ(view.n_queries, 0);
  EXPECT_TRUE(ValidateBatch(view).ok());
}

// A hand-built C batch whose arrays the test can break one at a time.
struct RawBatch {
  std::vector<int64_t> query_offsets = {0, 2, 3};
  std::vector<int64_t> item_offsets = {0, 1, 3, 3};
  std::vector<int32_t> weights = {1, 2, 3};
  std::vector<int32_t> lo = {1, 5, 9};
  std::vector<int32_t> hi = {1, 6, 9};
  int32_t n_queries = 2;

  genie_query_batch View() const {
    return {n_queries, query_offsets.data(), item_offsets.data(), weights.data(), lo.data(), hi.data()};
  }
};

TEST(ValidateBatch, AcceptsGoodBatches) {
  RawBatch raw;
  EXPECT_TRUE(ValidateBatch(raw.View()).ok());
  genie_query_batch view = raw.View();
  view.item_weights = nullptr;
  EXPECT_TRUE(ValidateBatch(view).ok());
  genie_query_batch empty{};
  EXPECT_TRUE(ValidateBatch(empty).ok());  // no queries, no arrays needed
  // Queries with no items need no item arrays.
  std::vector<int64_t> zeros = {0, 0, 0};
  genie_query_batch itemless{2, zeros.data(), nullptr, nullptr, nullptr, nullptr};
  EXPECT_TRUE(ValidateBatch(itemless).ok());
}

TEST(ValidateBatch, Rejections) {
  auto rejected = [](const RawBatch& raw, const char* what) {
    Status s = ValidateBatch(raw.View());
    EXPECT_EQ(s.code(), GENIE_INVALID_ARGUMENT) << what;
    EXPECT_FALSE(s.message().empty());
  };
  RawBatch raw;
  raw.n_queries = -1;
  rejected(raw, "negative n_queries");
  raw = {};
  raw.query_offsets = {1, 2, 3};
  rejected(raw, "query_offsets[0] != 0");
  raw = {};
  raw.query_offsets = {0, 2, 1};
  rejected(raw, "decreasing query_offsets");
  raw = {};
  raw.item_offsets = {1, 1, 3, 3};
  rejected(raw, "item_offsets[0] != 0");
  raw = {};
  raw.item_offsets = {0, 2, 1, 3};
  rejected(raw, "decreasing item_offsets");
  raw = {};
  raw.lo[1] = 7;
  rejected(raw, "lo > hi");
  raw = {};
  raw.weights[2] = 0;
  rejected(raw, "weight 0");
  raw = {};
  raw.weights[0] = -4;
  rejected(raw, "negative weight");

  raw = {};
  genie_query_batch view = raw.View();
  view.query_offsets = nullptr;
  EXPECT_EQ(ValidateBatch(view).code(), GENIE_INVALID_ARGUMENT);
  view = raw.View();
  view.item_offsets = nullptr;
  EXPECT_EQ(ValidateBatch(view).code(), GENIE_INVALID_ARGUMENT);
  view = raw.View();
  view.ranges_lo = nullptr;
  EXPECT_EQ(ValidateBatch(view).code(), GENIE_INVALID_ARGUMENT);
  view = raw.View();
  view.ranges_hi = nullptr;
  EXPECT_EQ(ValidateBatch(view).code(), GENIE_INVALID_ARGUMENT);
}

// Keywords and their List Array positions:
//   MIN [0,1)  -3 [1,2)  1 [2,4)  2 [4,6)  3 [6,7)  4 [7,9)  5 [9,10)
//   6 [10,11)  10 [11,12)  MAX [12,13)
class Compile : public ::testing::Test {
 protected:
  void SetUp() override { Rebuild(kDefaultSplitLength); }
  void Rebuild(int32_t split_length) {
    Csr csr;
    csr.Add({1, 2, 3, 4, 5});
    csr.Add({2, 4, 6});
    csr.Add({10});
    csr.Add({INT32_MIN, INT32_MAX});
    csr.Add({-3, 1});
    IndexOptions options;
    options.split_length = split_length;
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index_).ok());
    ASSERT_EQ(index_.max_object_keywords(), 5);
  }
  CompiledBatch CompileOk(const QueryBatch& batch) {
    CompiledBatch out;
    Status s = CompileBatch(index_, batch.View(), &out);
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }
  static QueryBatch OneItem(std::vector<KeywordRange> ranges, int32_t weight = 1) {
    QueryBatch batch;
    batch.BeginQuery();
    batch.AddItem(ranges, weight);
    return batch;
  }
  static void ExpectSlices(const CompiledBatch& c, int32_t q, std::vector<ListSlice> expected) {
    std::vector<ListSlice> actual(c.slices.begin() + c.query_slice_offsets[q],
                                  c.slices.begin() + c.query_slice_offsets[q + 1]);
    ASSERT_EQ(actual.size(), expected.size()) << "query " << q;
    for (std::size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].begin, expected[i].begin) << "slice " << i;
      EXPECT_EQ(actual[i].end, expected[i].end) << "slice " << i;
      EXPECT_EQ(actual[i].weight, expected[i].weight) << "slice " << i;
    }
  }

  InvertedIndex index_;
};

TEST_F(Compile, OverlappingRangesCountOnce) {
  CompiledBatch c = CompileOk(OneItem({{3, 5}, {2, 3}, {4, 4}}, 2));
  ASSERT_EQ(c.num_queries(), 1);
  ExpectSlices(c, 0, {{4, 10, 2}});
  EXPECT_EQ(c.total_postings, 6);
  EXPECT_EQ(c.max_score[0], 2 * 4);
}

TEST_F(Compile, ExtremeRangesDoNotWrap) {
  CompiledBatch c = CompileOk(OneItem({{INT32_MAX, INT32_MAX}, {INT32_MIN, INT32_MIN}}));
  ExpectSlices(c, 0, {{0, 1, 1}, {12, 13, 1}});
  EXPECT_EQ(c.max_score[0], 2);
  c = CompileOk(OneItem({{INT32_MIN, -4}, {-2, INT32_MAX}}));
  ExpectSlices(c, 0, {{0, 1, 1}, {2, 13, 1}});
  EXPECT_EQ(c.max_score[0], 5);  // 9 keywords, capped by max_object_keywords
  c = CompileOk(OneItem({{INT32_MIN, INT32_MAX}, {0, 0}}));
  ExpectSlices(c, 0, {{0, 13, 1}});
  EXPECT_EQ(c.total_postings, 13);
}

TEST_F(Compile, AbsentKeywordsBetweenRangesJoinSpans) {
  CompiledBatch c = CompileOk(OneItem({{6, 6}, {10, 10}}));
  ExpectSlices(c, 0, {{10, 12, 1}});
  EXPECT_EQ(c.max_score[0], 2);
  c = CompileOk(OneItem({{6, 9}, {100, 200}}));
  ExpectSlices(c, 0, {{10, 11, 1}});
  EXPECT_EQ(c.max_score[0], 1);
}

TEST_F(Compile, SameKeywordInTwoItems) {
  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{2, 2}}, 1);
  batch.AddItem(std::vector<KeywordRange>{{2, 2}}, 3);
  CompiledBatch c = CompileOk(batch);
  ExpectSlices(c, 0, {{4, 6, 1}, {4, 6, 3}});
  EXPECT_EQ(c.max_score[0], 4);
  EXPECT_EQ(c.total_postings, 4);
}

TEST_F(Compile, EmptyAndUnmatchedQueries) {
  QueryBatch batch;
  batch.BeginQuery();                                        // no items
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{7, 9}}, 100);     // keywords absent
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{}, 5);             // item with no ranges
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{11, INT32_MAX - 1}});
  CompiledBatch c = CompileOk(batch);
  ASSERT_EQ(c.num_queries(), 4);
  EXPECT_TRUE(c.slices.empty());
  EXPECT_EQ(c.total_postings, 0);
  EXPECT_EQ(c.max_score, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(c.query_slice_offsets, (std::vector<int64_t>{0, 0, 0, 0, 0}));

  QueryBatch none;
  c = CompileOk(none);
  EXPECT_EQ(c.num_queries(), 0);
  EXPECT_TRUE(c.max_score.empty());
}

TEST_F(Compile, SplitLengths) {
  Rebuild(1);
  CompiledBatch c = CompileOk(OneItem({{INT32_MIN, INT32_MAX}}));
  ASSERT_EQ(c.slices.size(), 13u);
  for (int64_t i = 0; i < 13; ++i) {
    EXPECT_EQ(c.slices[static_cast<std::size_t>(i)].begin, i);
    EXPECT_EQ(c.slices[static_cast<std::size_t>(i)].end, i + 1);
  }
  Rebuild(3);
  c = CompileOk(OneItem({{INT32_MIN, INT32_MAX}}, 7));
  ExpectSlices(c, 0, {{0, 3, 7}, {3, 6, 7}, {6, 9, 7}, {9, 12, 7}, {12, 13, 7}});
  c = CompileOk(OneItem({{1, 2}, {10, 10}}));
  ExpectSlices(c, 0, {{2, 5, 1}, {5, 6, 1}, {11, 12, 1}});
  EXPECT_EQ(c.total_postings, 5);
}

TEST(CompileSplit, LongSpansAreChunked) {
  Csr csr;
  for (int o = 0; o < 10; ++o) csr.Add({5});
  for (int o = 0; o < 4; ++o) csr.Add({6, 5});
  // Keyword 5: [0, 14), keyword 6: [14, 18).
  auto compile = [&](int32_t split) {
    IndexOptions options;
    options.split_length = split;
    InvertedIndex index;
    EXPECT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
    QueryBatch batch;
    batch.BeginQuery();
    batch.AddItem(std::vector<KeywordRange>{{0, 10}}, 3);
    CompiledBatch c;
    EXPECT_TRUE(CompileBatch(index, batch.View(), &c).ok());
    EXPECT_EQ(c.total_postings, 18);
    EXPECT_EQ(c.max_score[0], 3 * 2);
    std::vector<std::pair<int64_t, int64_t>> slices;
    for (const ListSlice& s : c.slices) {
      EXPECT_EQ(s.weight, 3);
      slices.emplace_back(s.begin, s.end);
    }
    return slices;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(compile(kDefaultSplitLength), (V{{0, 18}}));
  EXPECT_EQ(compile(3), (V{{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 18}}));
  EXPECT_EQ(compile(14), (V{{0, 14}, {14, 18}}));
  EXPECT_EQ(compile(13), (V{{0, 13}, {13, 18}}));
  EXPECT_EQ(compile(18), (V{{0, 18}}));
  EXPECT_EQ(compile(1).size(), 18u);
}

// On random data: the slices, weighted, cover each List Array position
// exactly as often as the items' keyword sets say, and none is too long;
// also with the split given to CompileBatch (kUnsplitSlices: whole spans, as
// the tiled GPU matcher takes them).  A slice's recorded list, when known
// (always for whole spans), holds its first position.  The random items
// come in any order, so the keyword search runs both from the last span and
// from scratch.
TEST(CompileSplit, SlicesCoverTheItemsKeywords) {
  testing::DataSpec data;
  data.objects = 400;
  data.zipf = 1.2;
  Csr csr = testing::RandomCsr(17, data);
  for (int64_t split : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{kDefaultSplitLength}, kUnsplitSlices}) {
    IndexOptions options;
    options.split_length = split == kUnsplitSlices ? 2 : static_cast<int32_t>(split);
    InvertedIndex index;
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
    testing::QuerySpec spec;
    spec.max_weight = 4;
    spec.max_ranges = 4;
    QueryBatch batch = testing::RandomBatch(18, spec);
    const genie_query_batch view = batch.View();
    CompiledBatch c;
    ASSERT_TRUE((split == kUnsplitSlices ? CompileBatch(index, view, &c, split)
                                         : CompileBatch(index, view, &c)).ok());
    ASSERT_EQ(c.num_queries(), batch.num_queries());
    const auto offsets = index.keyword_offsets();
    const auto p = static_cast<std::size_t>(index.num_postings());
    int64_t total = 0;
    for (int32_t q = 0; q < view.n_queries; ++q) {
      std::vector<int64_t> got(p, 0), want(p, 0);
      for (int64_t s = c.query_slice_offsets[q]; s < c.query_slice_offsets[q + 1]; ++s) {
        const ListSlice& slice = c.slices[static_cast<std::size_t>(s)];
        EXPECT_LT(slice.begin, slice.end);
        EXPECT_LE(slice.end - slice.begin, split);
        if (split == kUnsplitSlices) {
          EXPECT_GE(slice.list, 0);
        }
        if (slice.list >= 0) {
          EXPECT_LE(offsets[static_cast<std::size_t>(slice.list)], slice.begin);
          EXPECT_GT(offsets[static_cast<std::size_t>(slice.list) + 1], slice.begin);
        }
        for (int64_t i = slice.begin; i < slice.end; ++i) got[static_cast<std::size_t>(i)] += slice.weight;
        total += slice.end - slice.begin;
      }
      for (int64_t item = view.query_offsets[q]; item < view.query_offsets[q + 1]; ++item) {
        for (std::size_t kw = 0; kw < index.keywords().size(); ++kw) {
          bool inside = false;
          for (int64_t r = view.item_offsets[item]; r < view.item_offsets[item + 1]; ++r) {
            inside = inside || (view.ranges_lo[r] <= index.keywords()[kw] &&
                                index.keywords()[kw] <= view.ranges_hi[r]);
          }
          if (!inside) continue;
          for (int64_t i = offsets[kw]; i < offsets[kw + 1]; ++i) {
            want[static_cast<std::size_t>(i)] += view.item_weights[item];
          }
        }
      }
      EXPECT_EQ(got, want) << "query " << q << ", split_length " << split;
    }
    EXPECT_EQ(total, c.total_postings);
  }
}

}  // namespace
}  // namespace genie

namespace genie {
namespace {

// Heavily weighted disjoint items: the sum of weight x covered keywords
// exceeds INT32_MAX, but an object's keywords are each in one item only, so
// max_object_keywords x the largest weight on one keyword bounds the score.
TEST(CompileBound, DisjointHeavyItemsUseTheKeywordWeightBound) {
  testing::Csr csr;
  std::vector<int32_t> wide(1000);
  for (int32_t i = 0; i < 1000; ++i) wide[static_cast<std::size_t>(i)] = i;
  csr.Add(wide);  // object 0: keywords 0..999
  std::vector<int32_t> others;
  for (int32_t i = 1000; i < 3000; ++i) others.push_back(i);
  csr.Add(others);  // object 1: keywords 1000..2999, so max_object_keywords = 2000
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  ASSERT_EQ(index.max_object_keywords(), 2000);

  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{0, 999}}, 1000000);
  batch.AddItem(std::vector<KeywordRange>{{1000, 1999}}, 1000000);
  batch.AddItem(std::vector<KeywordRange>{{2000, 2999}}, 1000000);
  CompiledBatch compiled;
  ASSERT_TRUE(CompileBatch(index, batch.View(), &compiled).ok());
  EXPECT_EQ(compiled.max_score[0], 2000LL * 1000000);  // not 3e9

  // Overlapping heavy items really can exceed the range: still refused.
  QueryBatch overlapping;
  overlapping.BeginQuery();
  overlapping.AddItem(std::vector<KeywordRange>{{0, 2999}}, 1000000);
  overlapping.AddItem(std::vector<KeywordRange>{{0, 2999}}, 1000000);
  EXPECT_EQ(CompileBatch(index, overlapping.View(), &compiled).code(), GENIE_INVALID_ARGUMENT);

  // The bound is exact where it matters: the engines' scores stay within it.
  auto engine = MakeReferenceEngine();
  ASSERT_TRUE(engine->Upload(std::make_shared<InvertedIndex>(index)).ok());
  TopKResults results;
  ASSERT_TRUE(engine->Search(batch.View(), 2, &results).ok());
  ASSERT_EQ(results.hits.size(), 2u);
  EXPECT_EQ(results.hits[0].score, 2000000000);  // object 1: keywords 1000..2999, two items
  EXPECT_EQ(results.hits[1].score, 1000000000);
}

}  // namespace
}  // namespace genie

namespace genie {
namespace {

// Single-keyword items summed by the hash table: the same keyword in several
// items adds up, distinct keywords do not.
TEST(CompileBound, SingleKeywordItemsSumPerKeyword) {
  testing::Csr csr;
  csr.Add({1});
  csr.Add({2});
  csr.Add({4});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  QueryBatch batch;
  batch.BeginQuery();
  batch.AddItem(std::vector<KeywordRange>{{4, 4}, {1, 1}}, 5);
  batch.AddItem(std::vector<KeywordRange>{{2, 2}}, 7);
  batch.AddItem(std::vector<KeywordRange>{{1, 1}}, 2);  // keyword 1: 5 + 2
  batch.AddItem(std::vector<KeywordRange>{{2, 2}}, 3);  // keyword 2: 7 + 3, the most
  CompiledBatch compiled;
  ASSERT_TRUE(CompileBatch(index, batch.View(), &compiled).ok());
  // max_object_keywords (1) x the most weight on one keyword (10), below
  // the sum over items (22)
  EXPECT_EQ(compiled.max_score[0], 10);
}

// The parallel compilation gives CompileBatch's result, whatever the mix of
// wide ranges, single keywords, weights and empty queries.
TEST(CompileBatchParallel, EqualsCompileBatch) {
  std::mt19937 rng(17);
  testing::Csr csr;
  for (int o = 0; o < 3000; ++o) {
    std::vector<int32_t> kw;
    for (int j = 0; j < 12; ++j) kw.push_back(static_cast<int32_t>(rng() % 5000));
    csr.Add(kw);
  }
  IndexOptions options;
  options.split_length = 7;
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
  QueryBatch batch;
  for (int q = 0; q < 300; ++q) {
    batch.BeginQuery();
    const int items = q % 17 == 0 ? 0 : 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < items; ++i) {
      std::vector<KeywordRange> ranges;
      for (int r = 0; r < 1 + static_cast<int>(rng() % 3); ++r) {
        const int32_t lo = static_cast<int32_t>(rng() % 5200);
        ranges.push_back({lo, q % 3 == 0 ? lo : lo + static_cast<int32_t>(rng() % 30)});
      }
      batch.AddItem(ranges, 1 + static_cast<int32_t>(rng() % 9));
    }
  }
  CompiledBatch serial, parallel;
  ASSERT_TRUE(CompileBatch(index, batch.View(), &serial).ok());
  ASSERT_TRUE(CompileBatchParallel(index, batch.View(), 4, &parallel).ok());
  EXPECT_EQ(serial.query_slice_offsets, parallel.query_slice_offsets);
  EXPECT_EQ(serial.max_score, parallel.max_score);
  EXPECT_EQ(serial.total_postings, parallel.total_postings);
  ASSERT_EQ(serial.slices.size(), parallel.slices.size());
  for (std::size_t i = 0; i < serial.slices.size(); ++i) {
    EXPECT_EQ(serial.slices[i].begin, parallel.slices[i].begin);
    EXPECT_EQ(serial.slices[i].end, parallel.slices[i].end);
    EXPECT_EQ(serial.slices[i].weight, parallel.slices[i].weight);
    EXPECT_EQ(serial.slices[i].list, parallel.slices[i].list);
  }
  // a bad query is reported with its number in the whole batch
  QueryBatch bad = batch;
  bad.item_weights[bad.item_weights.size() - 1] = 0;
  Status s = CompileBatchParallel(index, bad.View(), 4, &parallel);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), CompileBatch(index, bad.View(), &serial).message());
  // queries without items, item_offsets NULL (a valid batch): cut into
  // sub-batches all the same, each query empty with bound 0
  const std::vector<int64_t> zeros(301, 0);
  const genie_query_batch itemless{300, zeros.data(), nullptr, nullptr, nullptr, nullptr};
  ASSERT_TRUE(ValidateBatchOffsets(itemless).ok());
  ASSERT_TRUE(CompileBatchParallel(index, itemless, 4, &parallel).ok());
  EXPECT_EQ(parallel.num_queries(), 300);
  EXPECT_TRUE(parallel.slices.empty());
  for (int64_t bound : parallel.max_score) EXPECT_EQ(bound, 0);
  SubBatchStorage storage;
  const genie_query_batch sub = SubBatch(itemless, 100, 200, &storage);
  EXPECT_EQ(sub.n_queries, 100);
  EXPECT_TRUE(ValidateBatch(sub).ok());
}

}  // namespace
}  // namespace genie

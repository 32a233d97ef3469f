// Shared helpers for the GoogleTest suites of core/ and gpu/ (header-only
// CMake target genie_test_util): random data, a brute-force oracle that
// never looks at the index, and result comparison.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/query.hpp"

namespace genie {
namespace testing {

// Objects in CSR form, as the C API takes them.
struct Csr {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;

  int32_t size() const { return static_cast<int32_t>(offsets.size() - 1); }
  void Add(const std::vector<int32_t>& object) {
    keywords.insert(keywords.end(), object.begin(), object.end());
    offsets.push_back(static_cast<int64_t>(keywords.size()));
  }
  std::vector<int32_t> Object(int32_t o) const {
    return std::vector<int32_t>(keywords.begin() + offsets[o], keywords.begin() + offsets[o + 1]);
  }
};

// Draws from {0, .., n-1} with P(i) proportional to 1 / (i + 1)^s.
class Zipf {
 public:
  Zipf(int32_t n, double s) : cdf_(static_cast<std::size_t>(n)) {
    double sum = 0;
    for (int32_t i = 0; i < n; ++i) {
      sum += 1.0 / std::pow(i + 1.0, s);
      cdf_[static_cast<std::size_t>(i)] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  template <typename Rng>
  int32_t operator()(Rng& rng) const {
    double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    if (it == cdf_.end()) --it;
    return static_cast<int32_t>(it - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

struct DataSpec {
  int32_t objects = 500;
  int32_t max_length = 12;      // keywords per object drawn from [0, max_length]
  int32_t universe = 200;       // distinct keyword ranks
  double zipf = 1.0;            // skew of keyword popularity (0: uniform)
  int32_t keyword_base = -50;   // rank r becomes keyword_base + r * keyword_step
  int32_t keyword_step = 1;
  double empty_fraction = 0.1;  // objects with no keywords
  double duplicate_rate = 0.1;  // chance a keyword is repeated within an object
};

inline Csr RandomCsr(uint32_t seed, const DataSpec& spec) {
  std::mt19937 rng(seed);
  Zipf zipf(spec.universe, spec.zipf);
  std::uniform_int_distribution<int32_t> length(0, spec.max_length);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Csr csr;
  for (int32_t o = 0; o < spec.objects; ++o) {
    std::vector<int32_t> object;
    if (unit(rng) >= spec.empty_fraction) {
      const int32_t len = length(rng);
      for (int32_t j = 0; j < len; ++j) {
        const auto keyword = static_cast<int32_t>(
            static_cast<int64_t>(spec.keyword_base) +
            static_cast<int64_t>(zipf(rng)) * spec.keyword_step);
        object.push_back(keyword);
        if (unit(rng) < spec.duplicate_rate) object.push_back(keyword);
      }
      std::shuffle(object.begin(), object.end(), rng);
    }
    csr.Add(object);
  }
  return csr;
}

struct QuerySpec {
  int32_t queries = 20;
  int32_t max_items = 5;     // items per query drawn from [0, max_items]
  int32_t max_ranges = 3;    // ranges per item drawn from [1, max_ranges]
  int32_t max_width = 4;     // a range spans [lo, lo + width), width in [1, max_width]
  int32_t lo_min = -60;      // range starts drawn from [lo_min, lo_max]
  int32_t lo_max = 160;
  int32_t max_weight = 1;    // weights drawn from [1, max_weight]
};

inline QueryBatch RandomBatch(uint32_t seed, const QuerySpec& spec) {
  std::mt19937 rng(seed);
  auto pick = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  QueryBatch batch;
  for (int32_t q = 0; q < spec.queries; ++q) {
    batch.BeginQuery();
    const int32_t items = pick(0, spec.max_items);
    for (int32_t i = 0; i < items; ++i) {
      std::vector<KeywordRange> ranges;
      const int32_t n_ranges = pick(1, spec.max_ranges);
      for (int32_t r = 0; r < n_ranges; ++r) {
        const int32_t lo = pick(spec.lo_min, spec.lo_max);
        ranges.push_back({lo, lo + pick(1, spec.max_width) - 1});
      }
      batch.AddItem(ranges, pick(1, spec.max_weight));
    }
  }
  return batch;
}

// The match-count model evaluated directly on the objects, never through an
// index: score = sum over items of weight * |distinct object keywords that
// fall in any of the item's ranges|.
inline TopKResults BruteForce(const Csr& csr, const genie_query_batch& batch, int32_t k) {
  std::vector<std::vector<int32_t>> objects;
  for (int32_t o = 0; o < csr.size(); ++o) {
    std::vector<int32_t> object = csr.Object(o);
    std::sort(object.begin(), object.end());
    object.erase(std::unique(object.begin(), object.end()), object.end());
    objects.push_back(std::move(object));
  }
  TopKResults results;
  for (int32_t q = 0; q < batch.n_queries; ++q) {
    std::vector<Hit> hits;
    for (int32_t o = 0; o < csr.size(); ++o) {
      int64_t score = 0;
      for (int64_t item = batch.query_offsets[q]; item < batch.query_offsets[q + 1]; ++item) {
        const int64_t weight = batch.item_weights ? batch.item_weights[item] : 1;
        for (int32_t keyword : objects[static_cast<std::size_t>(o)]) {
          bool inside = false;
          for (int64_t r = batch.item_offsets[item]; r < batch.item_offsets[item + 1]; ++r) {
            inside = inside || (batch.ranges_lo[r] <= keyword && keyword <= batch.ranges_hi[r]);
          }
          if (inside) score += weight;
        }
      }
      if (score >= 1) hits.push_back({o, static_cast<int32_t>(score)});
    }
    std::sort(hits.begin(), hits.end(), HitBefore);
    if (hits.size() > static_cast<std::size_t>(k)) hits.resize(static_cast<std::size_t>(k));
    results.hits.insert(results.hits.end(), hits.begin(), hits.end());
    results.query_offsets.push_back(static_cast<int64_t>(results.hits.size()));
  }
  return results;
}

inline std::shared_ptr<const InvertedIndex> MakeIndex(const Csr& csr, int32_t split_length = kDefaultSplitLength) {
  auto index = std::make_shared<InvertedIndex>();
  IndexOptions options;
  options.split_length = split_length;
  Status status = InvertedIndex::Build(csr.offsets, csr.keywords, options, index.get());
  EXPECT_TRUE(status.ok()) << status.message();
  return index;
}

inline TopKResults Search(Engine& engine, std::shared_ptr<const InvertedIndex> index,
                          const genie_query_batch& batch, int32_t k) {
  TopKResults results;
  Status status = engine.Upload(std::move(index));
  EXPECT_TRUE(status.ok()) << status.message();
  status = engine.Search(batch, k, &results);
  EXPECT_TRUE(status.ok()) << status.message();
  return results;
}

inline std::unique_ptr<Engine> MakeCpu(int32_t threads, uint64_t budget = 0) {
  EngineOptions options;
  options.threads = threads;
  options.memory_budget_bytes = budget;
  return MakeCpuEngine(options);
}

// The batch's queries `times` over, so that the engines' threads share the
// work and reuse their state across queries.
inline QueryBatch Repeat(const QueryBatch& batch, int times) {
  QueryBatch out;
  for (int t = 0; t < times; ++t) {
    for (int32_t q = 0; q < batch.num_queries(); ++q) {
      out.BeginQuery();
      for (int64_t i = batch.query_offsets[q]; i < batch.query_offsets[q + 1]; ++i) {
        const auto first = static_cast<std::size_t>(batch.item_offsets[i]);
        const auto count = static_cast<std::size_t>(batch.item_offsets[i + 1]) - first;
        out.AddItem(Span<KeywordRange>(batch.ranges.data() + first, count),
                    batch.item_weights[static_cast<std::size_t>(i)]);
      }
    }
  }
  return out;
}

inline TopKResults Repeat(const TopKResults& results, int times) {
  TopKResults out;
  for (int t = 0; t < times; ++t) {
    for (int32_t q = 0; q < results.num_queries(); ++q) {
      Span<Hit> hits = results.Query(q);
      out.hits.insert(out.hits.end(), hits.begin(), hits.end());
      out.query_offsets.push_back(static_cast<int64_t>(out.hits.size()));
    }
  }
  return out;
}

inline std::string Describe(Span<Hit> hits) {
  std::ostringstream out;
  for (const Hit& h : hits) out << "(" << h.object << ":" << h.score << ") ";
  return out.str();
}

inline ::testing::AssertionResult SameResults(const TopKResults& expected, const TopKResults& actual) {
  if (expected.num_queries() != actual.num_queries()) {
    return ::testing::AssertionFailure() << "query counts differ: " << expected.num_queries()
                                         << " vs " << actual.num_queries();
  }
  for (int32_t q = 0; q < expected.num_queries(); ++q) {
    Span<Hit> e = expected.Query(q), a = actual.Query(q);
    bool same = e.size() == a.size();
    for (std::size_t i = 0; same && i < e.size(); ++i) {
      same = e[i].object == a[i].object && e[i].score == a[i].score;
    }
    if (!same) {
      return ::testing::AssertionFailure() << "query " << q << "\n expected " << Describe(e)
                                           << "\n actual   " << Describe(a);
    }
  }
  if (expected.hits.size() != actual.hits.size()) {
    return ::testing::AssertionFailure() << "hit arrays differ in size";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing
}  // namespace genie

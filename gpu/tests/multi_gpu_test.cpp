// Every GPU of the host (genie/multi_device.hpp): engines, vector scans and
// string scans replicated and sharded over the GPUs equal the CPU engine hit for hit,
// through the C API's device mask as the extension calls it; a GPU left
// out of the mask is not touched; a GPU that fails mid-batch (simulated)
// leaves the answers exact.  Skipped where fewer than two GPUs are usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/genie.h"
#include "genie/gpu_engine.hpp"
#include "genie/multi_device.hpp"
#include "genie/test_util.hpp"
#include "genie/vector_fixture.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;

// Results of the C API as the core's, for SameResults.
TopKResults FromC(const genie_results* r) {
  TopKResults out;
  out.query_offsets.assign(r->query_offsets, r->query_offsets + r->n_queries + 1);
  for (int64_t i = 0; i < r->query_offsets[r->n_queries]; ++i) out.hits.push_back({r->objects[i], r->scores[i]});
  return out;
}

TopKResults CSearch(genie_engine_kind kind, uint64_t mask, int32_t placement, uint64_t budget, const genie_index* index,
                    const genie_query_batch& batch, int32_t k) {
  genie_engine_options options{};
  options.device_mask = mask;
  options.placement = placement;
  options.memory_budget_bytes = budget;
  genie_engine* engine = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_engine_create(kind, &options, &engine, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
  genie_results* results = nullptr;
  EXPECT_EQ(genie_engine_search(engine, &batch, k, &results, &err), GENIE_OK) << err.message;
  if (results == nullptr) {
    genie_engine_free(engine);
    return TopKResults();
  }
  TopKResults out = FromC(results);
  genie_results_free(results);
  genie_engine_free(engine);
  return out;
}

// Match counts: every placement, all GPUs and two of them, batches of 1 to
// 300 queries, k from 1 to beyond a shard; skewed keywords for ties.
TEST(MultiGpu, EnginesEqualTheCpuEngine) {
  SKIP_WITHOUT_TWO_GPUS();
  DataSpec data;
  data.objects = 200003;
  data.universe = 3000;
  data.max_length = 30;
  Csr csr = RandomCsr(7, data);
  genie_index* index = nullptr;
  genie_error err{};
  ASSERT_EQ(genie_index_create(csr.offsets.data(), data.objects, csr.keywords.data(), nullptr, &index, &err), GENIE_OK);
  for (int32_t queries : {1, 37, 300}) {
    QuerySpec spec;
    spec.queries = queries;
    spec.max_items = 12;
    spec.max_weight = 3;
    spec.lo_max = 3000;
    QueryBatch batch = RandomBatch(100 + static_cast<uint32_t>(queries), spec);
    for (int32_t k : {1, 10, 1000, 150000}) {
      const TopKResults expected = CSearch(GENIE_ENGINE_CPU, 0, 0, 0, index, batch.View(), k);
      for (int32_t placement : {GENIE_PLACEMENT_AUTO, GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
        for (uint64_t mask : {~uint64_t{0}, uint64_t{3}}) {
          EXPECT_TRUE(SameResults(expected, CSearch(GENIE_ENGINE_GPU, mask, placement, 0, index, batch.View(), k)))
              << "queries " << queries << " k " << k << " placement " << placement << " mask " << mask;
        }
      }
    }
  }
  genie_index_free(index);
}

// A GPU engine that loses its device from the nth search on.
class LosesItsDevice final : public Engine {
 public:
  LosesItsDevice(std::unique_ptr<Engine> gpu, int after) : gpu_(std::move(gpu)), after_(after) {}
  genie_engine_kind kind() const override { return gpu_->kind(); }
  Status Upload(std::shared_ptr<const InvertedIndex> index) override { return gpu_->Upload(std::move(index)); }
  Status Drop() override { return gpu_->Drop(); }
  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    if (searches_++ >= after_) return Status::DeviceError("simulated: the GPU fell off the bus");
    return gpu_->Search(batch, k, out);
  }
  Status MatchSet(SetPredicate p, Span<int32_t> keywords, Span<int32_t> sizes, std::vector<int32_t>* out) override {
    return gpu_->MatchSet(p, keywords, sizes, out);
  }

 private:
  std::unique_ptr<Engine> gpu_;
  int after_;
  int searches_ = 0;
};

TEST(MultiGpu, AGpuLostMidBatchLeavesAnswersExact) {
  SKIP_WITHOUT_TWO_GPUS();
  DataSpec data;
  data.objects = 50000;
  data.universe = 1000;
  Csr csr = RandomCsr(9, data);
  auto index = testing::MakeIndex(csr);
  QuerySpec spec;
  spec.queries = 64;
  spec.lo_max = 1000;
  QueryBatch batch = RandomBatch(10, spec);
  auto cpu = testing::MakeCpu(0);
  const TopKResults expected = testing::Search(*cpu, index, batch.View(), 20);
  for (Placement placement : {Placement::kReplicate, Placement::kShard}) {
    std::vector<DeviceMember> members;
    for (int32_t d = 0; d < UsableGpuCount(); ++d) {
      EngineOptions options;
      options.device_ordinal = d;
      Status status;
      DeviceMember m;
      m.device = d;
      m.engine = MakeGpuEngine(options, &status);
      ASSERT_TRUE(status.ok()) << status.message();
      if (d == 1) m.engine = std::make_unique<LosesItsDevice>(std::move(m.engine), 1);
      members.push_back(std::move(m));
    }
    MultiDeviceEngine group(std::move(members), [] { return testing::MakeCpu(0); }, placement);
    ASSERT_TRUE(group.Upload(index).ok());
    for (int round = 0; round < 3; ++round) {
      TopKResults got;
      ASSERT_TRUE(group.Search(batch.View(), 20, &got).ok());
      EXPECT_TRUE(SameResults(expected, got)) << "round " << round;
    }
    const auto report = group.Report();
    EXPECT_TRUE(report[1].dropped);
    EXPECT_FALSE(report[0].dropped);
    EXPECT_GE(report[0].searches, 3u);
  }
}

std::vector<std::pair<double, int32_t>> VectorRows(const genie_vector_results* r) {
  std::vector<std::pair<double, int32_t>> rows;
  for (int64_t i = 0; i < r->query_offsets[r->n_queries]; ++i) rows.emplace_back(r->distances[i], r->objects[i]);
  return rows;
}

// Exact kNN: replicated and sharded, with ties (small integers, duplicates),
// excluded rows and k beyond a shard, equal the CPU's rows, distances and
// offsets; a mask of one GPU runs on that GPU alone.
TEST(MultiGpu, VectorScansEqualTheCpu) {
  SKIP_WITHOUT_TWO_GPUS();
  std::mt19937 rng(11);
  const int32_t n = 30011, dim = 24;
  for (testing::VectorShape shape : {testing::VectorShape::kGaussian, testing::VectorShape::kSmallIntegers,
                                     testing::VectorShape::kDuplicates}) {
    const std::vector<float> values = testing::RandomVectors(&rng, shape, n, dim);
    genie_vectors* set = nullptr;
    genie_error err{};
    ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK) << err.message;
    std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
    for (int32_t i = 0; i < n; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
    for (int32_t nq : {1, 5, 130}) {
      const std::vector<float> queries = testing::RandomVectors(&rng, shape, nq, dim);
      for (int32_t k : {1, 10, 20000}) {
        genie_vector_scan scan{};
        scan.n_queries = nq;
        scan.queries = queries.data();
        scan.k = k;
        scan.excluded = excluded.data();
        genie_vector_results* expected = nullptr;
        ASSERT_EQ(genie_vectors_scan(set, GENIE_ENGINE_CPU, nullptr, &scan, &expected, &err), GENIE_OK);
        for (int32_t placement : {GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
          for (uint64_t mask : {~uint64_t{0}, uint64_t{2}}) {
            genie_engine_options options{};
            options.device_mask = mask;
            options.placement = placement;
            genie_vector_results* got = nullptr;
            ASSERT_EQ(genie_vectors_scan(set, GENIE_ENGINE_GPU, &options, &scan, &got, &err), GENIE_OK) << err.message;
            EXPECT_EQ(got->device, GENIE_ENGINE_GPU);
            EXPECT_EQ(std::vector<int64_t>(expected->query_offsets, expected->query_offsets + nq + 1),
                      std::vector<int64_t>(got->query_offsets, got->query_offsets + nq + 1));
            EXPECT_EQ(VectorRows(expected), VectorRows(got))
                << testing::ShapeName(shape) << " nq " << nq << " k " << k << " placement " << placement << " mask " << mask;
            genie_vector_results_free(got);
          }
        }
        genie_vector_results_free(expected);
      }
    }
    EXPECT_GT(genie_vectors_device_bytes(set), 0u);
    genie_vectors_free(set);
  }
}

std::vector<std::pair<int32_t, int32_t>> CodeRows(const genie_code_results* r) {
  std::vector<std::pair<int32_t, int32_t>> rows;
  for (int64_t i = 0; i < r->query_offsets[r->n_queries]; ++i) rows.emplace_back(r->distances[i], r->objects[i]);
  return rows;
}

// Hamming kNN: replicated and sharded, with many ties (codes of 20 bits:
// distances 0 to 20) and of 200 bits, excluded rows and k beyond a shard,
// equal the CPU's rows, distances and offsets; a mask of one GPU (the
// second) runs on it alone.
TEST(MultiGpu, CodeScansEqualTheCpu) {
  SKIP_WITHOUT_TWO_GPUS();
  std::mt19937_64 rng(17);
  const int32_t n = 30011;
  for (int32_t bits : {20, 200}) {
    genie_codes* set = nullptr;
    uint64_t* rows = nullptr;
    genie_error err{};
    ASSERT_EQ(genie_codes_create_unsealed(n, bits, 1, &set, &rows, &err), GENIE_OK) << err.message;
    const int32_t words = genie_code_words(bits);
    const uint64_t last = bits % 64 == 0 ? ~uint64_t{0} : (uint64_t{1} << (bits % 64)) - 1;
    auto random_code = [&](uint64_t* code) {
      for (int32_t w = 0; w < words; ++w) code[w] = rng();
      code[words - 1] &= last;
    };
    for (int32_t i = 0; i < n; ++i) random_code(rows + static_cast<std::size_t>(i) * words);
    ASSERT_EQ(genie_codes_seal(set, &err), GENIE_OK) << err.message;
    std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
    for (int32_t i = 0; i < n; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
    for (int32_t nq : {0, 1, 5, 130}) {
      std::vector<uint64_t> queries(static_cast<std::size_t>(std::max(nq, 1)) * words);
      for (int32_t q = 0; q < nq; ++q) random_code(queries.data() + static_cast<std::size_t>(q) * words);
      for (int32_t k : {1, 10, 20000}) {
        genie_code_scan scan{};
        scan.n_queries = nq;
        scan.queries = queries.data();
        scan.k = k;
        scan.excluded = excluded.data();
        genie_code_results* expected = nullptr;
        ASSERT_EQ(genie_codes_scan(set, GENIE_ENGINE_CPU, nullptr, &scan, &expected, &err), GENIE_OK);
        for (int32_t placement : {GENIE_PLACEMENT_AUTO, GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
          for (uint64_t mask : {~uint64_t{0}, uint64_t{2}}) {
            genie_engine_options options{};
            options.device_mask = mask;
            options.placement = placement;
            genie_code_results* got = nullptr;
            ASSERT_EQ(genie_codes_scan(set, GENIE_ENGINE_GPU, &options, &scan, &got, &err), GENIE_OK) << err.message;
            EXPECT_EQ(got->device, GENIE_ENGINE_GPU);
            EXPECT_EQ(std::vector<int64_t>(expected->query_offsets, expected->query_offsets + nq + 1),
                      std::vector<int64_t>(got->query_offsets, got->query_offsets + nq + 1));
            EXPECT_EQ(CodeRows(expected), CodeRows(got))
                << "bits " << bits << " nq " << nq << " k " << k << " placement " << placement << " mask " << mask;
            genie_code_results_free(got);
          }
        }
        genie_code_results_free(expected);
      }
    }
    EXPECT_GT(genie_codes_device_bytes(set), 0u);
    genie_codes_free(set);
  }
}

// UTF-8 words over a small alphabet (many ties), as text and offsets.
struct Words {
  std::string text;
  std::vector<int64_t> offsets{0};
  void Add(const std::string& w) {
    text += w;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  int32_t size() const { return static_cast<int32_t>(offsets.size()) - 1; }
};

Words RandomWords(std::mt19937* rng, int32_t n) {
  static const char* const letters[] = {"a", "b", "c", "d", "\xc3\xa9"};  // and e-acute
  Words words;
  for (int32_t i = 0; i < n; ++i) {
    std::string w;
    const int32_t length = 1 + static_cast<int32_t>((*rng)() % 12);
    for (int32_t j = 0; j < length; ++j) w += letters[(*rng)() % 5];
    words.Add(w);
  }
  return words;
}

std::vector<std::pair<int32_t, int32_t>> StringRows(const genie_string_results* r) {
  std::vector<std::pair<int32_t, int32_t>> rows;
  for (int64_t i = 0; i < r->query_offsets[r->n_queries]; ++i) rows.emplace_back(r->distances[i], r->objects[i]);
  return rows;
}

// Edit distance kNN: replicated and sharded, with caps, excluded strings and
// k beyond a shard, equal the CPU's rows (distance, length, id order).
TEST(MultiGpu, StringScansEqualTheCpu) {
  SKIP_WITHOUT_TWO_GPUS();
  std::mt19937 rng(13);
  const Words words = RandomWords(&rng, 40009);
  genie_strings* set = nullptr;
  genie_error err{};
  ASSERT_EQ(genie_strings_create(words.text.data(), words.offsets.data(), words.size(), &set, &err), GENIE_OK)
      << err.message;
  std::vector<uint8_t> excluded(static_cast<std::size_t>(words.size()), 0);
  for (int32_t i = 0; i < words.size(); i += 5) excluded[static_cast<std::size_t>(i)] = 1;
  for (int32_t nq : {1, 7, 200}) {
    const Words queries = RandomWords(&rng, nq);
    std::vector<int32_t> caps(static_cast<std::size_t>(nq));
    for (int32_t q = 0; q < nq; ++q) caps[static_cast<std::size_t>(q)] = q % 3 == 0 ? 2 : -1;
    for (int32_t k : {1, 10, 25000}) {
      for (bool with_caps : {false, true}) {
        genie_string_scan scan{};
        scan.n_queries = nq;
        scan.query_text = queries.text.data();
        scan.query_text_offsets = queries.offsets.data();
        scan.k = k;
        scan.caps = with_caps ? caps.data() : nullptr;
        scan.excluded = excluded.data();
        genie_string_results* expected = nullptr;
        ASSERT_EQ(genie_strings_scan(set, GENIE_ENGINE_CPU, nullptr, &scan, &expected, &err), GENIE_OK);
        for (int32_t placement : {GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD}) {
          genie_engine_options options{};
          options.device_mask = ~uint64_t{0};
          options.placement = placement;
          genie_string_results* got = nullptr;
          ASSERT_EQ(genie_strings_scan(set, GENIE_ENGINE_GPU, &options, &scan, &got, &err), GENIE_OK) << err.message;
          EXPECT_EQ(std::vector<int64_t>(expected->query_offsets, expected->query_offsets + nq + 1),
                    std::vector<int64_t>(got->query_offsets, got->query_offsets + nq + 1));
          EXPECT_EQ(StringRows(expected), StringRows(got))
              << "nq " << nq << " k " << k << " caps " << with_caps << " placement " << placement;
          genie_string_results_free(got);
        }
        genie_string_results_free(expected);
      }
    }
  }
  EXPECT_GT(genie_strings_device_bytes(set), 0u);
  genie_strings_free(set);
}

}  // namespace
}  // namespace genie

// Range search over every GPU of the host (capi/src/range_group.hpp),
// through the C API's device mask as the extension calls it: each GPU holds
// the whole set and reads a share of each batch's plan, cut inside a query
// where one query reads enough.  The rows equal the CPU engine's, row for
// row and to the bit, for vectors (no list, a List of Superclusters, a list
// of the first objects with the rest pending; excluded rows; one query,
// batches, and more queries than one pass plans) and for strings; a mask of
// one GPU still searches on that one; a sharded set (each GPU reading its
// own objects, resident or, for vectors, streamed) as well.  Skipped where fewer than two GPUs
// are usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/genie.h"
#include "genie/vector_fixture.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::NearbyQueries;
using testing::RandomVectors;
using testing::VectorShape;

using Rows = RangeRows;

// The rows of call(&results, &err), a genie_*_within.
template <typename Call>
Rows Collect(const Call& call) {
  genie_range_results* r = nullptr;
  genie_error err{};
  EXPECT_EQ(call(&r, &err), GENIE_OK) << err.message;
  return TakeRangeRows(r);
}

// within(GENIE_ENGINE_GPU, &options, &results, &err), one genie_*_within,
// under a mask of every GPU (the set sharded, then replicated) and of GPU 1
// alone: the CPU engine's rows.
template <typename Within>
void ExpectEveryMaskAsTheCpu(const Rows& cpu, const Within& within, const std::string& what) {
  const std::pair<uint64_t, int32_t> masks[] = {
      {~uint64_t{0}, GENIE_PLACEMENT_SHARD}, {~uint64_t{0}, GENIE_PLACEMENT_AUTO}, {uint64_t{2}, GENIE_PLACEMENT_AUTO}};
  for (const auto& [mask, placement] : masks) {
    genie_engine_options options{};
    options.device_mask = mask;
    options.placement = placement;
    ExpectSameRangeRows(
        cpu, Collect([&](genie_range_results** r, genie_error* e) { return within(&options, r, e); }),
        what + " mask " + std::to_string(mask) + " placement " + std::to_string(placement));
  }
}

// A set of n x dim vectors and what the range tests search it with: a List
// of Superclusters of every object (K 32, N 8), a list of the first n -
// 5,000 (K 64, N 4; the rest as an index's pending rows), every 7th row
// excluded, and the first query's distances to every object, sorted (radii
// by rank).
struct RangeSet {
  genie_vectors* set = nullptr;
  genie_vectors* head = nullptr;
  genie_cluster_list* lsc = nullptr;
  genie_cluster_list* partial = nullptr;
  std::vector<uint8_t> excluded;
  std::vector<double> sorted;
  RangeSet() = default;
  RangeSet(const RangeSet&) = delete;
  RangeSet& operator=(const RangeSet&) = delete;
  ~RangeSet() {
    genie_cluster_list_free(lsc);
    genie_cluster_list_free(partial);
    genie_vectors_free(set);
    genie_vectors_free(head);
  }
};

void MakeRangeSet(const std::vector<float>& values, int32_t n, int32_t dim, const std::vector<float>& queries,
                  RangeSet* out) {
  genie_error err{};
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &out->set, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_create(values.data(), n - 5000, dim, &out->head, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_cluster_list(out->set, nullptr, 32, 8, GENIE_CLUSTER_CENTRES_SUM, nullptr, &out->lsc, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_cluster_list(out->head, nullptr, 64, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &out->partial, &err), GENIE_OK);
  out->excluded.assign(static_cast<std::size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 7) out->excluded[static_cast<std::size_t>(i)] = 1;
  for (int32_t o = 0; o < n; ++o)
    out->sorted.push_back(genie_l2_distance(queries.data(), values.data() + static_cast<std::size_t>(o) * dim, dim));
  std::sort(out->sorted.begin(), out->sorted.end());
}

TEST(MultiGpuRange, VectorsEqualTheCpuEngine) {
  SKIP_WITHOUT_TWO_GPUS();
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kDuplicates}) {
    std::mt19937 rng(900u + static_cast<uint32_t>(shape));
    // 600 queries, and 154 of them, read enough for two shares (2^28 floats
    // each), cut inside a query
    const int32_t n = 70001, dim = 64, nq = 600;
    const std::vector<float> values = RandomVectors(&rng, shape, n, dim);
    const std::vector<float> queries = NearbyQueries(&rng, values, n, dim, nq, 0.05f);
    RangeSet r;
    MakeRangeSet(values, n, dim, queries, &r);
    if (HasFatalFailure()) return;
    genie_vectors* set = r.set;
    const genie_cluster_list* lsc = r.lsc;
    const genie_cluster_list* partial = r.partial;
    const std::vector<uint8_t>& excluded = r.excluded;
    const std::vector<double>& all = r.sorted;
    for (double radius : {all[20], all[700], std::numeric_limits<double>::infinity()}) {
      for (const genie_cluster_list* list : {static_cast<const genie_cluster_list*>(nullptr),
                                             static_cast<const genie_cluster_list*>(lsc),
                                             static_cast<const genie_cluster_list*>(partial)}) {
        // an infinite radius answers every row: one batch size is enough
        for (int32_t count : radius == std::numeric_limits<double>::infinity() ? std::vector<int32_t>{3}
                                                                                : std::vector<int32_t>{1, 154, nq}) {
          genie_range_scan scan{};
          scan.n_queries = count;
          scan.queries = queries.data();
          scan.radius = radius;
          scan.excluded = count == 1 ? nullptr : excluded.data();
          scan.list = list;
          const std::string what = std::string("shape ") + testing::ShapeName(shape) + " radius " +
                                   std::to_string(radius) + " queries " + std::to_string(count) +
                                   (list == nullptr ? " no list" : list == lsc ? " lsc" : " partial");
          const Rows cpu = Collect([&](genie_range_results** r, genie_error* e) {
            return genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, r, e);
          });
          ASSERT_FALSE(cpu.offsets.empty()) << what;
          EXPECT_GT(cpu.offsets.back(), 0) << what;
          ExpectEveryMaskAsTheCpu(
              cpu,
              [&](const genie_engine_options* options, genie_range_results** r, genie_error* e) {
                return genie_vectors_within(set, GENIE_ENGINE_GPU, options, &scan, r, e);
              },
              what);
        }
      }
    }
    // the group's copies (a whole set on each GPU), and the copy on GPU 1
    // that the mask naming it alone searched
    EXPECT_GE(genie_vectors_device_bytes(set), 3 * values.size() * sizeof(float));
    // a mask naming no GPU of this host: GPU asked, the device's failure;
    // AUTO, the CPU engine's rows.  (Asking for that GPU
    // frees the one-GPU copy first, as any other GPU would; the group's
    // copies stay.)
    {
      genie_range_scan scan{};
      scan.n_queries = 5;
      scan.queries = queries.data();
      scan.radius = all[700];
      genie_engine_options options{};
      options.device_mask = uint64_t{1} << 63;
      genie_range_results* r = nullptr;
      genie_error e{};
      EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_GPU, &options, &scan, &r, &e), GENIE_DEVICE_UNAVAILABLE);
      genie_range_results_free(r);
      const Rows cpu = Collect([&](genie_range_results** out, genie_error* err2) {
        return genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, out, err2);
      });
      const Rows autod = Collect([&](genie_range_results** out, genie_error* err2) {
        return genie_vectors_within(set, GENIE_ENGINE_AUTO, &options, &scan, out, err2);
      });
      EXPECT_EQ(autod.device, GENIE_ENGINE_CPU);
      EXPECT_EQ(cpu.offsets, autod.offsets);
      EXPECT_EQ(cpu.objects, autod.objects);
      EXPECT_GE(genie_vectors_device_bytes(set), 2 * values.size() * sizeof(float));
    }
  }
}

// A sharded group (placement shard with every shard resident, or a budget
// that each GPU's shard is twice, so every shard streams): each GPU
// reads its own objects' part of every item; the rows equal the CPU
// engine's, to the bit, for no list, a List of Superclusters and a list of
// the first objects with the rest pending.
TEST(MultiGpuRange, ShardedVectorsEqualTheCpuEngine) {
  SKIP_WITHOUT_TWO_GPUS();
  std::mt19937 rng(950);
  const int32_t n = 50003, dim = 48, nq = 300;
  const std::vector<float> values = RandomVectors(&rng, VectorShape::kDuplicates, n, dim);
  const std::vector<float> queries = NearbyQueries(&rng, values, n, dim, nq, 0.05f);
  const uint64_t set_bytes = static_cast<uint64_t>(values.size()) * sizeof(float);
  RangeSet data;
  MakeRangeSet(values, n, dim, queries, &data);
  if (HasFatalFailure()) return;
  for (const bool streamed : {false, true}) {
    genie_engine_options options{};
    options.device_mask = ~uint64_t{0};
    options.placement = streamed ? GENIE_PLACEMENT_AUTO : GENIE_PLACEMENT_SHARD;
    options.memory_budget_bytes = streamed ? set_bytes / (2 * static_cast<uint64_t>(UsableGpuCount())) : 0;
    for (double radius : {data.sorted[30], data.sorted[900]}) {
      for (const genie_cluster_list* list : {static_cast<const genie_cluster_list*>(nullptr),
                                             static_cast<const genie_cluster_list*>(data.lsc),
                                             static_cast<const genie_cluster_list*>(data.partial)}) {
        for (int32_t count : {1, 37, nq}) {
          genie_range_scan scan{};
          scan.n_queries = count;
          scan.queries = queries.data();
          scan.radius = radius;
          scan.excluded = count == 1 ? nullptr : data.excluded.data();
          scan.list = list;
          const std::string what = std::string(streamed ? "streamed" : "resident") + " radius " +
                                   std::to_string(radius) + " queries " + std::to_string(count) +
                                   (list == nullptr ? " no list" : list == data.lsc ? " lsc" : " partial");
          const Rows cpu = Collect([&](genie_range_results** r, genie_error* e) {
            return genie_vectors_within(data.set, GENIE_ENGINE_CPU, nullptr, &scan, r, e);
          });
          EXPECT_GT(cpu.offsets.back(), 0) << what;
          ExpectSameRangeRows(cpu, Collect([&](genie_range_results** r, genie_error* e) {
                                return genie_vectors_within(data.set, GENIE_ENGINE_GPU, &options, &scan, r, e);
                              }),
                              what);
        }
      }
    }
    if (!streamed) {
      // the shards alone: half the set on each GPU, no whole copy made beside them
      EXPECT_GE(genie_vectors_device_bytes(data.set), set_bytes);
      EXPECT_LT(genie_vectors_device_bytes(data.set), set_bytes * 3 / 2);
    }
  }
}

// Words over a small alphabet (many ties), as text and offsets.
struct Words {
  std::string text;
  std::vector<int64_t> offsets{0};
  int32_t size() const { return static_cast<int32_t>(offsets.size()) - 1; }
};

Words RandomWords(std::mt19937* rng, int32_t n, int32_t max_length) {
  static const char* const letters[] = {"a", "b", "c", "d", "\xc3\xa9"};  // and e-acute
  Words words;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t length = 1 + static_cast<int32_t>((*rng)() % static_cast<uint32_t>(max_length));
    for (int32_t j = 0; j < length; ++j) words.text += letters[(*rng)() % 5];
    words.offsets.push_back(static_cast<int64_t>(words.text.size()));
  }
  return words;
}

TEST(MultiGpuRange, StringsEqualTheCpuEngine) {
  SKIP_WITHOUT_TWO_GPUS();
  std::mt19937 rng(17);
  const Words words = RandomWords(&rng, 60013, 12);
  genie_error err{};
  genie_strings* set = nullptr;
  ASSERT_EQ(genie_strings_create(words.text.data(), words.offsets.data(), words.size(), &set, &err), GENIE_OK);
  std::vector<uint8_t> excluded(static_cast<std::size_t>(words.size()), 0);
  for (int32_t i = 0; i < words.size(); i += 5) excluded[static_cast<std::size_t>(i)] = 1;
  // one query past the device's prepared pattern (300 code points): the CPU answers it
  Words queries = RandomWords(&rng, 199, 14);
  queries.text += std::string(300, 'a');
  queries.offsets.push_back(static_cast<int64_t>(queries.text.size()));
  for (int32_t radius : {0, 1, 2}) {
    for (int32_t count : {1, 7, queries.size()}) {
      genie_range_scan scan{};
      scan.n_queries = count;
      scan.query_text = queries.text.data();
      scan.query_text_offsets = queries.offsets.data();
      scan.radius = radius;
      scan.excluded = excluded.data();
      const std::string what = "radius " + std::to_string(radius) + " queries " + std::to_string(count);
      const Rows cpu = Collect([&](genie_range_results** r, genie_error* e) {
        return genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, r, e);
      });
      ASSERT_FALSE(cpu.offsets.empty()) << what;
      if (radius > 0 && count > 1) {
        EXPECT_GT(cpu.offsets.back(), 0) << what;
      }
      ExpectEveryMaskAsTheCpu(
          cpu,
          [&](const genie_engine_options* options, genie_range_results** r, genie_error* e) {
            return genie_strings_within(set, GENIE_ENGINE_GPU, options, &scan, r, e);
          },
          what);
    }
  }
  genie_strings_free(set);
}

}  // namespace
}  // namespace genie

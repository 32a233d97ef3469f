// Range search on the GPU against the CPU engine and brute force, through
// the C API: vectors of every shape (Gaussian clusters, small integers with
// exact ties, duplicates, tiny and huge values), radius 0, a radius equal to
// a row's distance, wider ones and an infinite one; with a List of
// Superclusters, a plain List of Clusters, no list, and a list of the first
// objects only (the rest read as pending rows); excluded objects; one query
// and batches; more answers than the device's first buffer holds; a set
// beyond a small device budget, streamed through the two slots (the
// multi-pipeline: runs copied by DMA, gathered by the device from
// page-locked rows, or by the host), batches of more queries than one pass
// plans, single queries and batches reading each cluster's ring, rows
// page-locked in pieces, and cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "genie/genie.h"
#include "genie/gpu_vector_scan.hpp"
#include "genie/vector_fixture.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::NearbyQueries;
using testing::RandomVectors;
using testing::VectorShape;

using Rows = RangeRows;

Rows Within(genie_vectors* set, genie_engine_kind device, const std::vector<float>& queries, int32_t nq,
            double radius, const uint8_t* excluded, const genie_cluster_list* list,
            const genie_engine_options* options = nullptr, genie_status expect = GENIE_OK) {
  genie_range_scan scan{};
  scan.n_queries = nq;
  scan.queries = queries.data();
  scan.radius = radius;
  scan.excluded = excluded;
  scan.list = list;
  genie_range_results* r = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_vectors_within(set, device, options, &scan, &r, &err), expect) << err.message;
  return TakeRangeRows(r);
}

TEST(GpuRange, VectorsEqualTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  for (VectorShape shape : {VectorShape::kGaussian, VectorShape::kSmallIntegers, VectorShape::kDuplicates,
                            VectorShape::kTiny, VectorShape::kHuge}) {
    std::mt19937 rng(400u + static_cast<uint32_t>(shape));
    const int32_t n = 9000, dim = shape == VectorShape::kGaussian ? 37 : 12, nq = 40;
    std::vector<float> values = RandomVectors(&rng, shape, n, dim);
    std::vector<float> queries = NearbyQueries(&rng, values, n, dim, nq, 0.05f);
    genie_error err{};
    genie_vectors* set = nullptr;
    ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
    genie_vectors* head = nullptr;  // the first objects: a list of them, the rest pending
    ASSERT_EQ(genie_vectors_create(values.data(), n - 700, dim, &head, &err), GENIE_OK);
    genie_cluster_list *lsc = nullptr, *lc = nullptr, *partial = nullptr;
    ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 32, 8, GENIE_CLUSTER_CENTRES_SUM, nullptr, &lsc, &err), GENIE_OK);
    ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 64, 0, GENIE_CLUSTER_CENTRES_SUM, nullptr, &lc, &err), GENIE_OK);
    ASSERT_EQ(genie_vectors_cluster_list(head, nullptr, 32, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &partial, &err), GENIE_OK);
    std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
    for (int32_t i = 0; i < n; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
    std::vector<double> all;
    for (int32_t o = 0; o < n; ++o) all.push_back(genie_l2_distance(queries.data(), values.data() + o * dim, dim));
    std::sort(all.begin(), all.end());
    for (double r : {0.0, all[9], all[90], all[900], std::numeric_limits<double>::infinity()}) {
      for (const genie_cluster_list* list : {static_cast<const genie_cluster_list*>(nullptr),
                                             static_cast<const genie_cluster_list*>(lsc),
                                             static_cast<const genie_cluster_list*>(lc),
                                             static_cast<const genie_cluster_list*>(partial)}) {
        const std::string what = std::string("shape ") + testing::ShapeName(shape) + " radius " +
                                 std::to_string(r) + (list == nullptr ? " no list" : list == lsc ? " lsc"
                                                      : list == lc ? " lc" : " partial");
        Rows cpu = Within(set, GENIE_ENGINE_CPU, queries, nq, r, excluded.data(), list);
        ExpectSameRangeRows(cpu, Within(set, GENIE_ENGINE_GPU, queries, nq, r, excluded.data(), list), what);
        std::vector<float> one(queries.begin() + 3 * dim, queries.begin() + 4 * dim);
        ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, one, 1, r, nullptr, list),
                   Within(set, GENIE_ENGINE_AUTO, one, 1, r, nullptr, list), what + " single");
      }
    }
    genie_cluster_list_free(lsc);
    genie_cluster_list_free(lc);
    genie_cluster_list_free(partial);
    genie_vectors_free(set);
    genie_vectors_free(head);
  }
}

TEST(GpuRange, ManyAnswersAndTheBoundary) {
  SKIP_WITHOUT_GPU();
  // 200,000 answers (beyond the first buffer of 65,536) and a tie at the radius
  const int32_t n = 50000, dim = 4, nq = 4;
  std::vector<float> values(static_cast<std::size_t>(n) * dim);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < dim; ++j) values[static_cast<std::size_t>(i) * dim + j] = static_cast<float>((i * (j + 3)) % 11);
  std::vector<float> queries(values.begin(), values.begin() + nq * dim);
  genie_error err{};
  genie_vectors* set = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
  const double r = genie_l2_distance(values.data(), values.data() + 5 * dim, dim);
  Rows cpu = Within(set, GENIE_ENGINE_CPU, queries, nq, 1e9, nullptr, nullptr);
  Rows gpu = Within(set, GENIE_ENGINE_GPU, queries, nq, 1e9, nullptr, nullptr);
  EXPECT_EQ(cpu.offsets.back(), static_cast<int64_t>(n) * nq);
  ExpectSameRangeRows(cpu, gpu, "every row");
  cpu = Within(set, GENIE_ENGINE_CPU, queries, nq, r, nullptr, nullptr);
  gpu = Within(set, GENIE_ENGINE_GPU, queries, nq, r, nullptr, nullptr);
  ExpectSameRangeRows(cpu, gpu, "boundary");
  EXPECT_NE(std::find(gpu.objects.begin(), gpu.objects.begin() + gpu.offsets[1], 5),
            gpu.objects.begin() + gpu.offsets[1]) << "the row at exactly the radius";
  genie_vectors_free(set);
}

// Parts a GPU scan of set streams it in under options (1: resident).
int32_t ScanParts(genie_vectors* set, const genie_engine_options* options, const std::vector<float>& query) {
  genie_vector_scan scan{};
  scan.n_queries = 1;
  scan.queries = query.data();
  scan.k = 1;
  genie_vector_results* r = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_vectors_scan(set, GENIE_ENGINE_GPU, options, &scan, &r, &err), GENIE_OK) << err.message;
  const int32_t parts = r != nullptr ? r->parts : 0;
  genie_vector_results_free(r);
  return parts;
}

// A single query over a streamed set of 300 MB reads each cluster's ring
// alone (genie_vectors_within): the rows of brute force on the CPU, and of
// the same list read whole.  The list's 300 MB of rows are more than one
// registration piece: page-locked in two, so the device gathers a query's
// runs from them (GatherRuns, float4 rows of 1,000 dimensions).  A list of
// the first objects only leaves the rest to be read from the set's own
// rows, pageable at this size: those segments are gathered on the host.
TEST(GpuRange, StreamedSingleQueriesReadRings) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(20261204u);
  const int32_t n = 75000, dim = 1000, nq = 12;
  std::vector<float> values = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
  std::vector<float> queries = NearbyQueries(&rng, values, n, dim, nq, 0.05f);
  genie_error err{};
  genie_vectors* set = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
  genie_engine_options streamed{};
  streamed.memory_budget_bytes = 64u << 20;
  const std::vector<float> first(queries.begin(), queries.begin() + dim);
  ASSERT_GT(ScanParts(set, &streamed, first), 2) << "the set must stream";
  genie_cluster_list* lsc = nullptr;
  ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 64, 8, GENIE_CLUSTER_CENTRES_FARTHEST, nullptr, &lsc, &err),
            GENIE_OK);
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
  int64_t in_rings = 0, whole = 0;
  for (int32_t q = 0; q < nq; ++q) {
    const std::vector<float> one(queries.begin() + q * dim, queries.begin() + (q + 1) * dim);
    std::vector<double> all;
    for (int32_t o = 0; o < n; ++o) all.push_back(genie_l2_distance(one.data(), values.data() + static_cast<std::size_t>(o) * dim, dim));
    std::sort(all.begin(), all.end());
    for (double r : {0.0, all[10], all[300]}) {
      const std::string what = "query " + std::to_string(q) + " radius " + std::to_string(r);
      const Rows brute = Within(set, GENIE_ENGINE_CPU, one, 1, r, excluded.data(), nullptr);
      genie_range_scan scan{};
      scan.n_queries = 1;
      scan.queries = one.data();
      scan.radius = r;
      scan.excluded = excluded.data();
      scan.list = lsc;
      for (int32_t whole_clusters : {0, 1}) {
        scan.whole_clusters = whole_clusters;
        genie_range_results* res = nullptr;
        ASSERT_EQ(genie_vectors_within(set, GENIE_ENGINE_GPU, &streamed, &scan, &res, &err), GENIE_OK) << err.message;
        (whole_clusters ? whole : in_rings) += res->distances_computed;
        ExpectSameRangeRows(brute, TakeRangeRows(res), what + (whole_clusters ? " whole" : " rings"));
      }
    }
  }
  EXPECT_LT(in_rings, whole);
  // the list of the first 70,000 objects: the last 5,000 are read from the
  // set's pageable rows, beside the list's locked ones
  genie_vectors* head = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n - 5000, dim, &head, &err), GENIE_OK);
  genie_cluster_list* partial = nullptr;
  ASSERT_EQ(genie_vectors_cluster_list(head, nullptr, 64, 8, GENIE_CLUSTER_CENTRES_FARTHEST, nullptr, &partial, &err),
            GENIE_OK);
  const std::vector<float> four(queries.begin(), queries.begin() + 4 * dim);
  std::vector<double> all;
  for (int32_t o = 0; o < n; ++o) all.push_back(genie_l2_distance(four.data(), values.data() + static_cast<std::size_t>(o) * dim, dim));
  std::sort(all.begin(), all.end());
  for (double r : {all[10], all[3000]}) {
    const std::string what = "partial list radius " + std::to_string(r);
    ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, four, 4, r, excluded.data(), nullptr),
                        Within(set, GENIE_ENGINE_GPU, four, 4, r, excluded.data(), partial, &streamed), what);
    ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, first, 1, r, nullptr, nullptr),
                        Within(set, GENIE_ENGINE_GPU, first, 1, r, nullptr, partial, &streamed), what + " single");
  }
  genie_cluster_list_free(partial);
  genie_vectors_free(head);
  genie_cluster_list_free(lsc);
  genie_vectors_free(set);
}

struct PollCounter {
  std::atomic<int> polls{0};  // polled from the pool's, the planner's and the gathering threads
  int after = 0;
};
int CancelAfter(void* arg) {
  auto* c = static_cast<PollCounter*>(arg);
  return ++c->polls > c->after ? 1 : 0;
}

TEST(GpuRange, StreamedSetEqualsTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  // 20,000 x 37 (6.4 MB at the device's padding of 40) under a budget of 2
  // MB: a part buffer of about 6,500 rows, two slots of about 3,200, so
  // every search streams several segments through each slot
  std::mt19937 rng(431u);
  const int32_t n = 20000, dim = 37, nq = 600;  // 600: two batches of plans
  std::vector<float> values = RandomVectors(&rng, VectorShape::kGaussian, n, dim);
  std::vector<float> queries = NearbyQueries(&rng, values, n, dim, nq, 0.05f);
  genie_error err{};
  genie_vectors *set = nullptr, *head = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_create(values.data(), n - 1500, dim, &head, &err), GENIE_OK);
  genie_engine_options streamed{};
  streamed.memory_budget_bytes = 2u << 20;
  const std::vector<float> first(queries.begin(), queries.begin() + dim);
  ASSERT_GT(ScanParts(set, &streamed, first), 2) << "the set must stream";
  genie_cluster_list *lsc = nullptr, *partial = nullptr;
  ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 64, 8, GENIE_CLUSTER_CENTRES_SUM, nullptr, &lsc, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_cluster_list(head, nullptr, 32, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &partial, &err), GENIE_OK);
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 5) excluded[static_cast<std::size_t>(i)] = 1;
  std::vector<double> all;
  for (int32_t o = 0; o < n; ++o) all.push_back(genie_l2_distance(queries.data(), values.data() + o * dim, dim));
  std::sort(all.begin(), all.end());
  for (double r : {0.0, all[20], all[2000]}) {
    for (const genie_cluster_list* list : {static_cast<const genie_cluster_list*>(nullptr),
                                           static_cast<const genie_cluster_list*>(lsc),
                                           static_cast<const genie_cluster_list*>(partial)}) {
      const std::string what = "radius " + std::to_string(r) +
                               (list == nullptr ? " no list" : list == lsc ? " lsc" : " partial");
      const Rows cpu = Within(set, GENIE_ENGINE_CPU, queries, nq, r, excluded.data(), list);
      ExpectSameRangeRows(cpu, Within(set, GENIE_ENGINE_GPU, queries, nq, r, excluded.data(), list, &streamed), what);
      // and the resident copy gives the same rows
      ExpectSameRangeRows(cpu, Within(set, GENIE_ENGINE_GPU, queries, nq, r, excluded.data(), list), what + " resident");
      ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, first, 1, r, nullptr, list),
                 Within(set, GENIE_ENGINE_AUTO, first, 1, r, nullptr, list, &streamed), what + " single");
    }
  }
  // a batch reading each query's ring wherever (the union of the rings:
  // many short runs, gathered by the device from the page-locked rows)
  for (double r : {all[20], all[2000]}) {
    genie_range_scan scan{};
    scan.n_queries = nq;
    scan.queries = queries.data();
    scan.radius = r;
    scan.excluded = excluded.data();
    scan.list = lsc;
    scan.whole_clusters = -1;
    genie_range_results* res = nullptr;
    ASSERT_EQ(genie_vectors_within(set, GENIE_ENGINE_GPU, &streamed, &scan, &res, &err), GENIE_OK) << err.message;
    ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, queries, nq, r, excluded.data(), lsc), TakeRangeRows(res),
                        "rings radius " + std::to_string(r));
  }
  // every row for 40 queries: 800,000 answers, a segment's beyond a slot's
  // first buffer of 65,536 (40 x about 3,200 rows)
  const std::vector<float> forty(queries.begin(), queries.begin() + 40 * dim);
  const Rows every = Within(set, GENIE_ENGINE_GPU, forty, 40, 1e30, nullptr, lsc, &streamed);
  EXPECT_EQ(every.offsets.back(), int64_t{40} * n);
  ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, forty, 40, 1e30, nullptr, lsc), every, "every row");
  // cancel: asked at once, and after a few polls (between the segments);
  // the next search is exact
  for (int after : {0, 3, 40}) {
    PollCounter counter;
    counter.after = after;
    genie_engine_options cancelled = streamed;
    cancelled.cancel = &CancelAfter;
    cancelled.cancel_arg = &counter;
    Within(set, GENIE_ENGINE_GPU, queries, nq, all[2000], nullptr, lsc, &cancelled, GENIE_CANCELLED);
  }
  ExpectSameRangeRows(Within(set, GENIE_ENGINE_CPU, queries, nq, all[20], nullptr, lsc),
             Within(set, GENIE_ENGINE_GPU, queries, nq, all[20], nullptr, lsc, &streamed), "after cancel");
  genie_cluster_list_free(lsc);
  genie_cluster_list_free(partial);
  genie_vectors_free(set);
  genie_vectors_free(head);
}

// Host memory beyond one registration piece is page-locked in pieces, a
// cancel between two of them leaves nothing locked, and the memory can be
// locked again afterwards.
TEST(GpuRange, PageLocksInPiecesAndCancels) {
  SKIP_WITHOUT_GPU();
  const std::size_t bytes = kHostRegistrationPieceBytes * 2 + (std::size_t{3} << 20) + 123;
  std::vector<char> memory(bytes, 1);
  PollCounter counter;
  counter.after = 1;  // polled before the second piece (no) and the third (stop)
  std::unique_ptr<GpuHostRegistration> pin;
  EXPECT_EQ(GpuHostRegistration::Create(memory.data() + 5, bytes - 5, 0, &pin, CancelCheck{&CancelAfter, &counter})
                .code(),
            GENIE_CANCELLED);
  EXPECT_EQ(pin, nullptr);
  EXPECT_GE(counter.polls.load(), 2);
  ASSERT_TRUE(GpuHostRegistration::Create(memory.data() + 5, bytes - 5, 0, &pin).ok());
  ASSERT_NE(pin, nullptr);
  EXPECT_EQ(pin->pieces(), 3u);
  pin.reset();
  ASSERT_TRUE(GpuHostRegistration::Create(memory.data(), bytes, 0, &pin).ok());
  pin.reset();
  // at most one piece's bytes, wherever they start: one registration
  std::unique_ptr<GpuHostRegistration> one;
  ASSERT_TRUE(GpuHostRegistration::Create(memory.data() + bytes / 2 + 7, kHostRegistrationPieceBytes, 0, &one).ok());
  EXPECT_EQ(one->pieces(), 1u);
  EXPECT_GE(PageLockableBytes(), kHostRegistrationPieceBytes);
  // beyond what the process may lock: refused, nothing locked
  std::unique_ptr<GpuHostRegistration> beyond;
  EXPECT_EQ(GpuHostRegistration::Create(memory.data(), PageLockableBytes() + 1, 0, &beyond).code(),
            GENIE_DEVICE_ERROR);
  EXPECT_EQ(beyond, nullptr);
  one.reset();
  EXPECT_TRUE(GpuHostRegistration::Create(memory.data(), bytes, 0, &pin).ok());
}

}  // namespace
}  // namespace genie

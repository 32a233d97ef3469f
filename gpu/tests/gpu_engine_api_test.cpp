// The GPU engine's API: device listing, options checked before any device
// is touched, the errors for a machine without a (usable) GPU, bad
// arguments, Drop, and the C API's GPU engine on a tiny index.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/gpu_engine.hpp"
#include "genie/index.hpp"
#include "genie/query.hpp"
#include "genie/test_util.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::MakeIndex;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;

TEST(GpuEngineApi, ListDevicesNeverFails) {
  const auto devices = ListGpuDevices();  // must not crash without a driver
  for (const auto& d : devices) {
    EXPECT_EQ(d.kind, GENIE_DEVICE_GPU);
    if (!d.usable) {
      EXPECT_NE(d.note[0], '\0');
    }
  }
  EXPECT_GT(CudaRuntimeVersion(), 0);
}

TEST(GpuEngineApi, NoDeviceGivesUnavailable) {
  if (GpuUsable()) {
    GTEST_SKIP() << "a GPU is present";
  }
  Status status;
  EXPECT_EQ(MakeGpuEngine(EngineOptions(), &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(MakeGpuCountTableEngine(EngineOptions(), &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
}

TEST(GpuEngineApi, BadOptionsAreInvalidArgument) {
  // Checked before any device is touched: the same with or without a GPU.
  for (int32_t words : {0, 511, 1000, 49152 + 512}) {
    GpuEngineOptions gpu_options;
    gpu_options.tile_words = words;
    Status status;
    EXPECT_EQ(MakeGpuEngine(EngineOptions(), gpu_options, &status), nullptr) << words;
    EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT) << words;
  }
  GpuEngineOptions gpu_options;
  gpu_options.hash_table_slots = (1u << 30) + 1;
  Status status;
  EXPECT_EQ(MakeGpuEngine(EngineOptions(), gpu_options, &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT);
}

TEST(GpuEngineApi, BadOrdinalUnavailable) {
  SKIP_WITHOUT_GPU();
  Status status;
  EngineOptions options;
  options.device_ordinal = 999;
  EXPECT_EQ(MakeGpuEngine(options, &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
}

// The context made on another thread (as genie_gpu_prepare does in a
// backend) serves this one; bad ordinals are ignored and leave no error.
TEST(GpuEngineApi, PrepareDeviceOnAnotherThread) {
  PrepareDevice(-1);
  PrepareDevice(999);
  SKIP_WITHOUT_GPU();
  std::thread preparing([] { PrepareDevice(0); });
  preparing.join();
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  EXPECT_TRUE(status.ok());
}

// A batch large enough for the pipelined search is checked piece by piece
// (ValidateBatchOffsets first, each piece's ranges and weights as it
// compiles): a bad range or weight in a late piece is refused with the
// whole batch's numbering, as ValidateBatch words it, and the engine stays
// usable.
TEST(GpuEngineApi, PipelinedBatchRefusesABadLatePiece) {
  SKIP_WITHOUT_GPU();
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  for (int32_t o = 0; o < 20000; ++o) {
    for (int32_t j = 0; j < 4; ++j) keywords.push_back((o * 7 + j * 13) % 500);
    offsets.push_back(static_cast<int64_t>(keywords.size()));
  }
  auto index = std::make_shared<InvertedIndex>();
  ASSERT_TRUE(InvertedIndex::Build(offsets, keywords, IndexOptions(), index.get()).ok());
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  ASSERT_TRUE(engine->Upload(index).ok());
  const int32_t nq = 900;
  std::vector<int64_t> query_offsets{0}, item_offsets{0};
  std::vector<int32_t> lo, hi, weights;
  for (int32_t q = 0; q < nq; ++q) {
    for (int32_t j = 0; j < 3; ++j) {
      lo.push_back((q + j * 101) % 500);
      hi.push_back(lo.back() + j);  // one keyword, then ranges of 2 and 3
      weights.push_back(1 + j);
      item_offsets.push_back(static_cast<int64_t>(lo.size()));
    }
    query_offsets.push_back(static_cast<int64_t>(item_offsets.size()) - 1);
  }
  genie_query_batch batch{};
  batch.n_queries = nq;
  batch.query_offsets = query_offsets.data();
  batch.item_offsets = item_offsets.data();
  batch.item_weights = weights.data();
  batch.ranges_lo = lo.data();
  batch.ranges_hi = hi.data();
  TopKResults good;
  ASSERT_TRUE(engine->Search(batch, 10, &good).ok());
  ASSERT_EQ(good.num_queries(), nq);
  for (int which = 0; which < 2; ++which) {
    const std::size_t at = 3 * 850 + 1;  // query 850: in the last piece
    std::vector<int32_t> bad_hi = hi, bad_weights = weights;
    if (which == 0) bad_hi[at] = lo[at] - 1;
    if (which == 1) bad_weights[at] = 0;
    genie_query_batch bad = batch;
    bad.ranges_hi = bad_hi.data();
    bad.item_weights = bad_weights.data();
    const Status expected = ValidateBatch(bad);
    ASSERT_EQ(expected.code(), GENIE_INVALID_ARGUMENT);
    TopKResults out;
    const Status got = engine->Search(bad, 10, &out);
    EXPECT_EQ(got.code(), GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(got.message(), expected.message());
    TopKResults again;
    ASSERT_TRUE(engine->Search(batch, 10, &again).ok());
    EXPECT_EQ(again.hits.size(), good.hits.size());
    for (std::size_t h = 0; h < good.hits.size() && h < again.hits.size(); ++h) {
      EXPECT_EQ(again.hits[h].object, good.hits[h].object);
      EXPECT_EQ(again.hits[h].score, good.hits[h].score);
    }
  }
  // queries without items and item_offsets NULL (a valid batch), plain and
  // pipelined: no hits, no crash
  for (int32_t empty : {40, 700}) {
    const std::vector<int64_t> zeros(static_cast<std::size_t>(empty) + 1, 0);
    const genie_query_batch itemless{empty, zeros.data(), nullptr, nullptr, nullptr, nullptr};
    TopKResults none;
    ASSERT_TRUE(engine->Search(itemless, 10, &none).ok());
    EXPECT_EQ(none.num_queries(), empty);
    EXPECT_TRUE(none.hits.empty());
  }
  // decreasing item offsets: refused before any piece runs
  std::vector<int64_t> bad_items = item_offsets;
  bad_items[1500] = bad_items[1499] - 1;
  genie_query_batch bad = batch;
  bad.item_offsets = bad_items.data();
  TopKResults out;
  EXPECT_EQ(engine->Search(bad, 10, &out).code(), GENIE_INVALID_ARGUMENT);
}

TEST(GpuEngineApi, ErrorsAndDrop) {
  SKIP_WITHOUT_GPU();
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  EXPECT_EQ(engine->kind(), GENIE_ENGINE_GPU);
  QueryBatch batch;
  const std::vector<int32_t> kws{1, 2};
  batch.AddKeywordQuery(kws);
  TopKResults out;
  EXPECT_EQ(engine->Search(batch.View(), 5, &out).code(), GENIE_INVALID_ARGUMENT);  // no index
  EXPECT_EQ(engine->Upload(nullptr).code(), GENIE_INVALID_ARGUMENT);
  Csr csr;
  csr.Add({1, 2});
  csr.Add({2});
  auto index = MakeIndex(csr);
  ASSERT_TRUE(engine->Upload(index).ok());
  EXPECT_EQ(engine->Search(batch.View(), 0, &out).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(engine->Search(batch.View(), 5, nullptr).code(), GENIE_INVALID_ARGUMENT);
  ASSERT_TRUE(engine->Search(batch.View(), 5, &out).ok());
  ASSERT_EQ(out.hits.size(), 2u);
  EXPECT_EQ(out.hits[0].object, 0);
  EXPECT_EQ(out.hits[0].score, 2);
  ASSERT_TRUE(engine->Drop().ok());
  EXPECT_EQ(engine->Search(batch.View(), 5, &out).code(), GENIE_INVALID_ARGUMENT);
  ASSERT_TRUE(engine->Upload(index).ok());  // upload again after drop
  ASSERT_TRUE(engine->Search(batch.View(), 1, &out).ok());
  EXPECT_EQ(out.hits.size(), 1u);
}

// A call's own cancel check stands in for the engine's while it runs (a
// device group passes each call's down), and the engine's is back after.
TEST(GpuEngineApi, SearchCancellablePollsTheCallsCheck) {
  SKIP_WITHOUT_GPU();
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  Csr csr;
  for (int32_t o = 0; o < 5000; ++o) csr.Add({o % 7, 7 + o % 11, 20 + o % 3});
  ASSERT_TRUE(engine->Upload(MakeIndex(csr)).ok());
  QueryBatch batch;
  for (int32_t q = 0; q < 40; ++q) batch.AddKeywordQuery(std::vector<int32_t>{q % 7, 7 + q % 11});
  CancelCheck asks;
  asks.fn = [](void*) { return 1; };
  TopKResults out;
  EXPECT_EQ(engine->SearchCancellable(batch.View(), 10, asks, &out).code(), GENIE_CANCELLED);
  ASSERT_TRUE(engine->Search(batch.View(), 10, &out).ok());
  TopKResults again;
  ASSERT_TRUE(engine->SearchCancellable(batch.View(), 10, CancelCheck(), &again).ok());
  EXPECT_EQ(out.hits.size(), again.hits.size());
  EXPECT_EQ(out.query_offsets, again.query_offsets);
  ASSERT_EQ(out.query_offsets.back(), 40 * 10);
}

// Calls from several threads: one holds the device (its own cancel check,
// polled under the device's lock, holds it there until the other is done);
// another, waiting for the device behind it, stops within 100 ms of its own
// check asking; the first then answers in full, as it does alone.
TEST(GpuEngineApi, ACallWaitingForTheDeviceStopsOnItsOwnCancel) {
  SKIP_WITHOUT_GPU();
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  ASSERT_TRUE(engine->ConcurrentSearches());
  Csr csr;
  for (int32_t o = 0; o < 20000; ++o) csr.Add({o % 7, 7 + o % 11, 20 + o % 13, 40 + o % 101});
  ASSERT_TRUE(engine->Upload(MakeIndex(csr)).ok());
  QueryBatch large;  // the pipelined path: the device taken first, polled under it
  for (int32_t q = 0; q < 600; ++q) large.AddKeywordQuery(std::vector<int32_t>{q % 7, 7 + q % 11, 40 + q % 101});
  QueryBatch small;  // a host stage first, then the wait
  for (int32_t q = 0; q < 8; ++q) small.AddKeywordQuery(std::vector<int32_t>{q % 7, 20 + q % 13});
  const genie_query_batch large_view = large.View();
  const genie_query_batch small_view = small.View();
  TopKResults alone;
  ASSERT_TRUE(engine->Search(large_view, 10, &alone).ok());

  struct Hold {
    std::atomic<bool> holding{false};
    std::atomic<bool> release{false};
  } hold;
  CancelCheck holder;  // never asks; its first poll waits (up to 5 s) for the release
  holder.arg = &hold;
  holder.fn = [](void* arg) {
    auto* h = static_cast<Hold*>(arg);
    if (!h->holding.exchange(true)) {
      for (int i = 0; i < 5000 && !h->release.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
  };
  TopKResults held_out;
  Status held_status;
  std::thread first([&] { held_status = engine->SearchCancellable(large_view, 10, holder, &held_out); });
  for (int i = 0; i < 5000 && !hold.holding.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!hold.holding.load()) {
    hold.release = true;
    first.join();
    FAIL() << "the first call never polled its check";
  }

  std::atomic<bool> ask{false};
  CancelCheck waiter;
  waiter.arg = &ask;
  waiter.fn = [](void* arg) { return static_cast<std::atomic<bool>*>(arg)->load() ? 1 : 0; };
  using Clock = std::chrono::steady_clock;
  Clock::time_point asked;
  std::thread asker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    asked = Clock::now();
    ask = true;
  });
  TopKResults waited_out;
  const Status waited = engine->SearchCancellable(small_view, 10, waiter, &waited_out);
  const auto returned = Clock::now();
  asker.join();
  hold.release = true;
  first.join();
  EXPECT_EQ(waited.code(), GENIE_CANCELLED);
  const double stopped_ms = std::chrono::duration<double, std::milli>(returned - asked).count();
  EXPECT_LT(stopped_ms, 100.0) << "a withdrawn call stops within 100 ms";
  ASSERT_TRUE(held_status.ok()) << held_status.message();
  EXPECT_EQ(held_out.query_offsets, alone.query_offsets);
  ASSERT_EQ(held_out.hits.size(), alone.hits.size());
  for (std::size_t i = 0; i < alone.hits.size(); ++i) {
    EXPECT_EQ(held_out.hits[i].object, alone.hits[i].object);
    EXPECT_EQ(held_out.hits[i].score, alone.hits[i].score);
  }
  // and the device is free again: the small batch answers
  ASSERT_TRUE(engine->Search(small_view, 10, &waited_out).ok());
  EXPECT_EQ(waited_out.num_queries(), 8);
}

// Calls side by side on one device: each answers what the CPU engine
// does, whether its host stage ran on the pool (alone) or on its own
// thread (beside others: CallUnderWay), with batches of more ranges than
// the calling thread takes on its own alone (kInlineHostWork).
TEST(GpuEngineApi, CallsSideBySideAnswerAsTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  DataSpec data;
  data.objects = 40000;
  data.max_length = 16;
  data.universe = 600;
  data.zipf = 0.8;
  data.keyword_base = 0;
  const auto index = MakeIndex(RandomCsr(41, data));
  auto cpu = MakeCpuEngine(EngineOptions());
  ASSERT_TRUE(cpu->Upload(index).ok());
  Status status;
  auto gpu = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(gpu, nullptr) << status.message();
  ASSERT_TRUE(gpu->Upload(index).ok());
  std::vector<QueryBatch> batches;
  std::vector<TopKResults> expected;
  for (uint32_t b = 0; b < 4; ++b) {
    QuerySpec spec;
    spec.queries = 96 + 64 * static_cast<int32_t>(b);  // 96-288 queries of up to 24 ranges
    spec.max_items = 24;
    spec.max_ranges = 1;
    spec.max_width = 3;
    spec.lo_min = 0;
    spec.lo_max = 620;
    batches.push_back(RandomBatch(300 + b, spec));
    const genie_query_batch view = batches.back().View();
    // more than a lone call compiles on its own thread (kInlineHostWork, 1,024 ranges)
    ASSERT_GT(view.item_offsets[view.query_offsets[view.n_queries]], 1024) << "batch " << b;
    expected.emplace_back();
    ASSERT_TRUE(cpu->Search(batches.back().View(), 20, &expected.back()).ok());
    TopKResults alone;
    ASSERT_TRUE(gpu->Search(batches.back().View(), 20, &alone).ok());
    EXPECT_TRUE(SameResults(expected.back(), alone)) << "batch " << b << " alone";
  }
  std::vector<genie_query_batch> views;
  for (const QueryBatch& b : batches) views.push_back(b.View());
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        const std::size_t b = static_cast<std::size_t>((c + i) % 4);
        TopKResults got;
        if (!gpu->Search(views[b], 20, &got).ok()) {
          ++failed;
        } else if (!SameResults(expected[b], got)) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(GpuEngineApi, CApiGpuEngine) {
  SKIP_WITHOUT_GPU();
  const int64_t offsets[] = {0, 2, 3, 6};
  const int32_t keywords[] = {1, 2, 2, 1, 2, 3};
  genie_error err;
  genie_index* index = nullptr;
  ASSERT_EQ(genie_index_create(offsets, 3, keywords, nullptr, &index, &err), GENIE_OK) << err.message;
  genie_engine* engine = nullptr;
  ASSERT_EQ(genie_engine_create(GENIE_ENGINE_GPU, nullptr, &engine, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_engine_get_kind(engine), GENIE_ENGINE_GPU);
  ASSERT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
  const int64_t q_offsets[] = {0, 3};
  const int64_t i_offsets[] = {0, 1, 2, 3};
  const int32_t lo[] = {1, 2, 3};
  const int32_t hi[] = {1, 2, 3};
  genie_query_batch batch{1, q_offsets, i_offsets, nullptr, lo, hi};
  genie_results* results = nullptr;
  ASSERT_EQ(genie_engine_search(engine, &batch, 2, &results, &err), GENIE_OK) << err.message;
  ASSERT_EQ(results->query_offsets[1], 2);
  EXPECT_EQ(results->objects[0], 2);
  EXPECT_EQ(results->scores[0], 3);
  EXPECT_EQ(results->objects[1], 0);
  EXPECT_EQ(results->scores[1], 2);
  genie_results_free(results);
  genie_engine_free(engine);
  genie_index_free(index);
}

}  // namespace
}  // namespace genie

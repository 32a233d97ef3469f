// The C API: the error pattern (status + message, never an exception), the
// match count, devices, a search round trip through opaque handles, and the
// merge of per-part results (genie_results_merge).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "genie/genie.h"
#include "genie/similar_fixture.hpp"

namespace {

// The count by both forms, which must agree: at once, and against the
// query prepared (genie_match_count_prepare_int4, in place in a copy).
int32_t MatchCount(std::vector<int32_t> o, std::vector<int32_t> q) {
  int32_t count = -1, prepared_count = -2;
  genie_error err{};
  EXPECT_EQ(genie_match_count_int4(o.data(), o.size(), q.data(), q.size(), &count, &err), GENIE_OK)
      << err.message;
  std::vector<int32_t> keywords = q;
  std::size_t n = 0;
  uint64_t filter = 0;
  EXPECT_EQ(genie_match_count_prepare_int4(keywords.data(), keywords.size(), keywords.data(), &n, &filter, &err),
            GENIE_OK);
  EXPECT_EQ(genie_match_count_prepared_int4(o.data(), o.size(), keywords.data(), n, filter, &prepared_count, &err),
            GENIE_OK);
  EXPECT_EQ(count, prepared_count);
  return count;
}

TEST(CApiMatchCount, Rules) {
  EXPECT_EQ(MatchCount({1, 2, 3}, {2, 3, 4}), 2);
  EXPECT_EQ(MatchCount({1, 1, 2, 2}, {1, 1, 1}), 1);
  EXPECT_EQ(MatchCount({}, {1}), 0);
  EXPECT_EQ(MatchCount({1}, {}), 0);
  EXPECT_EQ(MatchCount({INT32_MIN, INT32_MAX, 0}, {INT32_MAX, INT32_MIN}), 2);
  // 64 distinct query keywords (the last position of the 64-bit mask),
  // the same twice over (128 given, 64 distinct), and 65 (the byte flags)
  std::vector<int32_t> q64, q128, q65;
  for (int32_t v = 0; v < 64; ++v) q64.push_back(v);
  q128 = q64;
  q128.insert(q128.end(), q64.begin(), q64.end());
  q65 = q64;
  q65.push_back(64);
  EXPECT_EQ(MatchCount({63, 63, 0, 32, 64}, q64), 3);
  EXPECT_EQ(MatchCount({63}, q128), 1);
  EXPECT_EQ(MatchCount({64, 64, 0}, q65), 2);
  q64.front() = INT32_MIN;
  q64.back() = INT32_MAX;
  EXPECT_EQ(MatchCount({INT32_MAX, INT32_MIN, INT32_MAX}, q64), 2);
}

TEST(CApiMatchCount, RandomAgainstSets) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4000; ++trial) {
    // queries past 64 distinct keywords too (the counting's second form)
    std::vector<int32_t> o(rng() % 30), q(trial % 2 == 0 ? rng() % 30 : rng() % 200);
    for (auto& x : o) x = int32_t(rng() % (q.size() > 30 ? 300 : 50)) - 25;
    for (auto& x : q) x = int32_t(rng() % (q.size() > 30 ? 300 : 50)) - 25;
    std::set<int32_t> os(o.begin(), o.end()), qs(q.begin(), q.end());
    int32_t expected = 0;
    for (int32_t x : qs) expected += os.count(x) ? 1 : 0;
    ASSERT_EQ(MatchCount(o, q), expected);
  }
}

TEST(CApiMatchCount, OnePreparedQueryManyObjects) {
  // keywords over the whole int4 range (the filter's hash spreads them), one
  // query prepared once and counted against many objects, as a scan does
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> q(1 + rng() % 90);
    for (auto& x : q) x = static_cast<int32_t>(rng());
    std::vector<int32_t> keywords(q.size());
    std::size_t n = 0;
    uint64_t filter = 0;
    genie_error err{};
    ASSERT_EQ(genie_match_count_prepare_int4(q.data(), q.size(), keywords.data(), &n, &filter, &err), GENIE_OK);
    const std::set<int32_t> qs(q.begin(), q.end());
    ASSERT_EQ(n, qs.size());
    for (int object = 0; object < 50; ++object) {
      std::vector<int32_t> o(rng() % 60);
      for (auto& x : o) x = rng() % 3 == 0 ? q[rng() % q.size()] : static_cast<int32_t>(rng());
      int32_t expected = 0;
      const std::set<int32_t> os(o.begin(), o.end());
      for (int32_t x : qs) expected += os.count(x) ? 1 : 0;
      int32_t count = -1;
      ASSERT_EQ(genie_match_count_prepared_int4(o.data(), o.size(), keywords.data(), n, filter, &count, &err),
                GENIE_OK);
      ASSERT_EQ(count, expected);
    }
  }
  // an empty query counts 0 against anything
  std::size_t n = 1;
  uint64_t filter = 1;
  int32_t count = -1, one = 1;
  EXPECT_EQ(genie_match_count_prepare_int4(nullptr, 0, nullptr, &n, &filter, nullptr), GENIE_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(genie_match_count_prepared_int4(&one, 1, nullptr, 0, filter, &count, nullptr), GENIE_OK);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(genie_match_count_prepared_int4(&one, 1, &one, 1, ~uint64_t{0}, nullptr, nullptr), GENIE_INVALID_ARGUMENT);
}

TEST(CApiErrors, NullArgumentsGiveStatusAndMessage) {
  genie_error err{};
  int32_t one = 1;
  EXPECT_EQ(genie_match_count_int4(nullptr, 3, &one, 1, &one, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(err.status, GENIE_INVALID_ARGUMENT);
  EXPECT_GT(std::strlen(err.message), 0u);
  // A NULL error pointer is allowed: the status alone still reports it.
  EXPECT_EQ(genie_match_count_int4(&one, 1, &one, 1, nullptr, nullptr), GENIE_INVALID_ARGUMENT);
  EXPECT_STREQ(genie_status_name(GENIE_DEVICE_OUT_OF_MEMORY), "device out of memory");
}

TEST(CApiParallelFor, EachIndexOnceAndCancel) {
  // every index once, whatever the threads
  for (int32_t threads : {1, 2, 0}) {
    std::vector<std::atomic<int>> seen(10007);
    for (auto& s : seen) s = 0;
    genie_error err{};
    auto body = [](int64_t i, void* arg) { (*static_cast<std::vector<std::atomic<int>>*>(arg))[i]++; };
    ASSERT_EQ(genie_parallel_for(static_cast<int64_t>(seen.size()), threads, body, &seen, nullptr, nullptr, &err),
              GENIE_OK)
        << err.message;
    for (std::size_t i = 0; i < seen.size(); i++) ASSERT_EQ(seen[i].load(), 1) << "index " << i;
  }
  genie_error err{};
  EXPECT_EQ(genie_parallel_for(0, 0, nullptr, nullptr, nullptr, nullptr, &err), GENIE_OK);
  EXPECT_EQ(genie_parallel_for(-1, 0, nullptr, nullptr, nullptr, nullptr, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_parallel_for(5, 0, nullptr, nullptr, nullptr, nullptr, &err), GENIE_INVALID_ARGUMENT);
  // a cancel asked part way: the rest are skipped
  std::atomic<int64_t> done{0};
  auto count = [](int64_t, void* arg) { (*static_cast<std::atomic<int64_t>*>(arg))++; };
  auto cancel = [](void* arg) { return static_cast<std::atomic<int64_t>*>(arg)->load() >= 100 ? 1 : 0; };
  EXPECT_EQ(genie_parallel_for(1000000, 2, count, &done, cancel, &done, &err), GENIE_CANCELLED);
  EXPECT_GE(done.load(), 100);
  EXPECT_LT(done.load(), 1000000);
}

TEST(CApiDevices, CpuComesFirst) {
  genie_device_info devices[16];
  size_t count = 0;
  genie_error err{};
  ASSERT_EQ(genie_list_devices(devices, 16, &count, &err), GENIE_OK) << err.message;
  ASSERT_GE(count, 1u);
  EXPECT_EQ(devices[0].kind, GENIE_DEVICE_CPU);
  EXPECT_EQ(devices[0].usable, 1);
  EXPECT_GT(devices[0].memory_bytes, 0u);
  for (size_t i = 1; i < count; ++i) EXPECT_EQ(devices[i].kind, GENIE_DEVICE_GPU);
  // Capacity limits what is written.
  size_t limited = 9;
  ASSERT_EQ(genie_list_devices(devices, 1, &limited, &err), GENIE_OK);
  EXPECT_EQ(limited, 1u);
}

// genie_gpu_prepare: nothing to wait for before it is called; it starts
// once, ends (with or without a GPU), and the devices and engines work after
// it as before.
TEST(CApiDevices, GpuPreparationStartsOnceAndEnds) {
  EXPECT_EQ(genie_gpu_prepare_wait(0), 1);  // not started in this process
  genie_gpu_prepare(0);
  genie_gpu_prepare(0);  // a second call starts nothing
  ASSERT_EQ(genie_gpu_prepare_wait(60000), 1);
  EXPECT_EQ(genie_gpu_prepare_wait(0), 1);
  genie_gpu_prepare(7);  // another ordinal after the first: still nothing
  EXPECT_EQ(genie_gpu_prepare_wait(0), 1);
  genie_device_info devices[16];
  size_t count = 0;
  genie_error err{};
  ASSERT_EQ(genie_list_devices(devices, 16, &count, &err), GENIE_OK) << err.message;
  genie_engine* engine = nullptr;
  ASSERT_EQ(genie_engine_create(GENIE_ENGINE_AUTO, nullptr, &engine, &err), GENIE_OK) << err.message;
  genie_engine_free(engine);
}

TEST(CApiBuild, InfoIsConsistent) {
  genie_build_info info{};
  genie_get_build_info(&info);
  ASSERT_NE(info.version, nullptr);
  EXPECT_GT(std::strlen(info.version), 0u);
  EXPECT_EQ(info.with_cuda != 0, info.cuda_version > 0);
}

bool AnyUsableGpu() {
  genie_device_info devices[16];
  size_t count = 0;
  genie_list_devices(devices, 16, &count, nullptr);
  for (size_t i = 0; i < count; ++i)
    if (devices[i].kind == GENIE_DEVICE_GPU && devices[i].usable) return true;
  return false;
}

TEST(CApiEngine, GpuKindFailsCleanlyWithoutGpuAndAutoFallsBack) {
  if (AnyUsableGpu()) GTEST_SKIP() << "a GPU is usable here";
  genie_engine* engine = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_engine_create(GENIE_ENGINE_GPU, nullptr, &engine, &err), GENIE_DEVICE_UNAVAILABLE);
  EXPECT_EQ(engine, nullptr);
  EXPECT_GT(std::strlen(err.message), 0u);
  ASSERT_EQ(genie_engine_create(GENIE_ENGINE_AUTO, nullptr, &engine, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_engine_get_kind(engine), GENIE_ENGINE_CPU);
  genie_engine_free(engine);
}

// A device mask naming GPUs where none is usable: GPU fails as it does with
// one GPU, AUTO falls back to the CPU engine, which spreads over no devices.
TEST(CApiEngine, DeviceMaskWithoutGpu) {
  if (AnyUsableGpu()) GTEST_SKIP() << "a GPU is usable here";
  genie_engine_options options{};
  options.device_mask = ~uint64_t{0};
  options.placement = GENIE_PLACEMENT_SHARD;
  genie_engine* engine = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_engine_create(GENIE_ENGINE_GPU, &options, &engine, &err), GENIE_DEVICE_UNAVAILABLE);
  ASSERT_EQ(genie_engine_create(GENIE_ENGINE_AUTO, &options, &engine, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_engine_get_kind(engine), GENIE_ENGINE_CPU);
  genie_engine_device devices[4];
  size_t count = 99;
  EXPECT_EQ(genie_engine_devices(engine, devices, 4, &count, &err), GENIE_OK);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(genie_engine_devices(engine, nullptr, 4, &count, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_engine_devices(nullptr, devices, 4, &count, &err), GENIE_INVALID_ARGUMENT);
  genie_engine_free(engine);
}

// genie_similar_verify: the GPU without a usable one is unavailable (no
// fallback), AUTO runs on the CPU.
TEST(CApiSimilar, GpuUnavailableAndAutoWithoutGpu) {
  if (AnyUsableGpu()) GTEST_SKIP() << "a GPU is usable here";
  genie::testing::KittenSimilarBatch k;
  genie_similar_batch& batch = k.batch;
  genie_similar_verdict& verdict = k.verdict;
  const int32_t* distances = k.distances;
  genie_error err{};
  EXPECT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_GPU, nullptr, &verdict, &err),
            GENIE_DEVICE_UNAVAILABLE);
  ASSERT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_AUTO, nullptr, &verdict, &err), GENIE_OK)
      << err.message;
  EXPECT_EQ(verdict.device, GENIE_ENGINE_CPU);
  EXPECT_EQ(distances[0], 3);  // ed(kitten, sitting)
  EXPECT_EQ(distances[1], 1);
}

// Builds a small random index through the C API, serialises and reloads it,
// and checks every engine kind against scores computed here from the sets.
TEST(CApiEngine, SearchRoundTrip) {
  std::mt19937 rng(11);
  const int32_t n = 300;
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  std::vector<std::set<int32_t>> objects(n);
  for (int32_t o = 0; o < n; ++o) {
    int len = int(rng() % 12);
    for (int j = 0; j < len; ++j) {
      int32_t kw = int32_t(rng() % 60);
      keywords.push_back(kw);
      objects[o].insert(kw);
    }
    offsets.push_back(int64_t(keywords.size()));
  }
  genie_error err{};
  genie_index* built = nullptr;
  genie_index_options options{};
  options.split_length = 5;
  ASSERT_EQ(genie_index_create(offsets.data(), n, keywords.data(), &options, &built, &err), GENIE_OK)
      << err.message;
  size_t size = 0;
  ASSERT_EQ(genie_index_serialized_size(built, &size, &err), GENIE_OK);
  std::vector<unsigned char> buffer(size);
  ASSERT_EQ(genie_index_serialize(built, buffer.data(), size, &err), GENIE_OK) << err.message;
  genie_index* index = nullptr;
  ASSERT_EQ(genie_index_deserialize(buffer.data(), size, &index, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_index_num_objects(index), n);
  EXPECT_EQ(genie_index_num_postings(index), genie_index_num_postings(built));
  genie_index_free(built);

  // Queries: item 0 is keyword range [q, q+4] with weight 2, item 1 the single keyword 3q % 60.
  const int32_t n_queries = 20, k = 7;
  std::vector<int64_t> query_offsets{0}, item_offsets{0};
  std::vector<int32_t> weights, lo, hi;
  for (int32_t q = 0; q < n_queries; ++q) {
    lo.push_back(q); hi.push_back(q + 4); weights.push_back(2); item_offsets.push_back(int64_t(lo.size()));
    lo.push_back(3 * q % 60); hi.push_back(3 * q % 60); weights.push_back(1); item_offsets.push_back(int64_t(lo.size()));
    query_offsets.push_back(int64_t(weights.size()));
  }
  genie_query_batch batch{n_queries, query_offsets.data(), item_offsets.data(), weights.data(), lo.data(), hi.data()};

  for (genie_engine_kind kind : {GENIE_ENGINE_CPU_REFERENCE, GENIE_ENGINE_CPU, GENIE_ENGINE_AUTO}) {
    genie_engine* engine = nullptr;
    ASSERT_EQ(genie_engine_create(kind, nullptr, &engine, &err), GENIE_OK) << err.message;
    genie_results* results = nullptr;
    EXPECT_EQ(genie_engine_search(engine, &batch, k, &results, &err), GENIE_INVALID_ARGUMENT)
        << "searching before upload must fail";
    ASSERT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
    EXPECT_EQ(genie_engine_search(engine, &batch, 0, &results, &err), GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(results, nullptr);
    ASSERT_EQ(genie_engine_search(engine, &batch, k, &results, &err), GENIE_OK) << err.message;
    ASSERT_EQ(results->n_queries, n_queries);
    for (int32_t q = 0; q < n_queries; ++q) {
      std::vector<int32_t> expected;
      for (int32_t o = 0; o < n; ++o) {
        int32_t score = 0;
        for (int32_t kw = q; kw <= q + 4; ++kw) score += 2 * int32_t(objects[o].count(kw));
        score += int32_t(objects[o].count(3 * q % 60));
        if (score > 0) expected.push_back(score);
      }
      std::sort(expected.rbegin(), expected.rend());
      if (expected.size() > size_t(k)) expected.resize(k);
      std::vector<int32_t> got;
      for (int64_t i = results->query_offsets[q]; i < results->query_offsets[q + 1]; ++i) {
        got.push_back(results->scores[i]);
        int32_t o = results->objects[i];
        int32_t score = 0;
        for (int32_t kw = q; kw <= q + 4; ++kw) score += 2 * int32_t(objects[o].count(kw));
        score += int32_t(objects[o].count(3 * q % 60));
        EXPECT_EQ(results->scores[i], score) << "object " << o << " query " << q;
      }
      EXPECT_EQ(got, expected) << "query " << q << " engine kind " << int(kind);
    }
    genie_results_free(results);
    // Set predicates through the engine (the host engines here; the GPU
    // engine's device path is gpu/tests/set_match_test.cpp), against the sets.
    for (int32_t q = 0; q < 8; ++q) {
      const std::vector<int32_t> query{q, 2 * q + 1, q};  // a repeat counts once
      const std::set<int32_t> wanted(query.begin(), query.end());
      for (genie_set_predicate p : {GENIE_SET_CONTAINS, GENIE_SET_OVERLAPS, GENIE_SET_CONTAINED_BY}) {
        std::vector<int32_t> expected;
        for (int32_t o = 0; o < n; ++o) {
          std::size_t shared = 0;
          for (int32_t kw : wanted) shared += objects[o].count(kw);
          const bool holds = p == GENIE_SET_CONTAINS ? shared == wanted.size()
                             : p == GENIE_SET_OVERLAPS ? shared > 0
                                                       : shared == objects[o].size();
          if (holds) expected.push_back(o);
        }
        int32_t* ids = nullptr;
        int64_t count = -1;
        ASSERT_EQ(genie_engine_match_set(engine, index, p, query.data(), int32_t(query.size()), 0,
                                         &ids, &count, &err),
                  GENIE_OK)
            << err.message;
        EXPECT_EQ(std::vector<int32_t>(ids, ids + count), expected)
            << "query " << q << " predicate " << int(p) << " engine kind " << int(kind);
        genie_ids_free(ids);
      }
    }
    int32_t* none = nullptr;
    int64_t none_count = 0;
    EXPECT_EQ(genie_engine_match_set(engine, index, genie_set_predicate(9), nullptr, 0, -1, &none,
                                     &none_count, &err),
              GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(genie_engine_match_set(engine, nullptr, GENIE_SET_OVERLAPS, nullptr, 0, -1, &none,
                                     &none_count, &err),
              GENIE_INVALID_ARGUMENT);
    ASSERT_EQ(genie_engine_drop(engine, &err), GENIE_OK);
    genie_engine_free(engine);
  }
  genie_index_free(index);
}

// A borrowed index (genie_index_borrow: the genie service's shared copy as a
// backend maps it) reads the caller's arrays in place and answers as the
// copied one does, on every engine kind; checked or taken as checked before.
TEST(CApiIndex, BorrowedArraysAnswerAsACopy) {
  std::mt19937 rng(31);
  const int32_t n = 500;
  std::vector<std::set<int32_t>> objects(n);
  std::vector<std::vector<int32_t>> lists(80);
  for (int32_t o = 0; o < n; ++o) {
    int len = int(rng() % 10);
    for (int j = 0; j < len; ++j) objects[o].insert(int32_t(rng() % 80));
    for (int32_t kw : objects[o]) lists[size_t(kw)].push_back(o);
  }
  std::vector<int32_t> keywords, postings;
  std::vector<int64_t> offsets{0};
  for (int32_t kw = 0; kw < 80; ++kw) {
    if (lists[size_t(kw)].empty()) continue;
    keywords.push_back(kw);
    postings.insert(postings.end(), lists[size_t(kw)].begin(), lists[size_t(kw)].end());
    offsets.push_back(int64_t(postings.size()));
  }
  const auto nk = int32_t(keywords.size());
  genie_error err{};
  genie_index* copy = nullptr;
  genie_index* checked = nullptr;
  genie_index* trusted = nullptr;
  ASSERT_EQ(genie_index_create_from_postings(n, nk, keywords.data(), offsets.data(), postings.data(),
                                             nullptr, &copy, &err), GENIE_OK) << err.message;
  ASSERT_EQ(genie_index_borrow(n, nk, keywords.data(), offsets.data(), postings.data(), -1, nullptr,
                               &checked, &err), GENIE_OK) << err.message;
  const int32_t max_keywords = genie_index_max_object_keywords(copy);
  EXPECT_EQ(genie_index_max_object_keywords(checked), max_keywords);
  ASSERT_EQ(genie_index_borrow(n, nk, keywords.data(), offsets.data(), postings.data(),
                               max_keywords, nullptr, &trusted, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_index_num_postings(trusted), int64_t(postings.size()));
  // a borrowed index reads the arrays, it holds no copy of them beyond its own size
  const size_t arrays = sizeof(int32_t) * (keywords.size() + postings.size()) +
                        sizeof(int64_t) * offsets.size();
  EXPECT_GE(genie_index_memory_bytes(trusted), arrays);
  EXPECT_LT(genie_index_memory_bytes(trusted), arrays + 1024);

  const int32_t n_queries = 12, k = 9;
  std::vector<int64_t> query_offsets{0}, item_offsets{0};
  std::vector<int32_t> weights, lo, hi;
  for (int32_t q = 0; q < n_queries; ++q) {
    for (int32_t j = 0; j < 4; ++j) {
      const int32_t kw = int32_t(rng() % 80);
      lo.push_back(kw);
      hi.push_back(kw + int32_t(j % 2));
      weights.push_back(1 + j % 3);
      item_offsets.push_back(int64_t(lo.size()));
    }
    query_offsets.push_back(int64_t(weights.size()));
  }
  genie_query_batch batch{n_queries, query_offsets.data(), item_offsets.data(), weights.data(), lo.data(), hi.data()};
  auto answer = [&](genie_engine_kind kind, genie_index* index) {
    genie_engine* engine = nullptr;
    genie_results* results = nullptr;
    std::vector<std::pair<int32_t, int32_t>> hits;
    EXPECT_EQ(genie_engine_create(kind, nullptr, &engine, &err), GENIE_OK) << err.message;
    EXPECT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
    EXPECT_EQ(genie_engine_search(engine, &batch, k, &results, &err), GENIE_OK) << err.message;
    for (int64_t i = 0; results != nullptr && i < results->query_offsets[n_queries]; ++i)
      hits.emplace_back(results->objects[i], results->scores[i]);
    genie_results_free(results);
    genie_engine_free(engine);
    return hits;
  };
  for (genie_engine_kind kind : {GENIE_ENGINE_CPU_REFERENCE, GENIE_ENGINE_CPU, GENIE_ENGINE_AUTO}) {
    const auto expected = answer(kind, copy);
    EXPECT_EQ(expected.size(), size_t(n_queries * k));
    EXPECT_EQ(answer(kind, checked), expected) << "engine kind " << int(kind);
    EXPECT_EQ(answer(kind, trusted), expected) << "engine kind " << int(kind);
  }
  genie_index_free(copy);
  genie_index_free(checked);
  genie_index_free(trusted);

  // checked: out of order refused; either way a shape that does not span the postings
  genie_index* bad = nullptr;
  std::swap(postings[0], postings[1]);
  if (offsets[1] >= 2) {
    EXPECT_EQ(genie_index_borrow(n, nk, keywords.data(), offsets.data(), postings.data(), -1,
                                 nullptr, &bad, &err), GENIE_INVALID_ARGUMENT);
    EXPECT_EQ(bad, nullptr);
  }
  offsets[0] = 1;
  EXPECT_EQ(genie_index_borrow(n, nk, keywords.data(), offsets.data(), postings.data(),
                               max_keywords, nullptr, &bad, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
}

// The genie service searches one engine from several runner threads: the
// CPU engine's calls run side by side, a GPU engine's (AUTO, where there is
// one) do their host work side by side and take the device one at a time;
// every answer equals the same batch searched alone, and a call stopped by
// its own cancel check stops alone.
TEST(CApiEngine, ConcurrentSearchesOfOneEngine) {
  std::mt19937 rng(23);
  const int32_t n = 20000;
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  for (int32_t o = 0; o < n; ++o) {
    const int len = 1 + int(rng() % 10);
    for (int j = 0; j < len; ++j) keywords.push_back(int32_t(rng() % 500));
    offsets.push_back(int64_t(keywords.size()));
  }
  genie_error err{};
  genie_index* index = nullptr;
  genie_index_options options{};
  ASSERT_EQ(genie_index_create(offsets.data(), n, keywords.data(), &options, &index, &err), GENIE_OK)
      << err.message;
  // batches of 1 to 16 queries of one to three keyword ranges
  struct Batch {
    std::vector<int64_t> query_offsets{0}, item_offsets{0};
    std::vector<int32_t> lo, hi;
    genie_query_batch View() {
      return genie_query_batch{int32_t(query_offsets.size() - 1), query_offsets.data(),
                               item_offsets.data(), nullptr, lo.data(), hi.data()};
    }
  };
  std::vector<Batch> batches(8);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const int nq = 1 + int(b) * 2;
    for (int q = 0; q < nq; ++q) {
      const int items = 1 + int(rng() % 3);
      for (int i = 0; i < items; ++i) {
        const int32_t a = int32_t(rng() % 500);
        batches[b].lo.push_back(a);
        batches[b].hi.push_back(a + int32_t(rng() % 4));
        batches[b].item_offsets.push_back(int64_t(batches[b].lo.size()));
      }
      batches[b].query_offsets.push_back(int64_t(batches[b].item_offsets.size() - 1));
    }
  }
  using Answer = std::vector<std::pair<int32_t, int32_t>>;
  auto answer = [](const genie_results* r) {
    Answer out;
    for (int64_t i = 0; i < r->query_offsets[r->n_queries]; ++i) out.emplace_back(r->objects[i], r->scores[i]);
    return out;
  };
  for (genie_engine_kind kind : {GENIE_ENGINE_CPU, GENIE_ENGINE_AUTO}) {
    genie_engine_options engine_options{};
    engine_options.threads = 2;
    genie_engine* engine = nullptr;
    ASSERT_EQ(genie_engine_create(kind, &engine_options, &engine, &err), GENIE_OK) << err.message;
    ASSERT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
    std::vector<Answer> alone;
    for (Batch& b : batches) {
      genie_results* r = nullptr;
      const genie_query_batch view = b.View();
      ASSERT_EQ(genie_engine_search(engine, &view, 10, &r, &err), GENIE_OK) << err.message;
      alone.push_back(answer(r));
      genie_results_free(r);
    }
    std::atomic<int> wrong{0}, failed{0}, cancel_wrong{0};
    std::vector<std::thread> threads;
    // a call's own cancel check: every engine stops that call alone
    auto always = [](void*) -> int { return 1; };
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 10; ++round) {
          for (std::size_t i = 0; i < batches.size(); ++i) {
            const std::size_t b = (i + std::size_t(t) * 3) % batches.size();
            const genie_query_batch view = batches[b].View();
            genie_results* r = nullptr;
            genie_error e{};
            if (t == 2) {  // every call of this thread asks to stop
              const genie_status st =
                  genie_engine_search_with_cancel(engine, &view, 10, always, nullptr, &r, &e);
              if (st != GENIE_CANCELLED) cancel_wrong++;
              genie_results_free(r);
              continue;
            }
            if (genie_engine_search(engine, &view, 10, &r, &e) != GENIE_OK) {
              failed++;
              continue;
            }
            if (answer(r) != alone[b]) wrong++;
            genie_results_free(r);
          }
        }
      });
    }
    // an upload of the same index meanwhile waits for the searches running
    ASSERT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
    for (auto& th : threads) th.join();
    EXPECT_EQ(failed.load(), 0) << "engine " << int(genie_engine_get_kind(engine));
    EXPECT_EQ(wrong.load(), 0) << "engine " << int(genie_engine_get_kind(engine));
    EXPECT_EQ(cancel_wrong.load(), 0) << "engine " << int(genie_engine_get_kind(engine));
    genie_engine_free(engine);
  }
  genie_index_free(index);
}

TEST(CApiIndex, RejectsBadInput) {
  genie_error err{};
  genie_index* index = nullptr;
  std::vector<int64_t> offsets{0, 2, 1};
  std::vector<int32_t> keywords{1, 2};
  EXPECT_EQ(genie_index_create(offsets.data(), 2, keywords.data(), nullptr, &index, &err),
            GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(index, nullptr);
  EXPECT_EQ(genie_index_create(offsets.data(), -1, keywords.data(), nullptr, &index, &err),
            GENIE_INVALID_ARGUMENT);
  unsigned char garbage[16] = {1, 2, 3};
  EXPECT_EQ(genie_index_deserialize(garbage, sizeof(garbage), &index, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(index, nullptr);
}

}  // namespace

// ---- genie_results_merge ------------------------------------------------------

namespace merge_test {

struct Objects {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  int32_t size() const { return int32_t(offsets.size() - 1); }
};

genie_index* IndexOf(const Objects& all, int32_t begin, int32_t end) {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords(all.keywords.begin() + all.offsets[begin],
                                all.keywords.begin() + all.offsets[end]);
  for (int32_t o = begin; o < end; ++o) offsets.push_back(all.offsets[o + 1] - all.offsets[begin]);
  genie_index* index = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_index_create(offsets.data(), end - begin, keywords.data(), nullptr, &index, &err),
            GENIE_OK)
      << err.message;
  return index;
}

genie_results* SearchOf(genie_index* index, const genie_query_batch& batch, int32_t k) {
  genie_error err{};
  genie_engine* engine = nullptr;
  EXPECT_EQ(genie_engine_create(GENIE_ENGINE_CPU, nullptr, &engine, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
  genie_results* results = nullptr;
  EXPECT_EQ(genie_engine_search(engine, &batch, k, &results, &err), GENIE_OK) << err.message;
  genie_engine_free(engine);
  return results;
}

void ExpectSame(const genie_results* expected, const genie_results* actual) {
  ASSERT_EQ(expected->n_queries, actual->n_queries);
  for (int32_t q = 0; q <= expected->n_queries; ++q) {
    ASSERT_EQ(expected->query_offsets[q], actual->query_offsets[q]) << "query " << q;
  }
  for (int64_t i = 0; i < expected->query_offsets[expected->n_queries]; ++i) {
    EXPECT_EQ(expected->objects[i], actual->objects[i]) << "hit " << i;
    EXPECT_EQ(expected->scores[i], actual->scores[i]) << "hit " << i;
  }
}

}  // namespace merge_test

// Main part + pending part (and a three-way split with an empty part), each
// searched on its own: the merge equals one search over all objects, hit for
// hit, ties by ascending global id included (few keywords: many ties).
TEST(CApiResultsMerge, EqualsOneSearchOverAllObjects) {
  using namespace merge_test;
  std::mt19937 rng(23);
  Objects all;
  for (int32_t o = 0; o < 2000; ++o) {
    const int len = int(rng() % 9);
    for (int j = 0; j < len; ++j) all.keywords.push_back(int32_t(rng() % 30));
    all.offsets.push_back(int64_t(all.keywords.size()));
  }
  std::vector<int64_t> query_offsets{0}, item_offsets{0};
  std::vector<int32_t> weights, lo, hi;
  for (int32_t q = 0; q < 40; ++q) {
    const int items = 1 + int(rng() % 4);
    for (int i = 0; i < items; ++i) {
      const int32_t l = int32_t(rng() % 30);
      lo.push_back(l);
      hi.push_back(l + int32_t(rng() % 3));
      weights.push_back(1 + int32_t(rng() % 3));
      item_offsets.push_back(int64_t(lo.size()));
    }
    query_offsets.push_back(int64_t(weights.size()));
  }
  const genie_query_batch batch{40, query_offsets.data(), item_offsets.data(), weights.data(),
                                lo.data(), hi.data()};
  genie_index* whole = IndexOf(all, 0, all.size());
  const std::vector<std::vector<int32_t>> splits = {{0, 1700}, {0, 1999}, {0, 700, 700, 1400}};
  for (const auto& firsts : splits) {
    std::vector<genie_index*> indexes;
    for (size_t p = 0; p < firsts.size(); ++p) {
      const int32_t end = p + 1 < firsts.size() ? firsts[p + 1] : all.size();
      indexes.push_back(IndexOf(all, firsts[p], end));
    }
    for (int32_t k : {1, 3, 10, 64, 5000}) {
      SCOPED_TRACE(::testing::Message() << firsts.size() << " parts, second at " << firsts[1]
                                        << ", k " << k);
      genie_results* expected = SearchOf(whole, batch, k);
      std::vector<genie_results*> parts;
      for (genie_index* index : indexes) parts.push_back(SearchOf(index, batch, k));
      genie_results* merged = nullptr;
      genie_error err{};
      ASSERT_EQ(genie_results_merge(parts.data(), firsts.data(), int32_t(parts.size()), k, &merged,
                                    &err),
                GENIE_OK)
          << err.message;
      ExpectSame(expected, merged);
      genie_results_free(merged);
      genie_results_free(expected);
      for (genie_results* r : parts) genie_results_free(r);
    }
    for (genie_index* index : indexes) genie_index_free(index);
  }
  genie_index_free(whole);
}

TEST(CApiResultsMerge, RejectsBadArguments) {
  int64_t offsets_a[] = {0, 2}, offsets_b[] = {0, 1}, offsets_two[] = {0, 0, 0};
  int32_t objects_a[] = {0, 4}, scores_a[] = {3, 2};
  int32_t objects_b[] = {1}, scores_b[] = {5};
  genie_results a{1, offsets_a, objects_a, scores_a};
  genie_results b{1, offsets_b, objects_b, scores_b};
  genie_results two{2, offsets_two, nullptr, nullptr};
  const genie_results* parts[] = {&a, &b};
  const int32_t firsts[] = {0, 5};
  genie_results* merged = nullptr;
  genie_error err{};
  ASSERT_EQ(genie_results_merge(parts, firsts, 2, 2, &merged, &err), GENIE_OK) << err.message;
  ASSERT_EQ(merged->n_queries, 1);
  ASSERT_EQ(merged->query_offsets[1], 2);
  EXPECT_EQ(merged->objects[0], 6);  // 1 + 5, score 5
  EXPECT_EQ(merged->scores[0], 5);
  EXPECT_EQ(merged->objects[1], 0);
  genie_results_free(merged);

  merged = reinterpret_cast<genie_results*>(&a);  // must be reset to NULL on failure
  EXPECT_EQ(genie_results_merge(parts, firsts, 0, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(merged, nullptr);
  EXPECT_GT(std::strlen(err.message), 0u);
  EXPECT_EQ(genie_results_merge(parts, firsts, 2, 0, &merged, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_results_merge(nullptr, firsts, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_results_merge(parts, nullptr, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_results_merge(parts, firsts, 2, 2, nullptr, &err), GENIE_INVALID_ARGUMENT);
  const genie_results* with_null[] = {&a, nullptr};
  EXPECT_EQ(genie_results_merge(with_null, firsts, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  const genie_results* mismatched[] = {&a, &two};
  EXPECT_EQ(genie_results_merge(mismatched, firsts, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  const int32_t descending[] = {5, 0};
  EXPECT_EQ(genie_results_merge(parts, descending, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  const int32_t negative[] = {-1, 5};
  EXPECT_EQ(genie_results_merge(parts, negative, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  const int32_t overlapping[] = {0, 4};  // part 0's object 4 would be part 1's first
  EXPECT_EQ(genie_results_merge(parts, overlapping, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  const int32_t near_the_top[] = {0, INT32_MAX};  // 1 + INT32_MAX does not exist
  EXPECT_EQ(genie_results_merge(parts, near_the_top, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  int32_t negative_object[] = {-1};
  genie_results c{1, offsets_b, negative_object, scores_b};
  const genie_results* with_negative[] = {&a, &c};
  EXPECT_EQ(genie_results_merge(with_negative, firsts, 2, 2, &merged, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(merged, nullptr);
  // One part alone is returned cut to k.
  const genie_results* one[] = {&a};
  const int32_t zero[] = {0};
  ASSERT_EQ(genie_results_merge(one, zero, 1, 1, &merged, &err), GENIE_OK) << err.message;
  EXPECT_EQ(merged->query_offsets[1], 1);
  EXPECT_EQ(merged->objects[0], 0);
  genie_results_free(merged);
}

// A set whose rows the caller writes (genie_vectors_create_unsealed) scans
// as the same rows copied by genie_vectors_create do, only once sealed;
// sealing refuses a NaN and leaves the set unsealed.
TEST(CApiVectors, UnsealedSetScansLikeACopiedOneOnceSealed) {
  const int32_t n = 300, dim = 5;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> values(static_cast<std::size_t>(n) * dim);
  for (float& v : values) v = u(rng);
  genie_error err;
  genie_vectors* copied = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &copied, &err), GENIE_OK) << err.message;
  genie_vectors* filled = nullptr;
  float* rows = nullptr;
  ASSERT_EQ(genie_vectors_create_unsealed(n, dim, 0, &filled, &rows, &err), GENIE_OK) << err.message;
  for (float* p = rows; p < rows + values.size(); ++p) ASSERT_EQ(*p, 0.0f) << "rows start zeroed";
  std::memcpy(rows, values.data(), sizeof(float) * values.size());

  const float queries[2 * dim] = {0.5f, -1, 0, 1, 2, -2, 0.25f, 1, -1, 0};
  genie_vector_scan scan;
  std::memset(&scan, 0, sizeof(scan));
  scan.n_queries = 2;
  scan.queries = queries;
  scan.k = 7;
  genie_vector_results* got = nullptr;
  EXPECT_EQ(genie_vectors_scan(filled, GENIE_ENGINE_CPU, nullptr, &scan, &got, &err), GENIE_INVALID_ARGUMENT)
      << "an unsealed set is not scanned";
  rows[3] = std::nanf("");
  EXPECT_EQ(genie_vectors_seal(filled, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("NaN"), std::string::npos) << err.message;
  EXPECT_EQ(genie_vectors_scan(filled, GENIE_ENGINE_CPU, nullptr, &scan, &got, &err), GENIE_INVALID_ARGUMENT)
      << "a refused seal leaves the set unsealed";
  rows[3] = values[3];
  ASSERT_EQ(genie_vectors_seal(filled, &err), GENIE_OK) << err.message;

  genie_vector_results* want = nullptr;
  ASSERT_EQ(genie_vectors_scan(copied, GENIE_ENGINE_CPU, nullptr, &scan, &want, &err), GENIE_OK) << err.message;
  ASSERT_EQ(genie_vectors_scan(filled, GENIE_ENGINE_CPU, nullptr, &scan, &got, &err), GENIE_OK) << err.message;
  ASSERT_EQ(got->query_offsets[2], want->query_offsets[2]);
  for (int64_t i = 0; i < want->query_offsets[2]; ++i) {
    EXPECT_EQ(got->objects[i], want->objects[i]);
    EXPECT_EQ(got->distances[i], want->distances[i]);
  }
  EXPECT_EQ(genie_vectors_count(filled), n);
  EXPECT_EQ(genie_vectors_dim(filled), dim);
  genie_vector_results_free(got);
  genie_vector_results_free(want);
  genie_vectors_free(filled);
  genie_vectors_free(copied);
}

// genie_codes_scan: an unknown placement is refused, as for vectors; with
// every GPU in the mask and none usable, AUTO scans on the CPU and GPU is
// unavailable.
TEST(CApiCodes, PlacementCheckedAndAutoWithoutGpu) {
  genie_codes* codes = nullptr;
  uint64_t* rows = nullptr;
  genie_error err{};
  ASSERT_EQ(genie_codes_create_unsealed(100, 64, 1, &codes, &rows, &err), GENIE_OK) << err.message;
  for (int i = 0; i < 100; ++i) rows[i] = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
  ASSERT_EQ(genie_codes_seal(codes, &err), GENIE_OK) << err.message;
  const uint64_t query = rows[17];
  genie_code_scan scan{};
  scan.n_queries = 1;
  scan.queries = &query;
  scan.k = 3;
  genie_engine_options options{};
  options.device_mask = ~uint64_t{0};
  options.placement = GENIE_PLACEMENT_SHARD + 1;
  genie_code_results* results = nullptr;
  EXPECT_EQ(genie_codes_scan(codes, GENIE_ENGINE_AUTO, &options, &scan, &results, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("placement"), std::string::npos) << err.message;
  if (!AnyUsableGpu()) {
    options.placement = GENIE_PLACEMENT_SHARD;
    EXPECT_EQ(genie_codes_scan(codes, GENIE_ENGINE_GPU, &options, &scan, &results, &err), GENIE_DEVICE_UNAVAILABLE);
    ASSERT_EQ(genie_codes_scan(codes, GENIE_ENGINE_AUTO, &options, &scan, &results, &err), GENIE_OK) << err.message;
    EXPECT_EQ(results->device, GENIE_ENGINE_CPU);
    ASSERT_EQ(results->query_offsets[1], 3);
    EXPECT_EQ(results->objects[0], 17);
    EXPECT_EQ(results->distances[0], 0);
    genie_code_results_free(results);
  }
  genie_codes_free(codes);
}

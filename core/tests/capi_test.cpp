// The C API: the error pattern (status + message, never an exception), the
// match count, devices, and a search round trip through opaque handles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "genie/genie.h"

namespace {

int32_t MatchCount(std::vector<int32_t> o, std::vector<int32_t> q) {
  int32_t count = -1;
  genie_error err{};
  EXPECT_EQ(genie_match_count_int4(o.data(), o.size(), q.data(), q.size(), &count, &err), GENIE_OK)
      << err.message;
  return count;
}

TEST(CApiMatchCount, Rules) {
  EXPECT_EQ(MatchCount({1, 2, 3}, {2, 3, 4}), 2);
  EXPECT_EQ(MatchCount({1, 1, 2, 2}, {1, 1, 1}), 1);
  EXPECT_EQ(MatchCount({}, {1}), 0);
  EXPECT_EQ(MatchCount({1}, {}), 0);
  EXPECT_EQ(MatchCount({INT32_MIN, INT32_MAX, 0}, {INT32_MAX, INT32_MIN}), 2);
}

TEST(CApiMatchCount, RandomAgainstSets) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> o(rng() % 30), q(rng() % 30);
    for (auto& x : o) x = int32_t(rng() % 50) - 25;
    for (auto& x : q) x = int32_t(rng() % 50) - 25;
    std::set<int32_t> os(o.begin(), o.end()), qs(q.begin(), q.end());
    int32_t expected = 0;
    for (int32_t x : qs) expected += os.count(x) ? 1 : 0;
    ASSERT_EQ(MatchCount(o, q), expected);
  }
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

// genie_similar_verify: the GPU without a usable one is unavailable (no
// fallback), AUTO runs on the CPU.
TEST(CApiSimilar, GpuUnavailableAndAutoWithoutGpu) {
  if (AnyUsableGpu()) GTEST_SKIP() << "a GPU is usable here";
  const std::string q = "kitten", candidates = "sittingmitten";
  const int64_t query_offsets[] = {0, 6};
  const int64_t candidate_offsets[] = {0, 2};
  const int64_t text_offsets[] = {0, 7, 13};
  const int32_t counts[] = {1, 3};
  const int32_t unseen[] = {0};
  genie_similar_batch batch{1, 3, 1, q.data(), query_offsets, candidate_offsets,
                            candidates.data(), text_offsets, counts, unseen};
  int32_t distances[2];
  uint8_t exact[2], certified[1];
  int32_t open_bound[1];
  genie_similar_verdict verdict{distances, exact, certified, open_bound, 0, GENIE_ENGINE_GPU};
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
    ASSERT_EQ(genie_engine_drop(engine, &err), GENIE_OK);
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

// The GPU's range search of strings by edit distance (GpuStringSet::Within,
// and genie_strings_within on the GPU) against the CPU engine and brute
// force: batches and single queries; radii 0 to past every length,
// fractional and infinite; excluded strings; non-ASCII code points and
// empty strings; queries longer than the prepared pattern (left to the
// caller's CPU engine); more answers than the device's first
// buffer; a list given (the GPU reads lengths, not the list); bad radii;
// and cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/genie.h"
#include "genie/gpu_string_scan.hpp"
#include "genie/myers_pattern.hpp"
#include "genie/string_scan.hpp"
#include "genie/string_scan_fixture.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::MutateWord;
using testing::RandomWords;

CodePointStrings Queries(std::mt19937* rng, const CodePointStrings& words, int32_t nq, int32_t max_edits) {
  CodePointStrings queries;
  for (int32_t q = 0; q < nq; ++q) {
    const Span<CodePoint> w = words.Get(std::uniform_int_distribution<int32_t>(0, words.size() - 1)(*rng));
    queries.Add(MutateWord(rng, std::vector<CodePoint>(w.begin(), w.end()),
                           std::uniform_int_distribution<int32_t>(0, max_edits)(*rng)));
  }
  return queries;
}

// Every string within radius of each query by the reference distance, by
// (distance, id).
RangeResult BruteForce(const CodePointStrings& words, const CodePointStrings& queries, double radius,
                       const std::vector<uint8_t>& excluded) {
  RangeResult out;
  for (int32_t q = 0; q < queries.size(); ++q) {
    std::vector<std::pair<int32_t, int32_t>> hits;
    for (int32_t id = 0; id < words.size(); ++id) {
      if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
      const int32_t d = LevenshteinReference(queries.Get(q), words.Get(id));
      if (d <= radius) hits.emplace_back(d, id);
    }
    std::sort(hits.begin(), hits.end());
    for (const auto& h : hits) {
      out.objects.push_back(h.second);
      out.distances.push_back(h.first);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

RangeRequest Request(const StringSet& set, const CodePointStrings& queries, double radius,
                     const std::vector<uint8_t>& excluded) {
  RangeRequest request;
  request.n_queries = queries.size();
  request.radius = radius;
  request.n_objects = set.size();
  if (!excluded.empty()) request.excluded = Span<uint8_t>(excluded);
  return request;
}

RangeResult OnCpu(const StringSet& set, const CodePointStrings& queries, double radius,
                  const std::vector<uint8_t>& excluded) {
  RangeResult out;
  EXPECT_TRUE(CpuRangeSearch(WholeList(set.size()), StringQueryMetrics(set.strings, queries, CancelCheck()),
                             Request(set, queries, radius, excluded), 4, &out)
                  .ok());
  return out;
}

// The device's rows; the queries it leaves (longer than the prepared
// pattern, and only those) by brute force, as a caller's CPU engine would.
RangeResult OnGpu(GpuStringSet* gpu, const StringSet& set, const CodePointStrings& queries, double radius,
                  const std::vector<uint8_t>& excluded, int64_t* computed = nullptr) {
  std::vector<RangeCandidate> candidates;
  std::vector<int32_t> host;
  int64_t pairs = -1;
  const Span<uint8_t> flags = excluded.empty() ? Span<uint8_t>() : Span<uint8_t>(excluded);
  const Status s = gpu->Within(set, queries, radius, flags, &candidates, &host, &pairs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (computed != nullptr) *computed = pairs;
  std::vector<int32_t> long_queries;
  for (int32_t q = 0; q < queries.size(); ++q)
    if (queries.Get(q).size() > static_cast<std::size_t>(kernel::kPatternMaxLength)) long_queries.push_back(q);
  EXPECT_EQ(host, long_queries);
  for (int32_t q : host)
    for (int32_t id = 0; id < set.size(); ++id) {
      if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
      const int32_t d = LevenshteinReference(queries.Get(q), set.strings.Get(id));
      if (d <= radius) candidates.push_back(RangeCandidate{q, id, static_cast<double>(d)});
    }
  RangeResult out;
  EXPECT_TRUE(FinishRangeSearch(StringQueryMetrics(set.strings, queries, CancelCheck()),
                                Request(set, queries, radius, excluded), std::move(candidates), 4, &out)
                  .ok());
  return out;
}

void ExpectSame(const RangeResult& got, const RangeResult& want, const std::string& what) {
  ASSERT_EQ(got.offsets, want.offsets) << what;
  EXPECT_EQ(got.objects, want.objects) << what;
  EXPECT_EQ(got.distances, want.distances) << what;
}

std::unique_ptr<GpuStringSet> Copy(const StringSet& set) {
  std::unique_ptr<GpuStringSet> gpu;
  EXPECT_TRUE(GpuStringSet::Create(set, 0, &gpu).ok());
  return gpu;
}

TEST(GpuStringRange, EqualsBruteForceAndTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3001);
  const CodePointStrings words = RandomWords(&rng, 3000, 30);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu = Copy(set);
  ASSERT_NE(gpu, nullptr);
  std::vector<uint8_t> excluded(3000, 0);
  for (int32_t i = 0; i < 3000; i += 7) excluded[static_cast<std::size_t>(i)] = 1;
  const CodePointStrings batch = Queries(&rng, words, 40, 6);
  for (double radius : {0.0, 1.0, 2.0, 2.5, 3.0, 5.0, 31.0, std::numeric_limits<double>::infinity()}) {
    for (bool with_excluded : {false, true}) {
      const std::vector<uint8_t>& flags = with_excluded ? excluded : std::vector<uint8_t>();
      const std::string what = "radius " + std::to_string(radius) + (with_excluded ? " excluded" : "");
      const RangeResult want = BruteForce(words, batch, radius, flags);
      ExpectSame(OnCpu(set, batch, radius, flags), want, what + " cpu");
      ExpectSame(OnGpu(gpu.get(), set, batch, radius, flags), want, what + " gpu");
      CodePointStrings one;
      one.Add(batch.Get(5));
      ExpectSame(OnGpu(gpu.get(), set, one, radius, flags), BruteForce(words, one, radius, flags),
                 what + " single");
    }
  }
  // the pairs read: each query's strings of lengths within the radius of its own
  int64_t computed = 0;
  (void)OnGpu(gpu.get(), set, batch, 2.0, {}, &computed);
  int64_t window = 0;
  for (int32_t q = 0; q < batch.size(); ++q)
    for (int32_t id = 0; id < words.size(); ++id)
      window += std::abs(static_cast<int64_t>(words.Get(id).size()) - static_cast<int64_t>(batch.Get(q).size())) <= 2;
  EXPECT_EQ(computed, window);
}

TEST(GpuStringRange, LongStringsAndQueriesBeyondThePattern) {
  SKIP_WITHOUT_GPU();
  // strings of 200 to 320 code points, each a near copy of one of 30; queries
  // of up to about 330, some past kernel::kPatternMaxLength (256)
  std::mt19937 rng(3002);
  std::uniform_int_distribution<int32_t> letter(0, 3);
  std::vector<std::vector<CodePoint>> seeds;
  for (int32_t i = 0; i < 30; ++i) {
    std::vector<CodePoint> s(static_cast<std::size_t>(200 + (i * 37) % 121));
    for (CodePoint& c : s) c = letter(rng) == 3 ? 0xE9 : static_cast<CodePoint>('a' + letter(rng));
    seeds.push_back(std::move(s));
  }
  CodePointStrings words;
  for (int32_t i = 0; i < 600; ++i) words.Add(MutateWord(&rng, seeds[static_cast<std::size_t>(i % 30)], i % 9));
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu = Copy(set);
  const CodePointStrings batch = Queries(&rng, words, 24, 12);
  int32_t beyond = 0;
  for (int32_t q = 0; q < batch.size(); ++q) beyond += batch.Get(q).size() > 256 ? 1 : 0;
  ASSERT_GT(beyond, 0);
  ASSERT_LT(beyond, batch.size());
  for (double radius : {0.0, 4.0, 12.0, 60.0}) {
    const std::string what = "radius " + std::to_string(radius);
    ExpectSame(OnGpu(gpu.get(), set, batch, radius, {}), BruteForce(words, batch, radius, {}), what);
  }
}

TEST(GpuStringRange, MoreAnswersThanTheFirstBuffer) {
  SKIP_WITHOUT_GPU();
  // 60 queries x 3,000 strings within a radius past every length: 180,000
  // answers against a first buffer of 65,536
  std::mt19937 rng(3003);
  const CodePointStrings words = RandomWords(&rng, 3000, 12);
  StringSet set;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  std::unique_ptr<GpuStringSet> gpu = Copy(set);
  const CodePointStrings batch = Queries(&rng, words, 60, 2);
  const RangeResult got = OnGpu(gpu.get(), set, batch, 1000.0, {});
  EXPECT_EQ(got.offsets.back(), 180000);
  ExpectSame(got, OnCpu(set, batch, 1000.0, {}), "every string");
}

TEST(GpuStringRange, EdgeCases) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3004);
  const CodePointStrings words = RandomWords(&rng, 500, 10);
  StringSet set, empty;
  ASSERT_TRUE(BuildStringSet(words, &set).ok());
  ASSERT_TRUE(BuildStringSet(CodePointStrings(), &empty).ok());
  std::unique_ptr<GpuStringSet> gpu = Copy(set), none = Copy(empty);
  CodePointStrings batch;
  batch.Add(std::vector<CodePoint>());  // the empty query: every string of length <= r
  batch.Add(std::vector<CodePoint>{0x1F600, 'a'});
  for (double radius : {0.0, 1.0, 3.0})
    ExpectSame(OnGpu(gpu.get(), set, batch, radius, {}), BruteForce(words, batch, radius, {}),
               "radius " + std::to_string(radius));
  // an empty set, no queries
  ExpectSame(OnGpu(none.get(), empty, batch, 2.0, {}), BruteForce(CodePointStrings(), batch, 2.0, {}), "empty set");
  ExpectSame(OnGpu(gpu.get(), set, CodePointStrings(), 2.0, {}), RangeResult(), "no queries");
  // bad radii and flags
  std::vector<RangeCandidate> out;
  std::vector<int32_t> host;
  int64_t computed = 0;
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN()})
    EXPECT_EQ(gpu->Within(set, batch, bad, Span<uint8_t>(), &out, &host, &computed).code(), GENIE_INVALID_ARGUMENT);
  std::vector<uint8_t> short_flags(10, 0);
  EXPECT_EQ(gpu->Within(set, batch, 1.0, Span<uint8_t>(short_flags), &out, &host, &computed).code(),
            GENIE_INVALID_ARGUMENT);
}

int CancelAt(void* arg) {
  int* polls = static_cast<int*>(arg);
  return ++*polls > 1 ? 1 : 0;
}

// Through the C API: genie_strings_within on the GPU and on the CPU engine,
// with and without a list (the GPU does not read it), and cancel.
genie_range_results* Within(genie_strings* set, genie_engine_kind device, const std::string& text,
                            const std::vector<int64_t>& offsets, double radius, const genie_cluster_list* list,
                            const genie_engine_options* options, genie_status expect) {
  genie_range_scan scan{};
  scan.n_queries = static_cast<int32_t>(offsets.size()) - 1;
  scan.query_text = text.data();
  scan.query_text_offsets = offsets.data();
  scan.radius = radius;
  scan.list = list;
  genie_range_results* r = nullptr;
  genie_error err{};
  EXPECT_EQ(genie_strings_within(set, device, options, &scan, &r, &err), expect) << err.message;
  return r;
}

TEST(GpuStringRange, CApiEqualsTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3005);
  std::string text, qtext;
  std::vector<int64_t> offsets{0}, qoffsets{0};
  std::uniform_int_distribution<int> letter(0, 5), len(1, 12);
  for (int32_t i = 0; i < 20000; ++i) {
    const int n = len(rng);
    for (int j = 0; j < n; ++j) text += static_cast<char>('a' + letter(rng));
    if (i % 50 == 0) text += "\xc3\xa9";  // an e acute
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  // two strings past the device's prepared pattern (256 code points)
  const std::string long_one(300, 'a'), long_two = std::string(150, 'a') + "b" + std::string(149, 'a');
  for (const std::string* l : {&long_one, &long_two}) {
    text += *l;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  for (int32_t q = 0; q < 700; ++q) {  // more than one pass of 512 queries
    const std::size_t at = static_cast<std::size_t>(offsets[static_cast<std::size_t>(q * 17)]);
    qtext += text.substr(at, static_cast<std::size_t>(offsets[static_cast<std::size_t>(q * 17) + 1]) - at);
    if (q % 3 == 0) qtext += "x";
    qoffsets.push_back(static_cast<int64_t>(qtext.size()));
  }
  qtext += std::string(299, 'a') + "c";  // a query the CPU answers: within 2 of both long strings
  qoffsets.push_back(static_cast<int64_t>(qtext.size()));
  const int32_t nq = 701;
  genie_error err{};
  genie_strings* set = nullptr;
  ASSERT_EQ(genie_strings_create(text.data(), offsets.data(), 20002, &set, &err), GENIE_OK);
  genie_cluster_list* list = nullptr;
  ASSERT_EQ(genie_strings_cluster_list(set, nullptr, 64, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &list, &err), GENIE_OK);
  for (double radius : {1.0, 2.0}) {
    for (const genie_cluster_list* l : {static_cast<const genie_cluster_list*>(nullptr),
                                        static_cast<const genie_cluster_list*>(list)}) {
      genie_range_results* cpu = Within(set, GENIE_ENGINE_CPU, qtext, qoffsets, radius, l, nullptr, GENIE_OK);
      genie_range_results* gpu = Within(set, GENIE_ENGINE_GPU, qtext, qoffsets, radius, l, nullptr, GENIE_OK);
      ASSERT_NE(cpu, nullptr);
      ASSERT_NE(gpu, nullptr);
      EXPECT_EQ(cpu->device, GENIE_ENGINE_CPU);
      EXPECT_EQ(gpu->device, GENIE_ENGINE_GPU);
      const int64_t n = cpu->query_offsets[nq];
      ASSERT_EQ(std::vector<int64_t>(cpu->query_offsets, cpu->query_offsets + nq + 1),
                std::vector<int64_t>(gpu->query_offsets, gpu->query_offsets + nq + 1));
      // the long query: the first long string at radius 1 and 2, the second at 2
      EXPECT_EQ(gpu->query_offsets[nq] - gpu->query_offsets[nq - 1], radius == 1.0 ? 1 : 2);
      EXPECT_EQ(std::vector<int32_t>(cpu->objects, cpu->objects + n), std::vector<int32_t>(gpu->objects, gpu->objects + n));
      EXPECT_EQ(std::vector<double>(cpu->distances, cpu->distances + n),
                std::vector<double>(gpu->distances, gpu->distances + n));
      EXPECT_GT(n, nq);
      genie_range_results_free(cpu);
      genie_range_results_free(gpu);
    }
  }
  int polls = 0;
  genie_engine_options cancelled{};
  cancelled.cancel = &CancelAt;
  cancelled.cancel_arg = &polls;
  EXPECT_EQ(Within(set, GENIE_ENGINE_GPU, qtext, qoffsets, 3.0, nullptr, &cancelled, GENIE_CANCELLED), nullptr);
  genie_cluster_list_free(list);
  genie_strings_free(set);
}

}  // namespace
}  // namespace genie

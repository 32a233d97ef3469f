// GPU edit-distance verification against the CPU one.  Skips when no usable
// GPU is present (CI); run it on the GPU host.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "genie/genie.h"
#include "genie/similar_fixture.hpp"
#include "genie/gpu_edit_distance.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/sequence.hpp"

namespace genie {
namespace {

bool HaveGpu() {
  for (const genie_device_info& d : ListGpuDevices()) {
    if (d.usable) return true;
  }
  return false;
}

const CodePoint kAlphabet[] = {'a', 'b', 'c', 'd', 0xE9, 0xDF, 0x65E5, 0x1F600};

std::vector<CodePoint> RandomString(std::mt19937* rng, int32_t len, int32_t alphabet) {
  std::uniform_int_distribution<int32_t> pick(0, alphabet - 1);
  std::vector<CodePoint> s(static_cast<std::size_t>(len));
  for (CodePoint& c : s) c = kAlphabet[pick(*rng)];
  return s;
}

std::vector<CodePoint> Mutate(std::mt19937* rng, std::vector<CodePoint> s, int32_t edits) {
  for (int32_t e = 0; e < edits; ++e) {
    const std::size_t pos = std::uniform_int_distribution<std::size_t>(0, s.size())(*rng);
    const CodePoint c = kAlphabet[(*rng)() % 8];
    switch ((*rng)() % 3) {
      case 0: if (pos < s.size()) s[pos] = c; break;
      case 1: s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
      default: if (pos < s.size()) s.erase(s.begin() + static_cast<std::ptrdiff_t>(pos)); break;
    }
  }
  return s;
}

EditDistanceBatch RandomBatch(uint32_t seed, int32_t queries, int32_t max_candidates, bool caps,
                              int32_t max_len) {
  static const int32_t kLens[] = {0, 1, 2, 5, 13, 40, 63, 64, 65, 100, 200, 500};
  std::mt19937 rng(seed);
  auto len = [&] {
    int32_t l = kLens[rng() % 12];
    return l > max_len ? static_cast<int32_t>(rng() % (max_len + 1)) : l;
  };
  EditDistanceBatch batch;
  for (int32_t q = 0; q < queries; ++q) {
    const auto query = RandomString(&rng, len(), 2 + q % 7);
    batch.queries.Add(query);
    const int32_t nc = static_cast<int32_t>(rng() % (max_candidates + 1));
    for (int32_t c = 0; c < nc; ++c) {
      batch.candidates.Add(c % 2 ? Mutate(&rng, query, static_cast<int32_t>(rng() % 30))
                                 : RandomString(&rng, len(), 2 + q % 7));
    }
    batch.candidate_offsets.push_back(batch.candidates.size());
    if (caps) batch.max_distance.push_back(q % 3 == 0 ? -1 : q % 13);
  }
  return batch;
}

TEST(EditDistanceGpu, MatchesCpuOnRandomBatches) {
  if (!HaveGpu()) GTEST_SKIP() << "no usable GPU";
  int32_t seed = 1;
  for (bool caps : {false, true}) {
    for (int32_t max_len : {64, 500}) {
      for (int32_t queries : {1, 37, 300}) {
        const EditDistanceBatch batch = RandomBatch(static_cast<uint32_t>(seed++), queries, 64, caps, max_len);
        std::vector<int32_t> cpu, gpu;
        Status st = CpuEditDistances(batch, 0, &cpu);
        ASSERT_TRUE(st.ok()) << st.message();
        st = GpuEditDistances(batch, 0, &gpu);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_EQ(gpu, cpu) << "caps=" << caps << " max_len=" << max_len << " queries=" << queries;
      }
    }
  }
}

TEST(EditDistanceGpu, LargeShortStringBatch) {
  if (!HaveGpu()) GTEST_SKIP() << "no usable GPU";
  const EditDistanceBatch batch = RandomBatch(99, 2000, 200, true, 20);
  std::vector<int32_t> cpu, gpu;
  ASSERT_TRUE(CpuEditDistances(batch, 0, &cpu).ok());
  Status st = GpuEditDistances(batch, 0, &gpu);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(gpu, cpu);
}

std::string Utf8(Span<CodePoint> s) {
  std::string out;
  for (CodePoint c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// genie_similar's verification round through the C API: the GPU's verdict
// (distances, exact flags, certificates, bounds) equals the CPU's.
TEST(EditDistanceGpu, SimilarVerifyMatchesCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no usable GPU";
  for (int32_t round = 0; round < 6; ++round) {
    const EditDistanceBatch strings = RandomBatch(static_cast<uint32_t>(500 + round), 120, 80, false,
                                                  round % 2 ? 64 : 300);
    std::string query_text, candidate_text;
    std::vector<int64_t> query_offsets{0}, candidate_text_offsets{0};
    std::vector<int32_t> counts, unseen;
    std::mt19937 rng(static_cast<uint32_t>(round));
    for (int32_t q = 0; q < strings.queries.size(); ++q) {
      query_text += Utf8(strings.queries.Get(q));
      query_offsets.push_back(static_cast<int64_t>(query_text.size()));
      unseen.push_back(q % 5 == 0 ? -1 : static_cast<int32_t>(rng() % 6));
    }
    for (int32_t j = 0; j < strings.candidates.size(); ++j) {
      candidate_text += Utf8(strings.candidates.Get(j));
      candidate_text_offsets.push_back(static_cast<int64_t>(candidate_text.size()));
      counts.push_back(static_cast<int32_t>(rng() % 12));
    }
    genie_similar_batch batch{};
    batch.n_queries = strings.queries.size();
    batch.n = 2 + round;
    batch.k = 1 + round * 3;
    batch.query_text = query_text.data();
    batch.query_text_offsets = query_offsets.data();
    batch.candidate_offsets = strings.candidate_offsets.data();
    batch.candidate_text = candidate_text.data();
    batch.candidate_text_offsets = candidate_text_offsets.data();
    batch.candidate_counts = counts.data();
    batch.unseen_count_bound = unseen.data();
    const std::size_t nc = counts.size(), nq = unseen.size();
    std::vector<int32_t> d_cpu(nc), d_gpu(nc), b_cpu(nq), b_gpu(nq);
    std::vector<uint8_t> e_cpu(nc), e_gpu(nc), c_cpu(nq), c_gpu(nq);
    genie_similar_verdict cpu{d_cpu.data(), e_cpu.data(), c_cpu.data(), b_cpu.data(), 0, GENIE_ENGINE_AUTO};
    genie_similar_verdict gpu{d_gpu.data(), e_gpu.data(), c_gpu.data(), b_gpu.data(), 0, GENIE_ENGINE_AUTO};
    genie_error err{};
    ASSERT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_CPU, nullptr, &cpu, &err), GENIE_OK) << err.message;
    ASSERT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_GPU, nullptr, &gpu, &err), GENIE_OK) << err.message;
    EXPECT_EQ(cpu.device, GENIE_ENGINE_CPU);
    EXPECT_EQ(gpu.device, GENIE_ENGINE_GPU);
    EXPECT_EQ(d_gpu, d_cpu);
    EXPECT_EQ(e_gpu, e_cpu);
    EXPECT_EQ(c_gpu, c_cpu);
    EXPECT_EQ(b_gpu, b_cpu);
    EXPECT_EQ(gpu.distances_computed, cpu.distances_computed);
    EXPECT_GT(cpu.distances_computed, 0);
  }
}

TEST(EditDistanceGpu, Errors) {
  std::vector<int32_t> d;
  EditDistanceBatch empty;
  EXPECT_TRUE(GpuEditDistances(empty, 0, &d).ok());
  EXPECT_TRUE(d.empty());
  EditDistanceBatch bad = RandomBatch(3, 4, 4, false, 20);
  bad.candidate_offsets.pop_back();
  EXPECT_EQ(GpuEditDistances(bad, 0, &d).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(GpuEditDistances(empty, 0, nullptr).code(), GENIE_INVALID_ARGUMENT);
  EditDistanceBatch one;
  one.queries.Add(std::vector<CodePoint>{'a'});
  one.candidates.Add(std::vector<CodePoint>{'b'});
  one.candidate_offsets.push_back(1);
  if (!HaveGpu()) {
    EXPECT_EQ(GpuEditDistances(one, 0, &d).code(), GENIE_DEVICE_UNAVAILABLE);
    return;
  }
  EXPECT_EQ(GpuEditDistances(one, 1 << 20, &d).code(), GENIE_DEVICE_UNAVAILABLE);
  ASSERT_TRUE(GpuEditDistances(one, 0, &d).ok());
  EXPECT_EQ(d, std::vector<int32_t>{1});
}

int Always(void*) { return 1; }
int Never(void*) { return 0; }

// Polled before the launch: a cancelled batch returns GENIE_CANCELLED, also
// through genie_similar_verify on the GPU.
TEST(EditDistanceGpu, Cancel) {
  if (!HaveGpu()) GTEST_SKIP() << "no usable GPU";
  const EditDistanceBatch batch = RandomBatch(5, 20, 30, true, 100);
  std::vector<int32_t> d, cpu;
  EXPECT_EQ(GpuEditDistances(batch, 0, &d, CancelCheck{&Always, nullptr}).code(), GENIE_CANCELLED);
  ASSERT_TRUE(GpuEditDistances(batch, 0, &d, CancelCheck{&Never, nullptr}).ok());
  ASSERT_TRUE(CpuEditDistances(batch, 0, &cpu).ok());
  EXPECT_EQ(d, cpu);

  genie::testing::KittenSimilarBatch k;
  genie_similar_batch& similar = k.batch;
  genie_similar_verdict& verdict = k.verdict;
  const int32_t* distances = k.distances;
  genie_engine_options options{};
  options.cancel = &Always;
  genie_error err{};
  EXPECT_EQ(genie_similar_verify(&similar, GENIE_ENGINE_GPU, &options, &verdict, &err),
            GENIE_CANCELLED);
  options.cancel = &Never;
  ASSERT_EQ(genie_similar_verify(&similar, GENIE_ENGINE_GPU, &options, &verdict, &err), GENIE_OK)
      << err.message;
  EXPECT_EQ(verdict.device, GENIE_ENGINE_GPU);
  EXPECT_EQ(distances[1], 1);
}

}  // namespace
}  // namespace genie

// GPU edit-distance verification against the CPU one.  Skips when no usable
// GPU is present (CI); run it on the GPU host.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

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

}  // namespace
}  // namespace genie

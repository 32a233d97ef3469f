// Tests of the parallel radix sort against std::sort: signed keys, ties,
// keys whose high or low bits never vary (skipped passes), every thread
// count, the sizes around a thread's share, and cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include "genie/radix_sort.hpp"

namespace genie {
namespace {

void ExpectSorts(std::vector<int64_t> keys, int32_t threads) {
  std::vector<int64_t> want = keys;
  std::sort(want.begin(), want.end());
  ASSERT_TRUE(RadixSortInt64(keys.data(), keys.size(), threads).ok());
  EXPECT_EQ(keys, want) << "n " << keys.size() << " threads " << threads;
}

TEST(RadixSortInt64, EqualsStdSort) {
  std::mt19937_64 rng(3);
  for (std::size_t n : {0, 1, 2, 3, 1000, 65535, 65536, 65537, 300001}) {
    std::vector<int64_t> any(n), pairs(n), narrow(n);
    for (std::size_t i = 0; i < n; ++i) {
      any[i] = static_cast<int64_t>(rng());
      // (keyword, object) as an index build makes them: keywords signed and few, ids ascending
      const int32_t keyword = static_cast<int32_t>(rng() % 5000) - 100;
      pairs[i] = static_cast<int64_t>((static_cast<uint64_t>(static_cast<uint32_t>(keyword)) << 32) | (i / 3));
      narrow[i] = static_cast<int64_t>(rng() % 7) - 3;  // massive ties, both signs
    }
    for (int32_t threads : {1, 3, 8}) {
      ExpectSorts(any, threads);
      ExpectSorts(pairs, threads);
      ExpectSorts(narrow, threads);
    }
  }
  ExpectSorts({INT64_MAX, INT64_MIN, 0, -1, 1, INT64_MIN, INT64_MAX}, 2);
  // non-negative keys in few digits, on several threads: passes skipped, an
  // odd number of them (three: digits 0, 1 and 2) and an even one (two)
  for (uint64_t high : {1000, 0}) {
    std::vector<int64_t> keys(200003);
    for (std::size_t i = 0; i < keys.size(); ++i)
      keys[i] = static_cast<int64_t>(((high ? rng() % high : 0) << 32) | (rng() % 100000));
    for (int32_t threads : {2, 5}) ExpectSorts(keys, threads);
  }
}

TEST(RadixSortInt64, CancelStopsIt) {
  std::vector<int64_t> keys(3000000);
  std::mt19937_64 rng(5);
  for (int64_t& k : keys) k = static_cast<int64_t>(rng());
  std::atomic<int> polls{0};
  auto cancel_fn = [](void* arg) -> int { return ++*static_cast<std::atomic<int>*>(arg) > 2; };
  const Status s = RadixSortInt64(keys.data(), keys.size(), 2, CancelCheck{cancel_fn, &polls});
  EXPECT_EQ(s.code(), GENIE_CANCELLED);
  EXPECT_EQ(RadixSortInt64(nullptr, 5, 1).code(), GENIE_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace genie

// HostArray and ResizeZeroed (genie/host_array.hpp): the zeros written on
// every core reach every element, pieces and tail alike, over memory that
// held other values; and a set made of a HostArray keeps its values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "genie/host_array.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

template <typename T>
std::size_t NonZero(const HostArray<T>& a) {
  std::size_t bad = 0;
  for (const T& x : a) bad += x != T{};
  return bad;
}

TEST(HostArray, ResizeZeroedWritesEveryElement) {
  constexpr std::size_t kFloatPiece = (std::size_t{8} << 20) / sizeof(float);
  HostArray<float> a;
  // room for the largest count first: every count below reuses memory the
  // loop dirtied (a fresh allocation's pages would be zero already)
  a.reserve(3 * kFloatPiece + 7);
  for (int32_t threads : {0, 1, 3}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, kFloatPiece - 1, kFloatPiece, 3 * kFloatPiece + 7,
                              std::size_t{5}}) {
      a.assign(a.capacity(), -1.5f);  // what the memory held before: not zero
      ResizeZeroed(&a, count, threads);
      ASSERT_EQ(a.size(), count);
      EXPECT_EQ(NonZero(a), 0u) << "count " << count << ", threads " << threads;
    }
  }
}

TEST(HostArray, ResizeZeroedWordsOfCodes) {
  const std::size_t count = (std::size_t{8} << 20) / sizeof(uint64_t) * 2 + 3;
  HostArray<uint64_t> a;
  a.reserve(count);
  a.assign(count, ~uint64_t{0});
  ResizeZeroed(&a, count, 0);
  EXPECT_EQ(NonZero(a), 0u);
}

TEST(HostArray, SetBuiltFromItKeepsItsValues) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  VectorSet set;
  ASSERT_TRUE(BuildVectorSet(3, 2, HostArray<float>(values.begin(), values.end()), &set).ok());
  ASSERT_EQ(set.values.size(), values.size());
  EXPECT_EQ(std::memcmp(set.values.data(), values.data(), sizeof(float) * values.size()), 0);
  EXPECT_EQ(set.row(1)[0], 4.0f);
}

}  // namespace
}  // namespace genie

namespace genie {
namespace {

int AlwaysCancel(void*) { return 1; }

// ZeroOnThreads, which ResizeZeroed and the C API's genie_parallel_zero share:
// a cancel before the pieces stops them, with Cancelled
TEST(HostArray, ZeroOnThreadsAnswersACancel) {
  std::vector<char> bytes((std::size_t{8} << 20) * 3, 1);
  EXPECT_EQ(ZeroOnThreads(bytes.data(), bytes.size(), 2, CancelCheck{AlwaysCancel, nullptr}).code(), GENIE_CANCELLED);
  ASSERT_TRUE(ZeroOnThreads(bytes.data(), bytes.size(), 2).ok());
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), static_cast<std::ptrdiff_t>(bytes.size()));
}

}  // namespace
}  // namespace genie

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "genie/postings_codec.hpp"

namespace genie {
namespace {

// Packs lists one after another as the access method does; returns the bytes.
std::vector<uint8_t> PackAll(const std::vector<std::vector<int32_t>>& lists) {
  std::vector<uint8_t> bytes;
  for (const auto& list : lists) {
    std::vector<uint8_t> out(PackedPostingsBound(list.size()) + 1);
    std::size_t written = 0;
    EXPECT_TRUE(PackPostings(list, out.data(), &written).ok());
    EXPECT_LE(written, PackedPostingsBound(list.size()));
    bytes.insert(bytes.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(written));
  }
  return bytes;
}

std::vector<int64_t> Offsets(const std::vector<std::vector<int32_t>>& lists) {
  std::vector<int64_t> offsets{0};
  for (const auto& list : lists) offsets.push_back(offsets.back() + static_cast<int64_t>(list.size()));
  return offsets;
}

std::vector<int32_t> RandomList(std::mt19937& rng, int32_t n_objects, double density) {
  std::bernoulli_distribution take(density);
  std::vector<int32_t> list;
  for (int32_t id = 0; id < n_objects; id++)
    if (take(rng)) list.push_back(id);
  return list;
}

TEST(PostingsCodec, RoundTripsListsOfEveryShape) {
  std::mt19937 rng(15);
  const int32_t n = 100000;
  std::vector<std::vector<int32_t>> lists = {
      {},                                  // an empty list
      {0},                                 // starts at 0: zero bits
      {n - 1},                             // one large id
      {0, 1, 2, 3, 4, 5, 6, 7},            // dense
      {5, 1000, 99999},                    // sparse
  };
  std::vector<int32_t> all(n);
  for (int32_t i = 0; i < n; i++) all[static_cast<std::size_t>(i)] = i;
  lists.push_back(all);  // every object: 0 bits a posting
  for (double density : {0.9, 0.3, 0.01, 0.0003}) lists.push_back(RandomList(rng, n, density));
  // exactly one block, one block and one, a gap in the middle of a block
  std::vector<int32_t> block(128), block_and_one(129), hole;
  for (int32_t i = 0; i < 128; i++) block[static_cast<std::size_t>(i)] = 3 * i;
  for (int32_t i = 0; i < 129; i++) block_and_one[static_cast<std::size_t>(i)] = i;
  for (int32_t i = 0; i < 200; i++) hole.push_back(i < 100 ? i : 50000 + i);
  lists.push_back(block);
  lists.push_back(block_and_one);
  lists.push_back(hole);

  const std::vector<uint8_t> bytes = PackAll(lists);
  const std::vector<int64_t> offsets = Offsets(lists);
  std::vector<int32_t> postings(static_cast<std::size_t>(offsets.back()), -7);
  ASSERT_TRUE(UnpackPostings(bytes.data(), bytes.size(), offsets, n, postings.data(), postings.size(), CancelCheck{}).ok());
  std::size_t p = 0;
  for (const auto& list : lists)
    for (int32_t id : list) EXPECT_EQ(postings[p++], id);
  // the dense list of every object packs to its block bytes alone
  std::vector<uint8_t> out(PackedPostingsBound(all.size()));
  std::size_t written = 0;
  ASSERT_TRUE(PackPostings(all, out.data(), &written).ok());
  EXPECT_EQ(written, (all.size() + kPackedBlock - 1) / kPackedBlock);
}

TEST(PostingsCodec, WidestIdsUse31Bits) {
  const int32_t top = INT32_MAX;
  std::vector<std::vector<int32_t>> lists = {{top - 1}, {0, top - 1}, {1, 2, top - 1}};
  const std::vector<uint8_t> bytes = PackAll(lists);
  const std::vector<int64_t> offsets = Offsets(lists);
  std::vector<int32_t> postings(static_cast<std::size_t>(offsets.back()));
  ASSERT_TRUE(UnpackPostings(bytes.data(), bytes.size(), offsets, top, postings.data(), postings.size(), CancelCheck{}).ok());
  EXPECT_EQ(postings, (std::vector<int32_t>{top - 1, 0, top - 1, 1, 2, top - 1}));
}

TEST(PostingsCodec, RejectsWhatItCannotPack) {
  std::vector<uint8_t> out(64);
  std::size_t written = 0;
  EXPECT_FALSE(PackPostings(std::vector<int32_t>{3, 3}, out.data(), &written).ok());
  EXPECT_FALSE(PackPostings(std::vector<int32_t>{4, 2}, out.data(), &written).ok());
  EXPECT_FALSE(PackPostings(std::vector<int32_t>{-1, 2}, out.data(), &written).ok());
}

// Every truncation, every extension and every single-byte change of a
// packing either unpacks to in-range ids or is refused; never a read or
// write out of bounds (the sanitizer builds would say so).
TEST(PostingsCodec, DamagedPackingsAreRefusedSafely) {
  std::mt19937 rng(7);
  const int32_t n = 5000;
  std::vector<std::vector<int32_t>> lists;
  for (double density : {0.5, 0.05, 0.002}) lists.push_back(RandomList(rng, n, density));
  const std::vector<uint8_t> bytes = PackAll(lists);
  const std::vector<int64_t> offsets = Offsets(lists);
  std::vector<int32_t> postings(static_cast<std::size_t>(offsets.back()));
  for (std::size_t cut = 0; cut < bytes.size(); cut++) {
    std::vector<uint8_t> shorter(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_FALSE(UnpackPostings(shorter.data(), shorter.size(), offsets, n, postings.data(), postings.size(), CancelCheck{}).ok());
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(UnpackPostings(longer.data(), longer.size(), offsets, n, postings.data(), postings.size(), CancelCheck{}).ok());
  EXPECT_FALSE(UnpackPostings(bytes.data(), bytes.size(), offsets, 10, postings.data(), postings.size(), CancelCheck{}).ok());
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::vector<uint8_t> damaged = bytes;
    damaged[i] = static_cast<uint8_t>(damaged[i] ^ (1 + byte(rng) % 255));
    if (UnpackPostings(damaged.data(), damaged.size(), offsets, n, postings.data(), postings.size(), CancelCheck{}).ok()) {
      for (int32_t id : postings) EXPECT_TRUE(id >= 0 && id < n);
    }
  }
  const std::vector<int64_t> backwards = {0, 5, 3};
  EXPECT_FALSE(UnpackPostings(bytes.data(), bytes.size(), backwards, n, postings.data(), postings.size(), CancelCheck{}).ok());
}

// Counts from a damaged Position Map (a negative one, or more postings than
// the buffer holds) are refused before a single id is written.
TEST(PostingsCodec, BadOffsetsAreRefusedBeforeAnyWrite) {
  const std::vector<uint8_t> zero_width = {0};  // one block of width 0: ids 0, 1, 2, ...
  std::vector<int32_t> postings(50, -7);
  const std::vector<std::vector<int64_t>> bad = {
      {0, 100, 50},  // counts 100 and -50: the sum fits, the first list does not
      {0, 51},       // one more than the buffer
      {3, 53},       // not starting at 0
  };
  for (const auto& offsets : bad) {
    EXPECT_FALSE(UnpackPostings(zero_width.data(), zero_width.size(), offsets, 1000, postings.data(),
                                postings.size(), CancelCheck{}).ok());
    EXPECT_EQ(postings, std::vector<int32_t>(50, -7));
  }
  const std::vector<int64_t> fits = {0, 50};
  ASSERT_TRUE(UnpackPostings(zero_width.data(), zero_width.size(), fits, 1000, postings.data(),
                             postings.size(), CancelCheck{}).ok());
  EXPECT_EQ(postings[49], 49);
}

TEST(PostingsCodec, UnpackingPollsCancel) {
  std::vector<int32_t> all(300000);
  for (int32_t i = 0; i < 300000; i++) all[static_cast<std::size_t>(i)] = i;
  std::vector<std::vector<int32_t>> lists = {all, all, all};
  const std::vector<uint8_t> bytes = PackAll(lists);
  const std::vector<int64_t> offsets = Offsets(lists);
  std::vector<int32_t> postings(static_cast<std::size_t>(offsets.back()));
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  EXPECT_EQ(UnpackPostings(bytes.data(), bytes.size(), offsets, 300000, postings.data(), postings.size(), cancel).code(),
            GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

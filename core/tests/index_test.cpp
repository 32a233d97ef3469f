#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "index_format.hpp"  // core/src: a private include dir of the core tests
#include "genie/gallop.hpp"
#include "genie/index.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::RandomCsr;

std::vector<int32_t> ToVector(Span<int32_t> s) { return {s.begin(), s.end()}; }
std::vector<int64_t> ToVector(Span<int64_t> s) { return {s.begin(), s.end()}; }

// The index built the slow, obvious way.
struct NaiveIndex {
  std::map<int32_t, std::set<int32_t>> lists;
  int32_t max_object_keywords = 0;
};

NaiveIndex Naive(const Csr& csr) {
  NaiveIndex naive;
  for (int32_t o = 0; o < csr.size(); ++o) {
    std::vector<int32_t> object = csr.Object(o);
    std::set<int32_t> distinct(object.begin(), object.end());
    naive.max_object_keywords = std::max(naive.max_object_keywords, static_cast<int32_t>(distinct.size()));
    for (int32_t k : distinct) naive.lists[k].insert(o);
  }
  return naive;
}

void ExpectMatchesNaive(const InvertedIndex& index, const NaiveIndex& naive) {
  ASSERT_EQ(index.keywords().size(), naive.lists.size());
  ASSERT_EQ(index.keyword_offsets().size(), naive.lists.size() + 1);
  EXPECT_EQ(index.keyword_offsets()[0], 0);
  std::size_t i = 0;
  for (const auto& [keyword, objects] : naive.lists) {
    ASSERT_EQ(index.keywords()[i], keyword);
    std::vector<int32_t> list(index.postings().begin() + index.keyword_offsets()[i],
                              index.postings().begin() + index.keyword_offsets()[i + 1]);
    EXPECT_EQ(list, std::vector<int32_t>(objects.begin(), objects.end())) << "keyword " << keyword;
    ++i;
  }
  EXPECT_EQ(index.keyword_offsets()[i], index.num_postings());
  EXPECT_EQ(index.max_object_keywords(), naive.max_object_keywords);
}

TEST(IndexBuild, SmallExample) {
  Csr csr;
  csr.Add({5, 3, 5, 9});  // 5 twice: counts once
  csr.Add({});
  csr.Add({3});
  csr.Add({9, 9, 9, -2});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  EXPECT_EQ(index.num_objects(), 4);
  EXPECT_EQ(index.num_postings(), 6);
  EXPECT_EQ(index.split_length(), kDefaultSplitLength);
  EXPECT_EQ(index.max_object_keywords(), 3);
  EXPECT_EQ(ToVector(index.keywords()), (std::vector<int32_t>{-2, 3, 5, 9}));
  EXPECT_EQ(ToVector(index.keyword_offsets()), (std::vector<int64_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(ToVector(index.postings()), (std::vector<int32_t>{3, 0, 2, 0, 0, 3}));
}

TEST(IndexBuild, ExtremeKeywordsSortSigned) {
  Csr csr;
  csr.Add({INT32_MAX, INT32_MIN, 0, -1, 1, 65536, -65536, 65535, -65537});
  csr.Add({INT32_MIN, INT32_MAX});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  EXPECT_EQ(ToVector(index.keywords()),
            (std::vector<int32_t>{INT32_MIN, -65537, -65536, -1, 0, 1, 65535, 65536, INT32_MAX}));
  ExpectMatchesNaive(index, Naive(csr));
}

TEST(IndexBuild, EmptyIndexes) {
  InvertedIndex index;
  std::vector<int64_t> zero = {0};
  ASSERT_TRUE(InvertedIndex::Build(zero, {}, IndexOptions{}, &index).ok());
  EXPECT_EQ(index.num_objects(), 0);
  EXPECT_EQ(index.num_postings(), 0);
  EXPECT_EQ(index.keyword_offsets().size(), 1u);

  std::vector<int64_t> all_empty(6, 0);
  ASSERT_TRUE(InvertedIndex::Build(all_empty, {}, IndexOptions{}, &index).ok());
  EXPECT_EQ(index.num_objects(), 5);
  EXPECT_EQ(index.num_postings(), 0);
  EXPECT_EQ(index.max_object_keywords(), 0);
  EXPECT_TRUE(index.keywords().empty());
}

TEST(IndexBuild, RandomMatchesNaive) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    DataSpec spec;
    spec.objects = 700;
    spec.max_length = 20;
    spec.universe = 300;
    spec.zipf = seed % 2 ? 1.2 : 0.0;
    // Steps that spread keywords over both 16-bit radix digits and the sign.
    spec.keyword_base = seed % 3 == 0 ? INT32_MIN : -1000000;
    spec.keyword_step = seed % 3 == 0 ? 14000000 : 6779;
    Csr csr = RandomCsr(seed, spec);
    InvertedIndex index;
    IndexOptions options;
    options.split_length = static_cast<int32_t>(seed);
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
    EXPECT_EQ(index.split_length(), static_cast<int32_t>(seed));
    ExpectMatchesNaive(index, Naive(csr));
  }
}

TEST(IndexBuild, LargerSkewedBuild) {
  DataSpec spec;
  spec.objects = 20000;
  spec.max_length = 40;
  spec.universe = 5000;
  spec.zipf = 1.1;
  Csr csr = RandomCsr(77, spec);
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  ExpectMatchesNaive(index, Naive(csr));
}

TEST(IndexBuild, Rejections) {
  InvertedIndex index;
  std::vector<int32_t> keywords = {1, 2, 3};
  auto build = [&](std::vector<int64_t> offsets, int32_t split = kDefaultSplitLength) {
    IndexOptions options;
    options.split_length = split;
    return InvertedIndex::Build(offsets, keywords, options, &index);
  };
  EXPECT_EQ(build({}).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(build({1, 3}).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(build({0, 2, 1}).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(build({0, 4}).code(), GENIE_INVALID_ARGUMENT);  // more than the keywords given
  EXPECT_EQ(build({0, -1}).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(build({0, 3}, 0).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(build({0, 3}, -5).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_TRUE(build({0, 1, 3}).ok());
  EXPECT_TRUE(build({0, 1, 3}, 1).ok());

  Status s = build({0, 2, 1});
  EXPECT_NE(s.message().find("offsets"), std::string::npos) << s.message();

  std::vector<int64_t> offsets = {0, 2};
  EXPECT_EQ(InvertedIndex::Build(offsets, Span<int32_t>(nullptr, 2), IndexOptions{}, &index).code(),
            GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(InvertedIndex::Build(offsets, keywords, IndexOptions{}, nullptr).code(),
            GENIE_INVALID_ARGUMENT);

  // A failed build leaves the output alone.
  ASSERT_TRUE(build({0, 3}).ok());
  EXPECT_FALSE(build({0, 5}).ok());
  EXPECT_EQ(index.num_postings(), 3);
}

TEST(IndexKeywordSpan, Bounds) {
  Csr csr;
  csr.Add({INT32_MIN, -5, 0, 7, 8, 20, INT32_MAX});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  using P = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(index.KeywordSpan(INT32_MIN, INT32_MAX), P(0, 7));
  EXPECT_EQ(index.KeywordSpan(INT32_MIN, INT32_MIN), P(0, 1));
  EXPECT_EQ(index.KeywordSpan(INT32_MAX, INT32_MAX), P(6, 7));
  EXPECT_EQ(index.KeywordSpan(-5, 7), P(1, 4));
  EXPECT_EQ(index.KeywordSpan(-4, 6), P(2, 3));
  EXPECT_EQ(index.KeywordSpan(1, 6).first, index.KeywordSpan(1, 6).second);
  EXPECT_EQ(index.KeywordSpan(9, 19).first, index.KeywordSpan(9, 19).second);
  auto reversed = index.KeywordSpan(20, 0);
  EXPECT_EQ(reversed.first, reversed.second);
  InvertedIndex empty;
  EXPECT_EQ(empty.KeywordSpan(INT32_MIN, INT32_MAX), P(0, 0));
}

TEST(IndexSliceObjects, MatchesBuildOfTheSlice) {
  DataSpec spec;
  spec.objects = 300;
  Csr csr = RandomCsr(5, spec);
  IndexOptions options;
  options.split_length = 7;
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
  const std::vector<std::pair<int32_t, int32_t>> cases = {
      {0, 300}, {0, 1}, {0, 150}, {150, 300}, {37, 38}, {100, 233}, {299, 300}, {10, 10}};
  for (auto [begin, end] : cases) {
    Csr sub;
    for (int32_t o = begin; o < end; ++o) sub.Add(csr.Object(o));
    InvertedIndex slice = index.SliceObjects(begin, end);
    SCOPED_TRACE(::testing::Message() << "slice [" << begin << ", " << end << ")");
    EXPECT_EQ(slice.num_objects(), end - begin);
    EXPECT_EQ(slice.split_length(), 7);
    NaiveIndex naive = Naive(sub);
    EXPECT_GE(slice.max_object_keywords(), naive.max_object_keywords);
    naive.max_object_keywords = slice.max_object_keywords();
    ExpectMatchesNaive(slice, naive);
  }
  // Out-of-range bounds clamp.
  EXPECT_EQ(index.SliceObjects(-10, 1000).num_postings(), index.num_postings());
  EXPECT_EQ(index.SliceObjects(200, 100).num_objects(), 0);
  EXPECT_EQ(index.SliceObjects(200, 100).num_postings(), 0);
}

Csr SmallCsr() {
  Csr csr;
  csr.Add({1, 2, 3});
  csr.Add({-7, 2});
  csr.Add({});
  csr.Add({INT32_MAX, 3, 3});
  return csr;
}

std::vector<unsigned char> SerializeOk(const InvertedIndex& index) {
  std::vector<unsigned char> buffer(index.SerializedSize());
  Status s = index.Serialize(buffer.data(), buffer.size());
  EXPECT_TRUE(s.ok()) << s.message();
  return buffer;
}

void ExpectSameIndex(const InvertedIndex& a, const InvertedIndex& b) {
  EXPECT_EQ(a.num_objects(), b.num_objects());
  EXPECT_EQ(a.split_length(), b.split_length());
  EXPECT_EQ(a.max_object_keywords(), b.max_object_keywords());
  EXPECT_EQ(ToVector(a.keywords()), ToVector(b.keywords()));
  EXPECT_EQ(ToVector(a.keyword_offsets()), ToVector(b.keyword_offsets()));
  EXPECT_EQ(ToVector(a.postings()), ToVector(b.postings()));
}

TEST(IndexSerialize, RoundTrip) {
  DataSpec spec;
  spec.objects = 400;
  for (uint32_t seed : {1u, 2u}) {
    Csr csr = RandomCsr(seed, spec);
    IndexOptions options;
    options.split_length = 13;
    InvertedIndex index;
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, options, &index).ok());
    std::vector<unsigned char> buffer = SerializeOk(index);
    InvertedIndex loaded;
    Status s = InvertedIndex::Deserialize(buffer.data(), buffer.size(), &loaded);
    ASSERT_TRUE(s.ok()) << s.message();
    ExpectSameIndex(index, loaded);

    // A slice keeps its inherited bound through a round trip.
    InvertedIndex slice = index.SliceObjects(100, 180);
    buffer = SerializeOk(slice);
    ASSERT_TRUE(InvertedIndex::Deserialize(buffer.data(), buffer.size(), &loaded).ok());
    ExpectSameIndex(slice, loaded);
  }
  InvertedIndex empty, loaded;
  std::vector<unsigned char> buffer = SerializeOk(empty);
  EXPECT_EQ(buffer.size(), empty.SerializedSize());
  ASSERT_TRUE(InvertedIndex::Deserialize(buffer.data(), buffer.size(), &loaded).ok());
  ExpectSameIndex(empty, loaded);
}

TEST(IndexSerialize, UnalignedBuffer) {
  InvertedIndex index;
  Csr csr = SmallCsr();
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  std::vector<unsigned char> storage(index.SerializedSize() + 3);
  ASSERT_TRUE(index.Serialize(storage.data() + 3, index.SerializedSize()).ok());
  InvertedIndex loaded;
  ASSERT_TRUE(InvertedIndex::Deserialize(storage.data() + 3, index.SerializedSize(), &loaded).ok());
  ExpectSameIndex(index, loaded);
}

TEST(IndexSerialize, BadArguments) {
  InvertedIndex index;
  Csr csr = SmallCsr();
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  std::vector<unsigned char> buffer(index.SerializedSize());
  EXPECT_EQ(index.Serialize(buffer.data(), buffer.size() - 1).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(index.Serialize(nullptr, buffer.size()).code(), GENIE_INVALID_ARGUMENT);
  ASSERT_TRUE(index.Serialize(buffer.data(), buffer.size()).ok());
  InvertedIndex loaded;
  EXPECT_EQ(InvertedIndex::Deserialize(nullptr, buffer.size(), &loaded).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(InvertedIndex::Deserialize(buffer.data(), buffer.size(), nullptr).code(),
            GENIE_INVALID_ARGUMENT);
  // A larger buffer is fine for Serialize, but Deserialize wants the exact size.
  std::vector<unsigned char> bigger(buffer.size() + 8, 0);
  ASSERT_TRUE(index.Serialize(bigger.data(), bigger.size()).ok());
  EXPECT_EQ(InvertedIndex::Deserialize(bigger.data(), bigger.size(), &loaded).code(),
            GENIE_INVALID_ARGUMENT);
  EXPECT_TRUE(InvertedIndex::Deserialize(bigger.data(), buffer.size(), &loaded).ok());
}

TEST(IndexSerialize, EveryTruncationIsRejected) {
  InvertedIndex index;
  Csr csr = SmallCsr();
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  std::vector<unsigned char> buffer = SerializeOk(index);
  for (std::size_t len = 0; len < buffer.size(); ++len) {
    // A fresh copy so that reading past len would show up under sanitizers.
    std::vector<unsigned char> cut(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(len));
    InvertedIndex loaded;
    Status s = InvertedIndex::Deserialize(cut.data(), cut.size(), &loaded);
    EXPECT_EQ(s.code(), GENIE_INVALID_ARGUMENT) << "length " << len;
  }
}

TEST(IndexSerialize, EveryByteFlipIsRejected) {
  InvertedIndex index;
  Csr csr = SmallCsr();
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  const std::vector<unsigned char> buffer = SerializeOk(index);
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::vector<unsigned char> bad = buffer;
      bad[i] ^= mask;
      InvertedIndex loaded;
      Status s = InvertedIndex::Deserialize(bad.data(), bad.size(), &loaded);
      EXPECT_EQ(s.code(), GENIE_INVALID_ARGUMENT) << "byte " << i << " mask " << int(mask);
    }
  }
}

// Forged buffers: structurally wrong but with a valid checksum, so that the
// checks behind the checksum are exercised.
class ForgedBuffer : public ::testing::Test {
 protected:
  void SetUp() override {
    Csr csr = SmallCsr();
    ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index_).ok());
    buffer_ = SerializeOk(index_);
    // Layout: header 48, offsets 8*(K+1), keywords 4*K, postings 4*P.
    k_ = index_.keywords().size();
    keywords_at_ = detail::kIndexHeaderBytes + 8 * (k_ + 1);
    postings_at_ = keywords_at_ + 4 * k_;
  }
  template <typename T>
  void Write(std::size_t at, T value) {
    std::memcpy(buffer_.data() + at, &value, sizeof(T));
  }
  template <typename T>
  T Read(std::size_t at) const {
    T value;
    std::memcpy(&value, buffer_.data() + at, sizeof(T));
    return value;
  }
  Status Load() {
    uint64_t sum = detail::IndexChecksum(buffer_.data() + detail::kIndexChecksummedFrom,
                                         buffer_.size() - detail::kIndexChecksummedFrom);
    Write<uint64_t>(detail::kIndexChecksumOffset, sum);
    InvertedIndex loaded;
    return InvertedIndex::Deserialize(buffer_.data(), buffer_.size(), &loaded);
  }
  void ExpectRejected(const char* what) {
    Status s = Load();
    EXPECT_EQ(s.code(), GENIE_INVALID_ARGUMENT) << what;
  }

  InvertedIndex index_;
  std::vector<unsigned char> buffer_;
  std::size_t k_ = 0, keywords_at_ = 0, postings_at_ = 0;
};

TEST_F(ForgedBuffer, UntouchedLoads) { EXPECT_TRUE(Load().ok()); }

TEST_F(ForgedBuffer, HeaderFields) {
  auto original = buffer_;
  Write<int32_t>(16, -1);
  ExpectRejected("negative object count");
  buffer_ = original;
  Write<int32_t>(16, 2);  // postings name object 3
  ExpectRejected("posting beyond the object count");
  buffer_ = original;
  Write<int32_t>(20, 0);
  ExpectRejected("split_length 0");
  buffer_ = original;
  Write<int32_t>(24, -1);
  ExpectRejected("negative max_object_keywords");
  buffer_ = original;
  Write<int32_t>(24, 2);  // object 0 has 3 keywords
  ExpectRejected("max_object_keywords below the real maximum");
  buffer_ = original;
  Write<int32_t>(24, 1000);  // a looser bound is still a bound
  EXPECT_TRUE(Load().ok());
  buffer_ = original;
  // Many objects, few postings: the bound is checked without an array per object.
  Write<int32_t>(16, 5000000);
  Write<int32_t>(24, 2);
  ExpectRejected("max_object_keywords below the real maximum, sparse objects");
  Write<int32_t>(24, 3);
  EXPECT_TRUE(Load().ok());
  buffer_ = original;
  Write<uint32_t>(28, 1);
  ExpectRejected("reserved field");
  buffer_ = original;
  Write<uint32_t>(4, 2);
  ExpectRejected("future version");
  buffer_ = original;
  Write<int64_t>(32, INT64_MAX / 2);
  ExpectRejected("huge keyword count");
  buffer_ = original;
  Write<int64_t>(40, -3);
  ExpectRejected("negative posting count");
  buffer_ = original;
  Write<int64_t>(40, INT64_MAX);
  ExpectRejected("huge posting count");
}

TEST_F(ForgedBuffer, Arrays) {
  auto original = buffer_;
  Write<int64_t>(detail::kIndexHeaderBytes, 1);
  ExpectRejected("first offset not 0");
  buffer_ = original;
  Write<int64_t>(detail::kIndexHeaderBytes + 8, Read<int64_t>(detail::kIndexHeaderBytes + 16));
  ExpectRejected("empty list");
  buffer_ = original;
  Write<int64_t>(detail::kIndexHeaderBytes + 8, 100);
  ExpectRejected("offset beyond the postings");
  buffer_ = original;
  Write<int32_t>(keywords_at_ + 4, Read<int32_t>(keywords_at_));
  ExpectRejected("duplicate keyword");
  buffer_ = original;
  Write<int32_t>(keywords_at_, INT32_MAX);
  ExpectRejected("keywords out of order");
  buffer_ = original;
  // Keyword 2's list is {0, 1}: swap it to {1, 0}.
  std::size_t two = 0;
  while (Read<int32_t>(keywords_at_ + 4 * two) != 2) ++two;
  const auto list_at = postings_at_ + 4 * static_cast<std::size_t>(index_.keyword_offsets()[two]);
  Write<int32_t>(list_at, 1);
  Write<int32_t>(list_at + 4, 0);
  ExpectRejected("postings not ascending");
  buffer_ = original;
  Write<int32_t>(list_at + 4, 0);
  ExpectRejected("duplicate posting");
  buffer_ = original;
  Write<int32_t>(list_at, -1);
  ExpectRejected("negative posting");
}

TEST(IndexMemory, CountsItsArrays) {
  InvertedIndex empty;
  EXPECT_GE(empty.MemoryBytes(), sizeof(InvertedIndex));
  Csr csr = RandomCsr(3, DataSpec{});
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &index).ok());
  EXPECT_GE(index.MemoryBytes(), sizeof(InvertedIndex) + 4 * static_cast<std::size_t>(index.num_postings()) +
                                     12 * index.keywords().size());
}

// Copies and moves of an owned index read their own arrays (the source
// gone), and of a borrowed one the memory it borrows.
TEST(IndexBorrow, CopiesAndMovesKeepTheirArrays) {
  Csr csr = RandomCsr(7, DataSpec{});
  InvertedIndex built;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions{}, &built).ok());
  const std::vector<int32_t> keywords(built.keywords().begin(), built.keywords().end());
  const std::vector<int64_t> offsets(built.keyword_offsets().begin(), built.keyword_offsets().end());
  const std::vector<int32_t> postings(built.postings().begin(), built.postings().end());

  auto equal = [&](const InvertedIndex& x) {
    return std::vector<int32_t>(x.keywords().begin(), x.keywords().end()) == keywords &&
           std::vector<int64_t>(x.keyword_offsets().begin(), x.keyword_offsets().end()) == offsets &&
           std::vector<int32_t>(x.postings().begin(), x.postings().end()) == postings &&
           x.max_object_keywords() == built.max_object_keywords();
  };
  InvertedIndex copy;
  {
    InvertedIndex source = built;
    copy = source;
    InvertedIndex moved(std::move(source));
    EXPECT_TRUE(equal(moved));
    EXPECT_EQ(source.num_postings(), 0);
    EXPECT_EQ(source.keyword_offsets().size(), 1u);
  }
  EXPECT_TRUE(equal(copy));
  EXPECT_FALSE(copy.borrowed());

  InvertedIndex borrowed;
  ASSERT_TRUE(InvertedIndex::Borrow(built.num_objects(), keywords, offsets, postings, -1,
                                    IndexOptions{}, &borrowed).ok());
  EXPECT_TRUE(borrowed.borrowed());
  EXPECT_TRUE(equal(borrowed));
  EXPECT_EQ(borrowed.postings().data(), postings.data());
  InvertedIndex borrowed_copy = borrowed;
  EXPECT_TRUE(borrowed_copy.borrowed());
  EXPECT_EQ(borrowed_copy.postings().data(), postings.data());
  // a part of a borrowed index is its own
  InvertedIndex part = borrowed.SliceObjects(0, built.num_objects() / 2);
  EXPECT_FALSE(part.borrowed());
  EXPECT_TRUE(part.postings().empty() || part.postings().data() != postings.data());
}

}  // namespace
// Gallop from any start at or before the answer equals std::lower_bound
// (before: x < v) and std::upper_bound (before: x <= v), duplicates included.
TEST(Gallop, EqualsTheBinarySearches) {
  std::mt19937 rng(92);
  std::vector<int64_t> values(700);
  for (auto& v : values) v = static_cast<int64_t>(rng() % 300);
  std::sort(values.begin(), values.end());
  for (int64_t v = -2; v < 303; ++v) {
    const auto lower = std::lower_bound(values.begin(), values.end(), v);
    const auto upper = std::upper_bound(values.begin(), values.end(), v);
    for (auto from = values.begin(); from <= lower; from += 1 + (lower - from) / 3) {
      EXPECT_EQ(Gallop(from, values.end(), v, [](int64_t x, int64_t y) { return x < y; }), lower) << v;
      if (from == lower) break;
    }
    for (auto from = values.begin(); from <= upper; from += 1 + (upper - from) / 3) {
      EXPECT_EQ(Gallop(from, values.end(), v, [](int64_t x, int64_t y) { return x <= y; }), upper) << v;
      if (from == upper) break;
    }
  }
}

// KeywordSpanFrom equals KeywordSpan from every admissible start (every
// keyword before it below lo), for ranges around, between and beyond the
// keywords, single keywords included.
TEST(KeywordSpan, FromAHintEqualsTheSearch) {
  std::mt19937 rng(91);
  Csr csr;
  for (int o = 0; o < 300; ++o) {
    std::vector<int32_t> kws;
    for (int i = 0; i < 4; ++i) kws.push_back(static_cast<int32_t>(rng() % 500) * 3);
    csr.Add(kws);
  }
  InvertedIndex index;
  ASSERT_TRUE(InvertedIndex::Build(csr.offsets, csr.keywords, IndexOptions(), &index).ok());
  const auto keywords = index.keywords();
  for (int trial = 0; trial < 3000; ++trial) {
    const int32_t lo = static_cast<int32_t>(rng() % 1600) - 50;
    const int32_t hi = trial % 3 == 0 ? lo : lo + static_cast<int32_t>(rng() % 40) - 5;
    const auto want = index.KeywordSpan(lo, hi);
    std::size_t limit = 0;  // starts in [0, limit] are admissible
    while (limit < keywords.size() && keywords[limit] < lo) ++limit;
    for (std::size_t from : {std::size_t{0}, limit / 2, limit, limit > 0 ? limit - 1 : 0}) {
      EXPECT_EQ(index.KeywordSpanFrom(from, lo, hi), want) << lo << " " << hi << " from " << from;
    }
  }
}

}  // namespace genie

#include "genie/index.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>

#include "genie/gallop.hpp"
#include "index_format.hpp"

namespace genie {
namespace {

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

template <typename T>
T ByteSwap(T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte values only");
  if constexpr (sizeof(T) == 4) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = __builtin_bswap32(u);
    std::memcpy(&v, &u, 4);
  } else {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    u = __builtin_bswap64(u);
    std::memcpy(&v, &u, 8);
  }
  return v;
}

// The buffer may come from PostgreSQL pages at any alignment, so every access
// goes through memcpy.
template <typename T>
void PutArray(unsigned char*& p, const T* data, std::size_t count) {
  if (count == 0) return;
  if constexpr (kLittleEndian) {
    std::memcpy(p, data, count * sizeof(T));
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      T v = ByteSwap(data[i]);
      std::memcpy(p + i * sizeof(T), &v, sizeof(T));
    }
  }
  p += count * sizeof(T);
}

template <typename T>
void Put(unsigned char*& p, T v) {
  PutArray(p, &v, 1);
}

template <typename T>
void GetArray(const unsigned char*& p, T* data, std::size_t count) {
  if (count == 0) return;
  std::memcpy(data, p, count * sizeof(T));
  if constexpr (!kLittleEndian) {
    for (std::size_t i = 0; i < count; ++i) data[i] = ByteSwap(data[i]);
  }
  p += count * sizeof(T);
}

template <typename T>
T Get(const unsigned char*& p) {
  T v;
  GetArray(p, &v, 1);
  return v;
}

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t Round(uint64_t acc, uint64_t input) {
  return Rotl(acc + input * kPrime2, 31) * kPrime1;
}
inline uint64_t LoadWord(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return kLittleEndian ? v : __builtin_bswap64(v);
}

// Keywords are signed; flipping the sign bit makes unsigned order match.
inline uint32_t SortKey(int32_t keyword) {
  return static_cast<uint32_t>(keyword) ^ 0x80000000u;
}
inline int32_t KeywordOf(uint32_t key) { return static_cast<int32_t>(key ^ 0x80000000u); }

}  // namespace

namespace detail {

uint64_t IndexChecksum(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int j = 0; j < 4; ++j) lane[j] = Round(lane[j], LoadWord(p + i + 8 * j));
  }
  uint64_t h = Rotl(lane[0], 1) + Rotl(lane[1], 7) + Rotl(lane[2], 12) + Rotl(lane[3], 18);
  h += static_cast<uint64_t>(size);
  for (; i + 8 <= size; i += 8) h = Rotl(h ^ Round(0, LoadWord(p + i)), 27) * kPrime1 + kPrime3;
  for (; i < size; ++i) h = Rotl(h ^ (p[i] * kPrime3), 11) * kPrime1;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

}  // namespace detail

Status InvertedIndex::Build(Span<int64_t> offsets, Span<int32_t> keywords,
                            const IndexOptions& options, InvertedIndex* out) {
  if (out == nullptr) return Status::InvalidArgument("index output is NULL");
  if (options.split_length < 1) {
    return Status::InvalidArgument("split_length must be at least 1, got " +
                                   std::to_string(options.split_length));
  }
  if (offsets.empty()) {
    return Status::InvalidArgument("offsets must have n_objects + 1 entries (at least 1)");
  }
  if (offsets.size() - 1 > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("too many objects: at most 2147483647");
  }
  const auto n = static_cast<int32_t>(offsets.size() - 1);
  if (offsets[0] != 0) {
    return Status::InvalidArgument("offsets[0] must be 0, got " + std::to_string(offsets[0]));
  }
  for (int32_t o = 0; o < n; ++o) {
    if (offsets[o + 1] < offsets[o]) {
      return Status::InvalidArgument("offsets must not decrease: offsets[" + std::to_string(o + 1) +
                                     "] = " + std::to_string(offsets[o + 1]) + " < offsets[" +
                                     std::to_string(o) + "] = " + std::to_string(offsets[o]));
    }
  }
  const int64_t total = offsets[n];
  if (static_cast<uint64_t>(total) > keywords.size()) {
    return Status::InvalidArgument("offsets[n_objects] = " + std::to_string(total) +
                                   " exceeds the number of keywords (" +
                                   std::to_string(keywords.size()) + ")");
  }
  if (total > 0 && keywords.data() == nullptr) {
    return Status::InvalidArgument("keywords is NULL but offsets describe " +
                                   std::to_string(total) + " of them");
  }

  try {
    InvertedIndex index;
    index.num_objects_ = n;
    index.split_length_ = options.split_length;
    const auto p_total = static_cast<std::size_t>(total);

    // LSD radix sort of (keyword, object) pairs in two 16-bit passes.  The
    // pairs are generated in object order and both passes are stable, so
    // objects come out ascending within each keyword and duplicates of a
    // keyword within one object end up adjacent.  O(P) time, 16 bytes per
    // posting at the peak, no comparison sort: this has to scale to hundreds
    // of millions of postings.
    constexpr std::size_t kBuckets = 1u << 16;
    std::vector<std::size_t> low_start(kBuckets + 1, 0), high_start(kBuckets + 1, 0);
    for (std::size_t j = 0; j < p_total; ++j) {
      uint32_t key = SortKey(keywords[j]);
      ++low_start[(key & 0xFFFFu) + 1];
      ++high_start[(key >> 16) + 1];
    }
    for (std::size_t b = 0; b < kBuckets; ++b) {
      low_start[b + 1] += low_start[b];
      high_start[b + 1] += high_start[b];
    }

    std::vector<uint64_t> by_low(p_total);  // key << 32 | object
    for (int32_t o = 0; o < n; ++o) {
      for (int64_t j = offsets[o]; j < offsets[o + 1]; ++j) {
        uint32_t key = SortKey(keywords[static_cast<std::size_t>(j)]);
        by_low[low_start[key & 0xFFFFu]++] = (static_cast<uint64_t>(key) << 32) |
                                             static_cast<uint32_t>(o);
      }
    }
    low_start = {};

    std::vector<uint32_t> keys(p_total);
    index.owned_postings_.resize(p_total);
    for (uint64_t pair : by_low) {
      std::size_t pos = high_start[pair >> 48]++;
      keys[pos] = static_cast<uint32_t>(pair >> 32);
      index.owned_postings_[pos] = static_cast<int32_t>(pair & 0xFFFFFFFFu);
    }
    by_low = {};
    high_start = {};

    // Dedupe in place, count each object's distinct keywords, and cut the
    // List Array into lists.
    std::vector<int32_t> per_object(static_cast<std::size_t>(n), 0);
    std::size_t kept = 0;
    std::size_t distinct = 0;
    for (std::size_t j = 0; j < p_total; ++j) {
      if (kept > 0 && keys[j] == keys[kept - 1] &&
          index.owned_postings_[j] == index.owned_postings_[kept - 1]) {
        continue;
      }
      if (kept == 0 || keys[j] != keys[kept - 1]) ++distinct;
      keys[kept] = keys[j];
      index.owned_postings_[kept] = index.owned_postings_[j];
      ++per_object[static_cast<std::size_t>(index.owned_postings_[kept])];
      ++kept;
    }
    index.owned_postings_.resize(kept);
    if (kept + kept / 8 < index.owned_postings_.capacity()) index.owned_postings_.shrink_to_fit();

    index.owned_keywords_.reserve(distinct);
    index.owned_keyword_offsets_.reserve(distinct + 1);
    for (std::size_t j = 0; j < kept; ++j) {
      if (j == 0 || keys[j] != keys[j - 1]) {
        if (j > 0) index.owned_keyword_offsets_.push_back(static_cast<int64_t>(j));
        index.owned_keywords_.push_back(KeywordOf(keys[j]));
      }
    }
    if (kept > 0) index.owned_keyword_offsets_.push_back(static_cast<int64_t>(kept));

    for (int32_t c : per_object) index.max_object_keywords_ = std::max(index.max_object_keywords_, c);
    index.AdoptOwned();
    *out = std::move(index);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory building an index of " +
                               std::to_string(total) + " postings");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("index build failed: ") + e.what());
  }
}

std::pair<std::size_t, std::size_t> InvertedIndex::KeywordSpan(int32_t lo, int32_t hi) const {
  auto first = std::lower_bound(keywords_.begin(), keywords_.end(), lo);
  if (lo > hi) {
    auto at = static_cast<std::size_t>(first - keywords_.begin());
    return {at, at};
  }
  auto last = std::upper_bound(first, keywords_.end(), hi);
  return {static_cast<std::size_t>(first - keywords_.begin()),
          static_cast<std::size_t>(last - keywords_.begin())};
}

std::pair<std::size_t, std::size_t> InvertedIndex::KeywordSpanFrom(std::size_t from, int32_t lo,
                                                                  int32_t hi) const {
  const std::size_t size = keywords_.size();
  from = std::min(from, size);
  // ascending items are usually close together
  const auto first = Gallop(keywords_.begin() + static_cast<std::ptrdiff_t>(from), keywords_.end(), lo,
                            [](int32_t keyword, int32_t v) { return keyword < v; });
  if (lo > hi) {
    const auto at = static_cast<std::size_t>(first - keywords_.begin());
    return {at, at};
  }
  std::size_t last = static_cast<std::size_t>(first - keywords_.begin());
  if (lo == hi) {  // one keyword: present or not
    return {last, last + (last < size && keywords_[last] == lo ? 1 : 0)};
  }
  last = static_cast<std::size_t>(std::upper_bound(first, keywords_.end(), hi) - keywords_.begin());
  return {static_cast<std::size_t>(first - keywords_.begin()), last};
}

InvertedIndex InvertedIndex::SliceObjects(int32_t begin, int32_t end) const {
  begin = std::clamp(begin, 0, num_objects_);
  end = std::clamp(end, begin, num_objects_);
  if (begin == 0 && end == num_objects_) return *this;

  InvertedIndex part;
  part.num_objects_ = end - begin;
  part.split_length_ = split_length_;
  // Still a valid bound for a subset of the objects; recomputing it exactly
  // would cost an array per part for little gain.
  part.max_object_keywords_ = max_object_keywords_;
  if (part.num_objects_ == 0) return part;

  // Most lists lie wholly inside or outside a part; the end checks spare
  // them the binary searches, which otherwise dominate for many short lists.
  auto list_range = [&](std::size_t i) {
    const int32_t* first = postings_.data() + keyword_offsets_[i];
    const int32_t* last = postings_.data() + keyword_offsets_[i + 1];
    if (*first >= end || last[-1] < begin) return std::make_pair(last, last);
    const int32_t* from = *first >= begin ? first : std::lower_bound(first, last, begin);
    const int32_t* to = last[-1] < end ? last : std::lower_bound(from, last, end);
    return std::make_pair(from, to);
  };

  // Size exactly first: a part can be most of a large index.
  std::size_t n_keywords = 0, n_postings = 0;
  for (std::size_t i = 0; i < keywords_.size(); ++i) {
    auto [from, to] = list_range(i);
    if (from != to) {
      ++n_keywords;
      n_postings += static_cast<std::size_t>(to - from);
    }
  }
  part.owned_keywords_.reserve(n_keywords);
  part.owned_keyword_offsets_.reserve(n_keywords + 1);
  part.owned_postings_.reserve(n_postings);
  for (std::size_t i = 0; i < keywords_.size(); ++i) {
    auto [from, to] = list_range(i);
    if (from == to) continue;
    part.owned_keywords_.push_back(keywords_[i]);
    const std::size_t at = part.owned_postings_.size();
    part.owned_postings_.resize(at + static_cast<std::size_t>(to - from));  // within the reservation
    std::transform(from, to, part.owned_postings_.begin() + static_cast<std::ptrdiff_t>(at),
                   [begin](int32_t o) { return o - begin; });
    part.owned_keyword_offsets_.push_back(static_cast<int64_t>(part.owned_postings_.size()));
  }
  part.AdoptOwned();
  return part;
}

std::size_t InvertedIndex::SerializedSize() const {
  return detail::kIndexHeaderBytes + sizeof(int64_t) * keyword_offsets_.size() +
         sizeof(int32_t) * keywords_.size() + sizeof(int32_t) * postings_.size();
}

Status InvertedIndex::Serialize(void* buffer, std::size_t size) const {
  const std::size_t needed = SerializedSize();
  if (buffer == nullptr) return Status::InvalidArgument("serialization buffer is NULL");
  if (size < needed) {
    return Status::InvalidArgument("serialization buffer too small: " + std::to_string(size) +
                                   " bytes, need " + std::to_string(needed));
  }
  auto* start = static_cast<unsigned char*>(buffer);
  unsigned char* p = start;
  Put<uint32_t>(p, detail::kIndexMagic);
  Put<uint32_t>(p, detail::kIndexFormatVersion);
  Put<uint64_t>(p, 0);  // checksum, filled in last
  Put<int32_t>(p, num_objects_);
  Put<int32_t>(p, split_length_);
  Put<int32_t>(p, max_object_keywords_);
  Put<uint32_t>(p, 0);
  Put<int64_t>(p, static_cast<int64_t>(keywords_.size()));
  Put<int64_t>(p, static_cast<int64_t>(postings_.size()));
  PutArray(p, keyword_offsets_.data(), keyword_offsets_.size());
  PutArray(p, keywords_.data(), keywords_.size());
  PutArray(p, postings_.data(), postings_.size());
  uint64_t sum = detail::IndexChecksum(start + detail::kIndexChecksummedFrom,
                                       needed - detail::kIndexChecksummedFrom);
  unsigned char* at = start + detail::kIndexChecksumOffset;
  Put<uint64_t>(at, sum);
  return Status::Ok();
}

Status InvertedIndex::Deserialize(const void* buffer, std::size_t size, InvertedIndex* out) {
  auto corrupt = [](const std::string& why) {
    return Status::InvalidArgument("corrupt genie index: " + why);
  };
  if (out == nullptr) return Status::InvalidArgument("index output is NULL");
  if (buffer == nullptr) return Status::InvalidArgument("index buffer is NULL");
  if (size < detail::kIndexHeaderBytes) {
    return corrupt("buffer of " + std::to_string(size) + " bytes is shorter than the header");
  }
  const auto* start = static_cast<const unsigned char*>(buffer);
  const unsigned char* p = start;
  const auto magic = Get<uint32_t>(p);
  const auto version = Get<uint32_t>(p);
  const auto checksum = Get<uint64_t>(p);
  const auto n_objects = Get<int32_t>(p);
  const auto split_length = Get<int32_t>(p);
  const auto max_object_keywords = Get<int32_t>(p);
  const auto reserved = Get<uint32_t>(p);
  const auto n_keywords = Get<int64_t>(p);
  const auto n_postings = Get<int64_t>(p);
  if (magic != detail::kIndexMagic) return corrupt("bad magic number");
  if (version != detail::kIndexFormatVersion) {
    return corrupt("unsupported format version " + std::to_string(version) + " (expected " +
                   std::to_string(detail::kIndexFormatVersion) + ")");
  }
  // Bound the counts by the buffer before any arithmetic on them, so a forged
  // header can neither overflow the size computation nor drive an allocation.
  const std::size_t body = size - detail::kIndexHeaderBytes;
  if (n_keywords < 0 || static_cast<uint64_t>(n_keywords) > body / 12 || n_postings < 0 ||
      static_cast<uint64_t>(n_postings) > body / 4) {
    return corrupt("keyword or posting count does not fit the buffer");
  }
  const auto nk = static_cast<std::size_t>(n_keywords);
  const auto np = static_cast<std::size_t>(n_postings);
  const std::size_t expected = detail::kIndexHeaderBytes + 8 * (nk + 1) + 4 * nk + 4 * np;
  if (size != expected) {
    return corrupt("buffer is " + std::to_string(size) + " bytes, its header describes " +
                   std::to_string(expected));
  }
  if (detail::IndexChecksum(start + detail::kIndexChecksummedFrom,
                            size - detail::kIndexChecksummedFrom) != checksum) {
    return corrupt("checksum mismatch");
  }
  if (reserved != 0) return corrupt("reserved header field is not 0");
  if (n_objects < 0) return corrupt("negative object count");
  if (split_length < 1) return corrupt("split_length below 1");
  if (max_object_keywords < 0) return corrupt("negative max_object_keywords");

  try {
    InvertedIndex index;
    index.num_objects_ = n_objects;
    index.split_length_ = split_length;
    index.max_object_keywords_ = max_object_keywords;
    index.owned_keyword_offsets_.resize(nk + 1);
    index.owned_keywords_.resize(nk);
    index.owned_postings_.resize(np);
    GetArray(p, index.owned_keyword_offsets_.data(), nk + 1);
    GetArray(p, index.owned_keywords_.data(), nk);
    GetArray(p, index.owned_postings_.data(), np);

    index.AdoptOwned();
    const auto& off = index.keyword_offsets_;
    if (off[0] != 0) return corrupt("first keyword offset is not 0");
    if (off[nk] != n_postings) return corrupt("last keyword offset is not the posting count");
    for (std::size_t i = 0; i < nk; ++i) {
      // Build never stores an empty list, so an empty one means corruption.
      if (off[i + 1] <= off[i]) return corrupt("keyword offsets not strictly increasing");
      if (i > 0 && index.keywords_[i] <= index.keywords_[i - 1]) {
        return corrupt("keywords not strictly ascending");
      }
    }
    for (std::size_t i = 0; i < nk; ++i) {
      int32_t prev = -1;
      for (int64_t j = off[i]; j < off[i + 1]; ++j) {
        int32_t o = index.postings_[static_cast<std::size_t>(j)];
        if (o <= prev || o >= n_objects) {
          return corrupt("postings of keyword " + std::to_string(index.keywords_[i]) +
                         " out of range or not strictly ascending");
        }
        prev = o;
      }
    }

    // The engines size their counters from max_object_keywords, so it must
    // really bound every object.  It trivially does when it is at least the
    // number of keywords (each list holds an object at most once).  Otherwise
    // count, with memory bounded by the buffer rather than by n_objects.
    if (static_cast<uint64_t>(max_object_keywords) < nk) {
      int64_t actual = 0;
      if (static_cast<uint64_t>(n_objects) <= np + (1u << 16)) {
        std::vector<int32_t> per_object(static_cast<std::size_t>(n_objects), 0);
        for (int32_t o : index.postings_) {
          actual = std::max<int64_t>(actual, ++per_object[static_cast<std::size_t>(o)]);
        }
      } else {
        std::vector<int32_t> sorted(index.postings_.begin(), index.postings_.end());
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t j = 0; j < sorted.size();) {
          std::size_t run = j;
          while (run < sorted.size() && sorted[run] == sorted[j]) ++run;
          actual = std::max<int64_t>(actual, static_cast<int64_t>(run - j));
          j = run;
        }
      }
      if (actual > max_object_keywords) {
        return corrupt("max_object_keywords " + std::to_string(max_object_keywords) +
                       " is below an object's " + std::to_string(actual) + " keywords");
      }
    }
    *out = std::move(index);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory loading an index of " + std::to_string(np) +
                               " postings");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("index load failed: ") + e.what());
  }
}

std::size_t InvertedIndex::MemoryBytes() const {
  if (borrowed_) {
    return sizeof(InvertedIndex) + sizeof(int32_t) * keywords_.size() +
           sizeof(int64_t) * keyword_offsets_.size() + sizeof(int32_t) * postings_.size();
  }
  return sizeof(InvertedIndex) + sizeof(int32_t) * owned_keywords_.capacity() +
         sizeof(int64_t) * owned_keyword_offsets_.capacity() +
         sizeof(int32_t) * owned_postings_.capacity();
}

namespace {
// The offsets of an index without keywords whose own offsets were moved
// away: a moved-from index stays a valid empty one without allocating.
constexpr int64_t kNoKeywordOffsets[1] = {0};
}  // namespace

void InvertedIndex::AdoptOwned() {
  borrowed_ = false;
  keywords_ = Span<int32_t>(owned_keywords_);
  keyword_offsets_ = owned_keyword_offsets_.empty() ? Span<int64_t>(kNoKeywordOffsets, 1)
                                                    : Span<int64_t>(owned_keyword_offsets_);
  postings_ = Span<int32_t>(owned_postings_);
}

void InvertedIndex::AdoptViews(const InvertedIndex& other) {
  AdoptOwned();
  if (other.borrowed_) {
    borrowed_ = true;
    keywords_ = other.keywords_;
    keyword_offsets_ = other.keyword_offsets_;
    postings_ = other.postings_;
  }
}

InvertedIndex::InvertedIndex(const InvertedIndex& other) { *this = other; }

// No allocation (noexcept): the member initializer's {0} is not made.
InvertedIndex::InvertedIndex(InvertedIndex&& other) noexcept : owned_keyword_offsets_() {
  *this = std::move(other);
}

// Copied into a new object first: out of memory leaves this one as it was.
InvertedIndex& InvertedIndex::operator=(const InvertedIndex& other) {
  if (this == &other) return *this;
  InvertedIndex copy;
  copy.num_objects_ = other.num_objects_;
  copy.split_length_ = other.split_length_;
  copy.max_object_keywords_ = other.max_object_keywords_;
  copy.owned_keywords_ = other.owned_keywords_;
  copy.owned_keyword_offsets_ = other.owned_keyword_offsets_;
  copy.owned_postings_ = other.owned_postings_;
  copy.AdoptViews(other);
  return *this = std::move(copy);
}

InvertedIndex& InvertedIndex::operator=(InvertedIndex&& other) noexcept {
  if (this == &other) return *this;
  num_objects_ = other.num_objects_;
  split_length_ = other.split_length_;
  max_object_keywords_ = other.max_object_keywords_;
  owned_keywords_ = std::move(other.owned_keywords_);
  owned_keyword_offsets_ = std::move(other.owned_keyword_offsets_);
  owned_postings_ = std::move(other.owned_postings_);
  AdoptViews(other);
  other.num_objects_ = 0;
  other.max_object_keywords_ = 0;
  other.owned_keywords_.clear();
  other.owned_keyword_offsets_.clear();
  other.owned_postings_.clear();
  other.AdoptOwned();
  return *this;
}

}  // namespace genie

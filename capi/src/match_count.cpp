// The C API of one object's match count against one int4 keyword query
// (genie/match_count.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "capi_util.hpp"
#include "genie/genie.h"

using genie::capi::Guarded;

namespace {

// The filter's bit of a keyword: the top 6 bits of a multiplicative hash,
// so that nearby keywords (tag numbers, n-gram codes) spread over the word.
inline uint64_t FilterBit(int32_t keyword) {
  return uint64_t{1} << ((static_cast<uint32_t>(keyword) * 0x9E3779B1u) >> 26);
}

// Sorts and dedups keywords[0 .. len) in place: the distinct count.
std::size_t SortDistinct(int32_t* keywords, std::size_t len) {
  std::sort(keywords, keywords + len);
  return static_cast<std::size_t>(std::unique(keywords, keywords + len) - keywords);
}

uint64_t FilterOf(const int32_t* keywords, std::size_t n) {
  uint64_t filter = 0;
  for (std::size_t i = 0; i < n; ++i) filter |= FilterBit(keywords[i]);
  return filter;
}

// The count against sorted distinct keywords[0 .. m): each object element
// the filter lets through is looked up; a query keyword counts once however
// often the object holds it.  A tag query of 8 keywords sets at most 8 of the
// 64 bits, so 7 elements in 8 of an unrelated object stop at the filter
// (the lookups' mispredicted branches were most of the operator's time).
int32_t CountPrepared(const int32_t* object, std::size_t object_len, const int32_t* q, std::size_t m,
                      uint64_t filter) {
  constexpr std::size_t kShort = 64;
  uint64_t seen_short = 0;  // query positions found, when m <= 64
  std::vector<uint8_t> seen_long(m > kShort ? m : 0);
  int32_t matched = 0;
  for (std::size_t i = 0; i < object_len && static_cast<std::size_t>(matched) < m; ++i) {
    if ((filter & FilterBit(object[i])) == 0) continue;
    const int32_t* at = std::lower_bound(q, q + m, object[i]);
    if (at == q + m || *at != object[i]) continue;
    const std::size_t pos = static_cast<std::size_t>(at - q);
    if (m <= kShort) {
      const uint64_t bit = uint64_t{1} << pos;
      matched += (seen_short & bit) == 0;
      seen_short |= bit;
    } else {
      matched += seen_long[pos] == 0;
      seen_long[pos] = 1;
    }
  }
  return matched;
}

}  // namespace

genie_status genie_match_count_int4(const int32_t* object, size_t object_len, const int32_t* query,
                                    size_t query_len, int32_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (count == nullptr || (object == nullptr && object_len > 0) ||
        (query == nullptr && query_len > 0))
      return genie::Status::InvalidArgument("genie_match_count_int4: null input");
    // Both sides are sets: only the query is sorted (in a buffer on the
    // stack when it is short) and each object element is looked up in it;
    // sorting and copying both sides was a tenth of a single tag
    // statement's time.  A scan's operator prepares its query once instead
    // (genie_match_count_prepare_int4).
    constexpr std::size_t kShort = 64;
    int32_t on_stack[kShort];
    std::vector<int32_t> on_heap;
    int32_t* q = on_stack;
    if (query_len > kShort) {
      on_heap.assign(query, query + query_len);
      q = on_heap.data();
    } else if (query_len > 0) {
      std::copy(query, query + query_len, on_stack);
    }
    const std::size_t m = SortDistinct(q, query_len);
    *count = CountPrepared(object, object_len, q, m, FilterOf(q, m));
    return genie::Status::Ok();
  });
}

genie_status genie_match_count_prepare_int4(const int32_t* query, size_t query_len, int32_t* keywords,
                                            size_t* n, uint64_t* filter, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (n == nullptr || filter == nullptr || ((query == nullptr || keywords == nullptr) && query_len > 0))
      return genie::Status::InvalidArgument("genie_match_count_prepare_int4: null input");
    if (query_len > 0 && keywords != query) std::copy(query, query + query_len, keywords);
    *n = SortDistinct(keywords, query_len);
    *filter = FilterOf(keywords, *n);
    return genie::Status::Ok();
  });
}

genie_status genie_match_count_prepared_int4(const int32_t* object, size_t object_len, const int32_t* keywords,
                                             size_t n, uint64_t filter, int32_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (count == nullptr || (object == nullptr && object_len > 0) || (keywords == nullptr && n > 0))
      return genie::Status::InvalidArgument("genie_match_count_prepared_int4: null input");
    *count = CountPrepared(object, object_len, keywords, n, filter);
    return genie::Status::Ok();
  });
}

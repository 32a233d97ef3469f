#include "genie/set_match.hpp"

#include <algorithm>

namespace genie {

namespace {

// Poll cancel about every this many postings read.
constexpr std::size_t kPollPostings = std::size_t{1} << 16;
// The longest union gathered and sorted rather than marked in a bitmap.
constexpr int64_t kSortedUnionMax = int64_t{1} << 20;

// The postings list of each distinct query keyword the index has; *missing
// says whether some query keyword has none.
std::vector<Span<int32_t>> QueryLists(const InvertedIndex& index, Span<int32_t> keywords,
                                      bool* missing) {
  std::vector<int32_t> distinct(keywords.begin(), keywords.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const Span<int32_t> all = index.keywords();
  const Span<int64_t> offsets = index.keyword_offsets();
  const int32_t* postings = index.postings().data();
  std::vector<Span<int32_t>> lists;
  lists.reserve(distinct.size());
  *missing = false;
  for (int32_t keyword : distinct) {
    const auto it = std::lower_bound(all.begin(), all.end(), keyword);
    if (it == all.end() || *it != keyword) {
      *missing = true;
      continue;
    }
    const std::size_t k = static_cast<std::size_t>(it - all.begin());
    lists.push_back(Span<int32_t>(postings + offsets[k], static_cast<std::size_t>(offsets[k + 1] - offsets[k])));
  }
  return lists;
}

// The first position in [from, list.size()) whose id is >= id: a gallop
// from `from`, then a binary search, so that a short list walks a long one
// in O(short * log(long / short)).
std::size_t Gallop(Span<int32_t> list, std::size_t from, int32_t id) {
  std::size_t step = 1;
  std::size_t hi = from;
  while (hi < list.size() && list[hi] < id) {
    from = hi + 1;
    hi += step;
    step *= 2;
  }
  hi = std::min(hi, list.size());
  return static_cast<std::size_t>(std::lower_bound(list.begin() + from, list.begin() + hi, id) -
                                  list.begin());
}

// result := result ∩ list.
Status Intersect(std::vector<int32_t>* result, Span<int32_t> list, const CancelCheck& cancel) {
  std::size_t kept = 0;
  std::size_t j = 0;
  std::size_t next_poll = kPollPostings;
  const bool gallop = list.size() > 8 * result->size();
  for (std::size_t i = 0; i < result->size() && j < list.size(); i++) {
    if (i + j >= next_poll) {
      next_poll = i + j + kPollPostings;
      if (cancel.requested()) return Status::Cancelled();
    }
    const int32_t id = (*result)[i];
    if (gallop) {
      j = Gallop(list, j, id);
    } else {
      while (j < list.size() && list[j] < id) j++;
    }
    if (j < list.size() && list[j] == id) (*result)[kept++] = id;
  }
  result->resize(kept);
  return Status::Ok();
}

}  // namespace

Status ObjectSizes(const InvertedIndex& index, const CancelCheck& cancel, std::vector<int32_t>* sizes) {
  sizes->assign(static_cast<std::size_t>(index.num_objects()), 0);
  const Span<int32_t> postings = index.postings();
  for (std::size_t begin = 0; begin < postings.size(); begin += kPollPostings) {
    if (cancel.requested()) return Status::Cancelled();
    const std::size_t end = std::min(postings.size(), begin + kPollPostings);
    for (std::size_t p = begin; p < end; p++) (*sizes)[static_cast<std::size_t>(postings[p])]++;
  }
  return Status::Ok();
}

Status MatchSet(const InvertedIndex& index, SetPredicate predicate, Span<int32_t> keywords,
                Span<int32_t> object_sizes, const CancelCheck& cancel, std::vector<int32_t>* out) {
  const int32_t n = index.num_objects();
  bool missing = false;
  std::vector<Span<int32_t>> lists = QueryLists(index, keywords, &missing);
  int64_t total = 0;
  for (const auto& list : lists) total += static_cast<int64_t>(list.size());
  out->clear();

  if (predicate == SetPredicate::kContains) {
    if (keywords.empty()) {
      out->resize(static_cast<std::size_t>(n));
      for (int32_t id = 0; id < n; id++) (*out)[static_cast<std::size_t>(id)] = id;
      return Status::Ok();
    }
    if (missing || lists.empty()) return Status::Ok();
    // shortest first: every later step is bounded by the shortest list
    std::sort(lists.begin(), lists.end(),
              [](const Span<int32_t>& a, const Span<int32_t>& b) { return a.size() < b.size(); });
    out->assign(lists[0].begin(), lists[0].end());
    for (std::size_t i = 1; i < lists.size() && !out->empty(); i++) {
      if (cancel.requested()) return Status::Cancelled();
      GENIE_RETURN_IF_ERROR(Intersect(out, lists[i], cancel));
    }
    return Status::Ok();
  }

  if (predicate == SetPredicate::kOverlaps) {
    if (lists.empty()) return Status::Ok();
    if (total * 16 < n && total <= kSortedUnionMax) {
      // few postings: gather and sort them, cheaper than a bitmap of n bits
      // (and short enough a sort to stay within a cancel's poll)
      out->reserve(static_cast<std::size_t>(total));
      for (const auto& list : lists) out->insert(out->end(), list.begin(), list.end());
      if (cancel.requested()) return Status::Cancelled();
      std::sort(out->begin(), out->end());
      out->erase(std::unique(out->begin(), out->end()), out->end());
      return Status::Ok();
    }
    std::vector<uint64_t> bits((static_cast<std::size_t>(n) + 63) / 64, 0);
    for (const auto& list : lists) {
      for (std::size_t begin = 0; begin < list.size(); begin += kPollPostings) {
        if (cancel.requested()) return Status::Cancelled();
        const std::size_t end = std::min(list.size(), begin + kPollPostings);
        for (std::size_t p = begin; p < end; p++)
          bits[static_cast<std::size_t>(list[p]) >> 6] |= uint64_t{1} << (list[p] & 63);
      }
    }
    for (std::size_t w = 0; w < bits.size(); w++) {
      if ((w & (kPollPostings - 1)) == 0 && cancel.requested()) return Status::Cancelled();
      for (uint64_t word = bits[w]; word != 0; word &= word - 1)
        out->push_back(static_cast<int32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(word))));
    }
    return Status::Ok();
  }

  // kContainedBy: an object qualifies when all of its keywords are the
  // query's, that is when the query's lists hold it as often as it has
  // keywords (objects without keywords included)
  if (object_sizes.size() != static_cast<std::size_t>(n))
    return Status::InvalidArgument("contained-by needs every object's keyword count");
  std::vector<int32_t> hits(static_cast<std::size_t>(n), 0);
  for (const auto& list : lists) {
    for (std::size_t begin = 0; begin < list.size(); begin += kPollPostings) {
      if (cancel.requested()) return Status::Cancelled();
      const std::size_t end = std::min(list.size(), begin + kPollPostings);
      for (std::size_t p = begin; p < end; p++) hits[static_cast<std::size_t>(list[p])]++;
    }
  }
  for (int32_t id = 0; id < n; id++) {
    if ((static_cast<std::size_t>(id) & (kPollPostings - 1)) == 0 && cancel.requested())
      return Status::Cancelled();
    if (hits[static_cast<std::size_t>(id)] == object_sizes[static_cast<std::size_t>(id)])
      out->push_back(id);
  }
  return Status::Ok();
}

}  // namespace genie

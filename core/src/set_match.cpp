#include "genie/set_match.hpp"

#include <algorithm>

namespace genie {

namespace {

// Poll cancel about every this many postings read.
constexpr int64_t kPollPostings = 1 << 16;

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
void Intersect(std::vector<int32_t>* result, Span<int32_t> list) {
  std::size_t kept = 0;
  std::size_t j = 0;
  const bool gallop = list.size() > 8 * result->size();
  for (std::size_t i = 0; i < result->size() && j < list.size(); i++) {
    const int32_t id = (*result)[i];
    if (gallop) {
      j = Gallop(list, j, id);
    } else {
      while (j < list.size() && list[j] < id) j++;
    }
    if (j < list.size() && list[j] == id) (*result)[kept++] = id;
  }
  result->resize(kept);
}

}  // namespace

std::vector<int32_t> ObjectSizes(const InvertedIndex& index) {
  std::vector<int32_t> sizes(static_cast<std::size_t>(index.num_objects()), 0);
  for (int32_t id : index.postings()) sizes[static_cast<std::size_t>(id)]++;
  return sizes;
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
      Intersect(out, lists[i]);
    }
    return Status::Ok();
  }

  if (predicate == SetPredicate::kOverlaps) {
    if (lists.empty()) return Status::Ok();
    if (total * 16 < n) {
      // few postings: gather and sort them, cheaper than a bitmap of n bits
      out->reserve(static_cast<std::size_t>(total));
      for (const auto& list : lists) out->insert(out->end(), list.begin(), list.end());
      if (cancel.requested()) return Status::Cancelled();
      std::sort(out->begin(), out->end());
      out->erase(std::unique(out->begin(), out->end()), out->end());
      return Status::Ok();
    }
    std::vector<uint64_t> bits((static_cast<std::size_t>(n) + 63) / 64, 0);
    int64_t read = 0;
    for (const auto& list : lists) {
      for (int32_t id : list) bits[static_cast<std::size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      read += static_cast<int64_t>(list.size());
      if (read >= kPollPostings) {
        read = 0;
        if (cancel.requested()) return Status::Cancelled();
      }
    }
    for (std::size_t w = 0; w < bits.size(); w++) {
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
  int64_t read = 0;
  for (const auto& list : lists) {
    for (int32_t id : list) hits[static_cast<std::size_t>(id)]++;
    read += static_cast<int64_t>(list.size());
    if (read >= kPollPostings) {
      read = 0;
      if (cancel.requested()) return Status::Cancelled();
    }
  }
  for (int32_t id = 0; id < n; id++) {
    if (hits[static_cast<std::size_t>(id)] == object_sizes[static_cast<std::size_t>(id)])
      out->push_back(id);
  }
  return Status::Ok();
}

}  // namespace genie

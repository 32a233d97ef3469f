// InvertedIndex::FromPostings and Borrow: a List Array that is already
// grouped by keyword, as the access method keeps it in its pages, copied or
// read in place.
#include <algorithm>
#include <string>
#include <vector>

#include "genie/index.hpp"

namespace genie {

Status InvertedIndex::CheckPostings(int32_t n_objects, Span<int32_t> keywords,
                                    Span<int64_t> keyword_offsets, Span<int32_t> postings,
                                    int32_t* max_object_keywords) {
  if (n_objects < 0) return Status::InvalidArgument("number of objects must not be negative");
  if (keyword_offsets.size() != keywords.size() + 1 || keyword_offsets[0] != 0 ||
      keyword_offsets[keywords.size()] != static_cast<int64_t>(postings.size()))
    return Status::InvalidArgument("keyword offsets do not span the postings");

  // Every check is O(1) per entry, so corrupt input is found in one pass.
  std::vector<int32_t> per_object(static_cast<std::size_t>(n_objects), 0);
  for (std::size_t k = 0; k < keywords.size(); ++k) {
    if (k > 0 && keywords[k] <= keywords[k - 1])
      return Status::InvalidArgument("keywords are not strictly ascending at position " +
                                     std::to_string(k));
    const int64_t begin = keyword_offsets[k];
    const int64_t end = keyword_offsets[k + 1];
    if (end < begin) return Status::InvalidArgument("keyword offsets are not monotone");
    for (int64_t p = begin; p < end; ++p) {
      const int32_t object = postings[static_cast<std::size_t>(p)];
      if (object < 0 || object >= n_objects)
        return Status::InvalidArgument("object id " + std::to_string(object) + " out of range");
      if (p > begin && object <= postings[static_cast<std::size_t>(p - 1)])
        return Status::InvalidArgument("object ids of keyword " + std::to_string(keywords[k]) +
                                       " are not strictly ascending");
      ++per_object[static_cast<std::size_t>(object)];
    }
  }
  *max_object_keywords = 0;
  for (int32_t count : per_object) *max_object_keywords = std::max(*max_object_keywords, count);
  return Status::Ok();
}

Status InvertedIndex::FromPostings(int32_t n_objects, Span<int32_t> keywords,
                                   Span<int64_t> keyword_offsets, Span<int32_t> postings,
                                   const IndexOptions& options, InvertedIndex* out) {
  if (options.split_length < 1) return Status::InvalidArgument("split length must be at least 1");
  int32_t max_object_keywords = 0;
  GENIE_RETURN_IF_ERROR(
      CheckPostings(n_objects, keywords, keyword_offsets, postings, &max_object_keywords));

  InvertedIndex index;
  index.num_objects_ = n_objects;
  index.split_length_ = options.split_length;
  index.max_object_keywords_ = max_object_keywords;
  index.owned_keywords_.assign(keywords.begin(), keywords.end());
  index.owned_keyword_offsets_.assign(keyword_offsets.begin(), keyword_offsets.end());
  index.owned_postings_.assign(postings.begin(), postings.end());
  index.AdoptOwned();
  *out = std::move(index);
  return Status::Ok();
}

Status InvertedIndex::Borrow(int32_t n_objects, Span<int32_t> keywords,
                             Span<int64_t> keyword_offsets, Span<int32_t> postings,
                             int32_t max_object_keywords, const IndexOptions& options,
                             InvertedIndex* out) {
  if (options.split_length < 1) return Status::InvalidArgument("split length must be at least 1");
  if (max_object_keywords < 0) {
    GENIE_RETURN_IF_ERROR(
        CheckPostings(n_objects, keywords, keyword_offsets, postings, &max_object_keywords));
  } else if (n_objects < 0 || keyword_offsets.size() != keywords.size() + 1 ||
             keyword_offsets[0] != 0 ||
             keyword_offsets[keywords.size()] != static_cast<int64_t>(postings.size())) {
    return Status::InvalidArgument("keyword offsets do not span the postings");
  }

  InvertedIndex index;
  index.num_objects_ = n_objects;
  index.split_length_ = options.split_length;
  index.max_object_keywords_ = max_object_keywords;
  index.owned_keyword_offsets_.clear();
  index.borrowed_ = true;
  index.keywords_ = keywords;
  index.keyword_offsets_ = keyword_offsets;
  index.postings_ = postings;
  *out = std::move(index);
  return Status::Ok();
}

}  // namespace genie

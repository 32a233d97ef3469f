// The host-side inverted index: GENIE's List Array and Position Map.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

constexpr int32_t kDefaultSplitLength = 4096;

struct IndexOptions {
  // Postings lists longer than this are handled as sublists of at most this
  // many postings (the paper's load balancing, section III-B1).
  int32_t split_length = kDefaultSplitLength;
};

// All postings grouped by keyword (keywords ascending), object ids ascending
// within a keyword: the List Array.  The Position Map is the sorted array of
// distinct keywords with the offset of each one's postings list.  Because
// keywords are sorted, a keyword range [lo, hi] maps to one contiguous span
// of the List Array, which is what query compilation relies on.
//
// Load balancing: keyword i's list [offsets[i], offsets[i+1]) is read as
// sublists of at most split_length postings; sublist j of it covers
// [offsets[i] + j*L, min(offsets[i] + (j+1)*L, offsets[i+1])).  This
// one-to-many map is arithmetic, so it costs no memory.
class InvertedIndex {
 public:
  InvertedIndex() { AdoptOwned(); }
  // Copies and moves re-point the views at the new object's own storage (a
  // borrowed index's views keep pointing at the memory it borrows).
  InvertedIndex(const InvertedIndex& other);
  InvertedIndex(InvertedIndex&& other) noexcept;
  InvertedIndex& operator=(const InvertedIndex& other);
  InvertedIndex& operator=(InvertedIndex&& other) noexcept;

  // Object o owns keywords[offsets[o] .. offsets[o+1]); offsets has
  // n_objects + 1 entries.  Duplicates within an object count once.
  // O(total postings) time and memory (radix sort by keyword).
  static Status Build(Span<int64_t> offsets, Span<int32_t> keywords, const IndexOptions& options,
                      InvertedIndex* out);

  // Adopts an already grouped List Array and Position Map (as the access
  // method stores them): keywords strictly ascending, keyword_offsets from 0
  // to postings.size(), object ids in [0, n_objects) strictly ascending
  // within a keyword.  Validated in O(postings); no sort.
  static Status FromPostings(int32_t n_objects, Span<int32_t> keywords,
                             Span<int64_t> keyword_offsets, Span<int32_t> postings,
                             const IndexOptions& options, InvertedIndex* out);

  // The same arrays read in place, not copied (a borrowed index): the caller
  // keeps them unchanged and mapped for the index's life and every copy of
  // it; the genie service's copy in shared memory, which each backend maps.
  // max_object_keywords < 0: validated as FromPostings does, and counted;
  // else the arrays are taken as a copy of an index validated before, whose
  // max_object_keywords that is, and only their shape is checked (O(1)).
  static Status Borrow(int32_t n_objects, Span<int32_t> keywords, Span<int64_t> keyword_offsets,
                       Span<int32_t> postings, int32_t max_object_keywords,
                       const IndexOptions& options, InvertedIndex* out);

  // Whether the arrays are borrowed (Borrow) rather than held.
  bool borrowed() const { return borrowed_; }

  int32_t num_objects() const { return num_objects_; }
  int64_t num_postings() const { return static_cast<int64_t>(postings_.size()); }
  int32_t split_length() const { return split_length_; }
  // The largest number of distinct keywords of one object: a bound on any
  // item's contribution to a score (before its weight).
  int32_t max_object_keywords() const { return max_object_keywords_; }

  Span<int32_t> keywords() const { return keywords_; }               // distinct, ascending
  Span<int64_t> keyword_offsets() const { return keyword_offsets_; } // keywords().size() + 1
  Span<int32_t> postings() const { return postings_; }               // the List Array

  // Indices [first, last) into keywords() of the keywords within [lo, hi].
  std::pair<std::size_t, std::size_t> KeywordSpan(int32_t lo, int32_t hi) const;
  // The same, searching from keyword position `from` on (every keyword before
  // it is < lo): a query's ascending items each start where the last ended.
  std::pair<std::size_t, std::size_t> KeywordSpanFrom(std::size_t from, int32_t lo, int32_t hi) const;

  // The objects [begin, end) as an index of their own, with object ids
  // renumbered to start at 0: one part for multiple loading.
  InvertedIndex SliceObjects(int32_t begin, int32_t end) const;

  std::size_t SerializedSize() const;
  Status Serialize(void* buffer, std::size_t size) const;
  static Status Deserialize(const void* buffer, std::size_t size, InvertedIndex* out);

  // Host bytes the index reads: its own, or for a borrowed index the
  // arrays it borrows (the engines size their parts by what they read).
  std::size_t MemoryBytes() const;

 private:
  // Points the views at the owned arrays (not borrowed).
  void AdoptOwned();
  // The same, then at other's borrowed memory when other borrows (its
  // owned arrays, copied or moved here first, are then empty).
  void AdoptViews(const InvertedIndex& other);
  // Checks the shape and order of a List Array, counting the largest number
  // of keywords of one object into *max_object_keywords.
  static Status CheckPostings(int32_t n_objects, Span<int32_t> keywords,
                              Span<int64_t> keyword_offsets, Span<int32_t> postings,
                              int32_t* max_object_keywords);

  int32_t num_objects_ = 0;
  int32_t split_length_ = kDefaultSplitLength;
  int32_t max_object_keywords_ = 0;
  bool borrowed_ = false;
  // What every reader reads: the owned arrays below, or borrowed memory.
  Span<int32_t> keywords_;
  Span<int64_t> keyword_offsets_;
  Span<int32_t> postings_;
  // Empty when borrowed; the builders write these and then AdoptOwned.
  std::vector<int32_t> owned_keywords_;
  std::vector<int64_t> owned_keyword_offsets_{0};
  std::vector<int32_t> owned_postings_;
};

}  // namespace genie

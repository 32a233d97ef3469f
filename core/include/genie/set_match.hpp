// Set predicates over an inverted index: the objects whose keyword set
// contains the query's (int4[] @>), overlaps it (&&) or is contained in it
// (<@), from the postings alone, by intersecting or uniting the query's
// keyword lists (the list intersection of seed 002, on the CPU).
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/index.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

enum class SetPredicate {
  kContains,     // every query keyword is among the object's: intersection
  kOverlaps,     // some query keyword is: union
  kContainedBy,  // every keyword of the object is among the query's
};

// Each object's number of distinct keywords (what kContainedBy compares
// with), by one pass over the postings into *sizes; polls cancel.
Status ObjectSizes(const InvertedIndex& index, const CancelCheck& cancel, std::vector<int32_t>* sizes);

// The ids of the objects that satisfy the predicate, ascending, into *out.
// keywords: the query's, in any order, repeats allowed.  An empty query is
// contained in every object and overlaps none.  object_sizes: ObjectSizes
// of the index, read by kContainedBy only (which then also returns the
// objects without keywords).  Polls cancel about every 64K postings or
// objects visited, and before sorting a union.
Status MatchSet(const InvertedIndex& index, SetPredicate predicate, Span<int32_t> keywords,
                Span<int32_t> object_sizes, const CancelCheck& cancel, std::vector<int32_t>* out);

}  // namespace genie

// The exact k nearest strings by edit distance over every string of an
// index: what genie_similar and ORDER BY text <%> query fall back to when
// the n-gram count bound is too weak to certify from a few candidates (real
// typos), and what makes them fast without it.
//
// A StringSet keeps an index's strings by object id and, beside them, the
// ids ordered by (length, id) with the start of each length: a query of
// length lq visits the lengths lq, lq - 1, lq + 1, lq - 2, ... and stops
// once |L - lq| exceeds the k-th smallest distance found so far (the length
// filter), and every distance is computed capped at that k-th distance
// (bit-parallel Myers with early exit, genie/myers_pattern.hpp), so most
// strings cost a few word operations.  On the CPU a class-count bound
// (genie/string_signature.hpp), read in the set's order, skips most strings
// before their distance.
//
// The order of a result, on every engine: distance, then length, then
// object id (so ties at the k-th distance are broken the same way by the
// CPU and the GPU, and a scan asked for a larger k returns the same rows
// first).
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/sequence.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"
#include "genie/string_signature.hpp"

namespace genie {

struct StringSet {
  CodePointStrings strings;           // by object id
  std::vector<int32_t> order;         // object ids by (length, id)
  std::vector<int64_t> length_begin;  // order[length_begin[L] .. length_begin[L + 1]): length L
  // by position in order: the CPU scan skips a string whose signature bound
  // exceeds the running k-th distance without reading the string
  std::vector<StringSignature> signatures;

  int32_t size() const { return strings.size(); }
  int32_t max_length() const { return static_cast<int32_t>(length_begin.size()) - 2; }
  int32_t length(int32_t id) const {
    return static_cast<int32_t>(strings.offsets[static_cast<std::size_t>(id) + 1] -
                                strings.offsets[static_cast<std::size_t>(id)]);
  }
};

// Takes the strings (object id = position) and builds the length order.
// InvalidArgument when a string is longer than 2^30 code points.
Status BuildStringSet(CodePointStrings strings, StringSet* out);

struct StringScanRequest {
  CodePointStrings queries;
  int32_t k = 1;
  // Empty, or one per query: only strings within this distance are
  // reported (< 0: no limit).  A caller that knows an upper bound on the
  // k-th distance passes it to narrow the scan.
  std::vector<int32_t> caps;
  // Empty, or one per object of the set: nonzero = not a candidate (dead).
  Span<uint8_t> excluded;
};

// Per query q: results [offsets[q], offsets[q + 1]) in the order above, at
// most k of them (fewer when fewer strings are candidates within the cap).
struct StringScanResult {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
  std::vector<int32_t> distances;
};

// k >= 1, caps and excluded of the right sizes, queries of at most 2^30
// code points.
Status ValidateStringScanRequest(const StringSet& set, const StringScanRequest& request);

// The scan on up to `threads` host threads (0: hardware concurrency): a
// batch is split by query, a single query by stripes of every length (the
// stripes share the k-th distance found so far).  cancel is polled every
// 1024 strings.
Status CpuStringScan(const StringSet& set, const StringScanRequest& request, int32_t threads,
                     StringScanResult* out, const CancelCheck& cancel = CancelCheck());

// Re-ranking (the permutation index): per query q, only the strings
// candidates[candidate_offsets[q] .. candidate_offsets[q + 1]), each by its
// exact Levenshtein distance, the best k in the scan's order (distance,
// length, id).  Candidates out of range or excluded are skipped;
// duplicates count once.  On up to `threads` threads, by query; cancel
// polled every 64 candidates.
Status RerankStrings(const StringSet& set, const CodePointStrings& queries, int32_t k,
                     Span<int64_t> candidate_offsets, Span<int32_t> candidates,
                     Span<uint8_t> excluded, int32_t threads, StringScanResult* out,
                     const CancelCheck& cancel = CancelCheck());

}  // namespace genie

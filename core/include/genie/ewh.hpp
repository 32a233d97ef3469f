// Error Weighted Hashing (seed 003: Mani et al.; its GPU form in
// ../shared/papers/error-weighted-hashing-gpu.txt), the approximate mode of
// binary codes, as genie's weighted match count.
//
// m hash functions each take h bit positions of a b-bit code (drawn at
// random, distinct within a function); a code's keyword for function i is
// i * 2^h + the h bits it reads there, so every code has one keyword per
// function, ascending.  A query asks, for each function, the buckets whose
// value differs from its own in r <= e bits, each with the weight alpha_r:
// one item per (function, r) holding the C(h, r) buckets at r errors.  The
// weighted match count of a code is then the sum over the functions of
// alpha_r for the r errors it has on each (0 where r > e), the paper's
// score (Algorithm 3); the codes of the highest scores are the shortlist,
// and the exact Hamming distance re-ranks it (RerankCodes), so every
// distance returned is true.
//
// The positions come from the seed alone (splitmix64), so every machine
// computes the same keywords.  A bit position p is bit 7 - p % 8 of byte
// p / 8 of the code, the order of PostgreSQL's bit(n): the keywords do not
// depend on the machine's byte order.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/query.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

// h: a bucket value fits 24 bits, so m * 2^h keywords stay in int32 for m
// up to 127; e: at most C(24, 3) = 2,024 buckets per function and query.
constexpr int32_t kMaxEwhSampleBits = 24;
constexpr int32_t kMaxEwhErrors = 3;

struct EwhParams {
  int32_t bits = 0;         // b, the codes' length
  int32_t functions = 0;    // m
  int32_t sample_bits = 0;  // h, at most b
  uint64_t seed = 0;
};

class EwhFunctions {
 public:
  // InvalidArgument for bits outside [1, kMaxCodeBits], functions below 1,
  // sample_bits outside [1, min(bits, kMaxEwhSampleBits)], or functions *
  // 2^sample_bits beyond the int32 keyword range.
  static Status Create(const EwhParams& params, std::unique_ptr<EwhFunctions>* out);

  const EwhParams& params() const { return params_; }

  // The h-bit value function i reads from a code (WordsForBits(bits) words).
  uint32_t Value(const uint64_t* code, int32_t function) const;

  // out[i] = i * 2^h + Value(code, i) for i in [0, m): ascending.
  void Keywords(const uint64_t* code, int32_t* out) const;

  // The errors a query may ask: errors within [0, min(h, kMaxEwhErrors)].
  int32_t ErrorsAsked(int32_t errors) const;

  // The buckets a query asks with e = ErrorsAsked(errors) errors: m * sum
  // over r <= e of C(h, r).
  int64_t QueryBuckets(int32_t errors) const;

  // Those buckets' keywords (QueryBuckets(errors) of them), function by
  // function, r ascending within a function, C(h, r) of them at r errors,
  // each group ascending (as an item's ranges are best given).
  void QueryKeywords(const uint64_t* code, int32_t errors, int32_t* out) const;

  // Appends the query of a code to batch: one item per (function, r) with
  // its C(h, r) buckets, weight weights[r]; weights has errors + 1 values,
  // each at least 1, and errors is in [0, min(h, kMaxEwhErrors)].
  Status AddQuery(const uint64_t* code, int32_t errors, Span<int32_t> weights, QueryBatch* batch) const;

 private:
  EwhParams params_;
  // per function, its h positions as (byte, shift) pairs: bit = (byte >> shift) & 1
  std::vector<uint32_t> bytes_;
  std::vector<uint8_t> shifts_;
};

// C(n, r) for the small values EWH uses (n <= 64, r <= 3).
int64_t EwhBinomial(int32_t n, int32_t r);

// The default weights for e errors: alpha_r = e + 1 - r (3, 2, 1 for the
// paper's e = 2).  Why linear: for a neighbour whose bits differ with
// probability p, the log-likelihood ratio of r errors in h bits against a
// random code is h ln(2 (1 - p)) - r ln((1 - p) / p), linear in r.
std::vector<int32_t> EwhDefaultWeights(int32_t errors);

}  // namespace genie

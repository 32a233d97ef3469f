// Locality-sensitive hashing for vectors (GENIE section IV): each of m hash
// functions h_i maps a vector to a signature, re-hashed (MurmurHash3) into
// `buckets` values, and keyword i * buckets + r_i(h_i(v)) is one item of the
// match-count model, so the match count of two vectors is the number of
// functions on which they collide, an estimate of m * sim(p, q).
//
// Families:
//   E2LSH (L2): h(v) = floor((a . v + b) / w), a ~ N(0, I), b ~ U[0, w)
//     (Datar et al., p-stable distributions); collision probability falls
//     with the Euclidean distance, at a rate set by the width w.
//   RBH (Laplacian kernel exp(-|p - q|_1 / sigma), L1): a randomly shifted
//     grid, each dimension j its own pitch g_j ~ Gamma(2, sigma) and shift
//     u_j ~ U[0, g_j), h(v) = (floor((v_j - u_j) / g_j))_j (Rahimi and
//     Recht's random binning), whose collision probability is the kernel
//     itself.
//
// The random draws come from the seed alone, through integer generators and
// a logarithm made of IEEE basic operations, so that every machine (a
// standby, a restore on another host) computes the same keywords.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/status.hpp"

namespace genie {

enum class LshFamily : int32_t { kE2Lsh = 1, kRbh = 2 };

struct LshParams {
  LshFamily family = LshFamily::kE2Lsh;
  int32_t dim = 0;
  int32_t functions = 0;  // m
  int32_t buckets = 0;    // the re-hash range of each function
  double width = 0;       // E2LSH: the bucket width w; RBH: the kernel's sigma
  uint64_t seed = 0;
};

class LshFunctions {
 public:
  // InvalidArgument for dim, functions or buckets below 1, functions *
  // buckets beyond the int32 keyword range, or a width that is not finite
  // and positive.  functions x dim draws (one double each, two for RBH): the
  // generator's numbers on this thread, their logarithms on up to `threads`
  // threads (0 or less: every core), the same functions for any count.
  // The cancel check is polled every 4,096 draws: Cancelled() within a
  // fraction of a millisecond.
  static Status Create(const LshParams& params, std::unique_ptr<LshFunctions>* out,
                       const CancelCheck& cancel = {}, int32_t threads = 1);

  const LshParams& params() const { return params_; }
  // The drawn functions, m x dim in function order (empty for the other
  // family): E2LSH's projections a_i and offsets b_i, RBH's pitches g and
  // shifts u.
  const std::vector<double>& projections() const { return projections_; }
  const std::vector<double>& offsets() const { return offsets_; }
  const std::vector<double>& cells() const { return cells_; }
  const std::vector<double>& shifts() const { return shifts_; }

  // out[i] = i * buckets + r_i(h_i(v)) for i in [0, m): ascending, one per
  // function.  v has dim finite elements.
  void Keywords(const float* v, int32_t* out) const;
  // The same for count vectors one after another (an index build's, a batch
  // at a time), on threads threads: vector k's keywords at out + k * m.
  // The same keywords as Keywords, vector by vector.
  Status KeywordsBatch(const float* vectors, int64_t count, int32_t threads, const CancelCheck& cancel,
                       int32_t* out) const;

 private:
  // E2LSH's keyword of function i from its dot product a_i . v
  int32_t E2LshKeyword(int32_t i, double dot) const;

  LshParams params_;
  std::vector<double> projections_;  // E2LSH: a_i, m x dim
  std::vector<double> offsets_;      // E2LSH: b_i
  std::vector<double> cells_;        // RBH: the pitch of each function and dimension, m x dim
  std::vector<double> shifts_;       // RBH: the shifts, m x dim
};

// Equation 9 of the paper: the smallest m with Pr[|c/m - s| <= epsilon] >=
// 1 - delta for c ~ Binomial(m, s), maximised over s = 0.01, 0.02, ..,
// 0.99.  epsilon and delta in (0, 1), else 0.  For epsilon = delta = 0.06
// it is 238, at s = 0.55 (the paper's Figure 8 reads 237 at s = 0.5, where
// the exact sum gives 234: its curve is drawn from a coarser computation).
int32_t LshFunctionsFor(double epsilon, double delta);

// Pr[h(p) = h(q)] for one function at distance c (L2 for E2LSH, L1 for RBH).
double LshCollisionProbability(LshFamily family, double width, double distance);

// A default width from a sample of count vectors (row-major): E2LSH four
// times, RBH twice the median distance (L2, L1) from a sample vector to its
// nearest other one; 1 when the sample has fewer than two distinct vectors.
// count^2 x dim work: the cancel check is polled once per sample pair.
Status EstimateLshWidth(LshFamily family, const float* sample, int32_t count, int32_t dim,
                        const CancelCheck& cancel, double* width);

// SplitMix64 (Steele, Lea and Flood): the next of a seeded sequence, the
// same on every machine (the LSH draws' seeding, EWH's bit positions).
uint64_t SplitMix64(uint64_t* state);

// MurmurHash3_x86_32 (Austin Appleby, public domain), the paper's re-hash.
uint32_t MurmurHash3(const void* key, std::size_t size, uint32_t seed);

// ln(x) for finite x > 0 from IEEE basic operations only (same bits on
// every machine), within a few units in the last place of std::log.
double PortableLog(double x);
// out[i] = PortableLog(x[i]) for i in [0, n), bit for bit, several at once.
void PortableLogs(const double* x, double* out, std::size_t n);

}  // namespace genie

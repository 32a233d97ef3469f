// The permutation index for metric spaces (seed 001, "a pure GPU
// architecture to build the Permutation Index"; Chávez, Figueroa and
// Navarro's permutation index).  m objects of the index, the permutants,
// are fixed at build; every object orders them by its distance to each,
// and two objects whose orders agree are likely close.  The order is kept
// as its inverse: byte j of an object's row is the rank of permutant j
// (0 = nearest), ties by permutant number.  The Spearman footrule of two
// rows, sum over j of |rank_a(j) - rank_b(j)|, is at most floor(m^2 / 2),
// so the candidates of a query (the objects of smallest footrule, ties by
// object id) are found by counting, not by a sort: in a batch the cut is
// searched with a few vectorised counting passes, a single query's comes
// from its stripes' histograms; then one pass collects.  Only the candidates are compared with the query by the real
// distance (RerankVectors, RerankStrings): the answers are approximate,
// their distances true.
//
// Rows are kPermutationStride-aligned: m rounded up to 16 bytes, the
// padding zero in every row, so the footrule is whole 16-byte steps of
// absolute differences (psadbw on x86, __vabsdiffu4 on the GPU) that the
// padding adds nothing to.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/sequence.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"
#include "genie/vectors.hpp"

namespace genie {

constexpr int32_t kMaxPermutants = 128;

inline int32_t PermutationStride(int32_t m) { return (m + 15) / 16 * 16; }

// The largest footrule of two permutations of m: floor(m^2 / 2).
inline int32_t MaxFootrule(int32_t m) { return m * m / 2; }

// A view of n rows of stride bytes; row i, byte j < m: the rank of
// permutant j for object i; bytes m .. stride zero.  The memory is the
// caller's (a PermutationTable, or a buffer of the extension's cache).
struct PermutationRows {
  int32_t m = 0;
  int32_t stride = 0;
  int32_t n = 0;
  uint8_t* data = nullptr;

  uint8_t* row(int32_t i) const {
    return data + static_cast<std::size_t>(i) * static_cast<std::size_t>(stride);
  }
};

// Rows that own their memory.
struct PermutationTable {
  int32_t m = 0;
  int32_t stride = 0;
  int32_t n = 0;
  std::vector<uint8_t> positions;

  PermutationRows rows() { return {m, stride, n, positions.data()}; }
  const uint8_t* row(int32_t i) const {
    return positions.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(stride);
  }
  uint8_t* row(int32_t i) {
    return positions.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(stride);
  }
};

// InvalidArgument unless rows is well formed: m in [1, kMaxPermutants],
// the stride PermutationStride(m), data for n >= 0 rows.
Status CheckPermutationRows(const PermutationRows& rows);

// An empty table of n zero rows for m permutants.  InvalidArgument for m
// outside [1, kMaxPermutants] or n < 0; OutOfMemory.
Status MakePermutationTable(int32_t m, int32_t n, PermutationTable* out);

// The permutants: m distinct object ids of [0, n) whose excluded byte is 0
// (excluded empty: all), in the order drawn.  A SplitMix64 generator seeded
// with seed draws ids uniformly; the same objects in the same order and the
// same seed give the same permutants on every machine.  InvalidArgument
// when fewer than m objects are eligible.
Status ChoosePermutants(int32_t n, Span<uint8_t> excluded, int32_t m, uint64_t seed,
                        std::vector<int32_t>* out);

// One row from an object's m distances: rank by (distance, permutant).
void PositionsFromDistances(const double* distances, int32_t m, uint8_t* row);

// Writes object i's distances to the m permutants to out[0 .. m); must not
// throw.
using PermutantDistances = std::function<Status(int32_t i, double* out)>;

// Rows first .. first + count of table, from distances, on up to `threads`
// threads (0: every core); cancel polled every few objects.
Status ComputePermutations(const PermutantDistances& distances, int32_t first, int32_t count,
                           int32_t threads, const PermutationRows& table,
                           const CancelCheck& cancel = CancelCheck());

// The squared L2Distance (the same sums, no square root: the same order)
// of every vector of objects to every vector of permutants, as rows
// first .. of table (table.n >= first + objects.n, m = permutants.n).
Status VectorPermutations(const VectorSet& objects, const VectorSet& permutants, int32_t first,
                          int32_t threads, const PermutationRows& table,
                          const CancelCheck& cancel = CancelCheck());

// The same by Levenshtein distance.
Status StringPermutations(const CodePointStrings& objects, const CodePointStrings& permutants,
                          int32_t first, int32_t threads, const PermutationRows& table,
                          const CancelCheck& cancel = CancelCheck());

int32_t Footrule(const uint8_t* a, const uint8_t* b, int32_t stride);

// Per query: candidates [offsets[q], offsets[q + 1]) of objects, ascending
// by id.
struct PermutationCandidates {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
};

// For each row q of queries (same m as objects): the `candidates` objects
// of smallest footrule, ties by id, skipping those whose excluded byte is
// nonzero (excluded empty, or one per object); all eligible objects when
// fewer.  On up to `threads` threads: a batch by groups of queries, one
// query by stripes of objects.  InvalidArgument for mismatched tables or
// candidates < 1; cancel polled every stripe and every counting pass.
Status CpuPermutationSelect(const PermutationRows& objects, const PermutationRows& queries,
                            Span<uint8_t> excluded, int32_t candidates, int32_t threads,
                            PermutationCandidates* out, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

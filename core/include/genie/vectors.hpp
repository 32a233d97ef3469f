// Vectors (genie_vector_ops on real[]): the exact k nearest vectors by
// Euclidean distance over every vector of an index, and re-ranking a
// candidate list (the LSH mode) by the same distance.
//
// One distance everywhere.  L2Distance is what the SQL operator
// real[] <-> real[] returns and what every engine reports: each element
// widened to double, the squared differences summed in element order with
// every step rounded on its own (no fused multiply-add), then the square
// root.  The GPU computes it the same way, so the CPU, the GPU and a
// sequential scan agree to the last bit.
//
// How a scan stays exact and fast.  A first pass computes every squared
// distance in float32, in whatever order suits the hardware (SIMD lanes,
// GPU tiles), with a proven bound on its error; the vectors that the bound
// cannot rule out of the k nearest (ties at the k-th distance included) are
// re-ranked with L2Distance.  On the CPU the pass sums (q_i - x_i)^2, whose
// error is relative whatever the order: |s32 - s| <= e s + a with e = (dim +
// 2) 2^-24 for the roundings and a = (dim + 1) 2^-149 for underflow (Higham,
// Accuracy and Stability of Numerical Algorithms, 3.1); FilterThreshold
// turns the k-th smallest s32 into the bound.  The GPU computes |q|^2 +
// |x|^2 - 2 q.x, one fused multiply-add per element (or, for large batches,
// on the tensor cores with each value split into two TF32 halves), whose
// error is absolute, proportional to (|q| + |x|)^2
// (gpu/src/vector_distance.cu).  An
// overflow to infinity only makes a vector a candidate.  The float32 passes
// therefore differ between engines, but the result cannot: (distance, object
// id) ascending, k rows.
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/host_array.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

// sqrt(sum over i of ((double) a[i] - (double) b[i])^2), in element order.
double L2Distance(const float* a, const float* b, int32_t dim);

// out[j] = L2Distance(rows[j], query, dim) for count rows, the same numbers,
// several rows' sums overlapped.
void L2Distances(const float* query, const float* const* rows, int64_t count, int32_t dim, double* out);

// The same sums before their square roots (the permutation index ranks by
// them: a root could make two of them one).
void SquaredL2Distances(const float* query, const float* const* rows, int64_t count, int32_t dim, double* out);

// The float32 filter's bound (see above): the largest s32 a vector may have
// and still be among the k nearest when the k-th smallest s32 of the query
// is kth_s32.  +infinity when kth_s32 is not finite.
double FilterThreshold(int32_t dim, float kth_s32);

// The range filter (see above): a float32 sum s32 of a vector above this
// proves its exact L2Distance beyond r (the bound's e and a, and a factor
// (1 + e) for the float64 sum's and the root's roundings).  +infinity when
// r is not finite.
double WithinThreshold(int32_t dim, double r);

// InvalidArgument ("<what> has a NaN element", or infinite) when one of
// count values is not finite.
Status CheckFinite(const float* values, std::size_t count, const char* what);

// Copies count values from src to dst and says whether every one is
// finite, in one pass: a scan that stages its queries anyway checks them on
// the way (CheckFinite of a single core read 1,024 Fashion-MNIST queries,
// 3.2 MB, in 0.38 ms, as long as the copy after it); CheckFinite then
// words the error.
bool CopyFinite(const float* src, std::size_t count, float* dst);

// Every vector of an index by object id (row-major, dim floats each).  A
// NULL row keeps a row of zeros and is excluded by the caller.
struct VectorSet {
  int32_t dim = 0;
  int32_t n = 0;
  HostArray<float> values;  // n * dim

  int32_t size() const { return n; }
  const float* row(int32_t id) const {
    return values.data() + static_cast<std::size_t>(id) * static_cast<std::size_t>(dim);
  }
};

// Takes n rows of dim floats.  InvalidArgument for dim < 1, a size that is
// not n * dim, or a value that is NaN or infinite.
Status BuildVectorSet(int32_t dim, int32_t n, HostArray<float> values, VectorSet* out);

struct VectorScanRequest {
  int32_t n_queries = 0;
  const float* queries = nullptr;  // n_queries * dim, finite
  int32_t k = 1;
  // Empty, or one per vector of the set: nonzero = not a candidate (dead, NULL).
  Span<uint8_t> excluded;
};

// Per query q: rows [offsets[q], offsets[q + 1]) by (distance, object id)
// ascending, at most k (fewer when fewer vectors are candidates).
struct VectorScanResult {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
  std::vector<double> distances;
};

// k >= 1, queries present, excluded empty or of the set's size, and every
// query value finite.
Status ValidateVectorScanRequest(const VectorSet& set, const VectorScanRequest& request);
// All of it but the query values (a scan that checks them as it stages
// them, CopyFinite).
Status ValidateVectorScanShape(const VectorSet& set, const VectorScanRequest& request);
// The query values alone (request.n_queries of dim floats): CheckFinite's
// answer, its message the one every engine gives.
Status CheckQueryValues(const VectorScanRequest& request, int32_t dim);

// One query's float32 candidates: (s32, object id) pairs.
struct VectorCandidate {
  float s32;
  int32_t object;
};

// The k nearest of one query among cands (s32 from any float32 pass, every
// vector that may be among the k nearest included): drops those above the
// threshold of their k-th s32, computes L2Distance for the rest and appends
// the best k by (distance, id) to out.
void FinishQuery(const VectorSet& set, const float* query, int32_t k,
                 std::vector<VectorCandidate>* cands, VectorScanResult* out);

// The per-query results, in query order, as one CSR result.
void ConcatenateResults(const std::vector<VectorScanResult>& parts, VectorScanResult* out);

// The exact scan on up to `threads` host threads (0: every core): a batch
// is split by groups of queries, a small batch by stripes of vectors.
// cancel is polled every few thousand vectors per thread.
Status CpuVectorScan(const VectorSet& set, const VectorScanRequest& request, int32_t threads,
                     VectorScanResult* out, const CancelCheck& cancel = CancelCheck());

// Re-ranking (the LSH and permutation modes): per query q, the candidates
// candidates[candidate_offsets[q] .. candidate_offsets[q + 1]) by
// L2Distance, the best k by (distance, id).  Candidates out of range or
// excluded are skipped; duplicates count once.  On up to `threads` threads,
// by objects: a vector chosen by several queries is read once for all of
// them (core/src/vector_rerank.cpp).
Status RerankVectors(const VectorSet& set, const float* queries, int32_t n_queries, int32_t k,
                     Span<int64_t> candidate_offsets, Span<int32_t> candidates,
                     Span<uint8_t> excluded, int32_t threads, VectorScanResult* out,
                     const CancelCheck& cancel = CancelCheck());

// The float32 squared distance of the filter (any order; SIMD where the
// processor has it): exposed for the tests of its bound.
float SquaredL2Float32(const float* a, const float* b, int32_t dim);

// The same for kDistanceGroup queries at once against one row, read once:
// out[g] is SquaredL2Float32(row, queries[g], dim), the same number.
constexpr int kDistanceGroup = 4;
void SquaredL2Float32Group(const float* row, const float* const* queries, int32_t dim, float* out);

}  // namespace genie

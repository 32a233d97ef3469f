// Vectors: the one distance, the float32 filter's bound, vector sets and
// the re-ranking every engine finishes with (see genie/vectors.hpp).
#include "genie/vectors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "genie/parallel.hpp"

namespace genie {

// Each operation is rounded on its own: core/ is compiled as ISO C++
// without -ffast-math, where GCC and Clang do not contract a * b + c into a
// fused multiply-add (and baseline x86-64 has none), so this is the same
// number as the GPU's __dadd_rn / __dmul_rn loop and the SQL operator's.
double L2Distance(const float* a, const float* b, int32_t dim) {
  double sum = 0.0;
  for (int32_t i = 0; i < dim; ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    const double sq = d * d;
    sum = sum + sq;
  }
  return std::sqrt(sum);
}

namespace {

// W rows' L2Distance sums at once: W sums, each in its row's element order with
// every operation rounded on its own (the same numbers), but independent of
// each other, so the processor overlaps them; one row's sum alone waits on
// its previous addition at every element.
template <int W>
void SquaredL2DistancesOf(const float* query, const float* const* rows, int32_t dim, double* out) {
  double sum[W];
  for (int w = 0; w < W; ++w) sum[w] = 0.0;
  for (int32_t i = 0; i < dim; ++i) {
    const double q = static_cast<double>(query[i]);
    for (int w = 0; w < W; ++w) {
      const double d = static_cast<double>(rows[w][i]) - q;
      const double sq = d * d;
      sum[w] = sum[w] + sq;
    }
  }
  for (int w = 0; w < W; ++w) out[w] = sum[w];
}

}  // namespace

void SquaredL2Distances(const float* query, const float* const* rows, int64_t count, int32_t dim, double* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) SquaredL2DistancesOf<8>(query, rows + i, dim, out + i);
  if (i + 4 <= count) {
    SquaredL2DistancesOf<4>(query, rows + i, dim, out + i);
    i += 4;
  }
  for (; i < count; ++i) SquaredL2DistancesOf<1>(query, rows + i, dim, out + i);
}

void L2Distances(const float* query, const float* const* rows, int64_t count, int32_t dim, double* out) {
  SquaredL2Distances(query, rows, count, dim, out);
  for (int64_t i = 0; i < count; ++i) out[i] = std::sqrt(out[i]);
}

// With e = (dim + 8) 2^-23, more than twice the float32 bound (dim + 2)
// 2^-24, the extra margin covers the float64 sum's own error, the square
// root mapping nearby sums to one distance (a tie), and this function's
// rounding.  A vector with true squared distance s has s32 in
// [s (1 - e) - a, s (1 + e) + a]; the k-th float64 distance is at most
// U = (kth + a) / (1 - e); a vector can reach it only if s <= U (1 + e),
// that is s32 <= U (1 + e)^2 + a.
double FilterThreshold(int32_t dim, float kth_s32) {
  if (!std::isfinite(kth_s32)) return std::numeric_limits<double>::infinity();
  const double e = (static_cast<double>(dim) + 8.0) * 0x1p-23;
  const double a = (static_cast<double>(dim) + 1.0) * 0x1p-148;
  const double upper = (static_cast<double>(kth_s32) + a) / (1.0 - e);
  return upper * (1.0 + e) * (1.0 + e) + a;
}

double WithinThreshold(int32_t dim, double r) {
  if (!std::isfinite(r)) return std::numeric_limits<double>::infinity();
  const double e = (static_cast<double>(dim) + 8.0) * 0x1p-23;
  const double a = (static_cast<double>(dim) + 1.0) * 0x1p-148;
  return r * r * (1.0 + e) * (1.0 + e) + a;
}

namespace {
// 1 when v is NaN or infinite (its exponent all ones): a test without a
// branch, which the compiler vectorises over a block.
inline uint32_t NotFinite(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
}
}  // namespace

Status CheckFinite(const float* values, std::size_t count, const char* what) {
  // A cold backend checks every stored value (tens of millions) as it loads
  // them: blocks are screened with an exponent test the compiler vectorises
  // (no early exit), and only a block that fails is searched element by
  // element for the message.
  constexpr std::size_t kBlock = 4096;
  std::size_t bad_block = count;
  for (std::size_t start = 0; start < count && bad_block == count; start += kBlock) {
    const std::size_t end = std::min(count, start + kBlock);
    uint32_t bad = 0;
    for (std::size_t i = start; i < end; ++i) bad |= NotFinite(values[i]);
    if (bad != 0) bad_block = start;
  }
  for (std::size_t i = bad_block; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      return Status::InvalidArgument(std::string(what) + " has a " +
                                     (std::isnan(values[i]) ? "NaN" : "infinite") + " element");
    }
  }
  return Status::Ok();
}

Status BuildVectorSet(int32_t dim, int32_t n, HostArray<float> values, VectorSet* out) {
  if (out == nullptr) return Status::InvalidArgument("BuildVectorSet: NULL output");
  if (dim < 1) return Status::InvalidArgument("a vector needs at least one dimension");
  if (n < 0) return Status::InvalidArgument("negative number of vectors");
  if (values.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(dim))
    return Status::InvalidArgument("vector values are not n * dim floats");
  GENIE_RETURN_IF_ERROR(CheckFinite(values.data(), values.size(), "a stored vector"));
  out->dim = dim;
  out->n = n;
  out->values = std::move(values);
  return Status::Ok();
}

bool CopyFinite(const float* src, std::size_t count, float* dst) {
  uint32_t bad = 0;  // no early exit: vectorised
  for (std::size_t i = 0; i < count; ++i) {
    bad |= NotFinite(src[i]);
    dst[i] = src[i];
  }
  return bad == 0;
}

Status ValidateVectorScanRequest(const VectorSet& set, const VectorScanRequest& request) {
  GENIE_RETURN_IF_ERROR(ValidateVectorScanShape(set, request));
  return CheckQueryValues(request, set.dim);
}

Status CheckQueryValues(const VectorScanRequest& request, int32_t dim) {
  return CheckFinite(request.queries, static_cast<std::size_t>(request.n_queries) * static_cast<std::size_t>(dim),
                     "a query vector");
}

Status ValidateVectorScanShape(const VectorSet& set, const VectorScanRequest& request) {
  if (request.k < 1) return Status::InvalidArgument("k must be at least 1");
  if (request.n_queries < 0) return Status::InvalidArgument("negative number of queries");
  if (request.n_queries > 0 && request.queries == nullptr)
    return Status::InvalidArgument("NULL query vectors");
  if (!request.excluded.empty() && request.excluded.size() != static_cast<std::size_t>(set.size()))
    return Status::InvalidArgument("excluded flags do not match the vector set");
  return Status::Ok();
}

namespace {

struct Ranked {
  double distance;
  int32_t object;
  bool operator<(const Ranked& o) const {
    return distance != o.distance ? distance < o.distance : object < o.object;
  }
};

void AppendBest(std::vector<Ranked>* ranked, int32_t k, VectorScanResult* out) {
  const std::size_t keep = std::min(ranked->size(), static_cast<std::size_t>(k));
  std::partial_sort(ranked->begin(), ranked->begin() + static_cast<std::ptrdiff_t>(keep), ranked->end());
  for (std::size_t i = 0; i < keep; ++i) {
    out->objects.push_back((*ranked)[i].object);
    out->distances.push_back((*ranked)[i].distance);
  }
  out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
}

}  // namespace

void ConcatenateResults(const std::vector<VectorScanResult>& parts, VectorScanResult* out) {
  out->offsets.assign(1, 0);
  out->objects.clear();
  out->distances.clear();
  for (const VectorScanResult& part : parts) {
    out->objects.insert(out->objects.end(), part.objects.begin(), part.objects.end());
    out->distances.insert(out->distances.end(), part.distances.begin(), part.distances.end());
    out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
  }
}

void FinishQuery(const VectorSet& set, const float* query, int32_t k,
                 std::vector<VectorCandidate>* cands, VectorScanResult* out) {
  double threshold = std::numeric_limits<double>::infinity();
  if (cands->size() > static_cast<std::size_t>(k)) {
    auto kth = cands->begin() + (k - 1);
    std::nth_element(cands->begin(), kth, cands->end(),
                     [](const VectorCandidate& a, const VectorCandidate& b) { return a.s32 < b.s32; });
    threshold = FilterThreshold(set.dim, kth->s32);
  }
  std::vector<Ranked> ranked;
  ranked.reserve(std::min(cands->size(), static_cast<std::size_t>(k) * 2 + 16));
  for (const VectorCandidate& c : *cands) {
    if (static_cast<double>(c.s32) <= threshold)
      ranked.push_back({L2Distance(set.row(c.object), query, set.dim), c.object});
  }
  AppendBest(&ranked, k, out);
}

}  // namespace genie

// The exact vector scan on the CPU (see genie/vectors.hpp): a float32 pass
// over every vector, each query keeping the candidates within the threshold
// of its running k-th s32; then FinishQuery re-ranks them with the float64
// distance.  Its units of work are scan_units.hpp's (blocks of queries
// against tiles of vectors), four queries at a time (AVX2 with fused
// multiply-add where the processor has it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <vector>

#include "genie/parallel.hpp"
#include "genie/vectors.hpp"
#include "scan_units.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace genie {
namespace {

constexpr int kGroup = kDistanceGroup;  // queries per pass over a vector
constexpr int kBlockQueries = kScanBlockQueries;

using GroupDistances = void (*)(const float* row, const float* const* q, int32_t dim, float* out);

// Eight partial sums per query: the order differs from the float64 sum's,
// which the filter's bound allows.
float OneDistancePortable(const float* row, const float* q, int32_t dim) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const float d = row[i + l] - q[i + l];
      acc[l] += d * d;
    }
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < dim; ++i) {
    const float d = row[i] - q[i];
    s += d * d;
  }
  return s;
}

void GroupDistancesPortable(const float* row, const float* const* q, int32_t dim, float* out) {
  for (int g = 0; g < kGroup; ++g) out[g] = OneDistancePortable(row, q[g], dim);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) void GroupDistancesAvx2(const float* row, const float* const* q,
                                                             int32_t dim, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    const __m256 x = _mm256_loadu_ps(row + i);
    const __m256 d0 = _mm256_sub_ps(x, _mm256_loadu_ps(q[0] + i));
    const __m256 d1 = _mm256_sub_ps(x, _mm256_loadu_ps(q[1] + i));
    const __m256 d2 = _mm256_sub_ps(x, _mm256_loadu_ps(q[2] + i));
    const __m256 d3 = _mm256_sub_ps(x, _mm256_loadu_ps(q[3] + i));
    a0 = _mm256_fmadd_ps(d0, d0, a0);
    a1 = _mm256_fmadd_ps(d1, d1, a1);
    a2 = _mm256_fmadd_ps(d2, d2, a2);
    a3 = _mm256_fmadd_ps(d3, d3, a3);
  }
  float s[kGroup] = {HorizontalSum(a0), HorizontalSum(a1), HorizontalSum(a2), HorizontalSum(a3)};
  for (; i < dim; ++i) {
    for (int g = 0; g < kGroup; ++g) {
      const float d = row[i] - q[g][i];
      s[g] += d * d;
    }
  }
  for (int g = 0; g < kGroup; ++g) out[g] = s[g];
}
#endif

// One query's: the group's steps for one of them (the same bits: the build
// does not contract a * b + c), a quarter of the work where a caller has a
// single query (range search).
using OneDistance = float (*)(const float* row, const float* q, int32_t dim);


#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float OneDistanceAvx2(const float* row, const float* q, int32_t dim) {
  __m256 a0 = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(q + i));
    a0 = _mm256_fmadd_ps(d0, d0, a0);
  }
  float s = HorizontalSum(a0);
  for (; i < dim; ++i) {
    const float d = row[i] - q[i];
    s += d * d;
  }
  return s;
}
#endif

OneDistance PickOneDistance() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return OneDistanceAvx2;
#endif
  return OneDistancePortable;
}

GroupDistances PickGroupDistances() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GroupDistancesAvx2;
#endif
  return GroupDistancesPortable;
}

// One query's float32 pass over a stripe: the k smallest s32 so far (a
// max-heap) and every vector within the threshold they give.
class QueryState {
 public:
  QueryState(int32_t dim, int32_t k) : dim_(dim), k_(static_cast<std::size_t>(k)) {}

  void Offer(float s32, int32_t object) {
    if (static_cast<double>(s32) > threshold_) return;
    cands_.push_back({s32, object});
    if (heap_.size() < k_) {
      heap_.push(s32);
      if (heap_.size() == k_) threshold_ = FilterThreshold(dim_, heap_.top());
    } else if (s32 < heap_.top()) {
      heap_.pop();
      heap_.push(s32);
      threshold_ = FilterThreshold(dim_, heap_.top());
    }
    if (cands_.size() > 2 * k_ + 4096) Prune();
  }

  std::vector<VectorCandidate>& candidates() { return cands_; }

 private:
  void Prune() {
    const double t = threshold_;
    cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                [t](const VectorCandidate& c) { return static_cast<double>(c.s32) > t; }),
                 cands_.end());
  }

  int32_t dim_;
  std::size_t k_;
  double threshold_ = std::numeric_limits<double>::infinity();
  std::priority_queue<float> heap_;
  std::vector<VectorCandidate> cands_;
};

}  // namespace

float SquaredL2Float32(const float* a, const float* b, int32_t dim) {
  static const OneDistance distance = PickOneDistance();
  return distance(a, b, dim);
}

void SquaredL2Float32Group(const float* row, const float* const* queries, int32_t dim, float* out) {
  static const GroupDistances distances = PickGroupDistances();
  distances(row, queries, dim, out);
}

Status CpuVectorScan(const VectorSet& set, const VectorScanRequest& request, int32_t threads,
                     VectorScanResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuVectorScan: NULL output");
  GENIE_RETURN_IF_ERROR(ValidateVectorScanRequest(set, request));
  static const GroupDistances distances = PickGroupDistances();
  const int32_t nq = request.n_queries;
  const int32_t dim = set.dim;
  const int64_t n = set.size();
  const ScanUnits units = PlanScanUnits(nq, n, dim, ResolveThreads(threads));
  const int64_t blocks = units.blocks, stripes = units.stripes, tile = units.tile;

  // states[(block * stripes + stripe) * kBlockQueries + i]: query block * kBlockQueries + i
  std::vector<QueryState> states;
  states.reserve(static_cast<std::size_t>(blocks * stripes * kBlockQueries));
  for (int64_t i = 0; i < blocks * stripes * kBlockQueries; ++i) states.emplace_back(dim, request.k);

  GENIE_RETURN_IF_ERROR(ParallelFor(
      units.count(), threads,
      [&](int64_t unit) -> Status {
        const ScanUnit at = units.At(unit, nq, n);
        const int32_t b0 = at.first_query, in_block = at.n_queries;
        QueryState* st = &states[static_cast<std::size_t>(unit * kBlockQueries)];
        const int64_t begin = at.first_vector, end = at.end_vector;
        float s[kGroup];
        for (int64_t t0 = begin; t0 < end; t0 += tile) {
          if (cancel.requested()) return Status::Cancelled();
          const int64_t t1 = std::min(end, t0 + tile);
          for (int32_t g0 = 0; g0 < in_block; g0 += kGroup) {
            const int32_t in_group = std::min(kGroup, in_block - g0);
            const float* q[kGroup];
            for (int g = 0; g < kGroup; ++g) {
              // a short group repeats its first query and ignores the copies
              const int32_t qi = b0 + g0 + (g < in_group ? g : 0);
              q[g] = request.queries + static_cast<std::size_t>(qi) * static_cast<std::size_t>(dim);
            }
            for (int64_t r = t0; r < t1; ++r) {
              if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(r)] != 0) continue;
              distances(set.row(static_cast<int32_t>(r)), q, dim, s);
              for (int g = 0; g < in_group; ++g) st[g0 + g].Offer(s[g], static_cast<int32_t>(r));
            }
          }
        }
        return Status::Ok();
      },
      cancel));

  // each query: its stripes' candidates together, then the float64 re-rank
  std::vector<VectorScanResult> parts(static_cast<std::size_t>(nq));
  GENIE_RETURN_IF_ERROR(ParallelFor(
      nq, threads,
      [&](int64_t q) -> Status {
        const int64_t block = q / kBlockQueries;
        const int64_t i = q % kBlockQueries;
        std::vector<VectorCandidate> cands;
        for (int64_t stripe = 0; stripe < stripes; ++stripe) {
          std::vector<VectorCandidate>& c =
              states[static_cast<std::size_t>((block * stripes + stripe) * kBlockQueries + i)].candidates();
          cands.insert(cands.end(), c.begin(), c.end());
          std::vector<VectorCandidate>().swap(c);
        }
        FinishQuery(set, request.queries + static_cast<std::size_t>(q) * static_cast<std::size_t>(dim),
                    request.k, &cands, &parts[static_cast<std::size_t>(q)]);
        return Status::Ok();
      },
      cancel));

  ConcatenateResults(parts, out);
  return Status::Ok();
}

}  // namespace genie

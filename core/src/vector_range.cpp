// The brute-force range search of vectors on the CPU (genie/cluster_list.hpp,
// CpuVectorRangeScan): every object within the radius of each query, as
// CpuRangeSearch over WholeList gives them, read the way the exact kNN scan
// reads (vector_scan.cpp).  Query by query, each query streamed every row
// from memory once: a batch of 154 Fashion-MNIST queries read 29 GB.  Here
// the units of work are the kNN scan's (scan_units.hpp: blocks of queries
// against tiles of the rows), the block's queries kDistanceGroup at a time
// (SquaredL2Float32Group, the bits SquaredL2Float32 gives one query).  A
// row whose float32 sum is within the filter's bound gets its exact
// L2Distance, which alone decides, so the rows are CpuRangeSearch's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/parallel.hpp"
#include "genie/vectors.hpp"
#include "scan_units.hpp"

namespace genie {
namespace {

constexpr int32_t kBlockQueries = kScanBlockQueries;

struct Found {
  double distance;
  int32_t object;
  int32_t query;  // within its block
};

}  // namespace

Status CpuVectorRangeScan(const VectorSet& set, const float* queries, const RangeRequest& request,
                          int32_t threads, RangeResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuVectorRangeScan: NULL output");
  if (std::isnan(request.radius) || request.radius < 0)
    return Status::InvalidArgument("the radius must be a number at least 0");
  if (request.n_queries < 0) return Status::InvalidArgument("a negative number of queries");
  if (request.n_queries > 0 && queries == nullptr) return Status::InvalidArgument("CpuVectorRangeScan: NULL queries");
  const int64_t n = request.n_objects < 0 ? set.size() : request.n_objects;
  if (n > set.size()) return Status::InvalidArgument("more objects searched than the set holds");
  if (!request.excluded.empty() && request.excluded.size() != static_cast<std::size_t>(n))
    return Status::InvalidArgument("excluded flags of another size than the objects");
  const int32_t nq = request.n_queries;
  const int32_t dim = set.dim;
  const double r = request.radius;
  // the filter of VectorQuery::Within (cluster_list.cpp); an overflow to
  // infinity proves nothing
  const double threshold = WithinThreshold(dim, r);
  const ScanUnits units = PlanScanUnits(nq, n, dim, ResolveThreads(threads));
  const int64_t blocks = units.blocks, stripes = units.stripes, tile = units.tile;
  std::vector<std::vector<Found>> found(static_cast<std::size_t>(units.count()));
  GENIE_RETURN_IF_ERROR(ParallelFor(
      units.count(), threads,
      [&](int64_t unit) -> Status {
        const ScanUnit at = units.At(unit, nq, n);
        const int32_t b0 = at.first_query, bn = at.n_queries;
        const int64_t first = at.first_vector, last = at.end_vector;
        std::vector<Found>* mine = &found[static_cast<std::size_t>(unit)];
        const float* q[kDistanceGroup];
        float s32[kDistanceGroup];
        for (int64_t t0 = first; t0 < last; t0 += tile) {
          if (cancel.requested()) return Status::Cancelled();
          const int64_t t1 = std::min(last, t0 + tile);
          for (int32_t g0 = 0; g0 < bn; g0 += kDistanceGroup) {
            const int32_t gn = std::min(kDistanceGroup, bn - g0);
            // a short group repeats its last query (computed, not kept)
            for (int g = 0; g < kDistanceGroup; ++g)
              q[g] = queries + static_cast<std::size_t>(b0 + g0 + std::min(g, gn - 1)) * dim;
            for (int64_t o = t0; o < t1; ++o) {
              if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(o)] != 0) continue;
              const float* x = set.row(static_cast<int32_t>(o));
              if (gn == 1) {
                s32[0] = SquaredL2Float32(x, q[0], dim);
              } else {
                SquaredL2Float32Group(x, q, dim, s32);
              }
              for (int32_t g = 0; g < gn; ++g) {
                if (std::isfinite(s32[g]) && static_cast<double>(s32[g]) > threshold) continue;
                const double d = L2Distance(q[g], x, dim);
                if (d <= r) mine->push_back(Found{d, static_cast<int32_t>(o), g0 + g});
              }
            }
          }
        }
        return Status::Ok();
      },
      cancel));
  // every query read every row not excluded, as CpuRangeSearch counts
  int64_t searched = n;
  if (!request.excluded.empty())
    searched -= std::count_if(request.excluded.begin(), request.excluded.end(), [](uint8_t f) { return f != 0; });
  RangeResult result;
  result.offsets.assign(1, 0);
  result.distances_computed = searched * nq;
  // each block's rows by query, then each query's by (distance, object):
  // the queries sorted on every thread, and a cancel heard between stripes
  // and queries (a radius that takes in every row leaves rows x queries)
  std::vector<std::vector<std::pair<double, int32_t>>> rows;
  for (int64_t block = 0; block < blocks; ++block) {
    const int32_t b0 = static_cast<int32_t>(block * kBlockQueries);
    rows.assign(static_cast<std::size_t>(std::min(kBlockQueries, nq - b0)), {});
    for (int64_t stripe = 0; stripe < stripes; ++stripe) {
      if (cancel.requested()) return Status::Cancelled();
      std::vector<Found>& unit = found[static_cast<std::size_t>(block * stripes + stripe)];
      for (const Found& f : unit) rows[static_cast<std::size_t>(f.query)].emplace_back(f.distance, f.object);
      std::vector<Found>().swap(unit);
    }
    GENIE_RETURN_IF_ERROR(ParallelFor(
        static_cast<int64_t>(rows.size()), threads,
        [&](int64_t q) -> Status {
          std::sort(rows[static_cast<std::size_t>(q)].begin(), rows[static_cast<std::size_t>(q)].end());
          return Status::Ok();
        },
        cancel));
    for (auto& query_rows : rows) {
      if (cancel.requested()) return Status::Cancelled();
      for (const auto& row : query_rows) {
        result.objects.push_back(row.second);
        result.distances.push_back(row.first);
      }
      result.offsets.push_back(static_cast<int64_t>(result.objects.size()));
      std::vector<std::pair<double, int32_t>>().swap(query_rows);
    }
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace genie

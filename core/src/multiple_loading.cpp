// Multiple loading (paper section III-D): the objects are split into
// contiguous parts that are searched one after another, and each part's
// top-k is merged into the global top-k.  Exact, because every object lies in
// exactly one part and a global top-k hit is a top-k hit of its own part.
#include <algorithm>
#include <utility>
#include <vector>

#include "genie/engine.hpp"
#include "genie/parallel.hpp"

namespace genie {

std::vector<std::pair<int32_t, int32_t>> PlanObjectParts(int32_t num_objects, int32_t num_parts) {
  const int64_t n = std::max<int32_t>(num_objects, 0);
  const int64_t parts = std::clamp<int64_t>(num_parts, 1, std::max<int64_t>(n, 1));
  std::vector<std::pair<int32_t, int32_t>> ranges;
  ranges.reserve(static_cast<std::size_t>(parts));
  for (int64_t i = 0; i < parts; ++i) {
    ranges.emplace_back(static_cast<int32_t>(i * n / parts),
                        static_cast<int32_t>((i + 1) * n / parts));
  }
  return ranges;
}

void MergePartResults(const std::vector<TopKResults>& parts,
                      const std::vector<std::pair<int32_t, int32_t>>& ranges, int32_t k,
                      TopKResults* out, int32_t threads) {
  TopKResults merged;
  const std::size_t n_parts = std::min(parts.size(), ranges.size());
  const int32_t n_queries = n_parts > 0 ? parts[0].num_queries() : 0;
  const auto keep = static_cast<int64_t>(std::max<int32_t>(k, 0));
  // each query's merged length, then the hits in place: a part's hits are
  // already in output order (score, then id; its ids shifted by its first
  // object keep their order), so a query takes the best head among the
  // parts k times instead of sorting every part's hits
  merged.query_offsets.assign(static_cast<std::size_t>(n_queries) + 1, 0);
  for (int32_t q = 0; q < n_queries; ++q) {
    int64_t total = 0;
    for (std::size_t p = 0; p < n_parts; ++p)
      if (q < parts[p].num_queries()) total += static_cast<int64_t>(parts[p].Query(q).size());
    merged.query_offsets[static_cast<std::size_t>(q) + 1] = merged.query_offsets[static_cast<std::size_t>(q)] + std::min(keep, total);
  }
  merged.hits.resize(static_cast<std::size_t>(merged.query_offsets.back()));
  // every query's heads made here: a worker allocates nothing, so cannot fail
  std::vector<std::size_t> heads(static_cast<std::size_t>(n_queries) * n_parts, 0);
  auto merge_query = [&](int64_t qi) {
    const auto q = static_cast<int32_t>(qi);
    std::size_t* head = heads.data() + static_cast<std::size_t>(q) * n_parts;
    Hit* to = merged.hits.data() + merged.query_offsets[static_cast<std::size_t>(q)];
    const int64_t count = merged.query_offsets[static_cast<std::size_t>(q) + 1] - merged.query_offsets[static_cast<std::size_t>(q)];
    for (int64_t i = 0; i < count; ++i) {
      std::size_t best = n_parts;
      Hit best_hit{0, 0};
      for (std::size_t p = 0; p < n_parts; ++p) {
        if (q >= parts[p].num_queries()) continue;
        const Span<Hit> hits = parts[p].Query(q);
        if (head[p] >= hits.size()) continue;
        const Hit h{hits[head[p]].object + ranges[p].first, hits[head[p]].score};
        if (best == n_parts || HitBefore(h, best_hit)) {
          best = p;
          best_hit = h;
        }
      }
      to[i] = best_hit;
      ++head[best];
    }
    return Status::Ok();
  };
  if (threads > 1 && n_queries > 1) {
    (void)ParallelFor(n_queries, threads, merge_query);  // merge_query never fails
  } else {
    for (int32_t q = 0; q < n_queries; ++q) (void)merge_query(q);
  }
  *out = std::move(merged);
}

}  // namespace genie

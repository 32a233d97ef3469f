// Multiple loading (paper section III-D): the objects are split into
// contiguous parts that are searched one after another, and each part's
// top-k is merged into the global top-k.  Exact, because every object lies in
// exactly one part and a global top-k hit is a top-k hit of its own part.
#include <algorithm>
#include <utility>
#include <vector>

#include "genie/engine.hpp"

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
                      TopKResults* out) {
  TopKResults merged;
  const std::size_t n_parts = std::min(parts.size(), ranges.size());
  const int32_t n_queries = n_parts > 0 ? parts[0].num_queries() : 0;
  const auto keep = static_cast<std::size_t>(std::max<int32_t>(k, 0));
  merged.query_offsets.reserve(static_cast<std::size_t>(n_queries) + 1);

  std::vector<Hit> candidates;
  for (int32_t q = 0; q < n_queries; ++q) {
    candidates.clear();
    for (std::size_t p = 0; p < n_parts; ++p) {
      if (q >= parts[p].num_queries()) continue;
      for (const Hit& hit : parts[p].Query(q)) {
        candidates.push_back({hit.object + ranges[p].first, hit.score});
      }
    }
    const std::size_t take = std::min(keep, candidates.size());
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(take),
                      candidates.end(), HitBefore);
    merged.hits.insert(merged.hits.end(), candidates.begin(),
                       candidates.begin() + static_cast<std::ptrdiff_t>(take));
    merged.query_offsets.push_back(static_cast<int64_t>(merged.hits.size()));
  }
  *out = std::move(merged);
}

}  // namespace genie

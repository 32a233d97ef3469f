// Per-query candidate lists as the re-rankers (RerankVectors, RerankCodes)
// and the range search of given candidates take them: query q's are
// candidates[offsets[q] .. offsets[q + 1]).
#pragma once
#include <cstddef>
#include <cstdint>

#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

// InvalidArgument unless offsets has n_queries + 1 entries that ascend
// within n_candidates.
inline Status CheckCandidateOffsets(int32_t n_queries, Span<int64_t> offsets, std::size_t n_candidates) {
  if (n_queries < 0 || offsets.size() != static_cast<std::size_t>(n_queries) + 1)
    return Status::InvalidArgument("candidate offsets do not match the queries");
  for (int32_t q = 0; q < n_queries; ++q) {
    if (offsets[q] < 0 || offsets[q + 1] < offsets[q] || static_cast<std::size_t>(offsets[q + 1]) > n_candidates)
      return Status::InvalidArgument("candidate offsets are not ascending within the candidates");
  }
  return Status::Ok();
}

}  // namespace genie

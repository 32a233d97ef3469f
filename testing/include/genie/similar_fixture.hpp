// A one-query genie_similar_verify batch for the C API tests (kitten
// against sitting and mitten, k = 1, n = 3), with its caller-allocated
// verdict: shared by the C API, cancel and GPU edit-distance suites.
#pragma once
#include <cstdint>
#include <string>

#include "genie/genie.h"

namespace genie {
namespace testing {

struct KittenSimilarBatch {
  const std::string query = "kitten", candidates = "sittingmitten";
  const int64_t query_offsets[2] = {0, 6};
  const int64_t candidate_offsets[2] = {0, 2};
  const int64_t text_offsets[3] = {0, 7, 13};
  const int32_t counts[2] = {1, 3};
  const int32_t unseen[1] = {0};
  int32_t distances[2] = {0, 0};
  uint8_t exact[2] = {0, 0}, certified[1] = {0};
  int32_t open_bound[1] = {0};
  genie_similar_batch batch{1, 3, 1, query.data(), query_offsets, candidate_offsets,
                            candidates.data(), text_offsets, counts, unseen};
  genie_similar_verdict verdict{distances, exact, certified, open_bound, 0, GENIE_ENGINE_CPU};

  KittenSimilarBatch() = default;
  KittenSimilarBatch(const KittenSimilarBatch&) = delete;  // batch points into itself
  KittenSimilarBatch& operator=(const KittenSimilarBatch&) = delete;
};

}  // namespace testing
}  // namespace genie

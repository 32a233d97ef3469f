// The C API of the permutation index: rows of strings and vectors against
// permutants drawn by genie_permutants_choose (a permutant ranks itself
// first), the CPU selection through opaque rows (candidates ascending by
// id, the closest row first among them), the strings' re-rank of a candidate
// list (exact distances, the scan's order), and the errors a caller can
// cause, as statuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "genie/genie.h"

namespace {

struct Strings {
  std::string text;
  std::vector<int64_t> offsets{0};
  void Add(const std::string& s) {
    text += s;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  int32_t n() const { return static_cast<int32_t>(offsets.size()) - 1; }
};

TEST(CApiPermutation, StringRowsSelectionAndRerank) {
  Strings words;
  for (const char* w : {"apple", "apply", "ample", "maple", "angle", "ankle", "uncle", "circle", "cycle",
                        "bicycle", "recycle", "purple", "people", "pebble", "bubble", "rubble"})
    words.Add(w);
  genie_error err{};
  genie_strings* set = nullptr;
  ASSERT_EQ(genie_strings_create(words.text.data(), words.offsets.data(), words.n(), &set, &err), GENIE_OK);
  int32_t ids[4];
  ASSERT_EQ(genie_permutants_choose(words.n(), nullptr, 4, 9, ids, &err), GENIE_OK) << err.message;
  Strings chosen;
  for (int32_t id : ids)
    chosen.Add(words.text.substr(static_cast<size_t>(words.offsets[id]),
                                 static_cast<size_t>(words.offsets[id + 1] - words.offsets[id])));
  genie_strings* permutants = nullptr;
  ASSERT_EQ(genie_strings_create(chosen.text.data(), chosen.offsets.data(), 4, &permutants, &err), GENIE_OK);
  ASSERT_EQ(genie_permutation_stride(4), 16);
  genie_permutation_rows* rows = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(genie_permutation_rows_create(4, words.n(), &rows, &data, &err), GENIE_OK);
  ASSERT_EQ(genie_strings_permutations(set, permutants, GENIE_ENGINE_CPU, nullptr, data, &err), GENIE_OK) << err.message;
  for (int32_t j = 0; j < 4; ++j) EXPECT_EQ(data[ids[j] * 16 + j], 0) << "a permutant ranks itself first";
  for (int32_t i = 0; i < words.n(); ++i) {
    std::vector<uint8_t> ranks(data + i * 16, data + i * 16 + 4);
    std::sort(ranks.begin(), ranks.end());
    EXPECT_EQ(ranks, (std::vector<uint8_t>{0, 1, 2, 3}));
    for (int32_t j = 4; j < 16; ++j) EXPECT_EQ(data[i * 16 + j], 0);
  }

  // the query "apple": its own row is a candidate, and the candidates come by id
  genie_permutation_candidates* found = nullptr;
  ASSERT_EQ(genie_permutation_select(rows, GENIE_ENGINE_CPU, nullptr, nullptr, data, 1, 5, &found, &err),
            GENIE_OK)
      << err.message;
  ASSERT_EQ(found->query_offsets[1], 5);
  EXPECT_TRUE(std::is_sorted(found->objects, found->objects + 5));
  EXPECT_NE(std::find(found->objects, found->objects + 5, 0), found->objects + 5);

  // re-rank the candidates by exact edit distance to "appel"
  Strings q;
  q.Add("appel");
  genie_string_scan scan{};
  scan.n_queries = 1;
  scan.query_text = q.text.data();
  scan.query_text_offsets = q.offsets.data();
  scan.k = 2;
  scan.candidate_offsets = found->query_offsets;
  scan.candidates = found->objects;
  genie_string_results* ranked = nullptr;
  ASSERT_EQ(genie_strings_scan(set, GENIE_ENGINE_AUTO, nullptr, &scan, &ranked, &err), GENIE_OK) << err.message;
  ASSERT_EQ(ranked->query_offsets[1], 2);
  EXPECT_EQ(ranked->device, GENIE_ENGINE_CPU);
  EXPECT_EQ(ranked->objects[0], 0);  // apple: 2 edits
  EXPECT_EQ(ranked->distances[0], 2);
  EXPECT_LE(ranked->distances[0], ranked->distances[1]);
  genie_string_results_free(ranked);

  // errors as statuses
  EXPECT_EQ(genie_permutation_select(rows, GENIE_ENGINE_CPU, nullptr, nullptr, data, 1, 0, &found, &err),
            GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_permutants_choose(3, nullptr, 4, 1, ids, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("fewer than"), std::string::npos) << err.message;
  genie_permutation_rows* bad = nullptr;
  EXPECT_EQ(genie_permutation_rows_create(GENIE_MAX_PERMUTANTS + 1, 4, &bad, &data, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_permutation_rows_create(0, 4, &bad, &data, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_strings_permutations(set, permutants, static_cast<genie_engine_kind>(9), nullptr, data, &err),
            GENIE_INVALID_ARGUMENT);
  genie_permutation_candidates_free(found);
  genie_permutation_rows_free(rows);
  genie_strings_free(permutants);
  genie_strings_free(set);
}

TEST(CApiPermutation, VectorRowsRankByDistance) {
  // points on a line: permutants at 0, 10, 20; object 5 is nearest 0 and 10 (tie: permutant order)
  const float values[] = {0, 5, 10, 14, 20, 26};
  const float perm[] = {0, 10, 20};
  genie_error err{};
  genie_vectors* set = nullptr;
  genie_vectors* permutants = nullptr;
  ASSERT_EQ(genie_vectors_create(values, 6, 1, &set, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_create(perm, 3, 1, &permutants, &err), GENIE_OK);
  std::vector<uint8_t> rows(6 * 16, 0xAA);
  ASSERT_EQ(genie_vectors_permutations(set, permutants, GENIE_ENGINE_CPU, nullptr, rows.data(), &err), GENIE_OK) << err.message;
  const uint8_t want[6][3] = {{0, 1, 2}, {0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {2, 1, 0}, {2, 1, 0}};
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(rows[static_cast<size_t>(i * 16 + j)], want[i][j]) << i << " " << j;
    for (int j = 3; j < 16; ++j) EXPECT_EQ(rows[static_cast<size_t>(i * 16 + j)], 0);
  }
  genie_vectors_free(set);
  genie_vectors_free(permutants);
}

}  // namespace

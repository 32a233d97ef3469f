// What the permutation index's tests share (core and GPU suites): tables of
// random permutations and the selection's oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <random>
#include <vector>

#include "genie/permutation.hpp"

namespace genie {
namespace testing {

// n rows, each a uniformly random permutation of 0 .. m - 1.
inline PermutationTable RandomPermutationTable(std::mt19937* rng, int32_t m, int32_t n) {
  PermutationTable t;
  EXPECT_TRUE(MakePermutationTable(m, n, &t).ok());
  std::vector<uint8_t> perm(static_cast<std::size_t>(m));
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = 0; j < m; ++j) perm[static_cast<std::size_t>(j)] = static_cast<uint8_t>(j);
    std::shuffle(perm.begin(), perm.end(), *rng);
    std::copy(perm.begin(), perm.end(), t.row(i));
  }
  return t;
}

// What every selection must equal, one query at a time: the footrules of
// every object sorted by (footrule, id), the first `candidates` eligible,
// ascending by id.
inline void ReferencePermutationSelect(const PermutationRows& objects, const uint8_t* query,
                                       Span<uint8_t> excluded, int32_t candidates,
                                       std::vector<int32_t>* out) {
  std::vector<std::pair<int32_t, int32_t>> scored;
  for (int32_t i = 0; i < objects.n; ++i) {
    if (!excluded.empty() && excluded[static_cast<std::size_t>(i)] != 0) continue;
    int32_t s = 0;
    for (int32_t j = 0; j < objects.m; ++j)
      s += std::abs(static_cast<int32_t>(objects.row(i)[j]) - static_cast<int32_t>(query[j]));
    scored.emplace_back(s, i);
  }
  std::sort(scored.begin(), scored.end());
  out->clear();
  for (std::size_t r = 0; r < scored.size() && r < static_cast<std::size_t>(candidates); ++r)
    out->push_back(scored[r].second);
  std::sort(out->begin(), out->end());
}


}  // namespace testing
}  // namespace genie

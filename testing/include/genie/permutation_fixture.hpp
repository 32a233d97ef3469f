// What the permutation index's tests share (core and GPU suites): tables of
// random permutations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace testing
}  // namespace genie

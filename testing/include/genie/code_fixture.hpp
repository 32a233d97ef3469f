// Test data and the oracle for binary codes, shared by the core and GPU
// tests: random codes with planted near neighbours (the shape of the Error
// Weighted Hashing paper's data), codes with many ties, and the k nearest
// by a brute-force sort of every (distance, id) pair.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "genie/codes.hpp"

namespace genie {
namespace testing {

// n random codes of `bits` bits (padding bits zero).  With `values` > 0
// each bit is drawn so that only that many distinct codes appear (ties).
inline std::vector<uint64_t> RandomCodes(std::mt19937_64* rng, int32_t n, int32_t bits, int values = 0) {
  const int32_t words = WordsForBits(bits);
  std::vector<uint64_t> pool;
  const int32_t draws = values > 0 ? values : n;
  std::vector<uint64_t> out(static_cast<std::size_t>(n) * words);
  for (int32_t i = 0; i < draws; ++i) {
    for (int32_t w = 0; w < words; ++w) pool.push_back((*rng)());
    pool.back() &= LastWordMask(bits);
  }
  for (int32_t i = 0; i < n; ++i) {
    const int32_t from = values > 0 ? static_cast<int32_t>((*rng)() % static_cast<uint64_t>(values)) : i;
    std::copy_n(pool.begin() + static_cast<std::ptrdiff_t>(from) * words, words,
                out.begin() + static_cast<std::ptrdiff_t>(i) * words);
  }
  return out;
}

// Bit i of a code (in bit(n)'s order) as its word and the mask within it.
inline std::pair<int32_t, uint64_t> CodeBit(int32_t i) {
  const int32_t byte_in_word = (i / 8) % 8;
  return {i / 64, uint64_t{1} << (byte_in_word * 8 + 7 - i % 8)};
}

// Queries each a copy of a random code of `codes` with `errors` random bits flipped.
inline std::vector<uint64_t> PlantedQueries(std::mt19937_64* rng, const std::vector<uint64_t>& codes,
                                            int32_t bits, int32_t n_queries, int32_t errors) {
  const int32_t words = WordsForBits(bits);
  const int32_t n = static_cast<int32_t>(codes.size() / static_cast<std::size_t>(words));
  std::vector<uint64_t> out(static_cast<std::size_t>(n_queries) * words);
  for (int32_t q = 0; q < n_queries; ++q) {
    const int32_t from = static_cast<int32_t>((*rng)() % static_cast<uint64_t>(n));
    uint64_t* row = out.data() + static_cast<std::size_t>(q) * words;
    std::copy_n(codes.begin() + static_cast<std::ptrdiff_t>(from) * words, words, row);
    for (int32_t e = 0; e < errors; ++e) {
      const int32_t bit = static_cast<int32_t>((*rng)() % static_cast<uint64_t>(bits));
      const auto at = CodeBit(bit);
      row[at.first] ^= at.second;
    }
  }
  return out;
}

inline CodeSet MakeCodeSet(int32_t bits, const std::vector<uint64_t>& codes) {
  CodeSet set;
  const int32_t n = static_cast<int32_t>(codes.size() / static_cast<std::size_t>(WordsForBits(bits)));
  const Status s = BuildCodeSet(bits, n, HostArray<uint64_t>(codes.begin(), codes.end()), &set);
  EXPECT_TRUE(s.ok()) << s.message();
  return set;
}

// The oracle: every candidate's (distance, id), sorted, the first k.
inline CodeScanResult BruteForceCodes(const CodeSet& set, const uint64_t* queries, int32_t n_queries,
                                      int32_t k, const std::vector<uint8_t>& excluded = {}) {
  CodeScanResult out;
  for (int32_t q = 0; q < n_queries; ++q) {
    std::vector<std::pair<int32_t, int32_t>> all;
    for (int32_t id = 0; id < set.size(); ++id) {
      if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
      int32_t d = 0;
      for (int32_t w = 0; w < set.words; ++w)
        d += __builtin_popcountll(set.row(id)[w] ^ queries[static_cast<std::size_t>(q) * set.words + w]);
      all.emplace_back(d, id);
    }
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size() && i < static_cast<std::size_t>(k); ++i) {
      out.objects.push_back(all[i].second);
      out.distances.push_back(all[i].first);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

inline void ExpectSameCodeRows(const CodeScanResult& want, const CodeScanResult& got) {
  ASSERT_EQ(want.offsets, got.offsets);
  EXPECT_EQ(want.objects, got.objects);
  EXPECT_EQ(want.distances, got.distances);
}

}  // namespace testing
}  // namespace genie

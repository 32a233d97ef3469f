// Bit-parallel Levenshtein distance of one prepared pattern against many
// texts (Myers 1999, Hyyro's global-distance form, multi-word blocks): what
// the string scan (genie/string_scan.hpp) runs for every string of an index,
// on the CPU and, compiled by nvcc, on the GPU.  Like levenshtein_kernel.hpp
// it is written once for both engines; no CUDA header here.
//
// Why a prepared pattern: a scan compares one query with hundreds of
// thousands of strings, so the query's match masks are built once (the
// per-pair table of levenshtein_kernel.hpp costs as much as a short
// distance).  Code points below 128 index a direct table; the others are
// found by binary search in the pattern's sorted distinct code points.
//
// Early exit: after column j of a text of length n the last row holds
// D[m][j]; since one more column changes it by at most 1, the final
// distance is at least D[m][j] - (n - j).  Once that exceeds the cap the
// pair cannot be within it and the function returns cap + 1.
#pragma once
#include <cstdint>

#include "genie/levenshtein_kernel.hpp"

namespace genie {
namespace kernel {

// Patterns up to this many code points (four 64-bit words) are prepared.
constexpr int32_t kPatternMaxWords = 4;
constexpr int32_t kPatternMaxLength = 64 * kPatternMaxWords;
constexpr uint32_t kPatternDirect = 128;

struct MyersPattern {
  int32_t length = 0;   // m, in code points (0 .. kPatternMaxLength)
  int32_t words = 0;    // ceil(m / 64)
  int32_t n_other = 0;  // distinct code points >= kPatternDirect
  uint64_t direct[kPatternDirect][kPatternMaxWords];
  uint32_t other_chars[kPatternMaxLength];  // ascending
  uint64_t other_masks[kPatternMaxLength][kPatternMaxWords];
  uint64_t none[kPatternMaxWords];  // the masks of a code point not in the pattern
};

// Prepares p[0 .. m); false when m > kPatternMaxLength.
GENIE_HOST_DEVICE inline bool PreparePattern(const uint32_t* p, int32_t m, MyersPattern* out) {
  if (m < 0 || m > kPatternMaxLength) return false;
  out->length = m;
  out->words = (m + 63) / 64;
  out->n_other = 0;
  for (int32_t w = 0; w < kPatternMaxWords; ++w) out->none[w] = 0;
  for (uint32_t c = 0; c < kPatternDirect; ++c)
    for (int32_t w = 0; w < kPatternMaxWords; ++w) out->direct[c][w] = 0;
  for (int32_t i = 0; i < m; ++i) {
    const uint32_t c = p[i];
    const int32_t w = i >> 6;
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (c < kPatternDirect) {
      out->direct[c][w] |= bit;
      continue;
    }
    const int32_t lo = LowerBound(out->other_chars, out->n_other, c);
    if (lo == out->n_other || out->other_chars[lo] != c) {
      for (int32_t k = out->n_other; k > lo; --k) {
        out->other_chars[k] = out->other_chars[k - 1];
        for (int32_t x = 0; x < kPatternMaxWords; ++x) out->other_masks[k][x] = out->other_masks[k - 1][x];
      }
      out->other_chars[lo] = c;
      for (int32_t x = 0; x < kPatternMaxWords; ++x) out->other_masks[lo][x] = 0;
      ++out->n_other;
    }
    out->other_masks[lo][w] |= bit;
  }
  return true;
}

// Code point c's match masks, one word per 64 pattern positions.
GENIE_HOST_DEVICE inline const uint64_t* PatternMasks(const MyersPattern& p, uint32_t c) {
  if (c < kPatternDirect) return p.direct[c];
  const int32_t lo = LowerBound(p.other_chars, p.n_other, c);
  return (lo < p.n_other && p.other_chars[lo] == c) ? p.other_masks[lo] : p.none;
}

// ed(pattern, text) capped at cap + 1 (cap >= 0), for a pattern of W words
// (W == p.words, m >= 1).  text(j) gives the text's code point j.
template <int W, typename Text>
GENIE_HOST_DEVICE inline int32_t MyersBlocks(const MyersPattern& p, const Text& text, int32_t n,
                                             int32_t cap) {
  const int32_t m = p.length;
  if ((m > n ? m - n : n - m) > cap) return cap + 1;
  uint64_t pv[W], mv[W];
  for (int w = 0; w < W; ++w) {
    pv[w] = ~uint64_t{0};
    mv[w] = 0;
  }
  const uint64_t last = uint64_t{1} << ((m - 1) & 63);
  int32_t score = m;
  for (int32_t j = 0; j < n; ++j) {
    const uint64_t* masks = PatternMasks(p, text(j));
    // the top row is D[0][j] = j: +1 enters the first block from above
    int32_t hin = 1;
    for (int w = 0; w < W; ++w) {
      uint64_t eq = masks[w];
      const uint64_t xv = eq | mv[w];
      if (hin < 0) eq |= 1;
      const uint64_t xh = (((eq & pv[w]) + pv[w]) ^ pv[w]) | eq;
      uint64_t ph = mv[w] | ~(xh | pv[w]);
      uint64_t mh = pv[w] & xh;
      const uint64_t high = w == W - 1 ? last : (uint64_t{1} << 63);
      const int32_t hout = (ph & high) ? 1 : ((mh & high) ? -1 : 0);
      ph <<= 1;
      mh <<= 1;
      if (hin < 0) {
        mh |= 1;
      } else if (hin > 0) {
        ph |= 1;
      }
      pv[w] = mh | ~(xv | ph);
      mv[w] = ph & xv;
      hin = hout;
    }
    score += hin;
    if (score - (n - 1 - j) > cap) return cap + 1;
  }
  return score > cap ? cap + 1 : score;
}

// ed(pattern, text) capped at cap + 1, for any prepared pattern.
template <typename Text>
GENIE_HOST_DEVICE inline int32_t PatternDistance(const MyersPattern& p, const Text& text, int32_t n,
                                                 int32_t cap) {
  if (p.length == 0) return n > cap ? cap + 1 : n;
  if (n == 0) return p.length > cap ? cap + 1 : p.length;
  switch (p.words) {
    case 1:
      return MyersBlocks<1>(p, text, n, cap);
    case 2:
      return MyersBlocks<2>(p, text, n, cap);
    case 3:
      return MyersBlocks<3>(p, text, n, cap);
    default:
      return MyersBlocks<4>(p, text, n, cap);
  }
}

}  // namespace kernel
}  // namespace genie

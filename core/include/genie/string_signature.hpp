// A lower bound of the edit distance that costs a few vector instructions,
// checked by the CPU string scan before the bit-parallel distance.
//
// Code points fall into 32 classes (cp & 31: the letters a-z, and A-Z, each
// get their own class), and a string's signature is its count of each
// class, saturated at 255.  An insertion raises one count by one, a deletion
// lowers one, a substitution does at most one of each; so with
// P = sum over classes of (s_c - q_c)+ and N = sum of (q_c - s_c)+,
// ED(s, q) >= max(P, N).  Saturation keeps the bound: min(x, 255) is
// monotone and never widens a gap.
#pragma once
#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "genie/sequence.hpp"
#include "genie/span.hpp"

namespace genie {

struct alignas(16) StringSignature {
  uint8_t counts[32] = {};
};

inline StringSignature MakeStringSignature(Span<CodePoint> s) {
  StringSignature sig;
  for (CodePoint c : s) {
    uint8_t& n = sig.counts[c & 31u];
    if (n != 255) ++n;
  }
  return sig;
}

// max(P, N) above: a lower bound of ED(a, b).
inline int32_t StringSignatureBound(const StringSignature& a, const StringSignature& b) {
#if defined(__SSE2__)
  const __m128i a0 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.counts));
  const __m128i a1 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.counts + 16));
  const __m128i b0 = _mm_load_si128(reinterpret_cast<const __m128i*>(b.counts));
  const __m128i b1 = _mm_load_si128(reinterpret_cast<const __m128i*>(b.counts + 16));
  const __m128i zero = _mm_setzero_si128();
  // byte sums of the saturated differences, two 64-bit halves each
  const __m128i p = _mm_add_epi64(_mm_sad_epu8(_mm_subs_epu8(a0, b0), zero),
                                  _mm_sad_epu8(_mm_subs_epu8(a1, b1), zero));
  const __m128i n = _mm_add_epi64(_mm_sad_epu8(_mm_subs_epu8(b0, a0), zero),
                                  _mm_sad_epu8(_mm_subs_epu8(b1, a1), zero));
  const int32_t pos = _mm_cvtsi128_si32(p) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(p, p));
  const int32_t neg = _mm_cvtsi128_si32(n) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(n, n));
  return std::max(pos, neg);
#else
  int32_t pos = 0, neg = 0;
  for (int c = 0; c < 32; ++c) {
    const int32_t d = static_cast<int32_t>(a.counts[c]) - static_cast<int32_t>(b.counts[c]);
    if (d > 0) pos += d; else neg -= d;
  }
  return std::max(pos, neg);
#endif
}

}  // namespace genie

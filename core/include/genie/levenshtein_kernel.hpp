// One Levenshtein distance, written once for both engines: core/ calls it on
// the CPU and gpu/ compiles the same code for the device (nvcc sees
// GENIE_HOST_DEVICE as __host__ __device__; every other compiler sees
// nothing), so the CPU and the GPU cannot drift apart.  No CUDA header here.
//
// Strings are code points.  The shorter string of a pair is the pattern:
// with at most kMyersMaxLength code points, bit-parallel Myers (Hyyro's
// global-distance form) with the pattern's match masks in a small sorted
// table; beyond, banded dynamic programming with doubling thresholds (16, 32,
// ... up to the cap or the longer length) over a caller-provided row.
//
// Cancel: every function takes a poll, called every kPollCells cells (or
// Myers columns); when it returns true the function stops and returns
// kStopped.  The device and callers without a cancel callback use NoPoll,
// which compiles to nothing, so their code is what it was without polling.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define GENIE_HOST_DEVICE __host__ __device__
#else
#define GENIE_HOST_DEVICE
#endif

namespace genie {
namespace kernel {

// Patterns up to this many code points use Myers (one 64-bit word).
constexpr int32_t kMyersMaxLength = 64;

// Work between two polls: about a millisecond of one CPU core.
constexpr int64_t kPollCells = int64_t{1} << 22;
// What a function returns when its poll asked it to stop.
constexpr int32_t kStopped = -1;

struct NoPoll {
  GENIE_HOST_DEVICE bool operator()() const { return false; }
};

GENIE_HOST_DEVICE inline int32_t Min32(int32_t a, int32_t b) { return a < b ? a : b; }
GENIE_HOST_DEVICE inline int32_t Max32(int32_t a, int32_t b) { return a > b ? a : b; }

// The first position in chars[0 .. size) (ascending) whose value is >= c.
GENIE_HOST_DEVICE inline int32_t LowerBound(const uint32_t* chars, int32_t size, uint32_t c) {
  int32_t lo = 0, hi = size;
  while (lo < hi) {
    const int32_t mid = (lo + hi) >> 1;
    if (chars[mid] < c) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Global edit distance of pattern p (1 <= m <= 64) and text t.
template <typename Poll = NoPoll>
GENIE_HOST_DEVICE inline int32_t MyersDistance(const uint32_t* p, int32_t m, const uint32_t* t,
                                               int64_t len_t, const Poll& poll = Poll()) {
  // The pattern's distinct code points, ascending, with their position masks.
  uint32_t chars[kMyersMaxLength];
  uint64_t masks[kMyersMaxLength];
  int32_t size = 0;
  for (int32_t i = 0; i < m; ++i) {
    const uint32_t c = p[i];
    const int32_t lo = LowerBound(chars, size, c);
    if (lo == size || chars[lo] != c) {
      for (int32_t k = size; k > lo; --k) {
        chars[k] = chars[k - 1];
        masks[k] = masks[k - 1];
      }
      chars[lo] = c;
      masks[lo] = 0;
      ++size;
    }
    masks[lo] |= uint64_t{1} << i;
  }
  uint64_t pv = ~uint64_t{0};
  uint64_t mv = 0;
  const uint64_t last = uint64_t{1} << (m - 1);
  int32_t score = m;
  for (int64_t j = 0; j < len_t; ++j) {
    if (((j + 1) & (kPollCells - 1)) == 0 && poll()) return kStopped;
    const uint32_t c = t[j];
    const int32_t lo = LowerBound(chars, size, c);
    const uint64_t eq = (lo < size && chars[lo] == c) ? masks[lo] : 0;
    const uint64_t xv = eq | mv;
    const uint64_t xh = (((eq & pv) + pv) ^ pv) | eq;
    uint64_t ph = mv | ~(xh | pv);
    uint64_t mh = pv & xh;
    if (ph & last) {
      ++score;
    } else if (mh & last) {
      --score;
    }
    ph = (ph << 1) | 1;
    mh <<= 1;
    pv = mh | ~(xv | ph);
    mv = ph & xv;
  }
  return score;
}

// Banded DP, rows over a (length m), columns over b (length n); row has
// n + 1 cells.  Exact when ed <= t, else t + 1.
template <typename Poll = NoPoll>
GENIE_HOST_DEVICE inline int32_t BandedDistance(const uint32_t* a, int32_t m, const uint32_t* b,
                                                int32_t n, int32_t t, int32_t* row,
                                                const Poll& poll = Poll()) {
  if ((m > n ? m - n : n - m) > t) return t + 1;
  const int32_t inf = t + 1;
  for (int32_t j = 0; j <= n; ++j) row[j] = j <= t ? j : inf;
  int64_t since_poll = 0;
  for (int32_t i = 1; i <= m; ++i) {
    const int32_t lo = Max32(1, i - t);
    const int32_t hi = Min32(n, i + t);
    since_poll += hi - lo + 1;
    if (since_poll >= kPollCells) {
      since_poll = 0;
      if (poll()) return kStopped;
    }
    int32_t diag = row[lo - 1];
    int32_t left = inf;
    if (lo == 1) {
      left = i <= t ? i : inf;
      row[0] = left;
    }
    int32_t row_min = left;
    const uint32_t ai = a[i - 1];
    for (int32_t j = lo; j <= hi; ++j) {
      const int32_t up = row[j];
      int32_t v = diag + (ai != b[j - 1] ? 1 : 0);
      v = Min32(v, Min32(up, left) + 1);
      if (v > inf) v = inf;
      diag = up;
      row[j] = v;
      left = v;
      row_min = Min32(row_min, v);
    }
    if (row_min > t) return inf;
  }
  return Min32(row[n], inf);
}

// The distance of a and b capped at cap + 1 (no cap when cap < 0), or
// kStopped.  row needs
// min(m, n) + 1 cells when min(m, n) > kMyersMaxLength and is untouched
// otherwise.
template <typename Poll = NoPoll>
GENIE_HOST_DEVICE inline int32_t CappedDistance(const uint32_t* a, int32_t m, const uint32_t* b,
                                                int32_t n, int32_t cap, int32_t* row,
                                                const Poll& poll = Poll()) {
  if (m > n) {  // a: the shorter
    const uint32_t* tp = a;
    a = b;
    b = tp;
    const int32_t tl = m;
    m = n;
    n = tl;
  }
  int32_t d;
  if (m == 0) {
    d = n;
  } else if (m <= kMyersMaxLength) {
    d = MyersDistance(a, m, b, n, poll);
    if (d == kStopped) return kStopped;
  } else {
    const int32_t limit = cap < 0 ? n : Min32(cap, n);
    if (n - m > limit) {
      d = limit + 1;
    } else {
      int32_t t = Min32(limit, Max32(n - m, 16));
      for (;;) {
        d = BandedDistance(b, n, a, m, t, row, poll);
        if (d == kStopped) return kStopped;
        if (d <= t || t >= limit) break;
        const int64_t doubled = int64_t{2} * t;
        t = doubled < limit ? static_cast<int32_t>(doubled) : limit;
      }
    }
  }
  if (cap >= 0 && d > cap) d = cap + 1;
  return d;
}

}  // namespace kernel
}  // namespace genie

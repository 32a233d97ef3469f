// The LSH draws as genie 0.8.0 and before made them, one draw at a time:
// the oracle that LshFunctions::Create's block draws must equal bit for
// bit (every LSH index built before keeps its keywords), for the core test
// and bench/lsh_draw_bench.  Written from the published algorithms
// (xoshiro256** seeded by SplitMix64, Marsaglia's polar method, RBH's
// Gamma(2) pitches), with genie's PortableLog.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "genie/lsh.hpp"

namespace genie {
namespace testing {

struct ReferenceDraws {
  std::vector<double> projections, offsets, cells, shifts;
};

inline ReferenceDraws ReferenceLshDraws(const LshParams& p) {
  struct Xoshiro {
    uint64_t s[4];
    static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t Next() {
      const uint64_t result = Rotl(s[1] * 5, 7) * 9;
      const uint64_t t = s[1] << 17;
      s[2] ^= s[0];
      s[3] ^= s[1];
      s[1] ^= s[2];
      s[0] ^= s[3];
      s[2] ^= t;
      s[3] = Rotl(s[3], 45);
      return result;
    }
    double Uniform() { return static_cast<double>(Next() >> 11) * 0x1p-53; }
    double UniformPositive() { return static_cast<double>((Next() >> 11) + 1) * 0x1p-53; }
    double Normal() {
      for (;;) {
        const double u = 2.0 * Uniform() - 1.0;
        const double v = 2.0 * Uniform() - 1.0;
        const double s2 = u * u + v * v;
        if (s2 > 0.0 && s2 < 1.0) return u * std::sqrt(-2.0 * PortableLog(s2) / s2);
      }
    }
  } rng;
  uint64_t seed = p.seed;
  for (uint64_t& w : rng.s) w = SplitMix64(&seed);
  const std::size_t m = static_cast<std::size_t>(p.functions), d = static_cast<std::size_t>(p.dim);
  ReferenceDraws r;
  if (p.family == LshFamily::kE2Lsh) {
    r.projections.resize(m * d);
    r.offsets.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < d; ++j) r.projections[i * d + j] = rng.Normal();
      r.offsets[i] = rng.Uniform() * p.width;
    }
  } else {
    r.cells.resize(m * d);
    r.shifts.resize(m * d);
    for (std::size_t i = 0; i < m * d; ++i) {
      // the first logarithm's draw comes first (0.8.0's compiled order)
      const double first = PortableLog(rng.UniformPositive());
      const double second = PortableLog(rng.UniformPositive());
      const double g = -p.width * (first + second);
      r.cells[i] = g;
      r.shifts[i] = rng.Uniform() * g;
    }
  }
  return r;
}

}  // namespace testing
}  // namespace genie

// LshFunctions::Create draws in chunks (the generator's numbers first, then
// the logarithms four at a time, on several threads): every function must
// be the one genie 0.8.0 drew one draw at a time, bit for bit, on any
// number of threads, or every LSH index built before
// would give other keywords to new rows and queries.  Checked against the
// draw-by-draw loop (genie/lsh_reference.hpp) and against fingerprints of
// what 0.8.0's library drew.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "genie/lsh.hpp"
#include "genie/lsh_reference.hpp"

namespace genie {
namespace {

uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// The index of the first element whose bits differ, or -1.
long FirstDifference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (Bits(a[i]) != Bits(b[i])) return static_cast<long>(i);
  return -1;
}

uint64_t Fnv(const std::vector<double>& x, uint64_t h) {
  for (double d : x) {
    const uint64_t b = Bits(d);
    for (int i = 0; i < 8; ++i) {
      h ^= (b >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

TEST(PortableLogs, EqualsPortableLogBitForBit) {
  std::vector<double> x = {1.0, 2.0, 0.5, 1e-300, 1e300, 0.7071067811865476, 0.7071067811865475,
                           1.4142135623730951, 3.0, std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                           0x1p-53, 0x1p-106, 1.0 - 0x1p-53};
  std::mt19937_64 rng(27);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 100003; ++i) x.push_back(i % 3 == 0 ? std::ldexp(u(rng) + 0.5, i % 2001 - 1000) : u(rng) + 1e-300);
  // every length's tail (n not a multiple of the lanes) and the full run
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{7}, x.size()}) {
    std::vector<double> out(n);
    PortableLogs(x.data(), out.data(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(Bits(out[i]), Bits(PortableLog(x[i]))) << "x = " << x[i];
  }
}

struct DrawCase {
  LshFamily family;
  int32_t dim, functions;
  double width;
  uint64_t seed;
  uint64_t fingerprint;  // of 0.8.0's draws (0: not recorded)
};

// dims and counts around the slice (4,096 draws), the chunk (2^18) and the
// lanes (4), both families
const DrawCase kCases[] = {
    {LshFamily::kE2Lsh, 784, 238, 1500, 7ULL, 0xcb824b0352657e39ULL},
    {LshFamily::kE2Lsh, 1, 5, 0.5, 0ULL, 0x962829d3fdd09411ULL},
    {LshFamily::kE2Lsh, 13, 333, 2, 12345678901ULL, 0x069e9741c07204e7ULL},
    {LshFamily::kRbh, 784, 238, 900, 7ULL, 0xd9e19fb8b0ceab2dULL},
    {LshFamily::kRbh, 3, 1000, 1, 99ULL, 0xcef56ff78229677eULL},
    {LshFamily::kRbh, 4097, 3, 3, 1ULL, 0xc10681f25eb41b9dULL},
    {LshFamily::kE2Lsh, 4096, 2, 1, 3ULL, 0},
    {LshFamily::kE2Lsh, 4095, 3, 1, 4ULL, 0},
    {LshFamily::kE2Lsh, 1, 4097, 1, 5ULL, 0},
    {LshFamily::kRbh, 1, 4096, 1, 6ULL, 0},
    {LshFamily::kRbh, 2049, 2, 0.25, 8ULL, 0},
    {LshFamily::kE2Lsh, 2049, 128, 1, 9ULL, 0},
    {LshFamily::kRbh, 1031, 255, 2, 10ULL, 0},
};

TEST(LshFunctions, BlockDrawsEqualTheDrawByDrawLoop) {
  for (const DrawCase& c : kCases) {
    LshParams p;
    p.family = c.family;
    p.dim = c.dim;
    p.functions = c.functions;
    p.buckets = 1 << 16;
    p.width = c.width;
    p.seed = c.seed;
    const testing::ReferenceDraws want = testing::ReferenceLshDraws(p);
    SCOPED_TRACE(std::string(c.family == LshFamily::kE2Lsh ? "e2lsh" : "rbh") + " dim " + std::to_string(c.dim) +
                 " m " + std::to_string(c.functions));
    // the same functions on one thread, three, and every core
    for (int32_t threads : {1, 3, 0}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      std::unique_ptr<LshFunctions> f;
      ASSERT_TRUE(LshFunctions::Create(p, &f, {}, threads).ok());
      EXPECT_EQ(FirstDifference(f->projections(), want.projections), -1);
      EXPECT_EQ(FirstDifference(f->offsets(), want.offsets), -1);
      EXPECT_EQ(FirstDifference(f->cells(), want.cells), -1);
      EXPECT_EQ(FirstDifference(f->shifts(), want.shifts), -1);
      if (c.fingerprint != 0) {
        uint64_t h = 1469598103934665603ULL;
        h = Fnv(f->shifts(), Fnv(f->cells(), Fnv(f->offsets(), Fnv(f->projections(), h))));
        EXPECT_EQ(h, c.fingerprint) << "not the draws of genie 0.8.0";
      }
    }
  }
}

}  // namespace
}  // namespace genie

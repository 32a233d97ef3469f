// Tests of the LSH families: MurmurHash3's published values, the portable
// logarithm, Equation 9 (the paper's 237), the collision probabilities of
// E2LSH (p-stable) and RBH (the Laplacian kernel) on samples, the keyword
// ranges, determinism from the seed, and the tau-ANN guarantee (Theorem
// 4.2) on synthetic data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "genie/lsh.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

TEST(MurmurHash3, PublishedValues) {
  EXPECT_EQ(MurmurHash3("", 0, 0), 0u);
  EXPECT_EQ(MurmurHash3("", 0, 1), 0x514E28B7u);
  EXPECT_EQ(MurmurHash3("", 0, 0xffffffffu), 0x81F16F39u);
  const char* fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(MurmurHash3(fox, std::strlen(fox), 0), 0x2E4FF723u);
  const unsigned char zeros[4] = {0, 0, 0, 0};
  EXPECT_EQ(MurmurHash3(zeros, 4, 0), 0x2362F9DEu);
}

TEST(PortableLog, AgreesWithStdLog) {
  std::mt19937_64 rng(5);
  for (double x : {1.0, 2.0, 0.5, 1e-300, 1e300, 0.7071067811865476, 1.4142135623730951, 3.0,
                   std::numeric_limits<double>::denorm_min()}) {
    EXPECT_NEAR(PortableLog(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 10000; ++i) {
    const double x = u(rng) + 1e-12;
    EXPECT_NEAR(PortableLog(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x))));
  }
  EXPECT_EQ(PortableLog(1.0), 0.0);
}

TEST(LshFunctionsFor, Equation9GivesThePapersM) {
  // Figure 8 reads 237 (see genie/lsh.hpp for the exact sum's 238)
  EXPECT_EQ(LshFunctionsFor(0.06, 0.06), 238);
  // tighter bounds need more functions, looser fewer
  EXPECT_GT(LshFunctionsFor(0.03, 0.06), 237);
  EXPECT_LT(LshFunctionsFor(0.1, 0.1), 237);
  EXPECT_EQ(LshFunctionsFor(0.0, 0.06), 0);
}

std::vector<float> RandomPoint(std::mt19937* rng, int32_t dim, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(dim);
  for (float& x : v) x = normal(*rng);
  return v;
}

// A point at exactly distance c (L2 or L1) from p, in a random direction.
std::vector<float> PointAt(std::mt19937* rng, const std::vector<float>& p, double c, bool l1) {
  std::vector<float> dir = RandomPoint(rng, static_cast<int32_t>(p.size()), 1.0f);
  double norm = 0;
  for (float x : dir) norm += l1 ? std::fabs(x) : static_cast<double>(x) * x;
  norm = l1 ? norm : std::sqrt(norm);
  std::vector<float> q(p.size());
  for (std::size_t j = 0; j < p.size(); ++j) q[j] = static_cast<float>(p[j] + dir[j] * c / norm);
  return q;
}

// The fraction of m functions on which p and q collide.
double CollisionRate(const LshFunctions& f, const std::vector<float>& p, const std::vector<float>& q) {
  const int32_t m = f.params().functions;
  std::vector<int32_t> kp(m), kq(m);
  f.Keywords(p.data(), kp.data());
  f.Keywords(q.data(), kq.data());
  int32_t same = 0;
  for (int32_t i = 0; i < m; ++i) same += kp[i] == kq[i];
  return static_cast<double>(same) / m;
}

TEST(LshFunctions, CollisionProbabilityMatchesTheFamily) {
  std::mt19937 rng(20261125);
  for (LshFamily family : {LshFamily::kE2Lsh, LshFamily::kRbh}) {
    LshParams params;
    params.family = family;
    params.dim = 16;
    params.functions = 4000;
    params.buckets = 1 << 19;  // false collisions 2^-19: negligible
    params.width = 4.0;
    params.seed = 99;
    std::unique_ptr<LshFunctions> f;
    ASSERT_TRUE(LshFunctions::Create(params, &f).ok());
    for (double c : {0.5, 1.0, 2.0, 4.0, 8.0}) {
      const std::vector<float> p = RandomPoint(&rng, 16, 3.0f);
      const std::vector<float> q = PointAt(&rng, p, c, family == LshFamily::kRbh);
      const double want = LshCollisionProbability(family, params.width, c);
      const double sigma = std::sqrt(want * (1 - want) / params.functions);
      EXPECT_NEAR(CollisionRate(*f, p, q), want, 4 * sigma + 0.005)
          << (family == LshFamily::kRbh ? "rbh" : "e2lsh") << " c=" << c;
    }
  }
}

TEST(LshFunctions, KeywordsAreOnePerFunctionInRangeAndSeeded) {
  std::mt19937 rng(1);
  LshParams params;
  params.dim = 5;
  params.functions = 50;
  params.buckets = 7;
  params.width = 1.5;
  params.seed = 42;
  for (LshFamily family : {LshFamily::kE2Lsh, LshFamily::kRbh}) {
    params.family = family;
    std::unique_ptr<LshFunctions> a, b, other;
    ASSERT_TRUE(LshFunctions::Create(params, &a).ok());
    ASSERT_TRUE(LshFunctions::Create(params, &b).ok());
    LshParams p2 = params;
    p2.seed = 43;
    ASSERT_TRUE(LshFunctions::Create(p2, &other).ok());
    int differ = 0;
    for (int t = 0; t < 20; ++t) {
      const std::vector<float> v = RandomPoint(&rng, 5, 10.0f);
      std::vector<int32_t> ka(50), kb(50), ko(50);
      a->Keywords(v.data(), ka.data());
      b->Keywords(v.data(), kb.data());
      other->Keywords(v.data(), ko.data());
      EXPECT_EQ(ka, kb);
      for (int32_t i = 0; i < 50; ++i) {
        EXPECT_GE(ka[i], i * 7);
        EXPECT_LT(ka[i], (i + 1) * 7);
        differ += ka[i] != ko[i];
      }
    }
    EXPECT_GT(differ, 500);  // another seed draws other functions
  }
  // the same seed gives the same keyword on every machine: a fixed value
  params.family = LshFamily::kE2Lsh;
  params.dim = 3;
  params.functions = 4;
  params.buckets = 1000;
  std::unique_ptr<LshFunctions> f;
  ASSERT_TRUE(LshFunctions::Create(params, &f).ok());
  const float v[3] = {1.0f, -2.0f, 0.5f};
  int32_t kw[4];
  f->Keywords(v, kw);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(kw[i] / 1000, i);
}

// E2LSH keywords against the definition, computed here term by term: each
// function's dot product summed in element order (the keywords are stored
// in indexes: Keywords overlaps several functions' sums, never reorders
// one), its cell, and the cell's hash with the function's seed.  Function
// counts below, at and past the groups Keywords computes together.
TEST(LshFunctions, E2LshKeywordsFollowTheDefinition) {
  std::mt19937 rng(8);
  const auto function_seed = [](uint64_t seed, int32_t i) {
    uint64_t state = seed ^ (0xA24BAED4963EE407ULL * (static_cast<uint64_t>(i) + 1));
    return static_cast<uint32_t>(SplitMix64(&state) >> 32);
  };
  for (int32_t dim : {1, 3, 8, 9, 784}) {
    for (int32_t functions : {1, 7, 8, 9, 17, 238}) {
      LshParams params;
      params.family = LshFamily::kE2Lsh;
      params.dim = dim;
      params.functions = functions;
      params.buckets = 1009;
      params.width = 4.0;
      params.seed = static_cast<uint64_t>(dim * 1000 + functions);
      std::unique_ptr<LshFunctions> f;
      ASSERT_TRUE(LshFunctions::Create(params, &f).ok());
      for (int t = 0; t < 4; ++t) {
        const std::vector<float> v = RandomPoint(&rng, dim, 10.0f);
        std::vector<int32_t> got(static_cast<std::size_t>(functions));
        f->Keywords(v.data(), got.data());
        for (int32_t i = 0; i < functions; ++i) {
          double dot = 0.0;
          for (int32_t j = 0; j < dim; ++j)
            dot = dot + f->projections()[static_cast<std::size_t>(i) * dim + j] * static_cast<double>(v[j]);
          const double x = std::floor((dot + f->offsets()[static_cast<std::size_t>(i)]) / params.width);
          const int64_t cell = static_cast<int64_t>(x);
          unsigned char bytes[8];
          for (int b = 0; b < 8; ++b) bytes[b] = static_cast<unsigned char>(static_cast<uint64_t>(cell) >> (8 * b));
          const uint32_t r = MurmurHash3(bytes, 8, function_seed(params.seed, i)) % 1009u;
          ASSERT_EQ(got[static_cast<std::size_t>(i)], i * 1009 + static_cast<int32_t>(r))
              << "dim " << dim << " functions " << functions << " function " << i;
        }
      }
    }
  }
}

// A batch's keywords are each vector's own, for both families, on one
// thread or several, for counts around the batch's tasks of 32 vectors.
TEST(LshFunctions, BatchKeywordsAreEachVectorsOwn) {
  std::mt19937 rng(9);
  for (LshFamily family : {LshFamily::kE2Lsh, LshFamily::kRbh}) {
    LshParams params;
    params.family = family;
    params.dim = 37;
    params.functions = family == LshFamily::kE2Lsh ? 21 : 5;
    params.buckets = 101;
    params.width = 3.0;
    params.seed = 5;
    std::unique_ptr<LshFunctions> f;
    ASSERT_TRUE(LshFunctions::Create(params, &f).ok());
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{100}}) {
      std::vector<float> vectors;
      for (int64_t k = 0; k < count; ++k) {
        const std::vector<float> v = RandomPoint(&rng, params.dim, 10.0f);
        vectors.insert(vectors.end(), v.begin(), v.end());
      }
      for (int32_t threads : {1, 3}) {
        std::vector<int32_t> got(static_cast<std::size_t>(count * params.functions) + 1, -1);
        ASSERT_TRUE(f->KeywordsBatch(vectors.data(), count, threads, CancelCheck(), got.data()).ok());
        for (int64_t k = 0; k < count; ++k) {
          std::vector<int32_t> one(static_cast<std::size_t>(params.functions));
          f->Keywords(vectors.data() + k * params.dim, one.data());
          ASSERT_EQ(std::vector<int32_t>(got.begin() + k * params.functions, got.begin() + (k + 1) * params.functions),
                    one)
              << "vector " << k << " of " << count << " threads " << threads;
        }
        EXPECT_EQ(got.back(), -1);  // nothing written past the last vector
      }
    }
    std::vector<float> vectors(static_cast<std::size_t>(params.dim) * 100, 1.0f);
    std::vector<int32_t> out(static_cast<std::size_t>(params.functions) * 100);
    const CancelCheck always{[](void*) { return 1; }, nullptr};
    EXPECT_EQ(f->KeywordsBatch(vectors.data(), 100, 2, always, out.data()).code(), GENIE_CANCELLED);
    EXPECT_EQ(f->KeywordsBatch(nullptr, 3, 1, CancelCheck(), out.data()).code(), GENIE_INVALID_ARGUMENT);
  }
}

TEST(LshFunctions, RejectsBadParameters) {
  std::unique_ptr<LshFunctions> f;
  LshParams p;
  p.dim = 4;
  p.functions = 10;
  p.buckets = 10;
  p.width = 1;
  EXPECT_TRUE(LshFunctions::Create(p, &f).ok());
  p.width = 0;
  EXPECT_EQ(LshFunctions::Create(p, &f).code(), GENIE_INVALID_ARGUMENT);
  p.width = std::numeric_limits<double>::infinity();
  EXPECT_EQ(LshFunctions::Create(p, &f).code(), GENIE_INVALID_ARGUMENT);
  p.width = 1;
  p.functions = 1 << 16;
  p.buckets = 1 << 16;
  EXPECT_EQ(LshFunctions::Create(p, &f).code(), GENIE_INVALID_ARGUMENT);
  p.functions = 10;
  p.dim = 0;
  EXPECT_EQ(LshFunctions::Create(p, &f).code(), GENIE_INVALID_ARGUMENT);
}

// A cancel stops the draws (within kCancelEvery of them) and the width
// estimate; a check that never fires draws the same functions as none.
TEST(LshFunctions, CancelStopsTheDrawsAndTheWidthEstimate) {
  struct Countdown {
    int polls_left;
    static int Fire(void* arg) { return --static_cast<Countdown*>(arg)->polls_left < 0; }
  };
  for (LshFamily family : {LshFamily::kE2Lsh, LshFamily::kRbh}) {
    LshParams p;
    p.family = family;
    p.dim = 3000;
    p.functions = 100;
    p.buckets = 64;
    p.width = 2;
    p.seed = 11;
    std::unique_ptr<LshFunctions> f;
    Countdown countdown{3};
    EXPECT_EQ(LshFunctions::Create(p, &f, CancelCheck{&Countdown::Fire, &countdown}).code(), GENIE_CANCELLED);
    EXPECT_EQ(countdown.polls_left, -1) << "the draws stopped at the first poll that fired";
    EXPECT_EQ(f, nullptr);
    Countdown never{1 << 30};
    std::unique_ptr<LshFunctions> polled, plain;
    ASSERT_TRUE(LshFunctions::Create(p, &polled, CancelCheck{&Countdown::Fire, &never}).ok());
    ASSERT_TRUE(LshFunctions::Create(p, &plain).ok());
    std::mt19937 rng(5);
    const std::vector<float> v = RandomPoint(&rng, p.dim, 1.0f);
    std::vector<int32_t> a(p.functions), b(p.functions);
    polled->Keywords(v.data(), a.data());
    plain->Keywords(v.data(), b.data());
    EXPECT_EQ(a, b);
  }
  std::mt19937 rng(6);
  std::vector<float> sample;
  for (int i = 0; i < 50; ++i) {
    const std::vector<float> v = RandomPoint(&rng, 8, 1.0f);
    sample.insert(sample.end(), v.begin(), v.end());
  }
  double width = 0;
  Countdown countdown{10};
  EXPECT_EQ(EstimateLshWidth(LshFamily::kE2Lsh, sample.data(), 50, 8, CancelCheck{&Countdown::Fire, &countdown},
                             &width).code(),
            GENIE_CANCELLED);
  ASSERT_TRUE(EstimateLshWidth(LshFamily::kE2Lsh, sample.data(), 50, 8, CancelCheck{}, &width).ok());
  EXPECT_GT(width, 0.0);
  ASSERT_TRUE(EstimateLshWidth(LshFamily::kE2Lsh, sample.data(), 1, 8, CancelCheck{}, &width).ok());
  EXPECT_EQ(width, 1.0) << "one vector gives no distance: the default width";
}

// Theorem 4.2: with m from Equation 9 the object of the highest match
// count has sim(p, q) >= sim(p*, q) - 2 epsilon with probability >= 1 - 2
// delta (sim = the collision probability; the re-hash adds at most 1/D).
TEST(LshFunctions, TopMatchCountIsTauApproximateNearest) {
  const double epsilon = 0.06, delta = 0.06;
  std::mt19937 rng(2018);
  const int32_t dim = 24, n = 1500, nq = 200;
  LshParams params;
  params.family = LshFamily::kE2Lsh;
  params.dim = dim;
  params.functions = LshFunctionsFor(epsilon, delta);
  params.buckets = 1 << 16;
  params.width = 6.0;
  params.seed = 7;
  std::unique_ptr<LshFunctions> f;
  ASSERT_TRUE(LshFunctions::Create(params, &f).ok());
  const int32_t m = params.functions;
  std::vector<std::vector<float>> points;
  std::vector<std::vector<int32_t>> keys;
  for (int32_t i = 0; i < n; ++i) {
    points.push_back(RandomPoint(&rng, dim, 1.0f));
    keys.emplace_back(m);
    f->Keywords(points.back().data(), keys.back().data());
  }
  int violations = 0, near_misses = 0;
  const double tau = 2 * epsilon + 1.0 / params.buckets;
  for (int32_t qi = 0; qi < nq; ++qi) {
    // half the queries near a point, half anywhere in the cloud (where many
    // points are almost as near as the nearest)
    const std::vector<float> q = qi % 2 == 0 ? PointAt(&rng, points[static_cast<std::size_t>(rng() % n)], 1.5, false)
                                             : RandomPoint(&rng, dim, 1.0f);
    std::vector<int32_t> kq(m);
    f->Keywords(q.data(), kq.data());
    int32_t best_count = -1;
    double best_true = 0, worst_top = 2;
    for (int32_t i = 0; i < n; ++i) {
      int32_t count = 0;
      for (int32_t j = 0; j < m; ++j) count += keys[i][j] == kq[j];
      const double sim = LshCollisionProbability(LshFamily::kE2Lsh, params.width,
                                                 L2Distance(points[i].data(), q.data(), dim));
      best_true = std::max(best_true, sim);
      if (count > best_count) best_count = count, worst_top = sim;
      else if (count == best_count) worst_top = std::min(worst_top, sim);
    }
    violations += best_true - worst_top > tau;
    near_misses += best_true - worst_top > 0;
  }
  // the guarantee is not vacuous here: the top count is often not the nearest
  EXPECT_GT(near_misses, nq / 10);
  EXPECT_LE(violations, static_cast<int>(2 * delta * nq)) << violations << " of " << nq;
}

}  // namespace
}  // namespace genie

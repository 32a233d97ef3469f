// Locality-sensitive hashing for vectors (see genie/lsh.hpp).
#include "genie/lsh.hpp"

#include "genie/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace genie {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {

// xoshiro256** (Blackman and Vigna), seeded through SplitMix64.
class Random {
 public:
  explicit Random(uint64_t seed) {
    for (uint64_t& w : s_) w = SplitMix64(&seed);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // uniform in [0, 1)
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1p-53; }
  // uniform in (0, 1]
  double UniformPositive() { return static_cast<double>((Next() >> 11) + 1) * 0x1p-53; }
  // The draws of a standard normal by Marsaglia's polar method (no
  // trigonometry): the accepted point's u and s = u^2 + v^2, in (0, 1).
  // The normal is Polar(u, s); the logarithm is left to the caller, so that
  // a block of them can go through PortableLogs.
  void PolarPoint(double* u_out, double* s_out) {
    for (;;) {
      const double u = 2.0 * Uniform() - 1.0;
      const double v = 2.0 * Uniform() - 1.0;
      const double s = u * u + v * v;
      if (s > 0.0 && s < 1.0) {
        *u_out = u;
        *s_out = s;
        return;
      }
    }
  }
  static double Polar(double u, double s, double log_s) { return u * std::sqrt(-2.0 * log_s / s); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

uint32_t Rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// A float64 cell index as int64, clamped (a finite vector far out of the
// data's range still gets a keyword).
int64_t Cell(double x) {
  const double f = std::floor(x);
  if (!(f > -9.0e18)) return std::numeric_limits<int64_t>::min();
  if (f > 9.0e18) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(f);
}

void PutLe64(int64_t v, unsigned char* out) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int b = 0; b < 8; ++b) out[b] = static_cast<unsigned char>(u >> (8 * b));
}

// The re-hash seed of function i.
uint32_t FunctionSeed(uint64_t seed, int32_t i) {
  uint64_t state = seed ^ (0xA24BAED4963EE407ULL * (static_cast<uint64_t>(i) + 1));
  return static_cast<uint32_t>(SplitMix64(&state) >> 32);
}

}  // namespace

double PortableLog(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m 2^e, m in [0.5, 1): exact
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  // ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.1716
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double term = s;
  double sum = 0.0;
  for (int k = 1; k <= 41; k += 2) {
    sum = sum + term / k;
    term = term * s2;
  }
  return 2.0 * sum + static_cast<double>(e) * 0.69314718055994530942;
}

void PortableLogs(const double* x, double* out, std::size_t n) {
  // Four logarithms at a time in a vector of four lanes (GCC and Clang's
  // vector extensions: SSE2 pairs, AVX or NEON as the target has them).
  // Each lane does PortableLog's operations in PortableLog's order, and a
  // vector operation rounds each lane as the scalar one does (no
  // contraction: -ffp-contract=off), so the bits are the same.  What it
  // gains is the divisions of four series in flight at once.
  typedef double Lanes __attribute__((vector_size(4 * sizeof(double))));
  constexpr std::size_t kLanes = 4;
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Lanes s, e;
    for (std::size_t l = 0; l < kLanes; ++l) {
      int exponent = 0;
      double m = std::frexp(x[i + l], &exponent);
      if (m < 0.70710678118654752440) {
        m *= 2.0;
        exponent -= 1;
      }
      s[l] = (m - 1.0) / (m + 1.0);
      e[l] = static_cast<double>(exponent);
    }
    const Lanes s2 = s * s;
    Lanes term = s;
    Lanes sum = {0.0, 0.0, 0.0, 0.0};
    for (int k = 1; k <= 41; k += 2) {
      const double kd = k;
      sum = sum + term / kd;
      term = term * s2;
    }
    const Lanes ln = 2.0 * sum + e * 0.69314718055994530942;
    for (std::size_t l = 0; l < kLanes; ++l) out[i + l] = ln[l];
  }
  for (; i < n; ++i) out[i] = PortableLog(x[i]);
}

uint32_t MurmurHash3(const void* key, std::size_t size, uint32_t seed) {
  const unsigned char* data = static_cast<const unsigned char*>(key);
  const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
  uint32_t h = seed;
  const std::size_t blocks = size / 4;
  for (std::size_t i = 0; i < blocks; ++i) {
    const unsigned char* p = data + 4 * i;
    uint32_t k = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                 (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    k *= c1;
    k = Rotl32(k, 15);
    k *= c2;
    h ^= k;
    h = Rotl32(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  const unsigned char* tail = data + 4 * blocks;
  uint32_t k1 = 0;
  switch (size & 3) {
    case 3:
      k1 ^= static_cast<uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k1 ^= static_cast<uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k1 ^= tail[0];
      k1 *= c1;
      k1 = Rotl32(k1, 15);
      k1 *= c2;
      h ^= k1;
  }
  h ^= static_cast<uint32_t>(size);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

Status LshFunctions::Create(const LshParams& p, std::unique_ptr<LshFunctions>* out, const CancelCheck& cancel,
                            int32_t threads) {
  if (out == nullptr) return Status::InvalidArgument("LshFunctions::Create: NULL output");
  if (p.family != LshFamily::kE2Lsh && p.family != LshFamily::kRbh)
    return Status::InvalidArgument("unknown LSH family");
  if (p.dim < 1) return Status::InvalidArgument("LSH needs a dimension of at least 1");
  if (p.functions < 1 || p.buckets < 1)
    return Status::InvalidArgument("LSH needs at least one function and one bucket");
  if (static_cast<int64_t>(p.functions) * p.buckets > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument("functions * buckets must stay within 2^31 - 1 keywords");
  if (!(std::isfinite(p.width) && p.width > 0))
    return Status::InvalidArgument("the LSH width must be finite and positive");
  auto f = std::unique_ptr<LshFunctions>(new LshFunctions());
  f->params_ = p;
  Random rng(p.seed);
  const std::size_t m = static_cast<std::size_t>(p.functions);
  const std::size_t d = static_cast<std::size_t>(p.dim);
  const std::size_t total = m * d;
  // The draws go in chunks.  This thread takes the generator's numbers in
  // their one order (sequential, a few ns a draw) and leaves each draw's
  // logarithm argument where its value goes; then the chunk's logarithms
  // (most of the cost) and values are computed in slices on up to
  // `threads` threads, four logarithms at a time (PortableLogs).  Every
  // value is the one a draw-by-draw loop gives.  The cancel check is polled
  // per chunk and per slice.
  constexpr std::size_t kChunk = std::size_t{1} << 18;
  constexpr std::size_t kSlice = 4096;
  const bool e2lsh = p.family == LshFamily::kE2Lsh;
  std::vector<double> other(std::min(kChunk, total));  // E2LSH: each point's u; RBH: the second uniform
  // Reserved whole, sized chunk by chunk: zeroing 2^24 draws (256 MB for RBH)
  // at once took hundreds of milliseconds in which no cancel was polled.
  if (e2lsh) {
    f->offsets_.resize(m);
    f->projections_.reserve(total);
  } else {
    f->shifts_.reserve(total);
    f->cells_.reserve(total);
  }
  for (std::size_t start = 0; start < total; start += kChunk) {
    if (cancel.requested()) return Status::Cancelled();
    const std::size_t n = std::min(kChunk, total - start);
    if (e2lsh) {
      f->projections_.resize(start + n);
    } else {
      f->shifts_.resize(start + n);
      f->cells_.resize(start + n);
    }
    if (e2lsh) {
      // each function's offset is drawn after its dim normals
      std::size_t function = start / d, column = start % d;
      for (std::size_t t = 0; t < n; ++t) {
        rng.PolarPoint(&other[t], &f->projections_[start + t]);
        if (++column == d) {
          f->offsets_[function++] = rng.Uniform() * p.width;
          column = 0;
        }
      }
    } else {
      for (std::size_t t = 0; t < n; ++t) {
        f->cells_[start + t] = rng.UniformPositive();
        other[t] = rng.UniformPositive();
        f->shifts_[start + t] = rng.Uniform();  // times the pitch, below
      }
    }
    const int64_t slices = static_cast<int64_t>((n + kSlice - 1) / kSlice);
    GENIE_RETURN_IF_ERROR(ParallelFor(
        slices, threads,
        [&](int64_t slice) -> Status {
          const std::size_t lo = static_cast<std::size_t>(slice) * kSlice;
          const std::size_t len = std::min(kSlice, n - lo);
          double logs[kSlice];
          if (e2lsh) {
            // the normal u sqrt(-2 ln s / s), s in place of the value
            double* value = f->projections_.data() + start + lo;
            PortableLogs(value, logs, len);
            for (std::size_t t = 0; t < len; ++t) value[t] = Random::Polar(other[lo + t], value[t], logs[t]);
          } else {
            // each dimension its own pitch g ~ Gamma(2, sigma) (the sum of
            // two exponentials of mean sigma) and shift u ~ U[0, g): the
            // collision probability is then the product of
            // exp(-|p_j - q_j| / sigma)
            double* cell = f->cells_.data() + start + lo;
            double second[kSlice];
            PortableLogs(cell, logs, len);
            PortableLogs(other.data() + lo, second, len);
            for (std::size_t t = 0; t < len; ++t) {
              const double g = -p.width * (logs[t] + second[t]);
              cell[t] = g;
              f->shifts_[start + lo + t] = f->shifts_[start + lo + t] * g;
            }
          }
          return Status::Ok();
        },
        cancel));
  }
  *out = std::move(f);
  return Status::Ok();
}

namespace {

// E2LSH's dot products of up to kE2LshGroup functions (projections p, one
// after another, d each) with v: each sum adds its terms one after another
// in element order (the keywords are stored in indexes and must not
// change), but the group's sums are independent, so the processor overlaps
// them where a lone sum waited for each addition.
constexpr int32_t kE2LshGroup = 8;

void GroupDots(const double* p, int32_t group_size, std::size_t d, const float* v, double* dots) {
  if (group_size == kE2LshGroup) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0, s7 = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      const double x = static_cast<double>(v[j]);
      s0 = s0 + p[j] * x;
      s1 = s1 + p[d + j] * x;
      s2 = s2 + p[2 * d + j] * x;
      s3 = s3 + p[3 * d + j] * x;
      s4 = s4 + p[4 * d + j] * x;
      s5 = s5 + p[5 * d + j] * x;
      s6 = s6 + p[6 * d + j] * x;
      s7 = s7 + p[7 * d + j] * x;
    }
    dots[0] = s0, dots[1] = s1, dots[2] = s2, dots[3] = s3;
    dots[4] = s4, dots[5] = s5, dots[6] = s6, dots[7] = s7;
    return;
  }
  for (int32_t g = 0; g < group_size; ++g) {
    double dot = 0.0;
    for (std::size_t j = 0; j < d; ++j) dot = dot + p[static_cast<std::size_t>(g) * d + j] * static_cast<double>(v[j]);
    dots[g] = dot;
  }
}

// Vectors a task of KeywordsBatch takes: their dot products (functions
// each) stay in a core's cache while a group's projections are read once
// for all of them, where one vector at a time read every projection (1.5 MB
// for 238 functions of 784 dimensions) from memory.
constexpr int32_t kBatchVectors = 32;

}  // namespace

int32_t LshFunctions::E2LshKeyword(int32_t i, double dot) const {
  unsigned char cell[8];
  PutLe64(Cell((dot + offsets_[static_cast<std::size_t>(i)]) / params_.width), cell);
  const uint32_t r = MurmurHash3(cell, 8, FunctionSeed(params_.seed, i)) % static_cast<uint32_t>(params_.buckets);
  return i * params_.buckets + static_cast<int32_t>(r);
}

void LshFunctions::Keywords(const float* v, int32_t* out) const {
  const std::size_t d = static_cast<std::size_t>(params_.dim);
  if (params_.family == LshFamily::kE2Lsh) {
    double dots[kE2LshGroup];
    for (int32_t i0 = 0; i0 < params_.functions; i0 += kE2LshGroup) {
      const int32_t group_size = std::min(kE2LshGroup, params_.functions - i0);
      GroupDots(projections_.data() + static_cast<std::size_t>(i0) * d, group_size, d, v, dots);
      for (int32_t g = 0; g < group_size; ++g) out[i0 + g] = E2LshKeyword(i0 + g, dots[g]);
    }
    return;
  }
  const uint32_t buckets = static_cast<uint32_t>(params_.buckets);
  std::vector<unsigned char> cells(8 * d);
  for (int32_t i = 0; i < params_.functions; ++i) {
    const std::size_t base = static_cast<std::size_t>(i) * d;
    for (std::size_t j = 0; j < d; ++j)
      PutLe64(Cell((static_cast<double>(v[j]) - shifts_[base + j]) / cells_[base + j]), cells.data() + 8 * j);
    const uint32_t r = MurmurHash3(cells.data(), cells.size(), FunctionSeed(params_.seed, i)) % buckets;
    out[i] = i * params_.buckets + static_cast<int32_t>(r);
  }
}

Status LshFunctions::KeywordsBatch(const float* vectors, int64_t count, int32_t threads, const CancelCheck& cancel,
                                   int32_t* out) const {
  if (count < 0 || (count > 0 && (vectors == nullptr || out == nullptr)))
    return Status::InvalidArgument("LshFunctions::KeywordsBatch: NULL or negative arguments");
  const std::size_t d = static_cast<std::size_t>(params_.dim);
  const std::size_t m = static_cast<std::size_t>(params_.functions);
  return ParallelFor(
      (count + kBatchVectors - 1) / kBatchVectors, threads,
      [&](int64_t task) -> Status {
        const int64_t first = task * kBatchVectors;
        const int64_t n = std::min<int64_t>(kBatchVectors, count - first);
        if (params_.family != LshFamily::kE2Lsh) {
          for (int64_t k = 0; k < n; ++k)
            Keywords(vectors + static_cast<std::size_t>(first + k) * d, out + static_cast<std::size_t>(first + k) * m);
          return Status::Ok();
        }
        double dots[kE2LshGroup];
        for (int32_t i0 = 0; i0 < params_.functions; i0 += kE2LshGroup) {
          const int32_t group_size = std::min(kE2LshGroup, params_.functions - i0);
          const double* p = projections_.data() + static_cast<std::size_t>(i0) * d;
          for (int64_t k = 0; k < n; ++k) {
            GroupDots(p, group_size, d, vectors + static_cast<std::size_t>(first + k) * d, dots);
            int32_t* keywords = out + static_cast<std::size_t>(first + k) * m;
            for (int32_t g = 0; g < group_size; ++g) keywords[i0 + g] = E2LshKeyword(i0 + g, dots[g]);
          }
        }
        return Status::Ok();
      },
      cancel);
}

int32_t LshFunctionsFor(double epsilon, double delta) {
  if (!(epsilon > 0 && epsilon < 1 && delta > 0 && delta < 1)) return 0;
  int32_t worst = 1;
  for (int si = 1; si < 100; ++si) {
    const double s = si / 100.0;
    const double ls = std::log(s), l1s = std::log1p(-s);
    for (int32_t m = 1; m <= 1000000; ++m) {
      // the counts c with |c/m - s| <= epsilon (a hair of slack for the
      // products that should be whole numbers)
      const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((s - epsilon) * m - 1e-9)));
      const int64_t hi = std::min<int64_t>(m, static_cast<int64_t>(std::floor((s + epsilon) * m + 1e-9)));
      double p = 0.0;
      const double lm = std::lgamma(m + 1.0);
      for (int64_t c = lo; c <= hi; ++c) {
        p += std::exp(lm - std::lgamma(c + 1.0) - std::lgamma(m - c + 1.0) + c * ls + (m - c) * l1s);
      }
      if (p >= 1.0 - delta) {
        worst = std::max(worst, m);
        break;
      }
    }
  }
  return worst;
}

double LshCollisionProbability(LshFamily family, double width, double c) {
  if (c <= 0) return 1.0;
  if (family == LshFamily::kRbh) return std::exp(-c / width);
  // Datar et al.: p(c) = 1 - 2 Phi(-w/c) - 2 / (sqrt(2 pi) w / c) (1 - exp(-(w/c)^2 / 2))
  const double r = width / c;
  const double phi = 0.5 * std::erfc(r / std::sqrt(2.0));
  return 1.0 - 2.0 * phi - 2.0 / (std::sqrt(2.0 * M_PI) * r) * (1.0 - std::exp(-r * r / 2.0));
}

Status EstimateLshWidth(LshFamily family, const float* sample, int32_t count, int32_t dim,
                        const CancelCheck& cancel, double* width) {
  if (width == nullptr) return Status::InvalidArgument("EstimateLshWidth: NULL output");
  *width = 1.0;
  if (sample == nullptr || count < 2 || dim < 1) return Status::Ok();
  std::vector<double> nearest;
  for (int32_t a = 0; a < count; ++a) {
    double best = std::numeric_limits<double>::infinity();
    const float* va = sample + static_cast<std::size_t>(a) * static_cast<std::size_t>(dim);
    for (int32_t b = 0; b < count; ++b) {
      if (a == b) continue;
      if (cancel.requested()) return Status::Cancelled();
      const float* vb = sample + static_cast<std::size_t>(b) * static_cast<std::size_t>(dim);
      double dist = 0.0;
      for (int32_t j = 0; j < dim; ++j) {
        const double diff = static_cast<double>(va[j]) - static_cast<double>(vb[j]);
        dist += family == LshFamily::kRbh ? std::fabs(diff) : diff * diff;
      }
      if (dist > 0.0) best = std::min(best, dist);
    }
    if (std::isfinite(best)) nearest.push_back(family == LshFamily::kRbh ? best : std::sqrt(best));
  }
  if (nearest.empty()) return Status::Ok();
  std::nth_element(nearest.begin(), nearest.begin() + static_cast<std::ptrdiff_t>(nearest.size() / 2), nearest.end());
  const double median = nearest[nearest.size() / 2];
  *width = (family == LshFamily::kRbh ? 2.0 : 4.0) * median;
  return Status::Ok();
}

}  // namespace genie

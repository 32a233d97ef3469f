// Vector data for the tests of the vector scans (core and GPU): random sets
// of several shapes (Gaussian clusters, small integers with many exact ties,
// duplicates, values so small that float32 squares underflow or so large
// that they overflow) and the brute-force oracle, which sorts every vector
// by L2Distance and never filters.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/vectors.hpp"

namespace genie {
namespace testing {

enum class VectorShape { kGaussian, kSmallIntegers, kDuplicates, kTiny, kHuge };

inline const char* ShapeName(VectorShape s) {
  switch (s) {
    case VectorShape::kGaussian: return "gaussian";
    case VectorShape::kSmallIntegers: return "small-integers";
    case VectorShape::kDuplicates: return "duplicates";
    case VectorShape::kTiny: return "tiny";
    case VectorShape::kHuge: return "huge";
  }
  return "?";
}

// n vectors of dim floats, row-major.
inline std::vector<float> RandomVectors(std::mt19937* rng, VectorShape shape, int32_t n, int32_t dim) {
  std::vector<float> v(static_cast<std::size_t>(n) * static_cast<std::size_t>(dim));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 3);
  const int32_t centres = 8;
  std::vector<float> centre(static_cast<std::size_t>(centres) * static_cast<std::size_t>(dim));
  for (float& c : centre) c = 4.0f * normal(*rng);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t c = static_cast<int32_t>((*rng)() % centres);
    for (int32_t j = 0; j < dim; ++j) {
      float x = 0;
      switch (shape) {
        case VectorShape::kGaussian:
          x = centre[static_cast<std::size_t>(c * dim + j)] + normal(*rng);
          break;
        case VectorShape::kSmallIntegers:
        case VectorShape::kDuplicates:
          x = static_cast<float>(small(*rng));
          break;
        case VectorShape::kTiny:
          x = normal(*rng) * 1e-25f;
          break;
        case VectorShape::kHuge:
          x = normal(*rng) * 1e25f;
          break;
      }
      v[static_cast<std::size_t>(i) * dim + j] = x;
    }
  }
  if (shape == VectorShape::kDuplicates) {
    // every vector a copy of one of a few
    for (int32_t i = 4; i < n; ++i) {
      const int32_t src = static_cast<int32_t>((*rng)() % 4);
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(src) * dim, dim,
                  v.begin() + static_cast<std::ptrdiff_t>(i) * dim);
    }
  }
  return v;
}

// Queries near the data (a std::vector or a set's values): a data vector plus a little noise, or a copy.
template <typename Values>
std::vector<float> NearbyQueries(std::mt19937* rng, const Values& data, int32_t n, int32_t dim, int32_t nq,
                                 float noise) {
  std::vector<float> q(static_cast<std::size_t>(nq) * static_cast<std::size_t>(dim));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int32_t i = 0; i < nq; ++i) {
    const int32_t src = static_cast<int32_t>((*rng)() % static_cast<uint32_t>(std::max(n, 1)));
    for (int32_t j = 0; j < dim; ++j) {
      const float base = n > 0 ? data[static_cast<std::size_t>(src) * dim + j] : 0.0f;
      q[static_cast<std::size_t>(i) * dim + j] = i % 5 == 0 ? base : base + noise * std::abs(base + 1e-30f) * normal(*rng);
    }
  }
  return q;
}

inline VectorSet MakeSet(int32_t dim, int32_t n, std::vector<float> values) {
  VectorSet set;
  Status s = BuildVectorSet(dim, n, HostArray<float>(values.begin(), values.end()), &set);
  EXPECT_TRUE(s.ok()) << s.message();
  return set;
}

// Every vector by (L2Distance, id), the first k not excluded.
inline VectorScanResult BruteForceVectors(const VectorSet& set, const VectorScanRequest& request) {
  VectorScanResult out;
  for (int32_t q = 0; q < request.n_queries; ++q) {
    const float* query = request.queries + static_cast<std::size_t>(q) * set.dim;
    std::vector<std::pair<double, int32_t>> all;
    for (int32_t id = 0; id < set.size(); ++id) {
      if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(id)]) continue;
      all.emplace_back(L2Distance(set.row(id), query, set.dim), id);
    }
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size() && i < static_cast<std::size_t>(request.k); ++i) {
      out.objects.push_back(all[i].second);
      out.distances.push_back(all[i].first);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

// Same rows, same order, same distances to the bit.
inline void ExpectSameVectorRows(const VectorScanResult& want, const VectorScanResult& got,
                                 const std::string& what) {
  ASSERT_EQ(want.offsets, got.offsets) << what;
  for (std::size_t i = 0; i < want.objects.size(); ++i) {
    ASSERT_EQ(want.objects[i], got.objects[i]) << what << " row " << i;
    ASSERT_EQ(want.distances[i], got.distances[i]) << what << " row " << i;
  }
}

}  // namespace testing
}  // namespace genie

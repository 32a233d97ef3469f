// How the CPU's passes over every vector divide their work (the exact kNN
// scan, vector_scan.cpp; the range scan, vector_range.cpp).  Memory traffic
// decides their speed: a unit of work is a block of up to kScanBlockQueries
// queries against a stripe of the vectors, walked in tiles small enough to
// stay in a core's cache while every query of the block passes over them.
#pragma once
#include <algorithm>
#include <cstdint>

namespace genie {

constexpr int32_t kScanBlockQueries = 64;      // queries per unit of work
constexpr int64_t kScanTileBytes = 256 << 10;  // vectors per tile: about this many bytes
constexpr int64_t kScanStripeMin = 4096;       // vectors a stripe gets at least

// One unit: queries [first_query, first_query + n_queries) against vectors
// [first_vector, end_vector).
struct ScanUnit {
  int32_t first_query;
  int32_t n_queries;
  int64_t first_vector;
  int64_t end_vector;
};

struct ScanUnits {
  int64_t blocks = 0;      // of queries
  int64_t stripes = 1;     // of vectors, per block
  int64_t stripe_len = 0;  // vectors a stripe (the last may have fewer)
  int64_t tile = 0;        // vectors a tile
  int64_t count() const { return blocks * stripes; }
  // unit u: block u / stripes, stripe u % stripes
  ScanUnit At(int64_t u, int32_t n_queries, int64_t n_vectors) const {
    const int32_t first_query = static_cast<int32_t>(u / stripes * kScanBlockQueries);
    const int64_t first_vector = u % stripes * stripe_len;
    return ScanUnit{first_query, std::min(kScanBlockQueries, n_queries - first_query), first_vector,
                    std::min(n_vectors, first_vector + stripe_len)};
  }
};

// Enough units for every one of `workers` threads: a small batch splits the
// vectors in stripes.
inline ScanUnits PlanScanUnits(int32_t n_queries, int64_t n_vectors, int32_t dim, int32_t workers) {
  ScanUnits u;
  u.blocks = (n_queries + kScanBlockQueries - 1) / kScanBlockQueries;
  if (u.blocks > 0 && u.blocks < 2 * static_cast<int64_t>(workers))
    u.stripes = std::max<int64_t>(
        1, std::min<int64_t>((2 * workers + u.blocks - 1) / u.blocks, n_vectors / kScanStripeMin));
  u.stripe_len = (n_vectors + u.stripes - 1) / u.stripes;
  u.tile = std::max<int64_t>(16, kScanTileBytes / (static_cast<int64_t>(dim) * 4));
  return u;
}

}  // namespace genie

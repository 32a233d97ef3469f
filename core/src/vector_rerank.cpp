// Re-ranking given candidates (RerankVectors, see genie/vectors.hpp): the
// LSH and permutation modes' exact distances.
//
// A batch's candidates are scattered over the set.  Taken query by query,
// every candidate is a vector fetched from memory for one distance (3 KB at
// 784 dimensions), so the permutation index's batches were memory-bound:
// 3,000 candidates a query cost as much as a twentieth of the exact scan's
// arithmetic but took most of its time (bench/permutation.md).  Here the
// float32 filter goes object by object instead.  A block of queries (their
// vectors small enough to stay in the cache) inverts its candidate lists,
// and each vector chosen by several of them is read once for all,
// kDistanceGroup queries a pass, by the exact scan's own kernel
// (SquaredL2Float32Group), on every thread, also for one query.  Then each
// query's float64 re-rank (FinishQuery) as before: the same numbers, the
// same results.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "genie/candidates.hpp"
#include "genie/parallel.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

// A block's query vectors stay within about this many bytes (the last-level
// cache's share) ...  A larger block reads the set fewer times, a smaller
// one keeps the queries in nearer caches: on the 2-core machine 256 KB took
// 1.6x as long as 2 MB, and 8 or 24 MB no less (2,000 Fashion-MNIST queries).
constexpr int64_t kBlockQueryBytes = 2 << 20;
// ... and its (query, candidate) pairs within this many (20 bytes each).
constexpr int64_t kBlockPairs = int64_t{1} << 21;
// Pairs per unit of work of the float32 pass (and per cancel poll): at
// most this many, fewer where a small block would leave threads idle.
constexpr int64_t kUnitPairs = 8192;
constexpr int64_t kUnitPairsMin = 256;

// One block of queries' candidates and their float32 distances.
struct Block {
  int32_t first_query = 0;
  int32_t n_queries = 0;
  std::vector<int64_t> begin;  // query i's candidates: ids[begin[i] .. end[i])
  std::vector<int64_t> end;
  std::vector<int32_t> ids;    // ascending within a query, each once
  std::vector<int32_t> owner;  // the query (of the block) of each pair
  std::vector<float> s32;
  std::vector<int64_t> by_object;  // pairs in object order (indexes of ids)
  std::vector<int32_t> objects;    // the chosen objects, ascending
  std::vector<int64_t> first;      // objects[j]'s pairs: by_object[first[j] .. first[j + 1])
};

// Step 1: each query's usable candidates, ascending, once (in parallel).
Status CollectCandidates(const VectorSet& set, Span<int64_t> offsets, Span<int32_t> candidates,
                         Span<uint8_t> excluded, int32_t threads, const CancelCheck& cancel, Block* b) {
  const int64_t base = offsets[b->first_query];
  b->begin.resize(static_cast<std::size_t>(b->n_queries));
  b->end.resize(static_cast<std::size_t>(b->n_queries));
  b->ids.resize(static_cast<std::size_t>(offsets[b->first_query + b->n_queries] - base));
  b->owner.resize(b->ids.size());
  b->s32.resize(b->ids.size());
  GENIE_RETURN_IF_ERROR(ParallelFor(
      b->n_queries, threads,
      [&](int64_t i) -> Status {
        const int32_t q = b->first_query + static_cast<int32_t>(i);
        const int64_t from = offsets[q] - base;
        int32_t* out = b->ids.data() + from;
        int64_t count = 0;
        for (int64_t c = offsets[q]; c < offsets[q + 1]; ++c) {
          const int32_t id = candidates[static_cast<std::size_t>(c)];
          if (id < 0 || id >= set.size()) continue;
          if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
          out[count++] = id;
        }
        // the permutation index's selection gives them ascending already
        if (!std::is_sorted(out, out + count)) std::sort(out, out + count);
        count = std::unique(out, out + count) - out;
        std::fill(b->owner.begin() + from, b->owner.begin() + from + count, static_cast<int32_t>(i));
        b->begin[static_cast<std::size_t>(i)] = from;
        b->end[static_cast<std::size_t>(i)] = from + count;
        return Status::Ok();
      },
      cancel));
  return Status::Ok();
}

// Step 2: the pairs in object order and the objects chosen, each once.  A
// lone query's candidates are that already; a block's are counted over
// [lo, hi] and placed, or sorted where they are few for that span.
void InvertByObject(Block* b) {
  b->objects.clear();
  b->first.assign(1, 0);
  if (b->n_queries == 1) {
    const int64_t from = b->begin[0], to = b->end[0];
    b->objects.assign(b->ids.begin() + from, b->ids.begin() + to);
    b->by_object.resize(static_cast<std::size_t>(to - from));
    for (int64_t p = from; p < to; ++p) {
      b->by_object[static_cast<std::size_t>(p - from)] = p;
      b->first.push_back(p - from + 1);
    }
    return;
  }
  // the block's smallest and largest candidate (each query's first and last)
  int32_t lo = INT32_MAX, hi = -1;
  int64_t pairs = 0;
  for (int32_t i = 0; i < b->n_queries; ++i) {
    const int64_t from = b->begin[static_cast<std::size_t>(i)], to = b->end[static_cast<std::size_t>(i)];
    if (from == to) continue;
    lo = std::min(lo, b->ids[static_cast<std::size_t>(from)]);
    hi = std::max(hi, b->ids[static_cast<std::size_t>(to - 1)]);
    pairs += to - from;
  }
  b->by_object.clear();
  if (pairs == 0) return;
  const int64_t span = static_cast<int64_t>(hi) - lo + 1;
  if (span > 8 * pairs) {
    // few pairs over a wide span of a large set: sorted, not counted
    for (int32_t i = 0; i < b->n_queries; ++i)
      for (int64_t p = b->begin[static_cast<std::size_t>(i)]; p < b->end[static_cast<std::size_t>(i)]; ++p)
        b->by_object.push_back(p);
    std::sort(b->by_object.begin(), b->by_object.end(), [b](int64_t x, int64_t y) {
      const int32_t ox = b->ids[static_cast<std::size_t>(x)], oy = b->ids[static_cast<std::size_t>(y)];
      return ox != oy ? ox < oy : x < y;
    });
    for (std::size_t j = 0; j < b->by_object.size(); ++j) {
      const int32_t o = b->ids[static_cast<std::size_t>(b->by_object[j])];
      if (b->objects.empty() || b->objects.back() != o) {
        if (!b->objects.empty()) b->first.push_back(static_cast<int64_t>(j));
        b->objects.push_back(o);
      }
    }
    b->first.push_back(static_cast<int64_t>(b->by_object.size()));
    return;
  }
  // 32-bit: a block of several queries holds at most kBlockPairs pairs
  std::vector<int32_t> next(static_cast<std::size_t>(span) + 1, 0);
  for (int32_t i = 0; i < b->n_queries; ++i)
    for (int64_t p = b->begin[static_cast<std::size_t>(i)]; p < b->end[static_cast<std::size_t>(i)]; ++p)
      next[static_cast<std::size_t>(b->ids[static_cast<std::size_t>(p)] - lo) + 1]++;
  for (int64_t j = 0; j < span; ++j) {
    const int32_t count = next[static_cast<std::size_t>(j) + 1];
    if (count != 0) {
      b->objects.push_back(lo + static_cast<int32_t>(j));
      b->first.push_back(b->first.back() + count);
    }
    next[static_cast<std::size_t>(j) + 1] = next[static_cast<std::size_t>(j)] + count;
  }
  b->by_object.resize(static_cast<std::size_t>(pairs));
  for (int32_t i = 0; i < b->n_queries; ++i)
    for (int64_t p = b->begin[static_cast<std::size_t>(i)]; p < b->end[static_cast<std::size_t>(i)]; ++p)
      b->by_object[static_cast<std::size_t>(next[static_cast<std::size_t>(b->ids[static_cast<std::size_t>(p)] - lo)]++)] = p;
}

// Step 3: every pair's float32 distance, object by object, on every thread.
Status FilterDistances(const VectorSet& set, const float* queries, int32_t threads,
                       const CancelCheck& cancel, Block* b) {
  const int64_t chosen = static_cast<int64_t>(b->objects.size());
  if (chosen == 0) return Status::Ok();
  // units of objects holding about `unit` pairs each, four a thread at least
  const int64_t pairs = static_cast<int64_t>(b->by_object.size());
  const int64_t unit = std::clamp<int64_t>(pairs / (4 * ResolveThreads(threads)), kUnitPairsMin, kUnitPairs);
  std::vector<int64_t> cuts{0};
  for (int64_t j = 0; j < chosen; ++j)
    if (b->first[static_cast<std::size_t>(j) + 1] - b->first[static_cast<std::size_t>(cuts.back())] >= unit)
      cuts.push_back(j + 1);
  if (cuts.back() != chosen) cuts.push_back(chosen);
  const std::size_t dim = static_cast<std::size_t>(set.dim);
  const float* block_queries = queries + static_cast<std::size_t>(b->first_query) * dim;
  return ParallelFor(
      static_cast<int64_t>(cuts.size()) - 1, threads,
      [&](int64_t u) -> Status {
        const float* q[kDistanceGroup];
        float s[kDistanceGroup];
        for (int64_t j = cuts[static_cast<std::size_t>(u)]; j < cuts[static_cast<std::size_t>(u) + 1]; ++j) {
          const float* row = set.row(b->objects[static_cast<std::size_t>(j)]);
          const int64_t p0 = b->first[static_cast<std::size_t>(j)];
          const int64_t p1 = b->first[static_cast<std::size_t>(j) + 1];
          for (int64_t g0 = p0; g0 < p1; g0 += kDistanceGroup) {
            const int in_group = static_cast<int>(std::min<int64_t>(kDistanceGroup, p1 - g0));
            for (int g = 0; g < kDistanceGroup; ++g) {
              // a short group repeats its first pair's query and ignores the copies
              const int64_t pair = b->by_object[static_cast<std::size_t>(g0 + (g < in_group ? g : 0))];
              q[g] = block_queries + static_cast<std::size_t>(b->owner[static_cast<std::size_t>(pair)]) * dim;
            }
            SquaredL2Float32Group(row, q, set.dim, s);
            for (int g = 0; g < in_group; ++g)
              b->s32[static_cast<std::size_t>(b->by_object[static_cast<std::size_t>(g0 + g)])] = s[g];
          }
        }
        return Status::Ok();
      },
      cancel);
}

}  // namespace

Status RerankVectors(const VectorSet& set, const float* queries, int32_t n_queries, int32_t k,
                     Span<int64_t> candidate_offsets, Span<int32_t> candidates,
                     Span<uint8_t> excluded, int32_t threads, VectorScanResult* out,
                     const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("RerankVectors: NULL output");
  if (k < 1) return Status::InvalidArgument("k must be at least 1");
  GENIE_RETURN_IF_ERROR(CheckCandidateOffsets(n_queries, candidate_offsets, candidates.size()));
  if (n_queries > 0 && queries == nullptr) return Status::InvalidArgument("NULL query vectors");
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(set.size()))
    return Status::InvalidArgument("excluded flags do not match the vector set");
  GENIE_RETURN_IF_ERROR(CheckFinite(queries, static_cast<std::size_t>(n_queries) * static_cast<std::size_t>(set.dim),
                                    "a query vector"));
  const std::size_t dim = static_cast<std::size_t>(set.dim);
  const int64_t block_queries = std::max<int64_t>(1, kBlockQueryBytes / static_cast<int64_t>(std::max<std::size_t>(dim, 1) * 4));
  std::vector<VectorScanResult> parts(static_cast<std::size_t>(n_queries));
  Block b;
  for (int32_t q0 = 0; q0 < n_queries; q0 += b.n_queries) {
    // the block: at least one query, then as many as its limits allow
    int32_t q1 = q0 + 1;
    while (q1 < n_queries && q1 - q0 < block_queries &&
           candidate_offsets[q1 + 1] - candidate_offsets[q0] <= kBlockPairs)
      ++q1;
    b.first_query = q0;
    b.n_queries = q1 - q0;
    GENIE_RETURN_IF_ERROR(CollectCandidates(set, candidate_offsets, candidates, excluded, threads, cancel, &b));
    InvertByObject(&b);
    GENIE_RETURN_IF_ERROR(FilterDistances(set, queries, threads, cancel, &b));
    // step 4: each query's float64 re-rank of the candidates its filter keeps
    GENIE_RETURN_IF_ERROR(ParallelFor(
        b.n_queries, threads,
        [&](int64_t i) -> Status {
          const int32_t q = q0 + static_cast<int32_t>(i);
          std::vector<VectorCandidate> cands;
          cands.reserve(static_cast<std::size_t>(b.end[static_cast<std::size_t>(i)] - b.begin[static_cast<std::size_t>(i)]));
          for (int64_t p = b.begin[static_cast<std::size_t>(i)]; p < b.end[static_cast<std::size_t>(i)]; ++p)
            cands.push_back({b.s32[static_cast<std::size_t>(p)], b.ids[static_cast<std::size_t>(p)]});
          FinishQuery(set, queries + static_cast<std::size_t>(q) * dim, k, &cands, &parts[static_cast<std::size_t>(q)]);
          return Status::Ok();
        },
        cancel));
  }
  ConcatenateResults(parts, out);
  return Status::Ok();
}

}  // namespace genie

// The permutation index on the CPU (see genie/permutation.hpp).
#include "genie/permutation.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <unordered_set>

#include "genie/myers_pattern.hpp"
#include "genie/parallel.hpp"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace genie {
namespace {

// Objects per unit of work of a single query's selection, and per cancel poll.
constexpr int64_t kStripe = 16384;
// Objects per unit of work when computing rows (each costs m distances).
constexpr int64_t kRowChunk = 64;

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A footrule that no eligible object has: marks the excluded ones.
constexpr uint16_t kExcluded = 0xFFFF;

// Footrules of objects [lo, hi) into f, counted in hist (excluded ones not).
void ScoreStripe(const PermutationRows& objects, const uint8_t* query, Span<uint8_t> excluded,
                 int64_t lo, int64_t hi, uint16_t* f, int64_t* hist) {
  for (int64_t i = lo; i < hi; ++i) {
    if (!excluded.empty() && excluded[static_cast<std::size_t>(i)] != 0) {
      f[i] = kExcluded;
      continue;
    }
    const int32_t s = Footrule(objects.row(static_cast<int32_t>(i)), query, objects.stride);
    f[i] = static_cast<uint16_t>(s);
    hist[s]++;
  }
}

// The candidates of one query from its footrules and their histogram.
void Collect(const uint16_t* f, int64_t n, const std::vector<int64_t>& hist, int32_t candidates,
             std::vector<int32_t>* out) {
  int64_t eligible = 0;
  for (int64_t c : hist) eligible += c;
  out->clear();
  if (eligible <= candidates) {
    for (int64_t i = 0; i < n; ++i)
      if (f[i] != kExcluded) out->push_back(static_cast<int32_t>(i));
    return;
  }
  // t: the smallest footrule at which the count reaches `candidates`
  int64_t below = 0;
  int32_t t = 0;
  while (below + hist[static_cast<std::size_t>(t)] < candidates) below += hist[static_cast<std::size_t>(t++)];
  int64_t at_t = candidates - below;
  out->reserve(static_cast<std::size_t>(candidates));
  for (int64_t i = 0; i < n; ++i) {
    if (f[i] < t || (f[i] == t && at_t-- > 0)) out->push_back(static_cast<int32_t>(i));
  }
}

Status CheckTables(const PermutationRows& objects, const PermutationRows& queries,
                   Span<uint8_t> excluded, int32_t candidates) {
  GENIE_RETURN_IF_ERROR(CheckPermutationRows(objects));
  GENIE_RETURN_IF_ERROR(CheckPermutationRows(queries));
  if (queries.m != objects.m)
    return Status::InvalidArgument("the queries' permutants differ from the index's");
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(objects.n))
    return Status::InvalidArgument("excluded must have one entry per object");
  if (candidates < 1) return Status::InvalidArgument("candidates must be at least 1");
  return Status::Ok();
}

}  // namespace

Status CheckPermutationRows(const PermutationRows& rows) {
  if (rows.m < 1 || rows.m > kMaxPermutants || rows.stride != PermutationStride(rows.m) || rows.n < 0 ||
      (rows.n > 0 && rows.data == nullptr))
    return Status::InvalidArgument("bad permutation rows");
  return Status::Ok();
}

Status MakePermutationTable(int32_t m, int32_t n, PermutationTable* out) {
  if (m < 1 || m > kMaxPermutants)
    return Status::InvalidArgument("permutants must be between 1 and " + std::to_string(kMaxPermutants));
  if (n < 0) return Status::InvalidArgument("negative object count");
  try {
    out->m = m;
    out->stride = PermutationStride(m);
    out->n = n;
    out->positions.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(out->stride), 0);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory for a permutation table");
  }
  return Status::Ok();
}

Status ChoosePermutants(int32_t n, Span<uint8_t> excluded, int32_t m, uint64_t seed,
                        std::vector<int32_t>* out) {
  if (m < 1 || m > kMaxPermutants)
    return Status::InvalidArgument("permutants must be between 1 and " + std::to_string(kMaxPermutants));
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(n))
    return Status::InvalidArgument("excluded must have one entry per object");
  try {
    std::vector<int32_t> eligible;
    for (int32_t i = 0; i < n; ++i)
      if (excluded.empty() || excluded[static_cast<std::size_t>(i)] == 0) eligible.push_back(i);
    if (static_cast<int64_t>(eligible.size()) < m)
      return Status::InvalidArgument("the index has " + std::to_string(eligible.size()) +
                                     " objects, fewer than the " + std::to_string(m) +
                                     " permutants asked for");
    // a partial Fisher-Yates shuffle: m distinct draws, reproducible
    uint64_t state = seed;
    out->clear();
    for (int32_t j = 0; j < m; ++j) {
      const uint64_t left = eligible.size() - static_cast<std::size_t>(j);
      const std::size_t pick = static_cast<std::size_t>(j) + static_cast<std::size_t>(SplitMix64(&state) % left);
      std::swap(eligible[static_cast<std::size_t>(j)], eligible[pick]);
      out->push_back(eligible[static_cast<std::size_t>(j)]);
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory choosing permutants");
  }
  return Status::Ok();
}

void PositionsFromDistances(const double* distances, int32_t m, uint8_t* row) {
  int32_t order[kMaxPermutants];
  std::iota(order, order + m, 0);
  std::sort(order, order + m, [distances](int32_t a, int32_t b) {
    return distances[a] < distances[b] || (distances[a] == distances[b] && a < b);
  });
  for (int32_t r = 0; r < m; ++r) row[order[r]] = static_cast<uint8_t>(r);
}

Status ComputePermutations(const PermutantDistances& distances, int32_t first, int32_t count,
                           int32_t threads, const PermutationRows& table, const CancelCheck& cancel) {
  GENIE_RETURN_IF_ERROR(CheckPermutationRows(table));
  if (first < 0 || count < 0 || static_cast<int64_t>(first) + count > table.n)
    return Status::InvalidArgument("rows beyond the permutation table");
  const int32_t m = table.m;
  const int64_t chunks = (count + kRowChunk - 1) / kRowChunk;
  return ParallelFor(
      chunks, threads,
      [&](int64_t c) -> Status {
        double d[kMaxPermutants];
        const int64_t lo = first + c * kRowChunk;
        const int64_t hi = std::min<int64_t>(lo + kRowChunk, static_cast<int64_t>(first) + count);
        for (int64_t i = lo; i < hi; ++i) {
          GENIE_RETURN_IF_ERROR(distances(static_cast<int32_t>(i - first), d));
          PositionsFromDistances(d, m, table.row(static_cast<int32_t>(i)));
        }
        return Status::Ok();
      },
      cancel);
}

Status VectorPermutations(const VectorSet& objects, const VectorSet& permutants, int32_t first,
                          int32_t threads, const PermutationRows& table, const CancelCheck& cancel) {
  if (permutants.n != table.m || objects.dim != permutants.dim)
    return Status::InvalidArgument("the permutants do not match the table or the vectors");
  const int32_t dim = objects.dim;
  return ComputePermutations(
      [&](int32_t i, double* out) -> Status {
        const float* v = objects.row(i);
        for (int32_t j = 0; j < permutants.n; ++j) {
          const float* p = permutants.row(j);
          double s = 0;
          for (int32_t e = 0; e < dim; ++e) {
            const double x = static_cast<double>(v[e]) - static_cast<double>(p[e]);
            s += x * x;
          }
          out[j] = s;
        }
        return Status::Ok();
      },
      first, objects.n, threads, table, cancel);
}

Status StringPermutations(const CodePointStrings& objects, const CodePointStrings& permutants,
                          int32_t first, int32_t threads, const PermutationRows& table,
                          const CancelCheck& cancel) {
  if (permutants.size() != table.m)
    return Status::InvalidArgument("the permutants do not match the table");
  // each permutant's pattern prepared once (bit-parallel Myers in blocks, as
  // the string scan), the rare longer one by the banded DP of Levenshtein()
  std::vector<std::unique_ptr<kernel::MyersPattern>> patterns;
  try {
    for (int32_t j = 0; j < permutants.size(); ++j) {
      const Span<CodePoint> p = permutants.Get(j);
      patterns.emplace_back();
      if (p.size() <= static_cast<std::size_t>(kernel::kPatternMaxLength)) {
        patterns.back() = std::make_unique<kernel::MyersPattern>();
        kernel::PreparePattern(p.data(), static_cast<int32_t>(p.size()), patterns.back().get());
      }
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory preparing permutants");
  }
  return ComputePermutations(
      [&](int32_t i, double* out) -> Status {
        const Span<CodePoint> s = objects.Get(i);
        const CodePoint* t = s.data();
        const int32_t n = static_cast<int32_t>(s.size());
        for (int32_t j = 0; j < permutants.size(); ++j) {
          int32_t d = 0;
          const kernel::MyersPattern* pattern = patterns[static_cast<std::size_t>(j)].get();
          if (pattern != nullptr) {
            // no cap: the distance is at most the longer length
            d = kernel::PatternDistance(*pattern, [t](int32_t x) { return t[x]; }, n,
                                        std::max(n, pattern->length));
          } else {
            GENIE_RETURN_IF_ERROR(Levenshtein(s, permutants.Get(j), cancel, &d));
          }
          out[j] = d;
        }
        return Status::Ok();
      },
      first, objects.size(), threads, table, cancel);
}

int32_t Footrule(const uint8_t* a, const uint8_t* b, int32_t stride) {
#if defined(__x86_64__)
  __m128i acc = _mm_setzero_si128();
  for (int32_t j = 0; j < stride; j += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + j));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j));
    acc = _mm_add_epi64(acc, _mm_sad_epu8(x, y));
  }
  return static_cast<int32_t>(_mm_cvtsi128_si64(acc) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)));
#else
  int32_t s = 0;
  for (int32_t j = 0; j < stride; ++j) s += std::abs(static_cast<int32_t>(a[j]) - static_cast<int32_t>(b[j]));
  return s;
#endif
}

Status CpuPermutationSelect(const PermutationRows& objects, const PermutationRows& queries,
                            Span<uint8_t> excluded, int32_t candidates, int32_t threads,
                            PermutationCandidates* out, const CancelCheck& cancel) {
  GENIE_RETURN_IF_ERROR(CheckTables(objects, queries, excluded, candidates));
  const int64_t n = objects.n;
  const std::size_t bins = static_cast<std::size_t>(MaxFootrule(objects.m)) + 1;
  const int32_t workers = ResolveThreads(threads);
  std::vector<std::vector<int32_t>> lists;
  try {
    lists.resize(static_cast<std::size_t>(queries.n));
    if (queries.n >= workers || n <= kStripe) {
      // a batch: one query a unit, each on its own scratch
      GENIE_RETURN_IF_ERROR(ParallelFor(
          queries.n, threads,
          [&](int64_t q) -> Status {
            try {
              std::vector<uint16_t> f(static_cast<std::size_t>(n));
              std::vector<int64_t> hist(bins, 0);
              const uint8_t* row = queries.row(static_cast<int32_t>(q));
              for (int64_t lo = 0; lo < n; lo += kStripe) {
                if (cancel.requested()) return Status::Cancelled();
                ScoreStripe(objects, row, excluded, lo, std::min(lo + kStripe, n), f.data(), hist.data());
              }
              Collect(f.data(), n, hist, candidates, &lists[static_cast<std::size_t>(q)]);
            } catch (const std::bad_alloc&) {
              return Status::OutOfMemory("out of host memory selecting permutation candidates");
            }
            return Status::Ok();
          },
          cancel));
    } else {
      // few queries: each one's objects by stripes on every thread
      std::vector<uint16_t> f(static_cast<std::size_t>(n));
      const int64_t stripes = (n + kStripe - 1) / kStripe;
      std::vector<std::vector<int64_t>> hists(static_cast<std::size_t>(stripes));
      for (int32_t q = 0; q < queries.n; ++q) {
        GENIE_RETURN_IF_ERROR(ParallelFor(
            stripes, threads,
            [&](int64_t s) -> Status {
              try {
                std::vector<int64_t>& h = hists[static_cast<std::size_t>(s)];
                h.assign(bins, 0);
                ScoreStripe(objects, queries.row(q), excluded, s * kStripe,
                            std::min((s + 1) * kStripe, n), f.data(), h.data());
              } catch (const std::bad_alloc&) {
                return Status::OutOfMemory("out of host memory selecting permutation candidates");
              }
              return Status::Ok();
            },
            cancel));
        std::vector<int64_t> hist(bins, 0);
        for (const auto& h : hists)
          for (std::size_t b = 0; b < bins; ++b) hist[b] += h[b];
        Collect(f.data(), n, hist, candidates, &lists[static_cast<std::size_t>(q)]);
      }
    }
    out->offsets.assign(1, 0);
    out->objects.clear();
    for (const auto& l : lists) {
      out->objects.insert(out->objects.end(), l.begin(), l.end());
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory selecting permutation candidates");
  }
  return Status::Ok();
}

}  // namespace genie

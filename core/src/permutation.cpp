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
#include <immintrin.h>
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

// A footrule that no eligible object has (MaxFootrule(kMaxPermutants) is
// 8,192): marks the excluded ones.  Below 2^15, so the collect pass's
// signed 16-bit comparisons order every value.
constexpr uint16_t kExcluded = 0x7FFF;
static_assert(kMaxPermutants * kMaxPermutants / 2 < kExcluded, "footrules must stay below kExcluded");

// Footrules of objects [lo, hi) into f (kExcluded for the excluded ones),
// counted in hist when there is one (excluded ones not).
void ScoreStripe(const PermutationRows& objects, const uint8_t* query, Span<uint8_t> excluded,
                 int64_t lo, int64_t hi, uint16_t* f, uint32_t* hist = nullptr) {
  for (int64_t i = lo; i < hi; ++i) {
    if (!excluded.empty() && excluded[static_cast<std::size_t>(i)] != 0) {
      f[i] = kExcluded;
      continue;
    }
    const int32_t s = Footrule(objects.row(static_cast<int32_t>(i)), query, objects.stride);
    f[i] = static_cast<uint16_t>(s);
    // a damaged row (a byte beyond m) counts in the last bin, not past it
    if (hist != nullptr) hist[std::min(s, MaxFootrule(objects.m))]++;
  }
}

// Queries scored together in a batch: each object's row is read once for
// all of them (the rows of 60,000 objects at m = 64 are 3.8 MB, beyond a
// core's L2, so one pass a query was bound by reading them).
constexpr int kSelectGroup = 4;
// A group's footrules (2 bytes an object a query) stay within this.
constexpr int64_t kGroupScratchBytes = int64_t{64} << 20;

#if defined(__x86_64__)
// ScoreStripe for `count` <= kSelectGroup queries at once, where the
// processor has AVX2: each row read once, 32 bytes a step (and a last 16),
// the four queries' totals gathered into one vector (each below 2^16, so
// two fit a 64-bit lane).
__attribute__((target("avx2"))) void ScoreStripeGroup(const PermutationRows& objects,
                                                      const uint8_t* const* query, int count,
                                                      Span<uint8_t> excluded, int64_t lo, int64_t hi,
                                                      uint16_t* const* f) {
  const int32_t stride = objects.stride;
  const int32_t whole = stride / 32 * 32;
  for (int64_t i = lo; i < hi; ++i) {
    if (!excluded.empty() && excluded[static_cast<std::size_t>(i)] != 0) {
      for (int g = 0; g < count; ++g) f[g][i] = kExcluded;
      continue;
    }
    const uint8_t* row = objects.row(static_cast<int32_t>(i));
    __m256i acc[kSelectGroup];
    for (int g = 0; g < kSelectGroup; ++g) acc[g] = _mm256_setzero_si256();
    for (int32_t j = 0; j < whole; j += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j));
      for (int g = 0; g < kSelectGroup; ++g)
        acc[g] = _mm256_add_epi64(
            acc[g], _mm256_sad_epu8(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(query[g] + j))));
    }
    if (whole < stride) {  // strides are whole 16-byte steps
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + whole));
      for (int g = 0; g < kSelectGroup; ++g)
        acc[g] = _mm256_add_epi64(acc[g], _mm256_zextsi128_si256(_mm_sad_epu8(
                                              x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(query[g] + whole)))));
    }
    // 32-bit lanes a0 b0 a1 b1 a2 b2 a3 b3 (queries 0 and 1), then c and d
    const __m256i ab = _mm256_or_si256(acc[0], _mm256_slli_epi64(acc[1], 32));
    const __m256i cd = _mm256_or_si256(acc[2], _mm256_slli_epi64(acc[3], 32));
    const __m128i ab2 = _mm_add_epi32(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
    const __m128i cd2 = _mm_add_epi32(_mm256_castsi256_si128(cd), _mm256_extracti128_si256(cd, 1));
    const __m128i sums = _mm_add_epi32(_mm_unpacklo_epi64(ab2, cd2), _mm_unpackhi_epi64(ab2, cd2));
    alignas(16) int32_t s[kSelectGroup];
    _mm_store_si128(reinterpret_cast<__m128i*>(s), sums);
    for (int g = 0; g < count; ++g) f[g][i] = static_cast<uint16_t>(s[g]);
  }
}

#endif

// Queries scored together where the processor can (AVX2), else one by one.
bool CanScoreGroups() {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

// How many eligible objects have a footrule of at most t (vectorised: no
// branch, 16-bit lanes).
int64_t CountAtMost(const uint16_t* f, int64_t n, int32_t t) {
  const uint16_t bound = static_cast<uint16_t>(t);
  int64_t count = 0;
  for (int64_t lo = 0; lo < n; lo += 32768) {
    const int64_t hi = std::min(n, lo + 32768);
    uint32_t c = 0;
    for (int64_t i = lo; i < hi; ++i) c += f[i] <= bound ? 1u : 0u;
    count += c;
  }
  return count;
}

// Where one query's candidates end: every object of footrule below t, then
// the first at_t of those at t (in id order), where t is the smallest
// footrule at which the count reaches `candidates`.
struct Cut {
  int32_t t = 0;
  int64_t at_t = 0;
};

// The cut from a single query's histogram (its stripes, scored on every
// thread, each count their own).
Cut CutOfHistogram(const std::vector<uint32_t>& hist, int32_t candidates) {
  int64_t below = 0;
  int32_t t = 0;
  while (below + hist[static_cast<std::size_t>(t)] < candidates) below += hist[static_cast<std::size_t>(t++)];
  return {t, candidates - below};
}

// The cut of a batch's query (more than `candidates` objects eligible),
// searched with counting passes: a histogram of every object, one
// increment each, took most of the batch's selection.  A guess from every
// 16th object, then doubling steps away from it and halving between, a
// few passes in all, each after a cancel poll.
Status SearchCut(const uint16_t* f, int64_t n, int32_t max_footrule, int32_t candidates, int64_t eligible,
                 const CancelCheck& cancel, Cut* out) {
  // the guess: the sample's value at the same share of its eligible objects
  std::vector<uint32_t> sample(static_cast<std::size_t>(max_footrule) + 1, 0);
  int64_t sampled = 0;
  for (int64_t i = 0; i < n; i += 16)
    if (f[i] != kExcluded) {
      sample[std::min<int32_t>(f[i], max_footrule)]++;  // a damaged row's footrule in the last bin
      ++sampled;
    }
  int32_t guess = 0;
  const double rank = static_cast<double>(candidates) * static_cast<double>(sampled) / static_cast<double>(eligible);
  for (double cum = 0; guess < max_footrule && (cum += sample[static_cast<std::size_t>(guess)]) < rank;) ++guess;
  // the smallest t in [lo, hi] with CountAtMost(t) >= candidates; below is
  // CountAtMost(lo - 1), kept from the pass that moved lo
  int32_t lo = 0, hi = max_footrule;
  int64_t below = 0, c = 0;
  auto count = [&](int32_t t) { return c = CountAtMost(f, n, t); };
  if (count(guess) >= candidates) {
    hi = guess;
    for (int32_t step = 1; hi - step >= 0; step *= 2) {
      if (cancel.requested()) return Status::Cancelled();
      if (count(hi - step) < candidates) {
        lo = hi - step + 1;
        below = c;
        break;
      }
      hi -= step;
    }
  } else {
    lo = guess + 1;
    below = c;
    for (int32_t step = 1; lo + step - 1 < max_footrule; step *= 2) {
      if (cancel.requested()) return Status::Cancelled();
      if (count(lo + step - 1) >= candidates) {
        hi = lo + step - 1;
        break;
      }
      lo += step;
      below = c;
    }
  }
  while (lo < hi) {
    if (cancel.requested()) return Status::Cancelled();
    const int32_t mid = lo + (hi - lo) / 2;
    if (count(mid) >= candidates) {
      hi = mid;
    } else {
      lo = mid + 1;
      below = c;
    }
  }
  *out = {lo, candidates - below};
  return Status::Ok();
}

// The candidates of a cut, ascending by id.
void CollectAt(const uint16_t* f, int64_t n, Cut cut, int32_t candidates, std::vector<int32_t>* out) {
  const int32_t t = cut.t;
  int64_t at_t = cut.at_t;
  out->clear();
  out->reserve(static_cast<std::size_t>(candidates));
  int64_t i = 0;
#if defined(__x86_64__)
  // eight objects a step; most steps hold none of the candidates
  const __m128i above = _mm_set1_epi16(static_cast<int16_t>(t + 1));
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + i));
    int mask = _mm_movemask_epi8(_mm_cmplt_epi16(v, above));
    while (mask != 0) {
      const int64_t j = i + __builtin_ctz(static_cast<unsigned>(mask)) / 2;
      mask &= ~(3 << ((j - i) * 2));
      if (f[j] < t || at_t-- > 0) out->push_back(static_cast<int32_t>(j));
    }
  }
#endif
  for (; i < n; ++i)
    if (f[i] < t || (f[i] == t && at_t-- > 0)) out->push_back(static_cast<int32_t>(i));
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

// A permutant's position is the number of permutants before it in (distance,
// index) order.  Edit distances are small integers: a counting sort, stable
// in the index, ranks them in O(m) (the CPU build of 663k words' rows spent a
// third of its time sorting 64 indexes through a comparator).  Other
// distances are ranked by counting, for each permutant, those of lower index
// at most as far and those of higher index nearer: m^2 comparisons without a
// branch, as the GPU's RankKernel does.  The distances are finite (vectors
// are, and edit distances are counts), so the ranks are a permutation.
void PositionsFromDistances(const double* distances, int32_t m, uint8_t* row) {
  constexpr int32_t kSmall = 256;
  bool small = true;
  for (int32_t j = 0; j < m; ++j) {
    const double d = distances[j];
    small &= d >= 0 && d < kSmall && static_cast<double>(static_cast<int32_t>(d)) == d;
  }
  if (small) {
    int32_t next[kSmall + 1] = {};
    for (int32_t j = 0; j < m; ++j) ++next[static_cast<int32_t>(distances[j]) + 1];
    for (int32_t v = 1; v <= kSmall; ++v) next[v] += next[v - 1];
    for (int32_t j = 0; j < m; ++j) row[j] = static_cast<uint8_t>(next[static_cast<int32_t>(distances[j])]++);
    return;
  }
  for (int32_t i = 0; i < m; ++i) {
    const double di = distances[i];
    int32_t before = 0;
    for (int32_t j = 0; j < i; ++j) before += distances[j] <= di;
    for (int32_t j = i + 1; j < m; ++j) before += distances[j] < di;
    row[i] = static_cast<uint8_t>(before);
  }
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
  std::vector<const float*> rows;
  try {
    for (int32_t j = 0; j < permutants.n; ++j) rows.push_back(permutants.row(j));
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory for the permutants");
  }
  return ComputePermutations(
      [&](int32_t i, double* out) -> Status {
        // the sums in element order, every operation rounded alone (the
        // GPU's numbers), several permutants' overlapped
        SquaredL2Distances(objects.row(i), rows.data(), permutants.n, objects.dim, out);
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
  const int32_t max_footrule = MaxFootrule(objects.m);
  const int32_t workers = ResolveThreads(threads);
  int64_t eligible = n;
  for (uint8_t e : excluded) eligible -= e != 0 ? 1 : 0;
  std::vector<std::vector<int32_t>> lists;
  try {
    if (eligible <= candidates) {
      // every eligible object is every query's candidate: nothing to score
      std::vector<int32_t> all;
      for (int64_t i = 0; i < n; ++i)
        if (excluded.empty() || excluded[static_cast<std::size_t>(i)] == 0) all.push_back(static_cast<int32_t>(i));
      lists.assign(static_cast<std::size_t>(queries.n), all);
    } else if (queries.n >= workers || n <= kStripe) {
      lists.resize(static_cast<std::size_t>(queries.n));
      // a batch: kSelectGroup queries a unit where the processor scores
      // them together (one where that leaves a thread idle, or where their
      // footrules would pass kGroupScratchBytes), each unit on its own scratch
      const bool grouped = CanScoreGroups() && queries.n >= kSelectGroup * workers &&
                           n * 2 * kSelectGroup <= kGroupScratchBytes;
      const int64_t group = grouped ? kSelectGroup : 1;
      GENIE_RETURN_IF_ERROR(ParallelFor(
          (queries.n + group - 1) / group, threads,
          [&](int64_t unit) -> Status {
            try {
              const int32_t q0 = static_cast<int32_t>(unit * group);
              const int count = static_cast<int>(std::min<int64_t>(group, queries.n - q0));
              std::vector<uint16_t> f(static_cast<std::size_t>(n) * static_cast<std::size_t>(count));
              const uint8_t* rows[kSelectGroup];
              uint16_t* fs[kSelectGroup];
              for (int g = 0; g < kSelectGroup; ++g) {
                // a short group scores its first query again and ignores it
                const int c = g < count ? g : 0;
                rows[g] = queries.row(q0 + c);
                fs[g] = f.data() + static_cast<std::size_t>(c) * static_cast<std::size_t>(n);
              }
              for (int64_t lo = 0; lo < n; lo += kStripe) {
                if (cancel.requested()) return Status::Cancelled();
                const int64_t hi = std::min(lo + kStripe, n);
#if defined(__x86_64__)
                if (grouped) {
                  ScoreStripeGroup(objects, rows, count, excluded, lo, hi, fs);
                  continue;
                }
#endif
                for (int g = 0; g < count; ++g) ScoreStripe(objects, rows[g], excluded, lo, hi, fs[g]);
              }
              for (int g = 0; g < count; ++g) {
                if (cancel.requested()) return Status::Cancelled();
                Cut cut;
                GENIE_RETURN_IF_ERROR(SearchCut(fs[g], n, max_footrule, candidates, eligible, cancel, &cut));
                CollectAt(fs[g], n, cut, candidates, &lists[static_cast<std::size_t>(q0 + g)]);
              }
            } catch (const std::bad_alloc&) {
              return Status::OutOfMemory("out of host memory selecting permutation candidates");
            }
            return Status::Ok();
          },
          cancel));
    } else {
      lists.resize(static_cast<std::size_t>(queries.n));
      // few queries: each one's objects by stripes on every thread
      std::vector<uint16_t> f(static_cast<std::size_t>(n));
      const int64_t stripes = (n + kStripe - 1) / kStripe;
      const std::size_t bins = static_cast<std::size_t>(max_footrule) + 1;
      std::vector<std::vector<uint32_t>> hists(static_cast<std::size_t>(stripes));
      for (int32_t q = 0; q < queries.n; ++q) {
        GENIE_RETURN_IF_ERROR(ParallelFor(
            stripes, threads,
            [&](int64_t s) -> Status {
              try {
                std::vector<uint32_t>& h = hists[static_cast<std::size_t>(s)];
                h.assign(bins, 0);
                ScoreStripe(objects, queries.row(q), excluded, s * kStripe, std::min((s + 1) * kStripe, n),
                            f.data(), h.data());
              } catch (const std::bad_alloc&) {
                return Status::OutOfMemory("out of host memory selecting permutation candidates");
              }
              return Status::Ok();
            },
            cancel));
        std::vector<uint32_t> hist(bins, 0);
        for (const auto& h : hists)
          for (std::size_t b = 0; b < bins; ++b) hist[b] += h[b];
        CollectAt(f.data(), n, CutOfHistogram(hist, candidates), candidates, &lists[static_cast<std::size_t>(q)]);
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

// The exact Hamming scan on the CPU (see genie/codes.hpp).  Reading the
// codes is what costs (a 512-bit code is 64 bytes, its distance a few
// popcounts), so a unit of work is a block of up to kBlockQueries queries
// against a stripe of codes: each code is read once for the whole block,
// and its distances go to one uint16 per (query, code).  A query's
// histogram and its k rows come from those distances afterwards, a pass
// over 2 bytes a code.  Queries are taken in chunks whose distances fit
// kDistanceBytes, so a large batch over a large set stays within bounded
// memory.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "genie/candidates.hpp"
#include "genie/codes.hpp"
#include "genie/parallel.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace genie {
namespace {

constexpr int kBlockQueries = 8;                  // queries a code is read for at once
constexpr int64_t kStripeMin = 4096;              // codes a stripe gets at least
constexpr int64_t kCancelEvery = 4096;            // codes between polls of cancel
constexpr int64_t kDistanceBytes = 256ll << 20;   // a chunk's distances

using BlockDistances = void (*)(const uint64_t* codes, int64_t begin, int64_t end, int32_t words,
                                const uint64_t* const* q, int nq, const uint8_t* excluded,
                                uint16_t* const* out);

// The distances of codes [begin, end) to the block's nq queries.  Words is a
// template argument for the common lengths (64 to 1024 bits), so the words
// of a code stay in registers while every query of the block passes.
template <int kWords, typename Popcount>
inline void BlockDistancesWith(const uint64_t* codes, int64_t begin, int64_t end, int32_t runtime_words,
                               const uint64_t* const* q, int nq, const uint8_t* excluded,
                               uint16_t* const* out, Popcount popcount) {
  const int32_t words = kWords > 0 ? kWords : runtime_words;
  for (int64_t id = begin; id < end; ++id) {
    if (excluded != nullptr && excluded[id] != 0) {
      for (int g = 0; g < nq; ++g) out[g][id] = kNoDistance;
      continue;
    }
    const uint64_t* row = codes + static_cast<std::size_t>(id) * static_cast<std::size_t>(words);
    for (int g = 0; g < nq; ++g) {
      const uint64_t* query = q[g];
      int32_t d = 0;
      for (int32_t w = 0; w < words; ++w) d += popcount(row[w] ^ query[w]);
      out[g][id] = static_cast<uint16_t>(d);
    }
  }
}

template <typename Popcount>
inline void BlockDistancesDispatch(const uint64_t* codes, int64_t begin, int64_t end, int32_t words,
                                   const uint64_t* const* q, int nq, const uint8_t* excluded,
                                   uint16_t* const* out, Popcount popcount) {
  switch (words) {
    case 1: return BlockDistancesWith<1>(codes, begin, end, words, q, nq, excluded, out, popcount);
    case 2: return BlockDistancesWith<2>(codes, begin, end, words, q, nq, excluded, out, popcount);
    case 4: return BlockDistancesWith<4>(codes, begin, end, words, q, nq, excluded, out, popcount);
    case 8: return BlockDistancesWith<8>(codes, begin, end, words, q, nq, excluded, out, popcount);
    case 13: return BlockDistancesWith<13>(codes, begin, end, words, q, nq, excluded, out, popcount);
    case 16: return BlockDistancesWith<16>(codes, begin, end, words, q, nq, excluded, out, popcount);
    default: return BlockDistancesWith<0>(codes, begin, end, words, q, nq, excluded, out, popcount);
  }
}

void BlockDistancesPortable(const uint64_t* codes, int64_t begin, int64_t end, int32_t words,
                            const uint64_t* const* q, int nq, const uint8_t* excluded, uint16_t* const* out) {
  BlockDistancesDispatch(codes, begin, end, words, q, nq, excluded, out,
                         [](uint64_t x) { return __builtin_popcountll(x); });
}

#if defined(__x86_64__)
// The same with the popcnt instruction (the portable build calls a
// table-driven routine for __builtin_popcountll).
__attribute__((target("popcnt"))) void BlockDistancesPopcnt(const uint64_t* codes, int64_t begin, int64_t end,
                                                            int32_t words, const uint64_t* const* q, int nq,
                                                            const uint8_t* excluded, uint16_t* const* out) {
  BlockDistancesDispatch(codes, begin, end, words, q, nq, excluded, out,
                         [](uint64_t x) __attribute__((target("popcnt"))) { return __builtin_popcountll(x); });
}

// With AVX-512 VPOPCNTDQ: eight words of a code against a query in three
// instructions (xor, popcount, add), the last words by a masked load (which
// reads nothing beyond them), one horizontal sum per (code, query).  For
// codes of four words and more; shorter ones take the popcnt loop.
__attribute__((target("avx512f,avx512vpopcntdq"))) void BlockDistancesAvx512(
    const uint64_t* codes, int64_t begin, int64_t end, int32_t words, const uint64_t* const* q, int nq,
    const uint8_t* excluded, uint16_t* const* out) {
  const int32_t full = words / 8 * 8;
  const __mmask8 tail = static_cast<__mmask8>((1u << (words - full)) - 1);
  for (int64_t id = begin; id < end; ++id) {
    if (excluded != nullptr && excluded[id] != 0) {
      for (int g = 0; g < nq; ++g) out[g][id] = kNoDistance;
      continue;
    }
    const uint64_t* row = codes + static_cast<std::size_t>(id) * static_cast<std::size_t>(words);
    for (int g = 0; g < nq; ++g) {
      const uint64_t* query = q[g];
      __m512i acc = _mm512_setzero_si512();
      for (int32_t w = 0; w < full; w += 8) {
        const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(row + w), _mm512_loadu_si512(query + w));
        acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(x));
      }
      if (tail != 0) {
        const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi64(tail, row + full),
                                           _mm512_maskz_loadu_epi64(tail, query + full));
        acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(x));
      }
      // the horizontal sum through memory: GCC 12's reduce and extract
      // intrinsics warn (maybe-uninitialized) inside its own headers
      alignas(64) int64_t lanes[8];
      _mm512_store_si512(lanes, acc);
      out[g][id] = static_cast<uint16_t>(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                                         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));
    }
  }
}
#endif

// GENIE_CODE_SCAN_PORTABLE=1 (tests) keeps the loop every processor runs.
BlockDistances ChooseBlockDistances(int32_t words) {
  const char* portable = std::getenv("GENIE_CODE_SCAN_PORTABLE");
  if (portable != nullptr && portable[0] == '1') return BlockDistancesPortable;
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq");
  if (avx512 && words >= 4) return BlockDistancesAvx512;
  if (__builtin_cpu_supports("popcnt")) return BlockDistancesPopcnt;
#endif
  (void)words;
  return BlockDistancesPortable;
}

}  // namespace

int32_t HammingDistance(const uint64_t* a, const uint64_t* b, int32_t words) {
  int32_t d = 0;
  for (int32_t w = 0; w < words; ++w) d += __builtin_popcountll(a[w] ^ b[w]);
  return d;
}

uint64_t LastWordMask(int32_t bits) {
  unsigned char used[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int32_t in_last = bits - (WordsForBits(bits) - 1) * 64;  // 1..64
  for (int32_t byte = 0; byte * 8 < in_last; ++byte) {
    const int32_t left = in_last - byte * 8;
    used[byte] = left >= 8 ? 0xFF : static_cast<unsigned char>(0xFF << (8 - left));
  }
  uint64_t mask;
  std::memcpy(&mask, used, sizeof(mask));
  return mask;
}

Status CheckCodes(const uint64_t* codes, int64_t count, int32_t bits, const char* what) {
  if (bits < 1 || bits > kMaxCodeBits)
    return Status::InvalidArgument("codes must have 1 to " + std::to_string(kMaxCodeBits) + " bits, not " +
                                   std::to_string(bits));
  if (count > 0 && codes == nullptr) return Status::InvalidArgument(std::string(what) + ": NULL codes");
  const int32_t words = WordsForBits(bits);
  const uint64_t beyond = ~LastWordMask(bits);
  if (beyond == 0) return Status::Ok();
  for (int64_t i = 0; i < count; ++i) {
    if ((codes[i * words + words - 1] & beyond) != 0)
      return Status::InvalidArgument(std::string(what) + " " + std::to_string(i) +
                                     " has bits set that are not among its " + std::to_string(bits));
  }
  return Status::Ok();
}

Status BuildCodeSet(int32_t bits, int32_t n, HostArray<uint64_t> values, CodeSet* out) {
  if (out == nullptr) return Status::InvalidArgument("BuildCodeSet: NULL output");
  if (n < 0) return Status::InvalidArgument("negative number of codes");
  if (bits < 1 || bits > kMaxCodeBits)
    return Status::InvalidArgument("codes must have 1 to " + std::to_string(kMaxCodeBits) + " bits");
  const int32_t words = WordsForBits(bits);
  if (values.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(words))
    return Status::InvalidArgument("code set size is not n * words");
  GENIE_RETURN_IF_ERROR(CheckCodes(values.data(), n, bits, "stored code"));
  out->bits = bits;
  out->words = words;
  out->n = n;
  out->values = std::move(values);
  return Status::Ok();
}

Status ValidateCodeScanRequest(const CodeSet& set, const CodeScanRequest& request) {
  if (request.k < 1) return Status::InvalidArgument("k must be at least 1");
  if (request.n_queries < 0) return Status::InvalidArgument("negative number of queries");
  if (request.n_queries > 0 && request.queries == nullptr) return Status::InvalidArgument("NULL queries");
  if (!request.excluded.empty() && request.excluded.size() != static_cast<std::size_t>(set.size()))
    return Status::InvalidArgument("excluded must have one flag per code");
  if (set.bits < 1) return Status::InvalidArgument("the code set is empty of layout");
  return CheckCodes(request.queries, request.n_queries, set.bits, "query code");
}

KthDistance FindKthDistance(const uint32_t* counts, int32_t bits, int32_t k) {
  KthDistance kth;
  int64_t nearer = 0;
  for (int32_t d = 0; d <= bits; ++d) {
    if (nearer + counts[d] >= k) {
      kth.distance = d;
      kth.nearer = nearer;
      kth.at = k - nearer;
      return kth;
    }
    nearer += counts[d];
  }
  kth.distance = bits;
  kth.nearer = nearer - counts[bits];
  kth.at = counts[bits];
  return kth;
}

void SelectNearestCodes(const uint16_t* distances, int32_t n, const uint32_t* counts, int32_t bits,
                        int32_t k, CodeScanResult* out) {
  const KthDistance kth = FindKthDistance(counts, bits, k);
  // each distance's first slot: a counting sort, stable in object id
  std::vector<int64_t> slot(static_cast<std::size_t>(kth.distance) + 1, 0);
  int64_t at = 0;
  for (int32_t d = 0; d <= kth.distance; ++d) {
    slot[d] = at;
    at += d < kth.distance ? counts[d] : kth.at;
  }
  const std::size_t base = out->objects.size();
  out->objects.resize(base + static_cast<std::size_t>(at));
  out->distances.resize(base + static_cast<std::size_t>(at));
  const int64_t last = slot[kth.distance] + kth.at;  // the slots at the k-th distance end here
  for (int32_t id = 0; id < n; ++id) {
    const uint16_t d = distances[id];
    if (d > kth.distance) continue;  // kNoDistance included
    int64_t& s = slot[d];
    if (d == kth.distance && s == last) continue;
    out->objects[base + static_cast<std::size_t>(s)] = id;
    out->distances[base + static_cast<std::size_t>(s)] = d;
    ++s;
  }
  out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
}

Status CpuCodeScan(const CodeSet& set, const CodeScanRequest& request, int32_t threads,
                   CodeScanResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuCodeScan: NULL output");
  GENIE_RETURN_IF_ERROR(ValidateCodeScanRequest(set, request));
  *out = CodeScanResult();
  const int64_t n = set.size();
  const int32_t words = set.words;
  const int32_t k = static_cast<int32_t>(std::min<int64_t>(request.k, std::max<int64_t>(n, 1)));
  const int32_t workers = ResolveThreads(threads);
  const BlockDistances block_distances = ChooseBlockDistances(words);
  const int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(request.n_queries, kDistanceBytes / std::max<int64_t>(n * 2, 1)));
  std::vector<uint16_t> distances(static_cast<std::size_t>(chunk * n));
  out->objects.reserve(static_cast<std::size_t>(request.n_queries) * static_cast<std::size_t>(k));
  out->distances.reserve(out->objects.capacity());

  for (int64_t first = 0; first < request.n_queries; first += chunk) {
    const int64_t nq = std::min<int64_t>(chunk, request.n_queries - first);
    const int64_t blocks = (nq + kBlockQueries - 1) / kBlockQueries;
    // enough units for every thread, but stripes long enough to amortise a unit
    const int64_t stripes = std::max<int64_t>(
        1, std::min<int64_t>((2 * workers + blocks - 1) / blocks, n / kStripeMin));
    const int64_t stripe = (n + stripes - 1) / std::max<int64_t>(stripes, 1);
    GENIE_RETURN_IF_ERROR(ParallelFor(
        blocks * stripes, workers,
        [&](int64_t unit) -> Status {
          const int64_t block = unit / stripes;
          const int64_t begin = (unit % stripes) * stripe;
          const int64_t end = std::min<int64_t>(n, begin + stripe);
          const int nb = static_cast<int>(std::min<int64_t>(kBlockQueries, nq - block * kBlockQueries));
          const uint64_t* q[kBlockQueries];
          uint16_t* d[kBlockQueries];
          for (int g = 0; g < nb; ++g) {
            const int64_t local = block * kBlockQueries + g;
            q[g] = request.queries + static_cast<std::size_t>(first + local) * static_cast<std::size_t>(words);
            d[g] = distances.data() + static_cast<std::size_t>(local * n);
          }
          for (int64_t from = begin; from < end; from += kCancelEvery) {
            if (from > begin && cancel.requested()) return Status::Cancelled();
            block_distances(set.values.data(), from, std::min<int64_t>(end, from + kCancelEvery), words, q, nb,
                            request.excluded.empty() ? nullptr : request.excluded.data(), d);
          }
          return Status::Ok();
        },
        cancel));

    // each query's histogram and rows, in query order
    std::vector<CodeScanResult> rows(static_cast<std::size_t>(nq));
    GENIE_RETURN_IF_ERROR(ParallelFor(
        nq, workers,
        [&](int64_t local) -> Status {
          const uint16_t* dist = distances.data() + static_cast<std::size_t>(local * n);
          std::vector<uint32_t> counts(static_cast<std::size_t>(set.bits) + 1, 0);
          for (int64_t id = 0; id < n; ++id) {
            if (dist[id] != kNoDistance) ++counts[dist[id]];
          }
          CodeScanResult& r = rows[static_cast<std::size_t>(local)];
          r.offsets.clear();
          SelectNearestCodes(dist, static_cast<int32_t>(n), counts.data(), set.bits, k, &r);
          return Status::Ok();
        },
        cancel));
    for (const CodeScanResult& r : rows) {
      out->objects.insert(out->objects.end(), r.objects.begin(), r.objects.end());
      out->distances.insert(out->distances.end(), r.distances.begin(), r.distances.end());
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
  }
  return Status::Ok();
}

Status RerankCodes(const CodeSet& set, const uint64_t* queries, int32_t n_queries, int32_t k,
                   Span<int64_t> candidate_offsets, Span<int32_t> candidates, Span<uint8_t> excluded,
                   int32_t threads, CodeScanResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("RerankCodes: NULL output");
  if (k < 1) return Status::InvalidArgument("k must be at least 1");
  GENIE_RETURN_IF_ERROR(CheckCandidateOffsets(n_queries, candidate_offsets, candidates.size()));
  if (n_queries > 0 && queries == nullptr) return Status::InvalidArgument("NULL query codes");
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(set.size()))
    return Status::InvalidArgument("excluded flags do not match the code set");
  GENIE_RETURN_IF_ERROR(CheckCodes(queries, n_queries, set.bits, "a query code"));
  std::vector<CodeScanResult> parts(static_cast<std::size_t>(n_queries));
  GENIE_RETURN_IF_ERROR(ParallelFor(
      n_queries, threads,
      [&](int64_t q) -> Status {
        std::vector<int32_t> ids(candidates.begin() + candidate_offsets[q], candidates.begin() + candidate_offsets[q + 1]);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        const uint64_t* query = queries + static_cast<std::size_t>(q) * static_cast<std::size_t>(set.words);
        // (distance, id) pairs: sorting them gives the scans' order
        std::vector<std::pair<int32_t, int32_t>> ranked;
        ranked.reserve(ids.size());
        for (int32_t id : ids) {
          if (id < 0 || id >= set.size()) continue;
          if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
          ranked.emplace_back(HammingDistance(set.row(id), query, set.words), id);
        }
        const std::size_t take = std::min(ranked.size(), static_cast<std::size_t>(k));
        std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(take), ranked.end());
        CodeScanResult& r = parts[static_cast<std::size_t>(q)];
        for (std::size_t i = 0; i < take; ++i) {
          r.objects.push_back(ranked[i].second);
          r.distances.push_back(ranked[i].first);
        }
        return Status::Ok();
      },
      cancel));
  out->offsets.assign(1, 0);
  out->objects.clear();
  out->distances.clear();
  for (const CodeScanResult& r : parts) {
    out->objects.insert(out->objects.end(), r.objects.begin(), r.objects.end());
    out->distances.insert(out->distances.end(), r.distances.begin(), r.distances.end());
    out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
  }
  return Status::Ok();
}

}  // namespace genie

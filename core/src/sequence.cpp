// Sequence similarity: see genie/sequence.hpp for the rules and proofs.
#include "genie/sequence.hpp"

#include "genie/levenshtein_kernel.hpp"
#include "genie/parallel.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <numeric>
#include <queue>
#include <string>
#include <vector>

namespace genie {
namespace {

constexpr int64_t kMaxStringLength = int64_t{1} << 30;

Status CheckN(int32_t n) {
  if (n < kMinGramLength || n > kMaxGramLength) {
    return Status::InvalidArgument("n-gram length " + std::to_string(n) + " is outside [" +
                                   std::to_string(kMinGramLength) + ", " +
                                   std::to_string(kMaxGramLength) + "]");
  }
  return Status::Ok();
}

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int32_t CeilDivNonNegative(int64_t num, int64_t den) {
  if (num <= 0) return 0;
  const int64_t q = (num + den - 1) / den;
  return static_cast<int32_t>(std::min<int64_t>(q, INT32_MAX));
}

// ---- Levenshtein (genie/levenshtein_kernel.hpp, shared with the GPU) ----

// The kernel's poll on the host: the caller's cancel callback.
struct CancelPoll {
  const CancelCheck* cancel;
  bool operator()() const { return cancel->requested(); }
};

// kernel::kStopped when cancel asked to stop (only with a cancel callback).
int32_t LevenshteinWith(Span<CodePoint> a, Span<CodePoint> b, int32_t max_distance,
                        std::vector<int32_t>* row, const CancelCheck* cancel = nullptr) {
  const std::size_t shorter = std::min(a.size(), b.size());
  if (shorter > static_cast<std::size_t>(kMyersMaxLength)) row->resize(shorter + 1);
  int32_t* cells = row->empty() ? nullptr : row->data();
  if (cancel != nullptr && cancel->fn != nullptr) {
    return kernel::CappedDistance(a.data(), static_cast<int32_t>(a.size()), b.data(),
                                  static_cast<int32_t>(b.size()), max_distance, cells,
                                  CancelPoll{cancel});
  }
  return kernel::CappedDistance(a.data(), static_cast<int32_t>(a.size()), b.data(),
                                static_cast<int32_t>(b.size()), max_distance, cells);
}

// Pairs verified per task of CpuEditDistances.
constexpr int64_t kVerifyChunk = 64;
// VerifySimilarBatch's own loops poll the cancel callback every this many queries.
constexpr int32_t kCancelPollQueries = 64;

}  // namespace

// ---- UTF-8 ----

Status DecodeUtf8(const char* data, std::size_t size, std::vector<CodePoint>* out) {
  if (out == nullptr) return Status::InvalidArgument("DecodeUtf8: NULL output");
  out->clear();
  if (size > 0 && data == nullptr) return Status::InvalidArgument("DecodeUtf8: NULL input");
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  auto bad = [&](std::size_t at, const char* why) {
    return Status::InvalidArgument("invalid UTF-8 at byte " + std::to_string(at) + ": " + why);
  };
  try {
    out->reserve(size);
    std::size_t i = 0;
    while (i < size) {
      const unsigned c = p[i];
      if (c < 0x80) {
        out->push_back(c);
        ++i;
        continue;
      }
      int extra;
      CodePoint cp;
      CodePoint min;
      if (c >= 0xC2 && c <= 0xDF) {
        extra = 1, cp = c & 0x1F, min = 0x80;
      } else if (c >= 0xE0 && c <= 0xEF) {
        extra = 2, cp = c & 0x0F, min = 0x800;
      } else if (c >= 0xF0 && c <= 0xF4) {
        extra = 3, cp = c & 0x07, min = 0x10000;
      } else if (c >= 0x80 && c <= 0xBF) {
        return bad(i, "unexpected continuation byte");
      } else {
        return bad(i, "invalid lead byte");
      }
      if (size - i <= static_cast<std::size_t>(extra)) return bad(i, "truncated sequence");
      for (int k = 1; k <= extra; ++k) {
        const unsigned cc = p[i + static_cast<std::size_t>(k)];
        if ((cc & 0xC0) != 0x80) return bad(i, "missing continuation byte");
        cp = (cp << 6) | (cc & 0x3F);
      }
      if (cp < min) return bad(i, "overlong encoding");
      if (cp >= 0xD800 && cp <= 0xDFFF) return bad(i, "surrogate code point");
      if (cp > 0x10FFFF) return bad(i, "code point above U+10FFFF");
      out->push_back(cp);
      i += static_cast<std::size_t>(extra) + 1;
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory decoding UTF-8");
  }
  return Status::Ok();
}

// ---- n-grams ----

std::vector<CodePoint> PadForNgrams(Span<CodePoint> s, int32_t n) {
  const std::size_t pad = n > 1 ? static_cast<std::size_t>(n - 1) : 0;
  std::vector<CodePoint> padded;
  padded.reserve(s.size() + 2 * pad);
  padded.insert(padded.end(), pad, kGramPadBegin);
  padded.insert(padded.end(), s.begin(), s.end());
  padded.insert(padded.end(), pad, kGramPadEnd);
  return padded;
}

Status OrderedNgrams(Span<CodePoint> s, int32_t n, std::vector<OrderedNgram>* out) {
  GENIE_RETURN_IF_ERROR(CheckN(n));
  if (out == nullptr) return Status::InvalidArgument("OrderedNgrams: NULL output");
  if (static_cast<int64_t>(s.size()) > kMaxStringLength) {
    return Status::InvalidArgument("string too long for n-grams (more than 2^30 characters)");
  }
  try {
    const std::vector<CodePoint> padded = PadForNgrams(s, n);
    const int32_t windows = static_cast<int32_t>(s.size()) + n - 1;
    const CodePoint* base = padded.data();
    // Windows sorted by (gram, start): runs of equal grams get 0, 1, ...
    std::vector<int32_t> order(static_cast<std::size_t>(windows));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      const int c = std::char_traits<char32_t>::compare(
          reinterpret_cast<const char32_t*>(base + x), reinterpret_cast<const char32_t*>(base + y),
          static_cast<std::size_t>(n));
      return c != 0 ? c < 0 : x < y;
    });
    out->assign(static_cast<std::size_t>(windows), OrderedNgram{0, 0});
    for (int32_t r = 0; r < windows; ++r) {
      const int32_t w = order[static_cast<std::size_t>(r)];
      int32_t occ = 0;
      if (r > 0) {
        const int32_t prev = order[static_cast<std::size_t>(r) - 1];
        if (std::equal(base + prev, base + prev + n, base + w)) {
          occ = (*out)[static_cast<std::size_t>(prev)].occurrence + 1;
        }
      }
      (*out)[static_cast<std::size_t>(w)] = OrderedNgram{w, occ};
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory decomposing a string into n-grams");
  }
  return Status::Ok();
}

namespace {

// NgramKeyword in two steps: the gram's own hash, then its occurrence mixed in.
uint64_t GramHash(const CodePoint* gram, int32_t n) {
  uint64_t h = Mix64(0x243F6A8885A308D3ull + static_cast<uint64_t>(n));
  for (int32_t i = 0; i < n; ++i) h = Mix64(h + 0x9E3779B97F4A7C15ull + gram[i]);
  return h;
}

int32_t KeywordOf(uint64_t gram_hash, int32_t occurrence) {
  const uint64_t h =
      Mix64(gram_hash ^ (0xD1B54A32D192ED03ull + static_cast<uint64_t>(static_cast<uint32_t>(occurrence))));
  return static_cast<int32_t>(static_cast<uint32_t>(h >> 32));
}

// Strings of at most this many windows number a window's gram by comparing
// it with the windows before it (hashes first), in place of OrderedNgrams'
// sort: a word's dozen windows cost a few dozen comparisons and no
// allocation (the CREATE INDEX of 663k words spent a quarter of its table
// scan in that sort and its vectors).
constexpr int32_t kCompareWindows = 64;

}  // namespace

int32_t NgramKeyword(const CodePoint* gram, int32_t n, int32_t occurrence) {
  return KeywordOf(GramHash(gram, n), occurrence);
}

Status ComputeNgramKeywords(Span<CodePoint> s, const NgramOptions& options, NgramKeywords* out) {
  if (out == nullptr) return Status::InvalidArgument("ComputeNgramKeywords: NULL output");
  if (options.keyword_bits < 1 || options.keyword_bits > 32) {
    return Status::InvalidArgument("keyword_bits must be in [1, 32]");
  }
  const int32_t n = options.n;
  GENIE_RETURN_IF_ERROR(CheckN(n));
  if (static_cast<int64_t>(s.size()) > kMaxStringLength) {
    return Status::InvalidArgument("string too long for n-grams (more than 2^30 characters)");
  }
  const int32_t windows = static_cast<int32_t>(s.size()) + n - 1;
  try {
    out->keywords.clear();
    out->keywords.reserve(static_cast<std::size_t>(windows));
    if (windows <= kCompareWindows) {
      CodePoint padded[kCompareWindows + kMaxGramLength - 1];
      uint64_t hash[kCompareWindows];
      std::fill(padded, padded + (n - 1), kGramPadBegin);
      std::copy(s.begin(), s.end(), padded + (n - 1));
      std::fill(padded + (n - 1) + s.size(), padded + windows + n - 1, kGramPadEnd);
      for (int32_t w = 0; w < windows; ++w) {
        hash[w] = GramHash(padded + w, n);
        int32_t occurrence = 0;
        for (int32_t v = 0; v < w; ++v)
          occurrence += hash[v] == hash[w] && std::equal(padded + v, padded + v + n, padded + w);
        out->keywords.push_back(KeywordOf(hash[w], occurrence));
      }
    } else {
      std::vector<OrderedNgram> grams;
      GENIE_RETURN_IF_ERROR(OrderedNgrams(s, n, &grams));
      const std::vector<CodePoint> padded = PadForNgrams(s, n);
      for (const OrderedNgram& g : grams) out->keywords.push_back(NgramKeyword(padded.data() + g.start, n, g.occurrence));
    }
    if (options.keyword_bits < 32) {
      for (int32_t& kw : out->keywords)
        kw = static_cast<int32_t>(static_cast<uint32_t>(kw) >> (32 - options.keyword_bits));
    }
    std::sort(out->keywords.begin(), out->keywords.end());
    out->keywords.erase(std::unique(out->keywords.begin(), out->keywords.end()),
                        out->keywords.end());
    out->length = static_cast<int32_t>(s.size());
    out->grams = windows;
    out->lost = out->grams - static_cast<int32_t>(out->keywords.size());
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory computing n-gram keywords");
  }
  return Status::Ok();
}

Status ComputeNgramKeywordsUtf8(const char* data, std::size_t size, const NgramOptions& options,
                                NgramKeywords* out) {
  std::vector<CodePoint> cps;
  GENIE_RETURN_IF_ERROR(DecodeUtf8(data, size, &cps));
  return ComputeNgramKeywords(cps, options, out);
}

int64_t NgramKeywordsBound(const int64_t* offsets, int32_t count, int32_t n) {
  return count == 0 ? 0 : offsets[count] - offsets[0] + static_cast<int64_t>(count) * (n - 1);
}

Status ComputeNgramKeywordsBatch(const char* text, const int64_t* offsets, int32_t count,
                                 const NgramOptions& options, int32_t threads, const CancelCheck& cancel,
                                 int32_t* keywords, int64_t* starts) {
  if (count < 0 || (count > 0 && (offsets == nullptr || keywords == nullptr)) || starts == nullptr)
    return Status::InvalidArgument("ComputeNgramKeywordsBatch: NULL or negative arguments");
  GENIE_RETURN_IF_ERROR(CheckN(options.n));
  for (int32_t i = 0; i < count; ++i) {
    if (offsets[i + 1] < offsets[i]) return Status::InvalidArgument("ComputeNgramKeywordsBatch: offsets go down");
  }
  if (count > 0 && offsets[count] > offsets[0] && text == nullptr)
    return Status::InvalidArgument("ComputeNgramKeywordsBatch: NULL text");
  const int32_t pad = options.n - 1;
  // string i's keywords first go to its bound's place (its bytes and pad
  // windows before it), then move down into place, in order
  constexpr int64_t kChunk = 512;
  std::vector<int32_t> found;
  try {
    found.resize(static_cast<std::size_t>(count));
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory computing n-gram keywords");
  }
  GENIE_RETURN_IF_ERROR(ParallelFor(
      (count + kChunk - 1) / kChunk, threads,
      [&](int64_t c) -> Status {
        std::vector<CodePoint> cps;
        NgramKeywords grams;
        const int64_t hi = std::min<int64_t>((c + 1) * kChunk, count);
        for (int64_t i = c * kChunk; i < hi; ++i) {
          const int64_t size = offsets[i + 1] - offsets[i];
          GENIE_RETURN_IF_ERROR(DecodeUtf8(text + offsets[i], static_cast<std::size_t>(size), &cps));
          GENIE_RETURN_IF_ERROR(ComputeNgramKeywords(cps, options, &grams));
          std::copy(grams.keywords.begin(), grams.keywords.end(), keywords + (offsets[i] - offsets[0]) + i * pad);
          found[static_cast<std::size_t>(i)] = static_cast<int32_t>(grams.keywords.size());
        }
        return Status::Ok();
      },
      cancel));
  int64_t at = 0;
  for (int32_t i = 0; i < count; ++i) {
    const int64_t from = (offsets[i] - offsets[0]) + static_cast<int64_t>(i) * pad;
    if (at != from)
      std::memmove(keywords + at, keywords + from, sizeof(int32_t) * static_cast<std::size_t>(found[static_cast<std::size_t>(i)]));
    starts[i] = at;
    at += found[static_cast<std::size_t>(i)];
  }
  starts[count] = at;
  return Status::Ok();
}

int32_t KeywordSetCount(Span<int32_t> a, Span<int32_t> b) {
  int32_t count = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++count, ++i, ++j;
    }
  }
  return count;
}

// ---- bounds ----

int32_t CountLowerBound(int64_t len_q, int64_t len_s, int64_t count, int32_t n) {
  if (n < 1) return 0;
  return CeilDivNonNegative(std::max(len_q, len_s) + n - 1 - count, n);
}

int32_t EditDistanceLowerBound(int64_t len_q, int64_t len_s, int64_t count, int32_t n) {
  const int64_t diff = len_q > len_s ? len_q - len_s : len_s - len_q;
  return std::max(static_cast<int32_t>(std::min<int64_t>(diff, INT32_MAX)),
                  CountLowerBound(len_q, len_s, count, n));
}

int32_t UnseenLowerBound(int64_t len_q, int64_t count, int32_t n) {
  return CountLowerBound(len_q, len_q, count, n);
}

// ---- Levenshtein ----

int32_t LevenshteinReference(Span<CodePoint> a, Span<CodePoint> b) {
  const std::size_t m = a.size(), n = b.size();
  std::vector<int32_t> prev(n + 1), cur(n + 1);
  for (std::size_t j = 0; j <= n; ++j) prev[j] = static_cast<int32_t>(j);
  for (std::size_t i = 1; i <= m; ++i) {
    cur[0] = static_cast<int32_t>(i);
    for (std::size_t j = 1; j <= n; ++j) {
      cur[j] = std::min({prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0), prev[j] + 1, cur[j - 1] + 1});
    }
    std::swap(prev, cur);
  }
  return prev[n];
}

int32_t LevenshteinMyers(Span<CodePoint> a, Span<CodePoint> b) {
  if (a.size() > b.size()) std::swap(a, b);
  if (a.size() > static_cast<std::size_t>(kMyersMaxLength)) return -1;
  if (a.empty()) return static_cast<int32_t>(b.size());
  return kernel::MyersDistance(a.data(), static_cast<int32_t>(a.size()), b.data(),
                               static_cast<int64_t>(b.size()));
}

int32_t LevenshteinBanded(Span<CodePoint> a, Span<CodePoint> b, int32_t threshold) {
  if (threshold < 0) threshold = 0;
  if (a.size() > b.size()) std::swap(a, b);
  std::vector<int32_t> row(a.size() + 1);
  return kernel::BandedDistance(b.data(), static_cast<int32_t>(b.size()), a.data(),
                                static_cast<int32_t>(a.size()), threshold, row.data());
}

int32_t Levenshtein(Span<CodePoint> a, Span<CodePoint> b, int32_t max_distance) {
  std::vector<int32_t> row;
  return LevenshteinWith(a, b, max_distance, &row);
}

Status Levenshtein(Span<CodePoint> a, Span<CodePoint> b, const CancelCheck& cancel,
                   int32_t* distance) {
  if (distance == nullptr) return Status::InvalidArgument("Levenshtein: NULL output");
  try {
    std::vector<int32_t> row;
    const int32_t d = LevenshteinWith(a, b, -1, &row, &cancel);
    if (d == kernel::kStopped) return Status::Cancelled();
    *distance = d;
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory computing an edit distance");
  }
  return Status::Ok();
}

// ---- batch ----

void CodePointStrings::Add(Span<CodePoint> s) {
  code_points.insert(code_points.end(), s.begin(), s.end());
  offsets.push_back(static_cast<int64_t>(code_points.size()));
}

Status CodePointStrings::AddUtf8(const char* data, std::size_t size) {
  std::vector<CodePoint> cps;
  GENIE_RETURN_IF_ERROR(DecodeUtf8(data, size, &cps));
  try {
    Add(cps);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory adding a string");
  }
  return Status::Ok();
}

namespace {
Status ValidateStrings(const CodePointStrings& s, const char* what) {
  if (s.offsets.empty() || s.offsets.front() != 0 ||
      s.offsets.back() != static_cast<int64_t>(s.code_points.size())) {
    return Status::InvalidArgument(std::string(what) + ": offsets must run from 0 to the number of code points");
  }
  if (s.offsets.size() - 1 > static_cast<std::size_t>(INT32_MAX)) {
    return Status::InvalidArgument(std::string(what) + ": too many strings");
  }
  for (std::size_t i = 1; i < s.offsets.size(); ++i) {
    const int64_t len = s.offsets[i] - s.offsets[i - 1];
    if (len < 0) return Status::InvalidArgument(std::string(what) + ": offsets decrease");
    if (len > kMaxStringLength) {
      return Status::InvalidArgument(std::string(what) + ": a string is longer than 2^30 characters");
    }
  }
  return Status::Ok();
}
}  // namespace

Status ValidateEditDistanceBatch(const EditDistanceBatch& batch) {
  GENIE_RETURN_IF_ERROR(ValidateStrings(batch.queries, "queries"));
  GENIE_RETURN_IF_ERROR(ValidateStrings(batch.candidates, "candidates"));
  const auto& co = batch.candidate_offsets;
  if (co.size() != batch.queries.offsets.size() || co.front() != 0 ||
      co.back() != static_cast<int64_t>(batch.candidates.size())) {
    return Status::InvalidArgument(
        "candidate_offsets must have one entry per query plus one, from 0 to the number of "
        "candidates");
  }
  for (std::size_t i = 1; i < co.size(); ++i) {
    if (co[i] < co[i - 1]) return Status::InvalidArgument("candidate_offsets decrease");
  }
  if (!batch.max_distance.empty() &&
      batch.max_distance.size() != static_cast<std::size_t>(batch.queries.size())) {
    return Status::InvalidArgument("max_distance must be empty or have one entry per query");
  }
  return Status::Ok();
}

Status CpuEditDistances(const EditDistanceBatch& batch, int32_t threads,
                        std::vector<int32_t>* distances, const CancelCheck& cancel) {
  if (distances == nullptr) return Status::InvalidArgument("CpuEditDistances: NULL output");
  GENIE_RETURN_IF_ERROR(ValidateEditDistanceBatch(batch));
  try {
    const int64_t total = batch.candidates.size();
    distances->assign(static_cast<std::size_t>(total), 0);
    std::vector<int32_t> query_of(static_cast<std::size_t>(total));
    for (int32_t q = 0; q < batch.queries.size(); ++q) {
      for (int64_t j = batch.candidate_offsets[static_cast<std::size_t>(q)];
           j < batch.candidate_offsets[static_cast<std::size_t>(q) + 1]; ++j) {
        query_of[static_cast<std::size_t>(j)] = q;
      }
    }
    const int64_t chunks = (total + kVerifyChunk - 1) / kVerifyChunk;
    int32_t* out = distances->data();
    GENIE_RETURN_IF_ERROR(ParallelFor(chunks, ResolveThreads(threads), [&](int64_t chunk) -> Status {
      std::vector<int32_t> row;
      const int64_t end = std::min(total, (chunk + 1) * kVerifyChunk);
      for (int64_t j = chunk * kVerifyChunk; j < end; ++j) {
        const int32_t q = query_of[static_cast<std::size_t>(j)];
        const int32_t cap =
            batch.max_distance.empty() ? -1 : batch.max_distance[static_cast<std::size_t>(q)];
        out[j] = LevenshteinWith(batch.queries.Get(q), batch.candidates.Get(static_cast<int32_t>(j)),
                                 cap, &row, &cancel);
        // a long pair polls inside; short ones are polled per chunk by ParallelFor
        if (out[j] == kernel::kStopped) return Status::Cancelled();
      }
      return Status::Ok();
    }, cancel));
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory verifying edit distances");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("edit-distance verification failed: ") + e.what());
  }
  return Status::Ok();
}

// ---- certificate ----

Status CertifyTopK(const TopKCertificateInput& input, TopKCertificate* out) {
  if (out == nullptr) return Status::InvalidArgument("CertifyTopK: NULL output");
  if (input.k < 1) return Status::InvalidArgument("k must be at least 1");
  GENIE_RETURN_IF_ERROR(CheckN(input.n));
  if (input.query_length < 0 || input.query_lost < 0) {
    return Status::InvalidArgument("query length and lost must be non-negative");
  }
  *out = TopKCertificate{};
  try {
    std::vector<int32_t> exact;
    for (const CandidateBound& c : input.candidates) {
      if (c.count < 0 || c.length < 0) {
        return Status::InvalidArgument("candidate counts and lengths must be non-negative");
      }
      if (c.exact) {
        exact.push_back(c.distance);
      } else {
        const int32_t lb = std::max(
            c.distance, EditDistanceLowerBound(input.query_length, c.length,
                                               int64_t{c.count} + input.query_lost, input.n));
        out->open_lower_bound = std::min(out->open_lower_bound, lb);
      }
    }
    out->verified = static_cast<int32_t>(exact.size());
    if (input.unseen_count_bound >= 0) {
      out->unseen_lower_bound = UnseenLowerBound(
          input.query_length, int64_t{input.unseen_count_bound} + input.query_lost, input.n);
    }
    const bool has_open = out->open_lower_bound != INT32_MAX;
    const bool has_unseen = input.unseen_count_bound >= 0;
    if (out->verified >= input.k) {
      std::nth_element(exact.begin(), exact.begin() + (input.k - 1), exact.end());
      out->kth_distance = exact[static_cast<std::size_t>(input.k - 1)];
      out->exact = (!has_open || out->open_lower_bound >= out->kth_distance) &&
                   (!has_unseen || out->unseen_lower_bound >= out->kth_distance);
    } else {
      out->exact = !has_open && !has_unseen;
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory certifying a top-k");
  }
  return Status::Ok();
}

Status VerifyTopKCandidates(Span<CodePoint> query, const CodePointStrings& candidates,
                            Span<int32_t> counts, int32_t k, int32_t n, int32_t query_lost,
                            std::vector<CandidateBound>* out) {
  if (out == nullptr) return Status::InvalidArgument("VerifyTopKCandidates: NULL output");
  if (k < 1) return Status::InvalidArgument("k must be at least 1");
  GENIE_RETURN_IF_ERROR(CheckN(n));
  if (counts.size() != static_cast<std::size_t>(candidates.size())) {
    return Status::InvalidArgument("one count per candidate is needed");
  }
  try {
    out->assign(counts.size(), CandidateBound{});
    std::priority_queue<int32_t> best;  // the k smallest exact distances (max on top)
    std::vector<int32_t> row;
    const int64_t len_q = static_cast<int64_t>(query.size());
    for (int32_t j = 0; j < candidates.size(); ++j) {
      const Span<CodePoint> s = candidates.Get(j);
      CandidateBound& c = (*out)[static_cast<std::size_t>(j)];
      c.count = counts[static_cast<std::size_t>(j)];
      c.length = static_cast<int32_t>(s.size());
      const bool full = static_cast<int32_t>(best.size()) >= k;
      const int32_t tau_k = full ? best.top() : -1;
      const int32_t lb = EditDistanceLowerBound(len_q, c.length, int64_t{c.count} + query_lost, n);
      if (full && lb >= tau_k) {  // count and length filters: cannot beat the k-th
        c.distance = lb;
        c.exact = false;
        continue;
      }
      const int32_t d = LevenshteinWith(query, s, full ? tau_k : -1, &row);
      if (full && d > tau_k) {
        c.distance = d;  // = tau_k + 1, a lower bound
        c.exact = false;
        continue;
      }
      c.distance = d;
      c.exact = true;
      best.push(d);
      if (static_cast<int32_t>(best.size()) > k) best.pop();
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory verifying candidates");
  }
  return Status::Ok();
}

}  // namespace genie

namespace genie {

Status VerifySimilarBatch(const SimilarBatch& batch, const EditDistanceFunction& distances,
                          SimilarVerdict* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("VerifySimilarBatch: NULL output");
  if (batch.k < 1) return Status::InvalidArgument("k must be at least 1");
  GENIE_RETURN_IF_ERROR(CheckN(batch.n));
  const int32_t n_queries = batch.queries.size();
  const int32_t n_candidates = batch.candidates.size();
  if (batch.candidate_offsets.size() != static_cast<std::size_t>(n_queries) + 1 ||
      batch.candidate_offsets.front() != 0 || batch.candidate_offsets.back() != n_candidates ||
      !std::is_sorted(batch.candidate_offsets.begin(), batch.candidate_offsets.end())) {
    return Status::InvalidArgument("candidate offsets do not match the candidates");
  }
  if (batch.candidate_counts.size() != static_cast<std::size_t>(n_candidates) ||
      batch.unseen_count_bound.size() != static_cast<std::size_t>(n_queries)) {
    return Status::InvalidArgument("one count per candidate and one bound per query are needed");
  }
  try {
    out->candidates.assign(static_cast<std::size_t>(n_candidates), CandidateBound{});
    out->certificates.assign(static_cast<std::size_t>(n_queries), TopKCertificate{});
    out->query_lost.assign(static_cast<std::size_t>(n_queries), 0);
    out->distances_computed = 0;

    NgramOptions options;
    options.n = batch.n;
    NgramKeywords grams;
    std::vector<int32_t> lower(static_cast<std::size_t>(n_candidates));
    for (int32_t q = 0; q < n_queries; ++q) {
      if (q % kCancelPollQueries == 0 && cancel.requested()) return Status::Cancelled();
      const Span<CodePoint> query = batch.queries.Get(q);
      GENIE_RETURN_IF_ERROR(ComputeNgramKeywords(query, options, &grams));
      out->query_lost[static_cast<std::size_t>(q)] = grams.lost;
      for (int64_t j = batch.candidate_offsets[static_cast<std::size_t>(q)];
           j < batch.candidate_offsets[static_cast<std::size_t>(q) + 1]; ++j) {
        CandidateBound& c = out->candidates[static_cast<std::size_t>(j)];
        c.count = batch.candidate_counts[static_cast<std::size_t>(j)];
        if (c.count < 0) return Status::InvalidArgument("candidate counts must be non-negative");
        c.length = static_cast<int32_t>(batch.candidates.Get(static_cast<int32_t>(j)).size());
        c.distance = EditDistanceLowerBound(static_cast<int64_t>(query.size()), c.length,
                                            int64_t{c.count} + grams.lost, batch.n);
        c.exact = false;
        lower[static_cast<std::size_t>(j)] = c.distance;
      }
    }

    // Runs one pass over the chosen pairs and records their results.
    auto run_pass = [&](const std::vector<int64_t>& chosen, const std::vector<int32_t>& caps) {
      EditDistanceBatch pass;
      pass.queries = batch.queries;
      pass.max_distance = caps;
      pass.candidate_offsets.assign(1, 0);
      std::size_t next = 0;
      for (int32_t q = 0; q < n_queries; ++q) {
        while (next < chosen.size() &&
               chosen[next] < batch.candidate_offsets[static_cast<std::size_t>(q) + 1]) {
          pass.candidates.Add(batch.candidates.Get(static_cast<int32_t>(chosen[next])));
          ++next;
        }
        pass.candidate_offsets.push_back(static_cast<int64_t>(next));
      }
      std::vector<int32_t> result;
      if (cancel.requested()) return Status::Cancelled();
      GENIE_RETURN_IF_ERROR(distances(pass, &result));
      if (result.size() != chosen.size()) {
        return Status::Internal("the edit-distance function returned a wrong number of distances");
      }
      out->distances_computed += static_cast<int64_t>(chosen.size());
      for (std::size_t i = 0; i < chosen.size(); ++i) {
        const int64_t j = chosen[i];
        int32_t q = static_cast<int32_t>(
            std::upper_bound(batch.candidate_offsets.begin(), batch.candidate_offsets.end(), j) -
            batch.candidate_offsets.begin() - 1);
        const int32_t cap = caps[static_cast<std::size_t>(q)];
        CandidateBound& c = out->candidates[static_cast<std::size_t>(j)];
        if (cap >= 0 && result[i] > cap) {
          c.distance = std::max(c.distance, cap + 1);
          c.exact = false;
        } else {
          c.distance = result[i];
          c.exact = true;
        }
      }
      return Status::Ok();
    };

    // Pass 1: the k smallest lower bounds of each query, uncapped.
    std::vector<int64_t> chosen;
    std::vector<int32_t> caps(static_cast<std::size_t>(n_queries), -1);
    std::vector<int64_t> order;
    for (int32_t q = 0; q < n_queries; ++q) {
      if (q % kCancelPollQueries == 0 && cancel.requested()) return Status::Cancelled();
      const int64_t begin = batch.candidate_offsets[static_cast<std::size_t>(q)];
      const int64_t end = batch.candidate_offsets[static_cast<std::size_t>(q) + 1];
      order.resize(static_cast<std::size_t>(end - begin));
      std::iota(order.begin(), order.end(), begin);
      const std::size_t take = std::min<std::size_t>(order.size(), static_cast<std::size_t>(batch.k));
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                        [&](int64_t a, int64_t b) {
                          if (lower[static_cast<std::size_t>(a)] != lower[static_cast<std::size_t>(b)])
                            return lower[static_cast<std::size_t>(a)] < lower[static_cast<std::size_t>(b)];
                          return a < b;
                        });
      order.resize(take);
      std::sort(order.begin(), order.end());
      chosen.insert(chosen.end(), order.begin(), order.end());
    }
    GENIE_RETURN_IF_ERROR(run_pass(chosen, caps));

    // Pass 2: the rest whose lower bound is below D, capped at D.
    chosen.clear();
    for (int32_t q = 0; q < n_queries; ++q) {
      if (q % kCancelPollQueries == 0 && cancel.requested()) return Status::Cancelled();
      const int64_t begin = batch.candidate_offsets[static_cast<std::size_t>(q)];
      const int64_t end = batch.candidate_offsets[static_cast<std::size_t>(q) + 1];
      if (end - begin <= batch.k) continue;  // pass 1 verified them all
      int32_t d = 0;
      for (int64_t j = begin; j < end; ++j) {
        const CandidateBound& c = out->candidates[static_cast<std::size_t>(j)];
        if (c.exact) d = std::max(d, c.distance);
      }
      caps[static_cast<std::size_t>(q)] = d;
      for (int64_t j = begin; j < end; ++j) {
        const CandidateBound& c = out->candidates[static_cast<std::size_t>(j)];
        if (!c.exact && c.distance < d) chosen.push_back(j);
      }
    }
    if (!chosen.empty()) GENIE_RETURN_IF_ERROR(run_pass(chosen, caps));

    for (int32_t q = 0; q < n_queries; ++q) {
      if (q % kCancelPollQueries == 0 && cancel.requested()) return Status::Cancelled();
      const int64_t begin = batch.candidate_offsets[static_cast<std::size_t>(q)];
      const int64_t end = batch.candidate_offsets[static_cast<std::size_t>(q) + 1];
      TopKCertificateInput input;
      input.k = batch.k;
      input.n = batch.n;
      input.query_length = static_cast<int32_t>(batch.queries.Get(q).size());
      input.query_lost = out->query_lost[static_cast<std::size_t>(q)];
      input.candidates = Span<CandidateBound>(out->candidates.data() + begin,
                                              static_cast<std::size_t>(end - begin));
      input.unseen_count_bound = batch.unseen_count_bound[static_cast<std::size_t>(q)];
      GENIE_RETURN_IF_ERROR(CertifyTopK(input, &out->certificates[static_cast<std::size_t>(q)]));
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory verifying a batch of candidates");
  }
  return Status::Ok();
}

}  // namespace genie

// Sequence similarity building blocks (GENIE paper section V-A): UTF-8
// decoding, ordered n-gram keywords, the match-count lower bound on edit
// distance (Theorem 5.1), Levenshtein distance (reference DP, bit-parallel
// Myers, banded DP), batch verification on the CPU, and the top-k
// certificate (Algorithm 2 and Theorem 5.2).
//
// Strings are sequences of Unicode code points, never bytes: lengths and
// edit distances count characters.
//
// ---- Ordered n-grams and their keywords (the exact rule) ------------------
//
// Let s be a string of L >= 0 code points and n in [2, 8].  The padded string
// is
//     P(s) = B^(n-1)  s  E^(n-1)          (length L + 2(n-1))
// where B = kGramPadBegin (U+110000) and E = kGramPadEnd (U+110001) are two
// values outside Unicode, so they never equal a real character.  (This is
// pg_trgm's idea, padding at both ends, made uniform for every n.)  The
// windows of P(s) are its L + n - 1 substrings of length n, in order; every
// string, the empty one included, has at least n - 1 >= 1 of them.  The empty
// string's windows are the n - 1 grams B^(n-1-i) E^(i+1), i = 0 .. n-2.
//
// Window w gets occurrence number o = the number of earlier windows with the
// same gram (the paper's ordered n-gram (gram, o), Example 5.1).  G(s) is the
// set of these L + n - 1 pairs; all are distinct.  For two strings the
// ordered n-gram count |G(q) ∩ G(s)| equals sum over grams of
// min(occurrences in q, occurrences in s) (Lemma 5.1).
//
// Each pair becomes a 32-bit keyword NgramKeyword(gram, o): a fixed 64-bit
// mix (splitmix64 finaliser) of n, the code points and o, whose high 32 bits
// are the keyword.  Keywords are stored in indexes: the function is part of
// the on-disk format and must never change.  A string's keyword set K(s) is
// the set of distinct keywords of its pairs.
//
// ---- What hash collisions can do (the exact guarantee) --------------------
//
// Let C = |G(q) ∩ G(s)| be the true ordered n-gram count and c = |K(q) ∩ K(s)|
// the set count that an index over keyword sets computes.  Let
// lost(q) = |G(q)| - |K(q)|, the number of q's pairs merged into another pair
// of q by a collision (almost always 0: NgramKeywords reports it).  Then
//     C <= c + lost(q)        (and symmetrically C <= c + lost(s)).
// Proof: the hash maps G(q) ∩ G(s) into K(q) ∩ K(s); restricted to any subset
// of G(q) it loses at most lost(q) elements, so c >= C - lost(q).  A collision
// between a pair of q and a different pair of s can only add to c.  So every
// bound below takes count = c + lost(q), an upper bound on C, and stays valid
// whatever the collisions; lost(q) is known from the query alone.
//
// ---- The lower bound (Theorem 5.1 adapted to the padding) -----------------
//
// With C as above (or any upper bound on it) and lengths in code points,
//     ed(q, s) >= max( |L_q - L_s|,  ceil((max(L_q, L_s) + n - 1 - C) / n) ),
// clamped at 0.  Proof sketch: a script of tau edits turning q into s turns
// P(q) into P(s) (the padding is never edited).  Each edit touches at most n
// windows of the longer padded string X (those overlapping the edited
// position); the untouched windows of X appear, in order, as windows of the
// other padded string with the same gram, which is an injective matching of
// equal grams, so C >= (number of windows of X) - n * tau
// = max(L_q, L_s) + n - 1 - n * tau.  Rearranging gives the bound; the length
// difference is the usual length filter.  It holds for empty and short
// strings alike (an empty string has n - 1 windows).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/levenshtein_kernel.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

using CodePoint = uint32_t;

constexpr int32_t kMinGramLength = 2;
constexpr int32_t kMaxGramLength = 8;
constexpr CodePoint kGramPadBegin = 0x110000;
constexpr CodePoint kGramPadEnd = 0x110001;
// Patterns (the shorter string of a pair) up to this many code points use
// bit-parallel Myers; longer pairs use banded dynamic programming.
constexpr int32_t kMyersMaxLength = kernel::kMyersMaxLength;

// ---- UTF-8 -------------------------------------------------------------------

// Decodes UTF-8 into code points (appended to *out after clearing it).
// Rejects, with InvalidArgument naming the byte offset: truncated sequences,
// stray continuation bytes, overlong forms, surrogates (U+D800..U+DFFF), and
// values above U+10FFFF.  NUL bytes decode to U+0000.
Status DecodeUtf8(const char* data, std::size_t size, std::vector<CodePoint>* out);

// ---- Ordered n-grams -----------------------------------------------------------

// P(s) as defined above.
std::vector<CodePoint> PadForNgrams(Span<CodePoint> s, int32_t n);

// One window of P(s): the gram is P(s)[start .. start + n).
struct OrderedNgram {
  int32_t start;
  int32_t occurrence;
};

// The L + n - 1 windows of P(s) in order, with their occurrence numbers.
// InvalidArgument when n is outside [2, 8] or s is longer than 2^30.
Status OrderedNgrams(Span<CodePoint> s, int32_t n, std::vector<OrderedNgram>* out);

// The keyword of the ordered n-gram (gram[0 .. n), occurrence).
int32_t NgramKeyword(const CodePoint* gram, int32_t n, int32_t occurrence);

struct NgramOptions {
  int32_t n = 3;
  // Test hook: keep only the top keyword_bits bits of each keyword (1..32),
  // to force collisions.  Indexes always use 32.
  int32_t keyword_bits = 32;
};

struct NgramKeywords {
  std::vector<int32_t> keywords;  // K(s): distinct, ascending
  int32_t length = 0;             // L, in code points
  int32_t grams = 0;              // |G(s)| = L + n - 1
  int32_t lost = 0;               // grams - keywords.size(): pairs merged by collisions
};

Status ComputeNgramKeywords(Span<CodePoint> s, const NgramOptions& options, NgramKeywords* out);
// Decodes UTF-8 first.
Status ComputeNgramKeywordsUtf8(const char* data, std::size_t size, const NgramOptions& options,
                                NgramKeywords* out);
// The keywords of count UTF-8 strings (string i: text[offsets[i],
// offsets[i + 1])) on threads threads (an index build's table, a batch at a
// time): string i's, distinct and ascending, in keywords[starts[i],
// starts[i + 1]).  keywords has room for NgramKeywordsBound entries (every
// string's bytes and n - 1 windows), starts for count + 1.
int64_t NgramKeywordsBound(const int64_t* offsets, int32_t count, int32_t n);
Status ComputeNgramKeywordsBatch(const char* text, const int64_t* offsets, int32_t count,
                                 const NgramOptions& options, int32_t threads, const CancelCheck& cancel,
                                 int32_t* keywords, int64_t* starts);

// |a ∩ b| of two ascending distinct keyword lists (what the engines count).
int32_t KeywordSetCount(Span<int32_t> a, Span<int32_t> b);

// ---- Bounds ----------------------------------------------------------------------

// Theorem 5.1 alone: max(0, ceil((max(len_q, len_s) + n - 1 - count) / n)).
// count must be an upper bound on the ordered n-gram count C, e.g. an
// engine's set count plus the query's NgramKeywords::lost.
int32_t CountLowerBound(int64_t len_q, int64_t len_s, int64_t count, int32_t n);

// The bound used everywhere: max(|len_q - len_s|, CountLowerBound(...)).
// Never exceeds ed(q, s) when count >= C (see the proof above).
int32_t EditDistanceLowerBound(int64_t len_q, int64_t len_s, int64_t count, int32_t n);

// A bound for every string of unknown length whose count is at most count:
// the minimum of EditDistanceLowerBound over len_s, which is
// CountLowerBound(len_q, len_q, count, n).
int32_t UnseenLowerBound(int64_t len_q, int64_t count, int32_t n);

// ---- Levenshtein distance (unit costs, code points) ------------------------------

// Plain O(|a| |b|) dynamic programming: the reference.
int32_t LevenshteinReference(Span<CodePoint> a, Span<CodePoint> b);

// Bit-parallel (Myers 1999, Hyyrö's global-distance form) with the shorter
// string as the pattern: O(max(|a|, |b|)) word operations.  Requires
// min(|a|, |b|) <= kMyersMaxLength; returns -1 otherwise.
int32_t LevenshteinMyers(Span<CodePoint> a, Span<CodePoint> b);

// Banded DP: the exact distance when it is <= threshold, else threshold + 1.
// O((2 threshold + 1) max(|a|, |b|)) time, O(min(|a|, |b|)) memory.
// threshold must be >= 0.
int32_t LevenshteinBanded(Span<CodePoint> a, Span<CodePoint> b, int32_t threshold);

// The distance capped at max_distance + 1 (no cap when max_distance < 0):
// Myers when the shorter string has <= kMyersMaxLength code points, else
// banded DP with doubling thresholds (16, 32, ... up to the cap or the
// longer length).  What batch verification computes, on CPU and GPU.
int32_t Levenshtein(Span<CodePoint> a, Span<CodePoint> b, int32_t max_distance = -1);

// The same without a cap, polling cancel about every millisecond of work:
// Cancelled when it asked to stop.
Status Levenshtein(Span<CodePoint> a, Span<CodePoint> b, const CancelCheck& cancel,
                   int32_t* distance);

// ---- Batch verification --------------------------------------------------------

// Strings as code points in CSR form.
struct CodePointStrings {
  std::vector<int64_t> offsets{0};
  std::vector<CodePoint> code_points;

  int32_t size() const { return static_cast<int32_t>(offsets.size() - 1); }
  Span<CodePoint> Get(int32_t i) const {
    return Span<CodePoint>(code_points.data() + offsets[static_cast<std::size_t>(i)],
                           static_cast<std::size_t>(offsets[static_cast<std::size_t>(i) + 1] -
                                                    offsets[static_cast<std::size_t>(i)]));
  }
  void Add(Span<CodePoint> s);
  Status AddUtf8(const char* data, std::size_t size);
};

// Queries, and per query a list of candidate strings: query q's candidates
// are candidates[candidate_offsets[q] .. candidate_offsets[q + 1]).
struct EditDistanceBatch {
  CodePointStrings queries;
  CodePointStrings candidates;
  std::vector<int64_t> candidate_offsets{0};  // queries.size() + 1 entries
  // Empty, or one cap per query (< 0: none): distances above the cap are
  // reported as cap + 1.
  std::vector<int32_t> max_distance;
};

// Offsets monotone and consistent, no string longer than 2^30 code points.
Status ValidateEditDistanceBatch(const EditDistanceBatch& batch);

// distances[j] = Levenshtein(query of j, candidates[j], its query's cap), on
// up to `threads` threads (0: hardware concurrency).  Worker threads run with
// every signal blocked and no exception leaves this function.  cancel is
// polled before each chunk of 64 pairs (Status::Cancelled()).
Status CpuEditDistances(const EditDistanceBatch& batch, int32_t threads,
                        std::vector<int32_t>* distances,
                        const CancelCheck& cancel = CancelCheck());

// ---- Top-k certificate (Algorithm 2, Theorem 5.2) ------------------------------

// What is known about one candidate (a string the engine returned).
struct CandidateBound {
  int32_t count = 0;     // set count |K(q) ∩ K(s)|
  int32_t length = 0;    // |s| in code points
  int32_t distance = 0;  // exact ed(q, s) when exact, else a known lower bound (or 0)
  bool exact = false;
};

struct TopKCertificateInput {
  int32_t k = 1;
  int32_t n = 3;
  int32_t query_length = 0;  // code points
  int32_t query_lost = 0;    // the query's NgramKeywords::lost
  Span<CandidateBound> candidates;
  // An upper bound on the set count of every string that is NOT a candidate
  // (the count of the K-th candidate when the engine returned its top K by
  // count; 0 when it returned every string with a count >= 1), or -1 when
  // there is no such string (every string is a candidate).
  int32_t unseen_count_bound = -1;
};

struct TopKCertificate {
  bool exact = false;
  int32_t verified = 0;          // candidates with an exact distance
  int32_t kth_distance = -1;     // k-th smallest exact distance; -1 with fewer than k
  int32_t open_lower_bound = INT32_MAX;    // min lower bound over inexact candidates
  int32_t unseen_lower_bound = INT32_MAX;  // lower bound for every non-candidate
};

// The statement.  Let d_k be the k-th smallest exact distance among the
// candidates.  Each inexact candidate j has lower bound
//   max(distance_j, EditDistanceLowerBound(query_length, length_j, count_j + query_lost, n)),
// every non-candidate has lower bound
//   UnseenLowerBound(query_length, unseen_count_bound + query_lost, n).
// The certificate is exact when
//   (a) at least k candidates are exact and every lower bound above is >= d_k:
//       then the k exact candidates with the smallest distances are a true
//       top-k by edit distance (ties arbitrary: their distance multiset equals
//       the brute-force one); or
//   (b) fewer than k candidates are exact, none is inexact and there is no
//       non-candidate: every string was verified.
// Theorem 5.2 is (a) with the paper's unpadded bound and a strict inequality.
// InvalidArgument for k < 1, n outside [2, 8], or negative lengths/counts.
Status CertifyTopK(const TopKCertificateInput& input, TopKCertificate* out);

// Algorithm 2 for one query, generalised to top-k and given lengths: visits
// the candidates in the given order (normally count descending) and
// computes ed(q, s_j) unless EditDistanceLowerBound(|q|, |s_j|,
// counts[j] + query_lost, n) >= the current k-th smallest distance (count
// and length filters); distances are computed capped at that k-th distance,
// so a capped one is recorded as an inexact lower bound.  Fills one
// CandidateBound per candidate, ready for CertifyTopK.
Status VerifyTopKCandidates(Span<CodePoint> query, const CodePointStrings& candidates,
                            Span<int32_t> counts, int32_t k, int32_t n, int32_t query_lost,
                            std::vector<CandidateBound>* out);

// ---- Batch verification with filters and certificates (genie_similar) ------

// One round of the paper's pipeline for a batch of queries: each query's
// candidates (its top K strings by set count) with their counts, and for
// each query an upper bound on the set count of every string that is not a
// candidate (TopKCertificateInput::unseen_count_bound).
struct SimilarBatch {
  int32_t n = 3;
  int32_t k = 1;
  CodePointStrings queries;
  CodePointStrings candidates;
  std::vector<int64_t> candidate_offsets{0};  // queries.size() + 1 entries
  std::vector<int32_t> candidate_counts;      // one per candidate
  std::vector<int32_t> unseen_count_bound;    // one per query
};

struct SimilarVerdict {
  std::vector<CandidateBound> candidates;      // one per candidate
  std::vector<TopKCertificate> certificates;   // one per query
  std::vector<int32_t> query_lost;             // one per query: NgramKeywords::lost
  int64_t distances_computed = 0;              // pairs sent to the distance function
};

// Computes the distances of a batch of (query, candidate) pairs, capped as
// EditDistanceBatch::max_distance says: CpuEditDistances or GpuEditDistances.
using EditDistanceFunction =
    std::function<Status(const EditDistanceBatch& batch, std::vector<int32_t>* distances)>;

// Algorithm 2's count and length filters, in two batched passes so that a
// GPU sees many pairs at once.  Pass 1: per query, the k candidates with the
// smallest lower bound (EditDistanceLowerBound with count + lost(q)) are
// verified exactly; the largest of their distances, D, bounds the k-th
// distance from above.  Pass 2: the other candidates whose lower bound is
// below D are verified with the cap D (a capped one becomes an inexact
// lower bound D + 1); the rest keep their lower bound, inexact.  Then
// CertifyTopK gives each query's certificate.  cancel is polled every 64
// queries of its own loops and before each pass (the distance function polls
// on its own); when it asks, Status::Cancelled() is returned.
Status VerifySimilarBatch(const SimilarBatch& batch, const EditDistanceFunction& distances,
                          SimilarVerdict* out, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

// Binary codes (genie_bit_ops on bit(n)): the exact k nearest codes by
// Hamming distance, the number of bits in which two codes differ
// (bit_count(a # b) in SQL).
//
// A code of b bits is held as its bit string's ceil(b / 8) bytes, first
// bit in the high-order bit of the first byte (the layout of PostgreSQL's
// bit(n) and of numpy.packbits), read as WordsForBits(b) 64-bit words; the
// bits that are not the code's (the low-order ones of a last partial byte,
// the bytes beyond) are zero.  The distance of two codes is then the
// popcount of their words' XOR.
//
// Distances are whole numbers in [0, b], so a query's k nearest need no
// sort and no heap: a histogram of its distances gives the k-th distance d,
// and the codes nearer than d with the first codes at d by object id are
// the k rows, ordered by (distance, object id) as every genie scan orders
// its ties.  The GPU scan (gpu/src/code_scan.cu) selects the same rows.
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/host_array.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

// The longest code: the scans keep one uint16 distance per code and query,
// with kNoDistance beyond every distance.
constexpr int32_t kMaxCodeBits = 65520;
// A distance no code has: what an excluded code (dead, NULL) is given.
constexpr uint16_t kNoDistance = 0xFFFF;

inline int32_t WordsForBits(int32_t bits) { return (bits + 63) / 64; }

// The bits of a code's last word that are the code's (the rest must be zero).
uint64_t LastWordMask(int32_t bits);

// sum over words of popcount(a[i] ^ b[i]).
int32_t HammingDistance(const uint64_t* a, const uint64_t* b, int32_t words);

// InvalidArgument unless bits is in [1, kMaxCodeBits] and every one of
// count codes (WordsForBits(bits) words each) has the bits that are not
// the code's zero; what names them in the message.
Status CheckCodes(const uint64_t* codes, int64_t count, int32_t bits, const char* what);

// Every code of an index by object id.  A NULL row keeps a zero code and
// is excluded by the caller.
struct CodeSet {
  int32_t bits = 0;
  int32_t words = 0;
  int32_t n = 0;
  HostArray<uint64_t> values;  // n * words

  int32_t size() const { return n; }
  const uint64_t* row(int32_t id) const {
    return values.data() + static_cast<std::size_t>(id) * static_cast<std::size_t>(words);
  }
};

// Takes n codes of `bits` bits (WordsForBits(bits) words each), checked by
// CheckCodes; InvalidArgument for a size that is not n * words.
Status BuildCodeSet(int32_t bits, int32_t n, HostArray<uint64_t> values, CodeSet* out);

struct CodeScanRequest {
  int32_t n_queries = 0;
  const uint64_t* queries = nullptr;  // n_queries codes of the set's layout
  int32_t k = 1;
  // Empty, or one per code of the set: nonzero = not a candidate (dead, NULL).
  Span<uint8_t> excluded;
};

// Per query q: rows [offsets[q], offsets[q + 1]) by (distance, object id)
// ascending, at most k (fewer when fewer codes are candidates).
struct CodeScanResult {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
  std::vector<int32_t> distances;
};

// k >= 1, queries present and checked, excluded empty or of the set's size.
Status ValidateCodeScanRequest(const CodeSet& set, const CodeScanRequest& request);

// The k-th distance of a histogram (counts[d] codes at distance d, d in
// [0, bits]): the smallest d with at least k codes at d or nearer, and
// how many codes lie strictly nearer.  When fewer than k codes are
// counted, d is bits and every code is taken.
struct KthDistance {
  int32_t distance = 0;
  int64_t nearer = 0;
  int64_t at = 0;  // the codes taken at `distance`: k - nearer, or all of them
};
KthDistance FindKthDistance(const uint32_t* counts, int32_t bits, int32_t k);

// One query's rows from its distances (kNoDistance: not a candidate) and
// their histogram: the codes nearer than the k-th distance and the first
// codes at it by id, appended to out by (distance, id).
void SelectNearestCodes(const uint16_t* distances, int32_t n, const uint32_t* counts, int32_t bits,
                        int32_t k, CodeScanResult* out);

// The exact scan on up to `threads` host threads (0: every core): blocks of
// queries against stripes of codes, each code read once per block, with
// the hardware popcount where the processor has it.  cancel is polled
// every few thousand codes per thread.
Status CpuCodeScan(const CodeSet& set, const CodeScanRequest& request, int32_t threads,
                   CodeScanResult* out, const CancelCheck& cancel = CancelCheck());

// Re-ranking (the EWH mode): per query q, the candidates
// candidates[candidate_offsets[q] .. candidate_offsets[q + 1]) by Hamming
// distance, the best k by (distance, id).  Candidates out of range or
// excluded are skipped; duplicates count once.
Status RerankCodes(const CodeSet& set, const uint64_t* queries, int32_t n_queries, int32_t k,
                   Span<int64_t> candidate_offsets, Span<int32_t> candidates, Span<uint8_t> excluded,
                   int32_t threads, CodeScanResult* out, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

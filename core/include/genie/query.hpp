// Query batches and their compilation into List Array slices.
#pragma once
#include <cstdint>
#include <vector>

#include "genie/types.h"
#include "genie/cancel.hpp"
#include "genie/index.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

struct KeywordRange {
  int32_t lo;
  int32_t hi;  // inclusive
};

// An owning batch of queries in CSR form (see genie_query_batch).
struct QueryBatch {
  std::vector<int64_t> query_offsets{0};
  std::vector<int64_t> item_offsets{0};
  std::vector<int32_t> item_weights;
  std::vector<KeywordRange> ranges;

  int32_t num_queries() const { return static_cast<int32_t>(query_offsets.size() - 1); }
  // Appends a query whose items are single keywords of weight 1 (GENIE's LSH form),
  // one item per distinct keyword (duplicates count once, as in genie_match_count_int4).
  void AddKeywordQuery(Span<int32_t> keywords);
  // Starts a new query; then AddItem adds items to it.
  void BeginQuery();
  void AddItem(Span<KeywordRange> item_ranges, int32_t weight = 1);

  // A C view of the batch.  It points into the batch (ranges split into the
  // lo/hi arrays below), so it is valid until the batch is modified; calling
  // View again on an unmodified batch keeps earlier views valid.  Two threads
  // must not call View on one batch at once.
  genie_query_batch View() const;

  // Storage for View(): genie_query_batch wants lo and hi as separate
  // arrays.  Not part of the batch's value.
  mutable std::vector<int32_t> view_lo_;
  mutable std::vector<int32_t> view_hi_;
};

// Checks a C batch: offsets monotone, lo <= hi, weights >= 1.
Status ValidateBatch(const genie_query_batch& batch);

// Checks n_queries and both offsets arrays (from 0, monotone), not the
// ranges and weights: enough to cut the batch into sub-batches anywhere
// (SubBatch) when CompileBatch then checks each whole.  The full check is a
// pass over every range and weight before any work; the GPU engine's
// pipeline leaves those to each piece's compilation.
Status ValidateBatchOffsets(const genie_query_batch& batch);

// A contiguous slice of the List Array whose postings each add weight to
// their object's score.  Slices are at most the index's split_length long.
struct ListSlice {
  int64_t begin;
  int64_t end;
  int32_t weight;
  // The keyword list holding position `begin` (an index into keywords()),
  // or -1 when not known (a later slice of a split span): spares the GPU
  // engine a search when it cuts slices at lists.
  int32_t list = -1;
};

// The batch compiled against one index: per query, the List Array slices to
// scan and a bound on the score any object can reach (sizes the counters).
struct CompiledBatch {
  std::vector<int64_t> query_slice_offsets{0};  // num_queries + 1
  std::vector<ListSlice> slices;
  std::vector<int64_t> max_score;               // per query
  int64_t total_postings = 0;                   // postings scanned by the batch

  int32_t num_queries() const { return static_cast<int32_t>(query_slice_offsets.size() - 1); }
};

// Overlapping or adjacent ranges of one item are merged first (an item is a
// set).  The same keyword in two items counts in both.  Fails with
// GENIE_INVALID_ARGUMENT when a query's score bound exceeds INT32_MAX.
Status CompileBatch(const InvertedIndex& index, const genie_query_batch& batch, CompiledBatch* out);
// The same with slices cut at split_length postings instead of the index's
// (kUnsplitSlices: spans whole, for a consumer that cuts them itself, as the
// tiled GPU matcher does at its tiles).
constexpr int64_t kUnsplitSlices = INT64_MAX;
Status CompileBatch(const InvertedIndex& index, const genie_query_batch& batch, CompiledBatch* out,
                    int64_t split_length);

// Queries [q_begin, q_end) of a batch whose offsets are checked
// (ValidateBatchOffsets) as a batch of their own: its offsets rebased into
// storage, its weights and ranges pointing into batch.
struct SubBatchStorage {
  std::vector<int64_t> query_offsets;
  std::vector<int64_t> item_offsets;
};
genie_query_batch SubBatch(const genie_query_batch& batch, int32_t q_begin, int32_t q_end,
                           SubBatchStorage* storage);

// CompileBatch on up to `threads` threads (0: every core), chunks of
// queries compiled apart and joined: the same result.  A query of many
// items (EWH asks thousands of buckets) costs a cache miss or two per
// item in the keyword directory, so a large batch's compilation is worth
// spreading; cancel is polled between chunks.
Status CompileBatchParallel(const InvertedIndex& index, const genie_query_batch& batch, int32_t threads,
                            CompiledBatch* out, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

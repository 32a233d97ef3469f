#include "genie/query.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <new>
#include <string>

#include "genie/parallel.hpp"

namespace genie {

void QueryBatch::AddKeywordQuery(Span<int32_t> keywords) {
  // Duplicates count once, as in genie_match_count_int4, so that an index
  // scan scores exactly like a sequential scan of the same query.
  std::vector<int32_t> distinct(keywords.begin(), keywords.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  BeginQuery();
  for (int32_t keyword : distinct) {
    KeywordRange range{keyword, keyword};
    AddItem(Span<KeywordRange>(&range, 1), 1);
  }
}

void QueryBatch::BeginQuery() { query_offsets.push_back(query_offsets.back()); }

void QueryBatch::AddItem(Span<KeywordRange> item_ranges, int32_t weight) {
  // An item added before any BeginQuery starts the first query rather than
  // corrupting query_offsets[0].
  if (query_offsets.size() == 1) BeginQuery();
  ranges.insert(ranges.end(), item_ranges.begin(), item_ranges.end());
  item_offsets.push_back(static_cast<int64_t>(ranges.size()));
  item_weights.push_back(weight);
  ++query_offsets.back();
}

genie_query_batch QueryBatch::View() const {
  // genie_query_batch wants lo and hi as two arrays, ranges stores pairs.
  view_lo_.resize(ranges.size());
  view_hi_.resize(ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    view_lo_[i] = ranges[i].lo;
    view_hi_[i] = ranges[i].hi;
  }
  genie_query_batch view{};
  view.n_queries = num_queries();
  view.query_offsets = query_offsets.data();
  view.item_offsets = item_offsets.data();
  // Weights are optional in the C form; a batch filled through AddItem always
  // has one per item, one filled by hand may have none.
  view.item_weights = item_weights.empty() ? nullptr : item_weights.data();
  view.ranges_lo = view_lo_.data();
  view.ranges_hi = view_hi_.data();
  return view;
}

namespace {

// Checks a CSR offsets array of count + 1 entries: starts at 0, never
// decreases.  *last receives its final entry.
Status CheckOffsets(const int64_t* offsets, int64_t count, const char* name, int64_t* last) {
  *last = 0;
  if (offsets == nullptr) {
    if (count == 0) return Status::Ok();
    return Status::InvalidArgument(std::string(name) + " is NULL");
  }
  if (offsets[0] != 0) {
    return Status::InvalidArgument(std::string(name) + "[0] must be 0, got " +
                                   std::to_string(offsets[0]));
  }
  for (int64_t i = 0; i < count; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return Status::InvalidArgument(std::string(name) + " must not decrease: " + name + "[" +
                                     std::to_string(i + 1) + "] = " +
                                     std::to_string(offsets[i + 1]) + " < " + name + "[" +
                                     std::to_string(i) + "] = " + std::to_string(offsets[i]));
    }
  }
  *last = offsets[count];
  return Status::Ok();
}

// ValidateBatchOffsets, with the number of items and of ranges.
Status CheckBatchOffsets(const genie_query_batch& batch, int64_t* n_items, int64_t* n_ranges) {
  *n_items = *n_ranges = 0;
  if (batch.n_queries < 0) {
    return Status::InvalidArgument("n_queries must be >= 0, got " +
                                   std::to_string(batch.n_queries));
  }
  GENIE_RETURN_IF_ERROR(CheckOffsets(batch.query_offsets, batch.n_queries, "query_offsets", n_items));
  return CheckOffsets(batch.item_offsets, *n_items, "item_offsets", n_ranges);
}

}  // namespace

Status ValidateBatchOffsets(const genie_query_batch& batch) {
  int64_t n_items = 0, n_ranges = 0;
  return CheckBatchOffsets(batch, &n_items, &n_ranges);
}

Status ValidateBatch(const genie_query_batch& batch) {
  int64_t n_items = 0, n_ranges = 0;
  GENIE_RETURN_IF_ERROR(CheckBatchOffsets(batch, &n_items, &n_ranges));
  if (n_ranges > 0 && (batch.ranges_lo == nullptr || batch.ranges_hi == nullptr)) {
    return Status::InvalidArgument("ranges_lo/ranges_hi is NULL but the batch has " +
                                   std::to_string(n_ranges) + " ranges");
  }
  for (int64_t r = 0; r < n_ranges; ++r) {
    if (batch.ranges_lo[r] > batch.ranges_hi[r]) {
      return Status::InvalidArgument("range " + std::to_string(r) + " is empty: lo " +
                                     std::to_string(batch.ranges_lo[r]) + " > hi " +
                                     std::to_string(batch.ranges_hi[r]));
    }
  }
  if (batch.item_weights != nullptr) {
    for (int64_t i = 0; i < n_items; ++i) {
      if (batch.item_weights[i] < 1) {
        return Status::InvalidArgument("item " + std::to_string(i) + " has weight " +
                                       std::to_string(batch.item_weights[i]) +
                                       "; weights must be at least 1");
      }
    }
  }
  return Status::Ok();
}

namespace {

// The largest sum of weights over one keyword position of (position,
// weight) pairs: open addressing, linear probing, in a table kept by the
// caller between queries.
int64_t MaxSummedWeight(const std::vector<std::pair<int64_t, int64_t>>& pairs,
                        std::vector<std::pair<int64_t, int64_t>>* table) {
  std::size_t capacity = 16;
  while (capacity < pairs.size() * 2) capacity *= 2;
  table->assign(capacity, {-1, 0});
  const std::size_t mask = capacity - 1;
  int64_t best = 0;
  for (const auto& p : pairs) {
    std::size_t at = static_cast<std::size_t>(static_cast<uint64_t>(p.first) * 0x9E3779B97F4A7C15ULL >> 20) & mask;
    while ((*table)[at].first != -1 && (*table)[at].first != p.first) at = (at + 1) & mask;
    (*table)[at].first = p.first;
    (*table)[at].second += p.second;
    best = std::max(best, (*table)[at].second);
  }
  return best;
}

}  // namespace

Status CompileBatch(const InvertedIndex& index, const genie_query_batch& batch,
                    CompiledBatch* out) {
  return CompileBatch(index, batch, out, static_cast<int64_t>(index.split_length()));
}

Status CompileBatch(const InvertedIndex& index, const genie_query_batch& batch,
                    CompiledBatch* out, int64_t split_length) {
  if (split_length < 1) return Status::InvalidArgument("split_length must be at least 1");
  if (out == nullptr) return Status::InvalidArgument("compiled batch output is NULL");
  GENIE_RETURN_IF_ERROR(ValidateBatch(batch));
  try {
    CompiledBatch compiled;
    const auto n_queries = static_cast<std::size_t>(batch.n_queries);
    compiled.query_slice_offsets.reserve(n_queries + 1);
    compiled.max_score.reserve(n_queries);
    // One slice per range is the usual case (a keyword's list, shorter than
    // split_length): reserving it saves the vector's regrowth copies.
    if (n_queries > 0 && batch.item_offsets != nullptr) {  // (validated: offsets start at 0)
      compiled.slices.reserve(static_cast<std::size_t>(batch.item_offsets[batch.query_offsets[n_queries]]));
    }

    const int64_t split = split_length;
    const int64_t bound_cap = index.max_object_keywords();
    const Span<int64_t> list_offsets = index.keyword_offsets();
    std::vector<KeywordRange> merged;
    // (keyword position, weight change) at the ends of each covered span
    std::vector<std::pair<int64_t, int64_t>> weight_events;
    // (keyword position, weight) of the ranges that cover a few keywords
    std::vector<std::pair<int64_t, int64_t>> single_keywords;
    std::vector<std::pair<int64_t, int64_t>> weight_table;
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

    for (std::size_t q = 0; q < n_queries; ++q) {
      int64_t bound = 0;  // saturates just above INT32_MAX
      weight_events.clear();
      single_keywords.clear();
      bool have_hint = false;  // KeywordSpanFrom: where the last range's keywords began
      int32_t hint_lo = 0;
      std::size_t hint_at = 0;
      for (int64_t item = batch.query_offsets[q]; item < batch.query_offsets[q + 1]; ++item) {
        const int64_t r_begin = batch.item_offsets[item], r_end = batch.item_offsets[item + 1];
        const int32_t weight = batch.item_weights ? batch.item_weights[item] : 1;

        merged.clear();
        for (int64_t r = r_begin; r < r_end; ++r) {
          merged.push_back({batch.ranges_lo[r], batch.ranges_hi[r]});
        }
        if (merged.size() > 1 &&  // most items are one range (a keyword), many come sorted
            !std::is_sorted(merged.begin(), merged.end(),
                            [](const KeywordRange& a, const KeywordRange& b) { return a.lo < b.lo; })) {
          std::sort(merged.begin(), merged.end(),
                    [](const KeywordRange& a, const KeywordRange& b) { return a.lo < b.lo; });
        }
        std::size_t kept = 0;
        for (std::size_t r = 0; r < merged.size(); ++r) {
          // 64-bit so that hi == INT32_MAX cannot wrap when testing adjacency.
          if (kept > 0 && static_cast<int64_t>(merged[r].lo) <=
                              static_cast<int64_t>(merged[kept - 1].hi) + 1) {
            merged[kept - 1].hi = std::max(merged[kept - 1].hi, merged[r].hi);
          } else {
            merged[kept++] = merged[r];
          }
        }
        merged.resize(kept);

        // A merged range is one contiguous span of the List Array (keywords
        // are sorted), cut into slices of at most split_length postings; a
        // range over many short lists thus costs few slices.  Disjoint
        // ascending ranges give disjoint ascending spans, and spans that touch
        // (only keywords the index lacks between them) are joined.
        int64_t covered = 0;
        int64_t span_begin = 0, span_end = 0;
        int32_t span_list = -1;  // the list the span starts in
        auto emit_span = [&]() {
          for (int64_t b = span_begin; b < span_end; b = b + std::min(split, span_end - b)) {
            compiled.slices.push_back(
                {b, b + std::min(split, span_end - b), weight, b == span_begin ? span_list : -1});
          }
          compiled.total_postings += span_end - span_begin;
        };
        for (const KeywordRange& range : merged) {
          // Ranges of one item ascend, and so usually do a query's items:
          // search on from the last span unless the range starts below it.
          const bool onward = have_hint && range.lo >= hint_lo;
          const auto [first, last] = onward ? index.KeywordSpanFrom(hint_at, range.lo, range.hi)
                                            : index.KeywordSpan(range.lo, range.hi);
          have_hint = true;
          hint_lo = range.lo;
          hint_at = first;
          if (first == last) continue;
          covered += static_cast<int64_t>(last - first);
          if (last - first <= 8) {  // a few keywords (ranges of one item merge neighbours)
            for (std::size_t at = first; at < last; ++at) single_keywords.push_back({static_cast<int64_t>(at), weight});
          } else {
            weight_events.push_back({static_cast<int64_t>(first), weight});
            weight_events.push_back({static_cast<int64_t>(last), -static_cast<int64_t>(weight)});
          }
          const int64_t b = list_offsets[first], e = list_offsets[last];
          if (span_end > span_begin && b == span_end) {
            span_end = e;
          } else {
            if (span_end > span_begin) emit_span();
            span_begin = b;
            span_end = e;
            span_list = first <= static_cast<std::size_t>(kInt32Max) ? static_cast<int32_t>(first) : -1;
          }
        }
        if (span_end > span_begin) emit_span();

        // weight < 2^31 and the min below < 2^31, so the product fits; the
        // sum saturates, so it never wraps.
        bound = std::min(bound + static_cast<int64_t>(weight) * std::min(covered, bound_cap),
                         kInt32Max + 1);
      }
      // A second bound: an object has at most max_object_keywords keywords,
      // each worth at most the total weight of the items that contain it.
      // It is the tighter one for heavily weighted disjoint items.
      // Items over ascending disjoint keywords (LSH, most keyword sets) give
      // their events in order already: the check is linear, the sort is not.
      int64_t keyword_weight = 0, max_keyword_weight = 0;
      if (weight_events.empty()) {
        // items of single keywords (LSH, EWH's buckets): each keyword's
        // weight summed in a hash table, where sorting thousands of events
        // would cost more than the rest of the compilation
        max_keyword_weight = MaxSummedWeight(single_keywords, &weight_table);
      } else {
        for (const auto& one : single_keywords) {
          weight_events.push_back({one.first, one.second});
          weight_events.push_back({one.first + 1, -one.second});
        }
        if (!std::is_sorted(weight_events.begin(), weight_events.end())) {
          std::sort(weight_events.begin(), weight_events.end());
        }
        for (const auto& event : weight_events) {
          keyword_weight += event.second;
          max_keyword_weight = std::max(max_keyword_weight, keyword_weight);
        }
      }
      if (max_keyword_weight <= kInt32Max) {
        bound = std::min(bound, max_keyword_weight * bound_cap);
      }
      if (bound > kInt32Max) {
        return Status::InvalidArgument(
            "query " + std::to_string(q) + ": its score bound (at least " +
            std::to_string(bound) + ") exceeds 2147483647; lower the item weights");
      }
      compiled.max_score.push_back(bound);
      compiled.query_slice_offsets.push_back(static_cast<int64_t>(compiled.slices.size()));
    }
    *out = std::move(compiled);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory compiling a batch of " +
                               std::to_string(batch.n_queries) + " queries");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("batch compilation failed: ") + e.what());
  }
}

genie_query_batch SubBatch(const genie_query_batch& batch, int32_t q_begin, int32_t q_end,
                           SubBatchStorage* storage) {
  const int64_t i0 = batch.query_offsets[q_begin], i1 = batch.query_offsets[q_end];
  // item_offsets may be NULL when the batch has no items (ValidateBatch)
  const int64_t r0 = batch.item_offsets != nullptr ? batch.item_offsets[i0] : 0;
  storage->query_offsets.resize(static_cast<std::size_t>(q_end - q_begin) + 1);
  for (int64_t j = 0; j <= q_end - q_begin; ++j)
    storage->query_offsets[static_cast<std::size_t>(j)] = batch.query_offsets[q_begin + j] - i0;
  if (batch.item_offsets == nullptr) {
    storage->item_offsets.assign(1, 0);  // (no items: i1 == i0)
  } else {
    storage->item_offsets.resize(static_cast<std::size_t>(i1 - i0) + 1);
    for (int64_t j = 0; j <= i1 - i0; ++j)
      storage->item_offsets[static_cast<std::size_t>(j)] = batch.item_offsets[i0 + j] - r0;
  }
  genie_query_batch sub{};
  sub.n_queries = q_end - q_begin;
  sub.query_offsets = storage->query_offsets.data();
  sub.item_offsets = storage->item_offsets.data();
  sub.item_weights = batch.item_weights ? batch.item_weights + i0 : nullptr;
  sub.ranges_lo = batch.ranges_lo ? batch.ranges_lo + r0 : nullptr;
  sub.ranges_hi = batch.ranges_hi ? batch.ranges_hi + r0 : nullptr;
  return sub;
}

Status CompileBatchParallel(const InvertedIndex& index, const genie_query_batch& batch, int32_t threads,
                            CompiledBatch* out, const CancelCheck& cancel) {
  const int32_t workers = ResolveThreads(threads);
  const int32_t nq = batch.n_queries;
  // small batches: one thread is quicker than handing work out
  if (workers <= 1 || nq < 32) return CompileBatch(index, batch, out);
  if (out == nullptr) return Status::InvalidArgument("compiled batch output is NULL");
  GENIE_RETURN_IF_ERROR(ValidateBatch(batch));
  const int32_t per_chunk = std::max<int32_t>(8, (nq + workers * 4 - 1) / (workers * 4));
  const int32_t n_chunks = (nq + per_chunk - 1) / per_chunk;
  std::vector<CompiledBatch> chunks(static_cast<std::size_t>(n_chunks));
  Status status = ParallelFor(
      n_chunks, workers,
      [&](int64_t c) -> Status {
        const int32_t q0 = static_cast<int32_t>(c) * per_chunk, q1 = std::min(nq, q0 + per_chunk);
        SubBatchStorage storage;
        return CompileBatch(index, SubBatch(batch, q0, q1, &storage), &chunks[static_cast<std::size_t>(c)]);
      },
      cancel);
  // an invalid query is reported with the batch's own query number
  if (status.code() == GENIE_INVALID_ARGUMENT) return CompileBatch(index, batch, out);
  GENIE_RETURN_IF_ERROR(status);
  try {
    CompiledBatch joined;
    std::size_t slices = 0;
    for (const CompiledBatch& chunk : chunks) slices += chunk.slices.size();
    joined.slices.reserve(slices);
    joined.max_score.reserve(static_cast<std::size_t>(nq));
    joined.query_slice_offsets.reserve(static_cast<std::size_t>(nq) + 1);
    for (const CompiledBatch& chunk : chunks) {
      const int64_t base = static_cast<int64_t>(joined.slices.size());
      joined.slices.insert(joined.slices.end(), chunk.slices.begin(), chunk.slices.end());
      joined.max_score.insert(joined.max_score.end(), chunk.max_score.begin(), chunk.max_score.end());
      for (std::size_t j = 1; j < chunk.query_slice_offsets.size(); ++j)
        joined.query_slice_offsets.push_back(base + chunk.query_slice_offsets[j]);
      joined.total_postings += chunk.total_postings;
    }
    *out = std::move(joined);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory compiling a batch of " + std::to_string(nq) + " queries");
  }
  return Status::Ok();
}

}  // namespace genie

// A call's host work (the engine's host stage): its queries compiled
// against the index into List Array slices (CompileBatch, in chunks on the
// host's threads), then prepared for the device: per query the score bound
// and, for the tiled matcher, its list runs.  Plain C++ beside the driver
// (gpu_engine.cpp); a resident tiled call does it before it takes the
// device (GpuEngine::RunHostStage), so that another call's kernels run
// meanwhile.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "genie/gallop.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"

namespace genie {
namespace gpu {

Status CompileQueries(const InvertedIndex& index, const genie_query_batch& batch,
                      int64_t split_length, int threads, const CancelCheck& cancel,
                      CompiledQueries* out) {
  GENIE_RETURN_IF_ERROR(ValidateBatch(batch));
  return CompileQueryRange(index, batch, 0, batch.n_queries, split_length, threads, cancel, out);
}

Status CompileQueryRange(const InvertedIndex& index, const genie_query_batch& batch,
                         int32_t q_begin, int32_t q_end, int64_t split_length, int threads,
                         const CancelCheck& cancel, CompiledQueries* out) {
  const int64_t nq = q_end - q_begin;
  const int64_t ranges = batch.item_offsets != nullptr && batch.query_offsets != nullptr
                             ? batch.item_offsets[batch.query_offsets[q_end]] -
                                   batch.item_offsets[batch.query_offsets[q_begin]]
                             : nq;
  // A small batch compiles on the calling thread: waking the pool's threads
  // costs tens of microseconds, more than its whole compilation.
  if (ranges <= kInlineHostWork) threads = 1;
  const int64_t per_chunk = QueriesPerTask(nq, ranges, threads);
  const int64_t n_chunks = (nq + per_chunk - 1) / per_chunk;
  out->chunks.assign(static_cast<std::size_t>(n_chunks), CompiledBatch());
  Status status = ParallelFor(n_chunks, threads, [&](int64_t c) -> Status {
    const int64_t q0 = q_begin + c * per_chunk, q1 = std::min<int64_t>(q_end, q0 + per_chunk);
    SubBatchStorage storage;
    const genie_query_batch sub = SubBatch(batch, static_cast<int32_t>(q0), static_cast<int32_t>(q1), &storage);
    return CompileBatch(index, sub, &out->chunks[static_cast<std::size_t>(c)], split_length);
  }, cancel);
  if (!status.ok()) {
    // Report the error with the batch's own query numbers.
    if (status.code() == GENIE_INVALID_ARGUMENT) {
      CompiledBatch whole;
      Status exact = CompileBatch(index, batch, &whole);
      if (!exact.ok()) return exact;
    }
    return status;
  }
  out->first.resize(static_cast<std::size_t>(nq));
  out->count.resize(static_cast<std::size_t>(nq));
  out->bound.resize(static_cast<std::size_t>(nq));
  int64_t q = 0;
  for (const CompiledBatch& chunk : out->chunks) {
    for (int32_t j = 0; j < chunk.num_queries(); ++j, ++q) {
      const int64_t b = chunk.query_slice_offsets[static_cast<std::size_t>(j)];
      const int64_t e = chunk.query_slice_offsets[static_cast<std::size_t>(j) + 1];
      out->first[static_cast<std::size_t>(q)] = chunk.slices.data() + b;
      out->count[static_cast<std::size_t>(q)] = e - b;
      out->bound[static_cast<std::size_t>(q)] = chunk.max_score[static_cast<std::size_t>(j)];
    }
  }
  return Status::Ok();
}

int64_t QueriesPerTask(int64_t queries, int64_t work, int threads) {
  if (queries <= 0) return 1;
  // A task of more than kMaxTaskWork ranges or slices (about 10 ms of LSH
  // queries) would hold a cancel that long: cancel is checked between tasks.
  constexpr int64_t kMaxTaskWork = int64_t{1} << 16;
  const int64_t at_most = work > kMaxTaskWork ? std::max<int64_t>(1, queries * kMaxTaskWork / work) : queries;
  if (threads <= 1) return at_most;
  // four tasks a thread balance uneven queries; a task of fewer than
  // kMinTaskWork ranges or slices costs more in its own set-up than it
  // gains (LSH queries of 237 keywords: 2 a task; tag queries of 8: 48)
  constexpr int64_t kMinTaskWork = 384;
  const int64_t per_thread = (queries + int64_t{threads} * 4 - 1) / (int64_t{threads} * 4);
  const int64_t by_work = work > 0 ? (queries * kMinTaskWork + work - 1) / work : queries;
  return std::max<int64_t>(1, std::min(at_most, std::max(per_thread, std::min(by_work, queries))));
}

namespace {

// A query's slices, consecutive contiguous slices of equal weight joined
// back into ranges (CompileBatch cuts spans into split_length slices), then
// each range cut at keyword-list boundaries (CompileBatch joins the lists of
// a keyword range into one span): sorted runs of one list each.
// The list holding List Array position b: the last i with offs[i] <= b,
// galloping on from `from` when b is at or past offs[from] (a query's slices
// mostly ascend), else a binary search.
std::size_t ListAt(Span<int64_t> offs, int64_t b, std::size_t from) {
  if (from < offs.size() && offs[from] <= b) {
    const auto it = Gallop(offs.begin() + static_cast<std::ptrdiff_t>(from), offs.end(), b,
                           [](int64_t offset, int64_t v) { return offset <= v; });
    return static_cast<std::size_t>(it - offs.begin()) - 1;
  }
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(offs.begin(), offs.end(), b) - offs.begin());
  return i == 0 ? 0 : i - 1;
}

template <typename Emit>
void ForEachListRun(Span<ListSlice> slices, Span<int64_t> offs, Emit emit) {
  const std::size_t last = slices.size();
  std::size_t list = 0;
  for (std::size_t s = 0; s < last;) {
    const ListSlice& first = slices[s];
    int64_t b = first.begin, e = first.end;
    const int32_t w = first.weight;
    for (++s; s < last; ++s) {
      const ListSlice& next = slices[s];
      if (next.begin != e || next.weight != w) break;
      e = next.end;
    }
    if (b >= e) continue;
    // An empty list before the span's first keyword shares its offset, so
    // the recorded list is taken only when it really starts at or before b.
    std::size_t i = first.list >= 0 && static_cast<std::size_t>(first.list) + 1 < offs.size() &&
                            offs[static_cast<std::size_t>(first.list)] <= b &&
                            offs[static_cast<std::size_t>(first.list) + 1] > b
                        ? static_cast<std::size_t>(first.list)
                        : ListAt(offs, b, list);
    while (b < e) {
      while (i + 1 < offs.size() && offs[i + 1] <= b) ++i;
      const int64_t list_end = i + 1 < offs.size() ? offs[i + 1] : e;
      const int64_t piece_end = std::min(e, list_end);
      emit(Segment{b, piece_end, static_cast<int64_t>(i), w});
      b = piece_end;
    }
    list = i;
  }
}

}  // namespace

Status Prepare(const CompiledQueries& cq, Span<int64_t> offs, bool keep_runs, int threads,
               const CancelCheck& cancel, Prepared* out) {
  const int32_t nq = cq.num_queries();
  int64_t slices = 0;
  for (int64_t c : cq.count) slices += c;
  if (slices <= kInlineHostWork) threads = 1;  // as in CompileQueryRange
  out->max_score.assign(static_cast<std::size_t>(nq), 0);
  out->num_runs.assign(static_cast<std::size_t>(nq), 0);
  out->runs = FlatRuns();
  const int64_t per_task = QueriesPerTask(nq, slices, threads);
  const int64_t tasks = (nq + per_task - 1) / per_task;
  // Pass 1: bounds and run counts.
  GENIE_RETURN_IF_ERROR(ParallelFor(tasks, threads, [&](int64_t t) -> Status {
    const int32_t q1 = static_cast<int32_t>(std::min<int64_t>(nq, (t + 1) * per_task));
    for (int32_t q = static_cast<int32_t>(t * per_task); q < q1; ++q) {
      const std::size_t qi = static_cast<std::size_t>(q);
      int64_t sum = 0, runs = 0;
      ForEachListRun(cq.Slices(q), offs, [&](const Segment& seg) {
        sum += seg.weight;
        ++runs;
      });
      out->max_score[qi] = std::min(sum, cq.bound[qi]);
      out->num_runs[qi] = runs;
    }
    return Status::Ok();
  }, cancel));
  if (!keep_runs) return Status::Ok();
  // Pass 2 (tiled): the runs themselves, flat, each query at its offset.
  FlatRuns& flat = out->runs;
  flat.offsets.assign(static_cast<std::size_t>(nq) + 1, 0);
  for (int32_t q = 0; q < nq; ++q) {
    flat.offsets[static_cast<std::size_t>(q) + 1] =
        flat.offsets[static_cast<std::size_t>(q)] + out->num_runs[static_cast<std::size_t>(q)];
  }
  const std::size_t total = static_cast<std::size_t>(flat.offsets.back());
  flat.begin.resize(total);
  flat.length.resize(total);
  flat.weight.resize(total);
  flat.list.resize(total);
  flat.list_begin.resize(total);
  return ParallelFor(tasks, threads, [&](int64_t t) -> Status {
    const int32_t q1 = static_cast<int32_t>(std::min<int64_t>(nq, (t + 1) * per_task));
    for (int32_t q = static_cast<int32_t>(t * per_task); q < q1; ++q) {
      std::size_t r = static_cast<std::size_t>(flat.offsets[static_cast<std::size_t>(q)]);
      ForEachListRun(cq.Slices(q), offs, [&](const Segment& seg) {
        flat.begin[r] = seg.begin;
        flat.length[r] = static_cast<int32_t>(seg.end - seg.begin);  // within one list
        flat.weight[r] = seg.weight;
        flat.list[r] = seg.list;
        flat.list_begin[r] = offs[static_cast<std::size_t>(seg.list)];
        ++r;
      });
    }
    return Status::Ok();
  }, cancel);
}
bool GpuEngine::TakesHostStage(int32_t n_queries) const {
  return resident_ && config_.matcher == Matcher::kTiled && n_queries > 0 &&
         n_queries < 2 * kPipelineQueries && index_->num_objects() > 0;
}

Status GpuEngine::RunHostStage(const genie_query_batch& batch, int threads, const CancelCheck& cancel,
                               HostStage* out) const {
  using Ms = std::chrono::duration<double, std::milli>;
  const InvertedIndex& index = *index_;
  const auto t0 = std::chrono::steady_clock::now();
  GENIE_RETURN_IF_ERROR(CompileQueries(index, batch, SplitLength(index), threads, cancel, &out->compiled));
  const auto t1 = std::chrono::steady_clock::now();
  GENIE_RETURN_IF_ERROR(Prepare(out->compiled, index.keyword_offsets(), /*keep_runs=*/true, threads, cancel, &out->prep));
  out->compile_ms = Ms(t1 - t0).count();
  out->prepare_ms = Ms(std::chrono::steady_clock::now() - t1).count();
  out->ready = true;
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

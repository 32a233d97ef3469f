// The GPU engine's pipelined search (issue 15): a large batch over the
// resident index is cut into pieces; a host thread compiles and prepares
// piece i + 1 (CompileQueryRange, Prepare) while the calling thread has the
// device match piece i (RunPrepared).  The batch time then approaches the
// device time plus the first piece's compilation, instead of the sum of both.
//
// The pieces grow: kPipelineFirst queries (more while they hold few ranges,
// up to a quarter of kPipelineQueries), then twice as many each time up to
// kPipelineQueries.  The device can start only once the first piece is
// compiled, so that piece is small and compiled alone, on all of the host's
// threads (with the helper compiling the second beside it, the two shared
// the cores and the device waited 2.2 ms of a 9.5 ms LSH batch at 1M); each
// later piece is compiled while the device matches one half its size.
//
// Roles: only the calling thread touches the device (it holds the device
// context, see DeviceGuard).  The helper is a JoinedThread, not a pool
// thread, so that the compilation's own ParallelFor finds the pool free;
// when it cannot be started, the calling thread compiles each piece itself
// before matching it, which is the unpipelined order.  Pieces are compiled
// in order, each exactly once: whoever takes the next number compiles it.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"

namespace genie {
namespace gpu {

namespace {

struct Piece {
  int32_t q_begin = 0;
  int32_t q_end = 0;
  CompiledQueries compiled;
  Prepared prep;
  Status status;
  bool ready = false;  // guarded by the pipeline's mutex
};

}  // namespace

Status GpuEngine::SearchPipelined(const genie_query_batch& batch, int32_t k, uint64_t budget,
                                  TopKResults* out) {
  const InvertedIndex& index = *index_;
  const int32_t nq = batch.n_queries;
  // The first piece: queries of kPipelineFirstRanges ranges, at least
  // kPipelineFirst and at most kPipelineQueries / 4 of them; then doubling
  // up to kPipelineQueries; a last piece of at most half the size due
  // joins the one before.
  // (offsets checked by the caller: ValidateBatchOffsets)
  const int64_t* query_offsets = batch.query_offsets;
  const int64_t* item_offsets = batch.item_offsets;
  int32_t first = std::min(kPipelineFirst, nq);
  while (item_offsets != nullptr && first < kPipelineQueries / 4 && first < nq &&
         item_offsets[query_offsets[first]] < kPipelineFirstRanges) {
    ++first;
  }
  std::vector<Piece> pieces;
  for (int32_t begin = 0, size = first; begin < nq;) {
    int32_t end = nq - begin <= size + size / 2 ? nq : begin + size;
    Piece piece;
    piece.q_begin = begin;
    piece.q_end = end;
    pieces.push_back(std::move(piece));
    begin = end;
    size = std::min(size * 2, kPipelineQueries);
  }
  const int32_t count = static_cast<int32_t>(pieces.size());
  const bool keep_runs = config_.matcher == Matcher::kTiled;

  std::mutex mutex;
  std::condition_variable piece_done;
  std::atomic<int32_t> next_piece{0};
  std::atomic<bool> stop{false};
  // Never throws: the piece is marked ready whatever happens, so that the
  // calling thread's wait for it ends.
  // on_caller: the calling thread compiles (the profile's marks are its own)
  auto compile = [&](int32_t p, bool on_caller) noexcept {
    Piece& piece = pieces[static_cast<std::size_t>(p)];
    Status status;
    try {
      status = stop.load() ? Status::Cancelled()
                           : CompileQueryRange(index, batch, piece.q_begin, piece.q_end,
                                               SplitLength(index), threads_, cancel_,
                                               &piece.compiled);
      if (on_caller) prof_.Mark("piece compile");
      if (status.ok()) {
        status = Prepare(piece.compiled, index.keyword_offsets(), keep_runs, threads_, cancel_,
                         &piece.prep);
      }
    } catch (const std::bad_alloc&) {
      status = Status::OutOfMemory("out of host memory compiling a batch");
    } catch (...) {
      status = Status::Internal("unexpected exception compiling a batch");
    }
    std::lock_guard<std::mutex> lock(mutex);
    piece.status = std::move(status);
    piece.ready = true;
    piece_done.notify_all();
  };

  const DeviceIndexView view = ResidentView();
  std::vector<std::vector<Hit>> per_query(static_cast<std::size_t>(nq));
  // The first piece alone on the host's threads, before the helper starts.
  next_piece.store(1);
  prof_.Mark("pipeline start");
  compile(0, true);
  JoinedThread helper;  // joined on every way out of this function
  if (pieces[0].status.ok()) {  // (else the loop below stops at once)
    helper.Start([&]() noexcept {
      for (int32_t p = next_piece.fetch_add(1); p < count && !stop.load();
           p = next_piece.fetch_add(1)) {
        compile(p, false);
      }
    });
  }
  // Destroyed before the helper: however the loop below ends, the helper
  // stops after its current piece instead of compiling the rest.
  struct StopOnExit {
    std::atomic<bool>* stop;
    ~StopOnExit() { stop->store(true); }
  } stop_on_exit{&stop};
  // The device's work for piece p is queued before the host waits for
  // piece p - 1's hits (FetchHits leaves them pending), so the device goes
  // from one piece to the next while the host prepares and collects: two
  // pieces' hits in flight at most, each in a buffer of its own.
  struct DeferFetches {
    GpuEngine* engine;
    explicit DeferFetches(GpuEngine* e) : engine(e) { engine->defer_fetch_ = true; }
    ~DeferFetches() {
      engine->DiscardHits();  // none left on success; after an error, the rest
      engine->defer_fetch_ = false;
    }
  } defer(this);
  std::vector<std::vector<Hit>> piece_hits[2];
  std::size_t behind = 0;  // pending fetches of the piece before this one
  const auto take = [&](int32_t p) {
    const Piece& piece = pieces[static_cast<std::size_t>(p)];
    std::vector<std::vector<Hit>>& hits = piece_hits[p % 2];
    for (int32_t q = piece.q_begin; q < piece.q_end; ++q) {
      per_query[static_cast<std::size_t>(q)] = std::move(hits[static_cast<std::size_t>(q - piece.q_begin)]);
    }
  };
  Status status;
  for (int32_t p = 0; p < count && status.ok(); ++p) {
    // Compile the piece here unless the helper has taken it.
    int32_t expected = p;
    if (next_piece.compare_exchange_strong(expected, p + 1)) compile(p, true);
    Piece& piece = pieces[static_cast<std::size_t>(p)];
    {
      std::unique_lock<std::mutex> lock(mutex);
      piece_done.wait(lock, [&] { return piece.ready; });
    }
    prof_.Mark("piece compiled");
    status = piece.status;
    if (status.ok()) status = CheckCancel();
    if (status.ok()) {
      // The index's device bytes may have grown (EnsureFullPostings).
      const uint64_t held = ResidentBytes();
      status = RunPrepared(view, piece.compiled, piece.prep, k, budget > held ? budget - held : 0,
                           &piece_hits[p % 2]);
    }
    prof_.Mark("piece queued");
    // the previous piece's hits, while the device matches this one
    if (status.ok() && p > 0) {
      const std::size_t now = pending_hits_.size();
      status = CollectHits(behind);
      prof_.Mark("hits collected");
      if (status.ok()) take(p - 1);
      behind = now - behind;
    } else {
      behind = pending_hits_.size();
    }
    // Free the piece's compiled form as soon as it is queued (the device
    // reads its own copies).
    piece.compiled = CompiledQueries();
    piece.prep = Prepared();
  }
  if (status.ok() && count > 0) {
    status = CollectHits(pending_hits_.size());
    if (status.ok()) take(count - 1);
  }
  stop.store(true);
  helper.Join();
  GENIE_RETURN_IF_ERROR(status);
  stats_.parts = 1;
  Assemble(nq, &per_query, out);
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

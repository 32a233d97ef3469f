// The engine interface shared by the CPU engines and the CUDA engine.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/index.hpp"
#include "genie/query.hpp"
#include "genie/set_match.hpp"
#include "genie/status.hpp"
#include "genie/types.h"

namespace genie {

struct Hit {
  int32_t object;
  int32_t score;
};

// Per query, up to k hits with score >= 1, highest score first, ties by
// ascending object id.
struct TopKResults {
  std::vector<int64_t> query_offsets{0};
  std::vector<Hit> hits;

  int32_t num_queries() const { return static_cast<int32_t>(query_offsets.size() - 1); }
  Span<Hit> Query(int32_t q) const {
    return Span<Hit>(hits.data() + query_offsets[q], query_offsets[q + 1] - query_offsets[q]);
  }
};

// Orders hits for output: score descending, then object ascending.
inline bool HitBefore(const Hit& a, const Hit& b) {
  return a.score != b.score ? a.score > b.score : a.object < b.object;
}

struct EngineOptions {
  int32_t threads = 0;                 // 0: hardware concurrency
  int32_t device_ordinal = 0;
  // Several GPUs (genie/multi_device.hpp): bit i names CUDA device i; 0 is
  // device_ordinal alone.  placement: a genie::Placement.
  uint64_t device_mask = 0;
  int32_t placement = 0;
  uint64_t memory_budget_bytes = 0;    // 0: engine default (see genie_engine_options)
  // The CPU engine's order (core/src/cpu_tiles.cpp).  0: the engine's
  // choice, tile by tile for a batch of 8 queries or more over at least two
  // tiles, else one query at a time; < 0: one query at a time over all the
  // objects; > 0: tile by tile, tiles of this many objects (rounded up to a
  // multiple of 64).  The answers are the same in either order.
  int64_t cpu_tile_objects = 0;
  // The CPU engine's tile order reads packed postings (genie/packed_postings.hpp,
  // the GPU engine's device form), built on the host the first time a batch
  // over the whole index takes tiles of whole pack tiles: 2 bytes a posting
  // more memory, kept while the index is uploaded, for half the bytes read.
  bool cpu_packed_postings = false;
  // Polled while the engine works (Search; the GPU engine's Upload too):
  // when it asks, the call returns Status::Cancelled().  The CPU engine polls
  // per query and every few ten thousand postings per worker, the GPU engine
  // between query groups, between object parts and before each blocking
  // synchronisation.  The reference engine ignores it.
  CancelCheck cancel;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual genie_engine_kind kind() const = 0;
  // The engine keeps a reference to the index until Drop or destruction.
  virtual Status Upload(std::shared_ptr<const InvertedIndex> index) = 0;
  virtual Status Drop() = 0;
  virtual Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) = 0;
  // Search polling a cancel check of the call's own instead of the
  // engine's: an engine that runs several searches at once (the CPU engine,
  // a device group) stops only the call whose own check asks; the GPU
  // engine polls the call's while it runs.  By default, the engine's.
  virtual Status SearchCancellable(const genie_query_batch& batch, int32_t k,
                                   const CancelCheck& cancel, TopKResults* out) {
    (void)cancel;
    return Search(batch, k, out);
  }
  // The objects of the uploaded index that satisfy a set predicate, as
  // genie::MatchSet gives them (set_match.hpp: ascending; object_sizes read
  // by kContainedBy only).  The host engines run MatchSet; the GPU engine
  // runs it on the device where the query's lists are long.
  virtual Status MatchSet(SetPredicate predicate, Span<int32_t> keywords,
                          Span<int32_t> object_sizes, std::vector<int32_t>* out) = 0;
  // Whether Search and SearchCancellable may run on several threads at once
  // (never beside Upload or Drop): the CPU engine's do; a GPU engine's do,
  // each call's host work side by side and the device one call at a time;
  // a device group's do, a few whole batches a device.
  virtual bool ConcurrentSearches() const { return kind() == GENIE_ENGINE_CPU; }
};

// The engines that search a host index they share with the caller: the
// common Upload and Drop, and the checks every Search starts with.
class HostIndexEngine : public Engine {
 public:
  Status Upload(std::shared_ptr<const InvertedIndex> index) override {
    if (index == nullptr) return Status::InvalidArgument("cannot upload a NULL index");
    index_ = std::move(index);
    return Status::Ok();
  }
  Status Drop() override {
    index_.reset();
    return Status::Ok();
  }
  Status MatchSet(SetPredicate predicate, Span<int32_t> keywords, Span<int32_t> object_sizes,
                  std::vector<int32_t>* out) override;

 protected:
  Status CheckSearch(int32_t k, const TopKResults* out) const;

  std::shared_ptr<const InvertedIndex> index_;
  CancelCheck match_cancel_;  // polled by MatchSet (the CPU engine's cancel)
};

// k must be >= 1; k larger than the number of objects is clamped.
Status ValidateK(int32_t k);

std::unique_ptr<Engine> MakeReferenceEngine();
std::unique_ptr<Engine> MakeCpuEngine(const EngineOptions& options);

// Multiple loading, shared by every engine: the object ranges [begin, end)
// of the parts, and the merge of per-part results (object ids local to each
// part) into the global top-k.
std::vector<std::pair<int32_t, int32_t>> PlanObjectParts(int32_t num_objects, int32_t num_parts);
// Each part's hits must be in output order (as every engine returns them);
// threads > 1 merges queries on that many threads.
void MergePartResults(const std::vector<TopKResults>& parts,
                      const std::vector<std::pair<int32_t, int32_t>>& ranges, int32_t k,
                      TopKResults* out, int32_t threads = 1);

}  // namespace genie

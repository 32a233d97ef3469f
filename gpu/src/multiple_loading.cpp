// The GPU engine's multiple loading (paper III-D; see the design notes in
// gpu_engine.cpp): the objects split into parts (PlanObjectParts +
// SliceObjects, cached, page locked), part i + 1 copied on a second stream
// while part i is matched, the per-part top-k merged (MergePartResults).
// Where the engine packs postings, the parts travel packed too (issue 15):
// 2 bytes a posting plus the part's pack directory, so a budget holds parts
// of about twice the objects, and the copies move half the bytes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <memory>
#include <vector>

#include "cuda_util.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {

uint64_t GpuEngine::PartPostings(const InvertedIndex& index, int32_t begin, int32_t end) {
  const Span<int64_t> offs = index.keyword_offsets();
  const Span<int32_t> postings = index.postings();
  uint64_t total = 0;
  for (std::size_t i = 0; i + 1 < offs.size(); ++i) {
    const int32_t* first = postings.data() + offs[i];
    const int32_t* last = postings.data() + offs[i + 1];
    const int32_t* from = std::lower_bound(first, last, begin);
    const int32_t* to = std::lower_bound(from, last, end);
    total += static_cast<uint64_t>(to - from);
  }
  return total;
}

Status GpuEngine::SearchPartsBesideResident(const genie_query_batch& batch, int32_t k,
                                            uint64_t budget, TopKResults* out) {
  const uint64_t held = ResidentBytes();  // (the 4-byte array may have joined it)
  stats_ = SearchStats();
  stats_.matcher = MatcherName(config_.matcher);
  stats_.index_device_bytes = held;
  return SearchParts(batch, k, budget > held ? budget - held : 0, out);
}

Status GpuEngine::SearchParts(const genie_query_batch& batch, int32_t k, uint64_t avail,
                              TopKResults* out) {
  const bool packed = PacksPostings(*index_);
  Status status = SearchPartsAs(batch, k, avail, packed, out);
  // A packed part whose queries needed its 4-byte ids as well (the count
  // table, after a tiled overflow) and found no room: 4-byte parts plan for
  // that from the start.
  if (packed && status.code() == GENIE_DEVICE_OUT_OF_MEMORY) {
    status = SearchPartsAs(batch, k, avail, false, out);
  }
  return status;
}

Status GpuEngine::SearchPartsAs(const genie_query_batch& batch, int32_t k, uint64_t avail,
                                bool packed_in, TopKResults* out) {
  const InvertedIndex& index = *index_;
  const int32_t n = index.num_objects();
  // The whole batch compiled once, for the planning: a part's lists are
  // sub-lists of the whole index's, so its state needs are bounded by these.
  CompiledQueries whole;
  GENIE_RETURN_IF_ERROR(CompileQueries(index, batch, SplitLength(index), threads_, cancel_, &whole));
  Prepared whole_prep;
  GENIE_RETURN_IF_ERROR(
      Prepare(whole, index.keyword_offsets(), false, threads_, cancel_, &whole_prep));
  const int32_t nq = whole.num_queries();
  // A query the count table takes needs 4-byte ids: such a batch streams
  // 4-byte parts.
  bool packed = packed_in;
  for (int32_t q = 0; q < nq && packed; ++q) {
    if (RouteOf(whole_prep.max_score[static_cast<std::size_t>(q)]) == Matcher::kCountTable) {
      packed = false;
    }
  }
  const uint64_t keywords =
      index.keyword_offsets().size() > 0 ? index.keyword_offsets().size() - 1 : 0;
  // A part's bytes on the device: its postings, and packed its directory.
  auto part_bytes = [&](uint64_t postings, int32_t objects) -> uint64_t {
    if (!packed) return postings * sizeof(int32_t);
    return postings * sizeof(uint16_t) +
           keywords * (static_cast<uint64_t>(PackTiles(objects)) + 1) * sizeof(uint32_t);
  };
  const uint64_t index_bytes = part_bytes(index.postings().size(), n);
  if (avail <= kGroupFixedBytes) {
    return Status::DeviceOutOfMemory("the device-memory budget (" + std::to_string(avail) +
                                     " bytes available) is too small for any search");
  }

  // Pick the number of parts: two part buffers plus the largest query's
  // state (for a part's object count) must fit, with room for groups.
  int64_t parts = std::min<int64_t>(
      n, std::max<int64_t>(
             2, static_cast<int64_t>(index_bytes * 4 / std::max<uint64_t>(avail, 1)) + 1));
  std::vector<std::pair<int32_t, int32_t>> ranges;
  uint64_t max_part_postings = 0, max_part_bytes = 0, state_budget = 0;
  int32_t max_part_objects = 0;
  for (;;) {
    if (parts > n || parts > kMaxParts) {
      return Status::DeviceOutOfMemory(
          "the device-memory budget (" + std::to_string(avail) +
          " bytes available) is too small even for multiple loading of this batch");
    }
    ranges = PlanObjectParts(n, static_cast<int32_t>(parts));
    uint64_t largest = 0;
    int32_t largest_objects = 0;
    for (const auto& r : ranges) {
      largest = std::max(largest, PartPostings(index, r.first, r.second));
      largest_objects = std::max(largest_objects, r.second - r.first);
    }
    max_part_postings = largest;
    max_part_objects = largest_objects;
    max_part_bytes = part_bytes(largest, largest_objects);
    const uint64_t buffers = 2 * max_part_bytes;
    if (buffers < avail) {
      state_budget = avail - buffers;
      const int32_t k_part = std::min(k, std::max(largest_objects, 1));
      const int32_t tiles = TileCount(largest_objects, whole_prep.max_score, packed);
      uint64_t worst = 0;
      for (int32_t q = 0; q < nq; ++q) {
        const int64_t m = whole_prep.max_score[static_cast<std::size_t>(q)];
        worst = std::max(worst, QueryBytes(whole, whole_prep, q, largest_objects, k_part, tiles,
                                           RouteOf(m)));
      }
      if (worst + kGroupFixedBytes <= state_budget) break;
    }
    parts *= 2;
  }

  if (part_count_ != static_cast<int32_t>(ranges.size()) || part_ranges_ != ranges ||
      parts_packed_ != packed) {
    ReleaseParts();
    parts_.resize(ranges.size());
    part_packed_.resize(packed ? ranges.size() : 0);
    GENIE_RETURN_IF_ERROR(ParallelFor(static_cast<int64_t>(ranges.size()), threads_,
                                      [&](int64_t i) -> Status {
      const auto& r = ranges[static_cast<std::size_t>(i)];
      auto& part = parts_[static_cast<std::size_t>(i)];
      part = std::make_unique<InvertedIndex>(index.SliceObjects(r.first, r.second));
      // one thread a part: this already runs on the pool
      if (packed) {
        return BuildPackedPostings(*part, 1, cancel_, &part_packed_[static_cast<std::size_t>(i)]);
      }
      return Status::Ok();
    }, cancel_));
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (packed) {
        const PackedPostings& pp = part_packed_[i];
        part_pins_.emplace_back();
        part_pins_.back().Register(pp.low.data(), pp.low.size() * sizeof(uint16_t));
        part_pins_.emplace_back();
        part_pins_.back().Register(pp.directory.data(), pp.directory.size() * sizeof(uint32_t));
      } else {
        const Span<int32_t> pp = parts_[i]->postings();
        part_pins_.emplace_back();
        part_pins_.back().Register(pp.data(), pp.size() * sizeof(int32_t));
      }
    }
    part_ranges_ = ranges;
    part_count_ = static_cast<int32_t>(ranges.size());
    parts_packed_ = packed;
  }
  prof_.Mark("plan parts");

  // Two slots of either form.
  DeviceArray<int32_t> buffers[2];
  DeviceArray<uint16_t> low_buffers[2];
  DeviceArray<uint32_t> dir_buffers[2];
  const uint64_t max_dir = keywords * (static_cast<uint64_t>(PackTiles(max_part_objects)) + 1);
  for (int slot = 0; slot < 2; ++slot) {
    if (packed) {
      GENIE_RETURN_IF_ERROR(low_buffers[slot].Allocate(std::max<uint64_t>(max_part_postings, 1),
                                                       "a packed part buffer"));
      GENIE_RETURN_IF_ERROR(
          dir_buffers[slot].Allocate(std::max<uint64_t>(max_dir, 1), "a part's pack directory"));
    } else {
      GENIE_RETURN_IF_ERROR(
          buffers[slot].Allocate(std::max<uint64_t>(max_part_postings, 1), "a part buffer"));
    }
  }
  cudaStream_t compute = compute_stream_.get();
  cudaStream_t copy = copy_stream_.get();
  auto issue_copy = [&](int32_t part) -> Status {
    const int slot = part % 2;
    if (part >= 2) {
      GENIE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, compute_done_[slot].get(), 0));
    }
    if (packed) {
      const PackedPostings& pp = part_packed_[static_cast<std::size_t>(part)];
      if (!pp.low.empty()) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(low_buffers[slot].get(), pp.low.data(),
                                                   pp.low.size() * sizeof(uint16_t),
                                                   cudaMemcpyHostToDevice, copy));
      }
      if (!pp.directory.empty()) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dir_buffers[slot].get(), pp.directory.data(),
                                                   pp.directory.size() * sizeof(uint32_t),
                                                   cudaMemcpyHostToDevice, copy));
      }
    } else {
      const Span<int32_t> pp = parts_[static_cast<std::size_t>(part)]->postings();
      if (!pp.empty()) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers[slot].get(), pp.data(),
                                                   pp.size() * sizeof(int32_t),
                                                   cudaMemcpyHostToDevice, copy));
      }
    }
    GENIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_done_[slot].get(), copy));
    return Status::Ok();
  };

  // current_part_ and the part's 4-byte ids never outlive this call; nor do
  // copies in flight after an error (a cancel, a part's state out of
  // memory): the copy stream reads the host parts, and the compute stream a
  // part's 4-byte ids, which the next call may free (SearchParts' retry with
  // 4-byte parts does at once).  (After a whole search both streams are
  // idle: no wait.)
  struct PartScope {
    GpuEngine* engine;
    ~PartScope() {
      (void)cudaStreamSynchronize(engine->copy_stream_.get());
      (void)cudaStreamSynchronize(engine->compute_stream_.get());
      engine->current_part_ = nullptr;
      engine->part_postings_.Reset();
    }
  } scope{this};

  std::vector<TopKResults> part_results(ranges.size());
  GENIE_RETURN_IF_ERROR(issue_copy(0));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    GENIE_RETURN_IF_ERROR(CheckCancel());
    const int slot = static_cast<int>(i % 2);
    if (i + 1 < ranges.size()) GENIE_RETURN_IF_ERROR(issue_copy(static_cast<int32_t>(i + 1)));
    const InvertedIndex& part = *parts_[i];
    CompiledQueries compiled;  // host work overlaps the copies in flight
    GENIE_RETURN_IF_ERROR(CompileQueries(part, batch, SplitLength(part), threads_, cancel_, &compiled));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, copy_done_[slot].get(), 0));
    DeviceIndexView view;
    if (packed) {
      view.packed = low_buffers[slot].get();
      view.pack_dir = dir_buffers[slot].get();
      view.pack_tiles = PackTiles(part.num_objects());
      current_part_ = &part;
    } else {
      view.postings = buffers[slot].get();
    }
    view.num_objects = part.num_objects();
    view.keyword_offsets = part.keyword_offsets();
    std::vector<std::vector<Hit>> per_query;
    GENIE_RETURN_IF_ERROR(RunQueries(view, compiled, k, state_budget, &per_query));
    GENIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_done_[slot].get(), compute));
    // (freeing waits for the device: only a part that needed them has them)
    part_postings_.Reset();
    current_part_ = nullptr;
    Assemble(nq, &per_query, &part_results[i]);
  }
  GENIE_RETURN_IF_ERROR(CheckCancel());
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute));
  stats_.parts = static_cast<int32_t>(ranges.size());
  stats_.parts_packed = packed;
  MergePartResults(part_results, ranges, k, out);
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

// The tiled c-PQ matcher, host side: the group's list runs and their tile
// bounds, one block per (tile, query) (matcher_tiled.cu), then the
// hash-table collection of the entries >= max(AT - 1, 1).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "cuda_util.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {

Status GpuEngine::RunTiledGroup(const DeviceIndexView& view, const Prepared& prep,
                                const std::vector<int32_t>& group, int32_t k,
                                std::vector<std::vector<Hit>>* per_query,
                                std::vector<int32_t>* overflowed) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t n = view.num_objects;
  const int32_t g = static_cast<int32_t>(group.size());
  int64_t group_max = 1;
  for (int32_t q : group) group_max = std::max(group_max, prep.max_score[static_cast<std::size_t>(q)]);
  TiledParams tp{};
  tp.bits = BitsFor(group_max);
  tp.per_word = 32 / tp.bits;
  tp.tile_words = config_.tile_words;
  tp.tile_objects = tp.tile_words * tp.per_word;
  tp.num_tiles =
      static_cast<int32_t>((static_cast<int64_t>(n) + tp.tile_objects - 1) / tp.tile_objects);
  tp.n_objects = n;
  tp.hist_bins = static_cast<int32_t>(group_max) + 2;

  // The group's list runs (one per segment; each gets its own tile bounds).
  std::vector<int64_t> seg_offsets(group.size() + 1, 0);
  for (std::size_t i = 0; i < group.size(); ++i) {
    seg_offsets[i + 1] =
        seg_offsets[i] + static_cast<int64_t>(prep.runs[static_cast<std::size_t>(group[i])].size());
  }
  const int64_t num_segs = seg_offsets.back();
  if (num_segs > std::numeric_limits<int32_t>::max()) {
    return Status::Internal("too many list runs in one query group");
  }
  std::unique_ptr<int64_t[]> seg_begin(new int64_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
  std::unique_ptr<int32_t[]> seg_length(new int32_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
  std::unique_ptr<int32_t[]> seg_weight(new int32_t[static_cast<std::size_t>(std::max<int64_t>(num_segs, 1))]);
  for (std::size_t i = 0; i < group.size(); ++i) {
    int64_t s = seg_offsets[i];
    for (const Segment& seg : prep.runs[static_cast<std::size_t>(group[i])]) {
      seg_begin[static_cast<std::size_t>(s)] = seg.begin;
      seg_length[static_cast<std::size_t>(s)] = static_cast<int32_t>(seg.end - seg.begin);
      seg_weight[static_cast<std::size_t>(s)] = seg.weight;
      ++s;
    }
  }
  prof_.Mark("host prep");

  std::vector<QueryParams> params(group.size());
  int64_t za_total = 0, ht_total = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const int64_t ms = prep.max_score[static_cast<std::size_t>(group[i])];
    QueryParams& p = params[i];
    p.max_score = static_cast<int32_t>(ms);
    p.bits = tp.bits;
    p.per_word = tp.per_word;
    const uint32_t cap = HtCapacity(Matcher::kTiled, k, ms, tp.num_tiles);
    p.ht_mask = cap - 1;
    p.bc_offset = 0;
    p.za_offset = za_total;
    p.ht_offset = ht_total;
    p.cand_offset = ht_total;
    za_total += ms + 2;
    ht_total += cap;
  }

  GateBuffers gb;
  GateState gate{};
  GENIE_RETURN_IF_ERROR(AllocateGate(&gb, params, za_total, ht_total, k, &gate));
  DeviceArray<int64_t> d_seg_begin, d_seg_offsets;
  DeviceArray<int32_t> d_seg_length, d_seg_weight;
  DeviceArray<uint32_t> d_bounds;
  const std::size_t segs = static_cast<std::size_t>(num_segs);
  GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_begin, seg_begin.get(), segs, "list runs"));
  GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_length, seg_length.get(), segs, "list runs"));
  GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_weight, seg_weight.get(), segs, "list runs"));
  GENIE_RETURN_IF_ERROR(CopyToDevice(&d_seg_offsets, seg_offsets, "list runs"));
  GENIE_RETURN_IF_ERROR(d_bounds.Allocate(
      std::max<std::size_t>(segs * (static_cast<std::size_t>(tp.num_tiles) + 1), 1),
      "tile bounds"));
  GENIE_RETURN_IF_ERROR(LaunchTileBounds(view.postings, d_seg_begin.get(), d_seg_length.get(),
                                         static_cast<int32_t>(num_segs), tp.num_tiles,
                                         tp.tile_objects, d_bounds.get(), stream));
  tp.postings = view.postings;
  tp.seg_begin = d_seg_begin.get();
  tp.bounds = d_bounds.get();
  tp.seg_offsets = d_seg_offsets.get();
  tp.seg_weight = d_seg_weight.get();
  prof_.Mark("alloc+init+bounds");
  GENIE_RETURN_IF_ERROR(LaunchTiled(tp, gate, stream));
  prof_.Mark("tiled kernel");

  Candidates cand;
  GENIE_RETURN_IF_ERROR(cand.Allocate(ht_total, g));
  GENIE_RETURN_IF_ERROR(LaunchHtCollect(gate, cand.state, /*from_bc=*/false,
                                        /*exact_ties=*/false, stream));
  prof_.Mark("select");
  GENIE_RETURN_IF_ERROR(FetchOverflow(gb.overflow, group, overflowed));
  return SortEmitFetch(&cand, group, k, per_query);
}

}  // namespace gpu
}  // namespace genie

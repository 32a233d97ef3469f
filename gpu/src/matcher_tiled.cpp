// The tiled c-PQ matcher, host side: the group's list runs and their tile
// bounds, one block per (tile, query) (matcher_tiled.cu), then the
// hash-table collection of the entries >= max(AT - 1, 1).  In list mode
// (GpuEngine::ListMode) each tile's own top-k lands at tile * k of its
// query's table instead, and the collection takes them all (AT stays 1).
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
                                const std::vector<int32_t>& group, int32_t k, bool list, int32_t tile_words,
                                std::vector<std::vector<Hit>>* per_query,
                                std::vector<int32_t>* overflowed) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t n = view.num_objects;
  const int32_t g = static_cast<int32_t>(group.size());
  int64_t group_max = 1;
  for (int32_t q : group) group_max = std::max(group_max, prep.max_score[static_cast<std::size_t>(q)]);
  TiledParams tp{};
  tp.bits = TiledBitsFor(group_max);
  tp.per_word = 32 / tp.bits;
  const bool packed = view.packed != nullptr;
  const TileGeometry geometry = TileFor(tile_words, tp.bits, packed);
  tp.tile_words = geometry.tile_words;
  tp.tile_objects = geometry.tile_objects;
  tp.num_tiles =
      static_cast<int32_t>((static_cast<int64_t>(n) + tp.tile_objects - 1) / tp.tile_objects);
  tp.n_objects = n;
  tp.hist_bins = static_cast<int32_t>(group_max) + 2;
  tp.list_mode = list ? 1 : 0;

  // The group's list runs (one per segment; each gets its own tile bounds):
  // Prepare's flat arrays as they are when the group is every query in
  // order (the usual case), else gathered query by query.
  const FlatRuns& all = prep.runs;
  bool whole = static_cast<std::size_t>(g) + 1 == all.offsets.size();
  for (int32_t i = 0; whole && i < g; ++i) whole = group[static_cast<std::size_t>(i)] == i;
  FlatRuns gathered;
  if (!whole) {
    gathered.offsets.assign(group.size() + 1, 0);
    for (std::size_t i = 0; i < group.size(); ++i) {
      const std::size_t q = static_cast<std::size_t>(group[i]);
      const int64_t b = all.offsets[q], e = all.offsets[q + 1];
      gathered.offsets[i + 1] = gathered.offsets[i] + (e - b);
      gathered.begin.insert(gathered.begin.end(), all.begin.begin() + b, all.begin.begin() + e);
      gathered.length.insert(gathered.length.end(), all.length.begin() + b, all.length.begin() + e);
      gathered.weight.insert(gathered.weight.end(), all.weight.begin() + b, all.weight.begin() + e);
      gathered.list.insert(gathered.list.end(), all.list.begin() + b, all.list.begin() + e);
      gathered.list_begin.insert(gathered.list_begin.end(), all.list_begin.begin() + b,
                                 all.list_begin.begin() + e);
    }
  }
  const FlatRuns& runs = whole ? all : gathered;
  const int64_t num_segs = runs.offsets.back();
  if (num_segs > std::numeric_limits<int32_t>::max()) {
    return Status::Internal("too many list runs in one query group");
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
    const uint32_t cap = HtCapacity(Matcher::kTiled, k, ms, tp.num_tiles, list);
    p.ht_mask = cap - 1;
    p.bc_offset = 0;
    p.za_offset = za_total;
    p.ht_offset = ht_total;
    p.cand_offset = ht_total;
    za_total += ms + 2;
    ht_total += cap;
  }

  // One upload for the query parameters and the runs (a small call's
  // copies are dominated by their fixed cost).
  const bool list_select = list && ht_total <= static_cast<int64_t>(kListSelectSlots) * g;
  UploadBatch upload;
  const std::size_t at_params = upload.Add(params);
  const std::size_t at_begin = upload.Add(runs.begin);
  const std::size_t at_length = upload.Add(runs.length);
  const std::size_t at_weight = upload.Add(runs.weight);
  const std::size_t at_offsets = upload.Add(runs.offsets);
  const std::size_t at_list = packed ? upload.Add(runs.list) : 0;
  const std::size_t at_list_begin = packed ? upload.Add(runs.list_begin) : 0;
  DeviceMemory d_upload;
  GENIE_RETURN_IF_ERROR(upload.Upload(&d_upload, stream, "list runs", &pinned_));
  const int64_t* d_seg_begin = UploadBatch::At<int64_t>(d_upload, at_begin);
  const int32_t* d_seg_length = UploadBatch::At<int32_t>(d_upload, at_length);

  GateBuffers gb;
  GateState gate{};
  GENIE_RETURN_IF_ERROR(AllocateGate(&gb, params, za_total, ht_total, k, &gate,
                                     UploadBatch::At<QueryParams>(d_upload, at_params), !list_select));
  DeviceArray<uint32_t> d_bounds;
  const std::size_t segs = static_cast<std::size_t>(num_segs);
  GENIE_RETURN_IF_ERROR(d_bounds.Allocate(
      std::max<std::size_t>(segs * (static_cast<std::size_t>(tp.num_tiles) + 1), 1),
      "tile bounds"));
  if (packed) {
    GENIE_RETURN_IF_ERROR(LaunchPackedTileBounds(
        view.packed, view.pack_dir, view.pack_tiles, d_seg_begin, d_seg_length,
        UploadBatch::At<int64_t>(d_upload, at_list), UploadBatch::At<int64_t>(d_upload, at_list_begin),
        static_cast<int32_t>(num_segs), tp.num_tiles, tp.tile_objects, d_bounds.get(), stream));
  } else {
    GENIE_RETURN_IF_ERROR(LaunchTileBounds(view.postings, d_seg_begin, d_seg_length,
                                           static_cast<int32_t>(num_segs), tp.num_tiles,
                                           tp.tile_objects, d_bounds.get(), stream));
  }
  tp.postings = view.postings;
  tp.packed = view.packed;
  tp.seg_begin = d_seg_begin;
  tp.bounds = d_bounds.get();
  tp.seg_offsets = UploadBatch::At<int64_t>(d_upload, at_offsets);
  tp.seg_weight = UploadBatch::At<int32_t>(d_upload, at_weight);
  prof_.Mark("alloc+init+bounds");
  GENIE_RETURN_IF_ERROR(LaunchTiled(tp, gate, stream));
  prof_.Mark("tiled kernel");
  if (list_select) {
    // every query's table is tiles * k <= kListSelectSlots slots (the same
    // for each): one block a query selects, no overflow can have happened
    DeviceHits found;
    GENIE_RETURN_IF_ERROR(found.Allocate(g, k));
    GENIE_RETURN_IF_ERROR(LaunchListSelect(gate, k, tp.num_tiles * k, n, found.hits(), found.counts(), stream));
    prof_.Mark("select");
    return FetchHits(found, group, k, per_query, /*may_defer=*/true);
  }

  Candidates cand;
  GENIE_RETURN_IF_ERROR(cand.Allocate(ht_total, g));
  GENIE_RETURN_IF_ERROR(LaunchHtCollect(gate, cand.state, /*from_bc=*/false,
                                        /*exact_ties=*/false, stream));
  prof_.Mark("select");
  // In list mode no table can overflow (each tile writes at most k entries
  // to slots of its own): no flags to wait for.
  if (!list) GENIE_RETURN_IF_ERROR(FetchOverflow(gb.overflow, group, overflowed));
  return SortEmitFetch(&cand, group, k, per_query, /*may_defer=*/list);
}

}  // namespace gpu
}  // namespace genie

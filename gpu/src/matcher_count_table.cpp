// The count table (the paper's GPU-SPQ), host side: a 32-bit counter per
// object per query (matcher_count_table.cu), radix selection of the k-th
// count, then everything above it and the first ties in id order.  Also the
// exact recomputation of c-PQ queries whose hash table overflowed.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_util.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {

int32_t GpuEngine::CountSlices(int32_t n, int32_t g) const {
  // A group of fewer queries than the device has SMs, over many objects:
  // each query's selection on slices of about 4,096 counters, up to two
  // blocks an SM over the group (a lone query over 126,000 objects: 0.18 ->
  // 0.04 ms of selection on an H200, bench/documents.md).  Otherwise a
  // block a query.
  constexpr int32_t kMinObjects = 16384;
  constexpr int32_t kSliceObjects = 4096;
  if (n < kMinObjects || g > sm_count_) return 1;
  const int64_t want = (static_cast<int64_t>(n) + kSliceObjects - 1) / kSliceObjects;
  const int64_t room = std::max<int64_t>(2, 2 * static_cast<int64_t>(sm_count_) / g);
  return static_cast<int32_t>(std::min<int64_t>({want, room, 1024}));
}

Status GpuEngine::RunCountGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                                const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                                std::vector<std::vector<Hit>>* per_query) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t n = view.num_objects;
  const int32_t g = static_cast<int32_t>(group.size());
  const int64_t stride = RoundUp(n, 4);
  std::vector<QueryParams> params(group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    QueryParams& p = params[i];
    p.max_score = static_cast<int32_t>(prep.max_score[static_cast<std::size_t>(group[i])]);
    p.bits = 32;
    p.per_word = 1;
    p.ht_mask = 0;
    p.bc_offset = static_cast<int64_t>(i) * stride;
    p.za_offset = 0;
    p.ht_offset = 0;
    p.cand_offset = static_cast<int64_t>(i) * k;
  }
  Work work;
  GENIE_RETURN_IF_ERROR(BuildWork(cq, group, &work));
  prof_.Mark("host prep");
  DeviceArray<QueryParams> d_params;
  GENIE_RETURN_IF_ERROR(CopyToDevice(&d_params, params, "query parameters"));
  DeviceArray<uint32_t> table;
  GENIE_RETURN_IF_ERROR(table.Allocate(static_cast<std::size_t>(stride) * g, "count table"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(table.get(), 0, table.bytes(), stream));
  DeviceWork d_work;
  GENIE_RETURN_IF_ERROR(UploadWork(work, &d_work));
  prof_.Mark("alloc+init");
  GENIE_RETURN_IF_ERROR(LaunchCountScan(view.postings, d_work.items.get(), work.num_items,
                                        d_work.slices.get(), d_params.get(), table.get(), stream));
  prof_.Mark("scan kernel");
  d_work.Reset();
  Candidates cand;
  GENIE_RETURN_IF_ERROR(cand.Allocate(static_cast<int64_t>(g) * k, g));
  const int32_t slices = CountSlices(n, g);
  if (slices > 1) {
    int32_t digits = 1;
    for (const QueryParams& p : params) digits = std::max(digits, (BitsFor(p.max_score) + 11) / 12);
    DeviceArray<int32_t> scratch;
    GENIE_RETURN_IF_ERROR(scratch.Allocate(CountSpreadScratchInts(g, slices), "selection scratch"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.get(), 0, scratch.bytes(), stream));
    GENIE_RETURN_IF_ERROR(LaunchCountSelectSpread(d_params.get(), table.get(), n, k, g, digits, slices,
                                                  scratch.get(), cand.state, stream));
  } else {
    GENIE_RETURN_IF_ERROR(LaunchCountSelect(d_params.get(), table.get(), n, k, g, cand.state, stream));
    GENIE_RETURN_IF_ERROR(LaunchOrderedCollect(d_params.get(), table.get(), n, g, cand.state,
                                               /*collect_above=*/true, stream));
  }
  prof_.Mark("select");
  return SortEmitFetch(&cand, group, k, per_query);
}

}  // namespace gpu
}  // namespace genie

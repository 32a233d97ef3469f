// The faithful c-PQ matcher (paper III-C), host side: a global Bitmap
// Counter per query, Algorithm 1 per posting (matcher_faithful.cu), then the
// hash-table collection and, with exact ties, the ordered tie collection.
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

Status GpuEngine::RunFaithfulGroup(const DeviceIndexView& view, const CompiledQueries& cq,
                                   const Prepared& prep, const std::vector<int32_t>& group, int32_t k,
                                   std::vector<std::vector<Hit>>* per_query,
                                   std::vector<int32_t>* overflowed) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t n = view.num_objects;
  const int32_t g = static_cast<int32_t>(group.size());
  std::vector<QueryParams> params(group.size());
  int64_t bc_total = 0, za_total = 0, ht_total = 0, cand_total = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const int64_t ms = prep.max_score[static_cast<std::size_t>(group[i])];
    QueryParams& p = params[i];
    p.max_score = static_cast<int32_t>(ms);
    p.bits = BitsFor(ms);
    p.per_word = 32 / p.bits;
    const uint32_t cap = HtCapacity(Matcher::kFaithful, k, ms, 0);
    p.ht_mask = cap - 1;
    p.bc_offset = bc_total;
    p.za_offset = za_total;
    p.ht_offset = ht_total;
    p.cand_offset = cand_total;
    bc_total += RoundUp((static_cast<int64_t>(n) + p.per_word - 1) / p.per_word, 4);
    za_total += ms + 2;
    ht_total += cap;
    cand_total += static_cast<int64_t>(cap) + k;
  }
  Work work;
  GENIE_RETURN_IF_ERROR(BuildWork(cq, group, &work));
  prof_.Mark("host prep");

  GateBuffers gb;
  GateState gate{};
  GENIE_RETURN_IF_ERROR(AllocateGate(&gb, params, za_total, ht_total, k, &gate));
  DeviceArray<uint32_t> bc;
  GENIE_RETURN_IF_ERROR(bc.Allocate(static_cast<std::size_t>(bc_total), "Bitmap Counters"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(bc.get(), 0, bc.bytes(), stream));
  gate.bc = bc.get();
  DeviceWork d_work;
  GENIE_RETURN_IF_ERROR(UploadWork(work, &d_work));
  prof_.Mark("alloc+init");
  GENIE_RETURN_IF_ERROR(LaunchCpqScan(view.postings, d_work.items.get(), work.num_items,
                                      d_work.slices.get(), gate, stream));
  prof_.Mark("scan kernel");
  d_work.Reset();

  Candidates cand;
  GENIE_RETURN_IF_ERROR(cand.Allocate(cand_total, g));
  GENIE_RETURN_IF_ERROR(LaunchHtCollect(gate, cand.state, /*from_bc=*/true,
                                        config_.exact_ties, stream));
  if (config_.exact_ties) {
    GENIE_RETURN_IF_ERROR(LaunchOrderedCollect(gb.queries.get(), bc.get(), n, g, cand.state,
                                               /*collect_above=*/false, stream));
  }
  prof_.Mark("select");
  GENIE_RETURN_IF_ERROR(FetchOverflow(gb.overflow, group, overflowed));
  return SortEmitFetch(&cand, group, k, per_query);
}

}  // namespace gpu
}  // namespace genie

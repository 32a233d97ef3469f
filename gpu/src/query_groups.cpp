// What the GPU engine's matchers share for one query group: the slices as
// device work (paper III-B), the c-PQ Gate buffers, and the selection tail
// (CUB's segmented sort, emission, copy back, overflow flags).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"
#include "kernels.hpp"

namespace genie {
namespace gpu {

Status GpuEngine::UploadWork(const Work& work, DeviceWork* out) {
  GENIE_RETURN_IF_ERROR(CopyToDevice(&out->slices, work.slices.get(),
                                     static_cast<std::size_t>(work.num_slices), "slices"));
  return CopyToDevice(&out->items, work.items.get(), static_cast<std::size_t>(work.num_items),
                      "work items");
}

Status GpuEngine::BuildWork(const CompiledQueries& cq, const std::vector<int32_t>& group, Work* work) {
  const std::size_t g = group.size();
  const int64_t cut = DeviceSliceLength();
  std::vector<int64_t> slice_start(g + 1, 0), item_start(g + 1, 0);
  for (std::size_t i = 0; i < g; ++i) {
    int64_t pieces = 0;
    for (const ListSlice& slice : cq.Slices(group[i])) {
      if (slice.end > slice.begin) pieces += (slice.end - slice.begin + cut - 1) / cut;
    }
    slice_start[i + 1] = slice_start[i] + pieces;
    item_start[i + 1] = item_start[i] + (pieces + kSlicesPerBlock - 1) / kSlicesPerBlock;
  }
  if (slice_start[g] > std::numeric_limits<int32_t>::max() ||
      item_start[g] > std::numeric_limits<int32_t>::max()) {
    return Status::Internal("too many slices in one query group");
  }
  work->num_slices = slice_start[g];
  work->num_items = item_start[g];
  work->slices.reset(new DevSlice[static_cast<std::size_t>(std::max<int64_t>(work->num_slices, 1))]);
  work->items.reset(new WorkItem[static_cast<std::size_t>(std::max<int64_t>(work->num_items, 1))]);
  return ParallelFor(static_cast<int64_t>(g), threads_, [&](int64_t i) -> Status {
    const std::size_t ii = static_cast<std::size_t>(i);
    int64_t s = slice_start[ii];
    for (const ListSlice& slice : cq.Slices(group[ii])) {
      // Longer slices (the tiled matcher's whole spans) are cut here so
      // that a block's work stays bounded.
      for (int64_t b = slice.begin; b < slice.end; b += cut) {
        DevSlice& d = work->slices[static_cast<std::size_t>(s++)];
        d.begin = b;
        d.length = static_cast<int32_t>(std::min<int64_t>(slice.end - b, cut));
        d.weight = slice.weight;
      }
    }
    int64_t item = item_start[ii];
    const int32_t end = static_cast<int32_t>(slice_start[ii + 1]);
    for (int32_t f = static_cast<int32_t>(slice_start[ii]); f < end; f += kSlicesPerBlock) {
      work->items[static_cast<std::size_t>(item++)] =
          WorkItem{static_cast<int32_t>(i), f, std::min(end, f + kSlicesPerBlock)};
    }
    return Status::Ok();
  }, cancel_);
}

Status GpuEngine::SortEmitFetch(Candidates* cand, const std::vector<int32_t>& group, int32_t k,
                                std::vector<std::vector<Hit>>* per_query, bool may_defer) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t g = static_cast<int32_t>(group.size());
  DeviceArray<unsigned long long> sorted;
  GENIE_RETURN_IF_ERROR(sorted.Allocate(static_cast<std::size_t>(cand->total), "sorted candidates"));
  std::size_t temp_bytes = 0;
  GENIE_RETURN_IF_ERROR(SortCandidates(nullptr, &temp_bytes, cand->keys.get(), sorted.get(),
                                       cand->total, g, cand->seg_begin.get(),
                                       cand->seg_end.get(), stream));
  DeviceMemory temp;
  GENIE_RETURN_IF_ERROR(temp.Allocate(std::max<std::size_t>(temp_bytes, 16), "sort scratch"));
  GENIE_RETURN_IF_ERROR(SortCandidates(temp.get(), &temp_bytes, cand->keys.get(), sorted.get(),
                                       cand->total, g, cand->seg_begin.get(),
                                       cand->seg_end.get(), stream));
  prof_.Mark("sort");
  DeviceHits found;
  GENIE_RETURN_IF_ERROR(found.Allocate(g, k));
  GENIE_RETURN_IF_ERROR(LaunchEmit(sorted.get(), cand->state, g, k, found.hits(), found.counts(), stream));
  return FetchHits(found, group, k, per_query, may_defer);
}

Status GpuEngine::FetchHits(const DeviceHits& found, const std::vector<int32_t>& group, int32_t k,
                            std::vector<std::vector<Hit>>* per_query, bool may_defer) {
  cudaStream_t stream = compute_stream_.get();
  const int32_t g = static_cast<int32_t>(group.size());
  GENIE_RETURN_IF_ERROR(CheckCancel());  // before the copy and the wait
  const std::size_t hits_at = found.hits_at;
  const std::size_t bytes = hits_at + static_cast<std::size_t>(g) * k * sizeof(DevHit);
  PendingHits pending;
  // Beyond kMaxPinnedBytes, or without pinned memory: through pageable memory.
  if (bytes > kMaxPinnedBytes || !pinned_.Take(bytes, &pending.slot).ok()) {
    // The copy below blocks (pageable memory), then the stream is waited for.
    // (DevHit and int32_t are 4-byte aligned: a vector of them holds the copy.)
    static_assert(sizeof(DevHit) % sizeof(int32_t) == 0, "DevHit is whole int32s");
    std::vector<int32_t> host((bytes + sizeof(int32_t) - 1) / sizeof(int32_t));
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host.data(), found.memory.get(), bytes, cudaMemcpyDeviceToHost, stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    prof_.Mark("emit+fetch");
    const int32_t* host_counts = host.data();
    DevHit host_hit;
    const char* host_hits = reinterpret_cast<const char*>(host.data()) + hits_at;
    for (int32_t i = 0; i < g; ++i) {
      auto& dst = (*per_query)[static_cast<std::size_t>(group[static_cast<std::size_t>(i)])];
      const int32_t c = std::min(host_counts[i], k);
      dst.resize(static_cast<std::size_t>(std::max(c, 0)));
      for (int32_t j = 0; j < c; ++j) {
        std::memcpy(&host_hit, host_hits + (static_cast<std::size_t>(i) * k + j) * sizeof(DevHit),
                    sizeof(DevHit));
        dst[static_cast<std::size_t>(j)] = Hit{host_hit.object, host_hit.score};
      }
    }
    return Status::Ok();
  }
  pending.hits_at = hits_at;
  pending.k = k;
  pending.per_query = per_query;
  Status status;
  try {
    pending.group = group;
  } catch (const std::bad_alloc&) {
    status = Status::OutOfMemory("out of host memory fetching hits");
  }
  cudaError_t error = cudaSuccess;
  if (status.ok()) {
    error = cudaMemcpyAsync(pending.slot->data(), found.memory.get(), bytes, cudaMemcpyDeviceToHost, stream);
  }
  if (status.ok()) {
    status = error == cudaSuccess ? pending.slot->MarkUsed(stream)
                                  : CudaStatus(error, "cudaMemcpyAsync (hits)", __FILE__, __LINE__);
  }
  if (status.ok() && defer_fetch_ && may_defer) {
    try {
      pending_hits_.push_back(std::move(pending));
      return Status::Ok();
    } catch (const std::bad_alloc&) {
      status = Status::OutOfMemory("out of host memory fetching hits");
    }
  }
  if (!status.ok()) {
    (void)cudaStreamSynchronize(stream);  // the slot's copies, if any, are done
    pinned_.Give(pending.slot);
    return status;
  }
  return Deliver(&pending);
}

Status GpuEngine::Deliver(PendingHits* pending) {
  PinnedSlot* slot = std::exchange(pending->slot, nullptr);
  Status status = slot->WaitIdle();
  if (status.ok()) try {
    prof_.Mark("emit+fetch");
    const auto* counts = reinterpret_cast<const int32_t*>(slot->data());
    const auto* hits = reinterpret_cast<const DevHit*>(slot->data() + pending->hits_at);
    const int32_t k = pending->k;
    for (std::size_t i = 0; i < pending->group.size(); ++i) {
      auto& dst = (*pending->per_query)[static_cast<std::size_t>(pending->group[i])];
      const int32_t c = std::min(counts[i], k);
      dst.resize(static_cast<std::size_t>(std::max(c, 0)));
      for (int32_t j = 0; j < c; ++j) {
        const DevHit& h = hits[i * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)];
        dst[static_cast<std::size_t>(j)] = Hit{h.object, h.score};
      }
    }
  } catch (const std::bad_alloc&) {
    status = Status::OutOfMemory("out of host memory fetching hits");
  }
  pinned_.Give(slot);  // on every way out: a slot left taken would never return
  return status;
}

Status GpuEngine::CollectHits(std::size_t count) {
  count = std::min(count, pending_hits_.size());
  Status status;
  std::size_t i = 0;
  for (; i < count && status.ok(); ++i) {
    status = CheckCancel();
    if (status.ok()) status = Deliver(&pending_hits_[i]);
  }
  if (!status.ok()) {
    DiscardHits();
    return status;
  }
  pending_hits_.erase(pending_hits_.begin(), pending_hits_.begin() + static_cast<std::ptrdiff_t>(count));
  return Status::Ok();
}

void GpuEngine::DiscardHits() {
  if (!pending_hits_.empty()) (void)cudaStreamSynchronize(compute_stream_.get());
  for (PendingHits& p : pending_hits_) {
    if (p.slot != nullptr) pinned_.Give(p.slot);
  }
  pending_hits_.clear();
}

Status GpuEngine::FetchOverflow(const DeviceArray<int32_t>& overflow, const std::vector<int32_t>& group,
                                std::vector<int32_t>* overflowed) {
  GENIE_RETURN_IF_ERROR(CheckCancel());  // before the blocking copy and wait
  std::vector<int32_t> flags(group.size());
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(flags.data(), overflow.get(),
                                             flags.size() * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, compute_stream_.get()));
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_stream_.get()));
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (flags[i] != 0) overflowed->push_back(group[i]);
  }
  return Status::Ok();
}

Status GpuEngine::AllocateGate(GateBuffers* gb, const std::vector<QueryParams>& params, int64_t za_total,
                               int64_t ht_total, int32_t k, GateState* gate, const QueryParams* d_params,
                               bool with_gate) {
  cudaStream_t stream = compute_stream_.get();
  const std::size_t g = params.size();
  if (d_params == nullptr) {
    GENIE_RETURN_IF_ERROR(CopyToDevice(&gb->queries, params, "query parameters"));
    d_params = gb->queries.get();
  }
  GENIE_RETURN_IF_ERROR(gb->ht.Allocate(static_cast<std::size_t>(ht_total), "hash tables"));
  if (with_gate) {
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->ht.get(), 0xFF, gb->ht.bytes(), stream));
    GENIE_RETURN_IF_ERROR(gb->za.Allocate(static_cast<std::size_t>(za_total), "ZipperArrays"));
    GENIE_RETURN_IF_ERROR(gb->at.Allocate(g, "AuditThresholds"));
    GENIE_RETURN_IF_ERROR(gb->overflow.Allocate(g, "overflow flags"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->za.get(), 0, gb->za.bytes(), stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gb->overflow.get(), 0, gb->overflow.bytes(), stream));
    GENIE_RETURN_IF_ERROR(LaunchInitAt(gb->at.get(), static_cast<int32_t>(g), stream));
  }
  gate->queries = d_params;
  gate->bc = nullptr;
  gate->za = gb->za.get();
  gate->at = gb->at.get();
  gate->ht = gb->ht.get();
  gate->overflow = gb->overflow.get();
  gate->k = k;
  gate->num_queries = static_cast<int32_t>(g);
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

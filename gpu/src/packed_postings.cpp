// Packed postings on the device (genie/packed_postings.hpp for the form and
// why): the GPU engine uploads them a chunk at a time, and keeps the 4-byte
// List Array beside them only when a count-table query needs it.
#include <algorithm>
#include <cstddef>

#include "cuda_util.hpp"
#include "genie/packed_postings.hpp"
#include "gpu_engine_impl.hpp"

namespace genie {
namespace gpu {

Status GpuEngine::UploadPacked() {
  const InvertedIndex& index = *index_;
  std::vector<uint32_t> dir;
  GENIE_RETURN_IF_ERROR(BuildPackDirectory(index, threads_, cancel_, &dir));
  GENIE_RETURN_IF_ERROR(gpu::Upload(dir.data(), dir.size(), &pack_dir_, "the pack directory"));
  const int64_t total = index.num_postings();
  GENIE_RETURN_IF_ERROR(packed_postings_.Allocate(static_cast<std::size_t>(total), "the packed List Array"));
  // Through a host staging buffer, a chunk at a time: the packed array is
  // never whole on the host.
  constexpr int64_t kChunk = int64_t{32} << 20;
  std::vector<uint16_t> staging(static_cast<std::size_t>(std::min(total, kChunk)));
  for (int64_t from = 0; from < total; from += kChunk) {
    GENIE_RETURN_IF_ERROR(CheckCancel());
    const int64_t to = std::min(total, from + kChunk);
    GENIE_RETURN_IF_ERROR(PackLowBits(index, from, to, threads_, cancel_, staging.data()));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(packed_postings_.get() + from, staging.data(),
                                          static_cast<std::size_t>(to - from) * sizeof(uint16_t),
                                          cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

Status GpuEngine::EnsureFullPostings(DeviceIndexView* view, uint64_t* avail) {
  if (view->postings != nullptr || index_ == nullptr) return Status::Ok();
  if (current_part_ != nullptr) {  // a packed part (multiple loading): its own ids
    const Span<int32_t> part = current_part_->postings();
    if (part.empty()) return Status::Ok();
    const uint64_t bytes = part.size() * sizeof(int32_t);
    if (bytes > *avail) {
      return Status::DeviceOutOfMemory("a packed part's 4-byte ids do not fit for a count-table query");
    }
    GENIE_RETURN_IF_ERROR(part_postings_.Allocate(part.size(), "a part's 4-byte ids"));
    GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(part_postings_.get(), part.data(), bytes,
                                               cudaMemcpyHostToDevice, compute_stream_.get()));
    view->postings = part_postings_.get();
    *avail -= bytes;
    return Status::Ok();
  }
  if (resident_postings_.size() > 0) {  // an earlier piece or search uploaded it
    view->postings = resident_postings_.get();
    return Status::Ok();
  }
  const Span<int32_t> postings = index_->postings();
  if (postings.empty()) return Status::Ok();
  // Both forms resident must still leave the room for search state that
  // Upload's rule leaves one form; else multiple loading takes the batch.
  uint64_t budget = 0;
  GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
  if (ResidentBytes() + postings.size() * sizeof(int32_t) > ResidentLimit(budget)) {
    return Status::DeviceOutOfMemory(
        "the 4-byte List Array does not fit beside the packed one for a count-table query");
  }
  GENIE_RETURN_IF_ERROR(resident_postings_.Allocate(postings.size(), "the List Array"));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(resident_postings_.get(), postings.data(),
                                             postings.size() * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, compute_stream_.get()));
  view->postings = resident_postings_.get();
  const uint64_t taken = resident_postings_.bytes();
  *avail = *avail > taken ? *avail - taken : 0;
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

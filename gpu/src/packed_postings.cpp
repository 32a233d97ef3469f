// Packed postings, host side: the pack directory and the low 16 bits of the
// ids, built on the host threads when an index is uploaded (see
// packed_postings.hpp for the form and why).
#include "packed_postings.hpp"

#include <algorithm>
#include <cstddef>

#include "cuda_util.hpp"
#include "genie/parallel.hpp"
#include "gpu_engine_impl.hpp"

namespace genie {
namespace gpu {

Status BuildPackDirectory(const InvertedIndex& index, int threads, const CancelCheck& cancel,
                          std::vector<uint32_t>* dir) {
  const Span<int64_t> offs = index.keyword_offsets();
  const Span<int32_t> postings = index.postings();
  const int64_t keywords = offs.size() > 0 ? static_cast<int64_t>(offs.size()) - 1 : 0;
  const int32_t tiles = PackTiles(index.num_objects());
  const std::size_t row = static_cast<std::size_t>(tiles) + 1;
  dir->assign(static_cast<std::size_t>(keywords) * row, 0);
  constexpr int64_t kPerTask = 256;  // keywords per task: small enough to poll cancel
  return ParallelFor((keywords + kPerTask - 1) / kPerTask, threads, [&](int64_t task) -> Status {
    const int64_t last = std::min(keywords, (task + 1) * kPerTask);
    for (int64_t kw = task * kPerTask; kw < last; ++kw) {
      const int32_t* list = postings.data() + offs[static_cast<std::size_t>(kw)];
      const int64_t length = offs[static_cast<std::size_t>(kw) + 1] - offs[static_cast<std::size_t>(kw)];
      if (length > UINT32_MAX) return Status::Internal("a keyword list too long to pack");
      uint32_t* out = dir->data() + static_cast<std::size_t>(kw) * row;
      // One walk of the sorted list: the first position at or past each tile start.
      int64_t p = 0;
      for (int32_t t = 0; t <= tiles; ++t) {
        const int64_t start = static_cast<int64_t>(t) << kPackShift;
        while (p < length && static_cast<int64_t>(list[p]) < start) ++p;
        out[t] = static_cast<uint32_t>(p);
      }
    }
    return Status::Ok();
  }, cancel);
}

Status PackLowBits(const InvertedIndex& index, int64_t begin, int64_t end, int threads,
                   const CancelCheck& cancel, uint16_t* out) {
  const int32_t* src = index.postings().data();
  constexpr int64_t kPerTask = 1 << 20;
  const int64_t count = end - begin;
  return ParallelFor((count + kPerTask - 1) / kPerTask, threads, [&](int64_t task) -> Status {
    const int64_t from = begin + task * kPerTask, to = std::min(end, from + kPerTask);
    for (int64_t i = from; i < to; ++i) {
      out[i - begin] = static_cast<uint16_t>(static_cast<uint32_t>(src[i]) & 0xFFFFu);
    }
    return Status::Ok();
  }, cancel);
}

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
  if (resident_postings_.size() > 0) {  // an earlier piece or search uploaded it
    view->postings = resident_postings_.get();
    return Status::Ok();
  }
  const Span<int32_t> postings = index_->postings();
  if (postings.empty()) return Status::Ok();
  // Both forms resident must still leave half the budget for search state,
  // as Upload's rule for one form; else multiple loading takes the batch.
  uint64_t budget = 0;
  GENIE_RETURN_IF_ERROR(EffectiveBudget(&budget));
  if (ResidentBytes() + postings.size() * sizeof(int32_t) > budget / 2) {
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

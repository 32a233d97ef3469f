// The answers a kernel appends through one counter into a device buffer,
// grown when they outgrow it (internal to gpu/src: the range searches of
// vectors, range_search.cu, and of strings, string_range.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "cuda_util.hpp"

namespace genie {
namespace gpu {

template <typename Answer>
class AnswerBuffer {
 public:
  Status Init(std::size_t capacity, const char* what) {
    what_ = what;
    capacity_ = capacity;
    GENIE_RETURN_IF_ERROR(count_.Allocate(1, "answer count"));
    return answers_.Allocate(capacity, what);
  }

  Answer* answers() { return answers_.get(); }
  unsigned long long* count() { return count_.get(); }
  unsigned long long capacity() const { return capacity_; }

  // Zeroes the counter, runs launch() (which queues a kernel that appends
  // through count() into answers(), storing those below capacity() and
  // counting all) and appends the answers to *out.  When they outgrew the
  // buffer, it grows to their number and launch() runs again: the kernel
  // must find the same answers every time (in any order).
  template <typename Launch>
  Status Run(const Launch& launch, std::vector<Answer>* out) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemset(count_.get(), 0, count_.bytes()));
      GENIE_RETURN_IF_ERROR(launch());
      unsigned long long found = 0;
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(&found, count_.get(), sizeof(found), cudaMemcpyDeviceToHost));
      if (found <= capacity_) {
        const std::size_t before = out->size();
        out->resize(before + static_cast<std::size_t>(found));
        if (found > 0)
          GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->data() + before, answers_.get(),
                                                sizeof(Answer) * static_cast<std::size_t>(found),
                                                cudaMemcpyDeviceToHost));
        return Status::Ok();
      }
      capacity_ = found;
      GENIE_RETURN_IF_ERROR(answers_.Allocate(static_cast<std::size_t>(capacity_), what_));
    }
    return Status::Internal("a GPU search's count of answers changed between two runs");
  }

 private:
  const char* what_ = "answers";
  unsigned long long capacity_ = 0;
  DeviceArray<unsigned long long> count_;
  DeviceArray<Answer> answers_;
};

}  // namespace gpu
}  // namespace genie

// gpu/src: the k-th smallest of each row of a matrix of non-negative floats,
// or a close bound on it
// (the exact vector scan's upper bounds, vector_scan.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

// kth[i] >= the k-th smallest of row i of d32 (gn rows of n_rows values,
// each >= 0 or +inf; +inf when k > n_rows): the largest float that shares
// its first 22 bits (at most 2^-13 relative above it), queued on stream.  Device
// scratch comes from DeviceMemory: call it inside a DeviceBlockScope.
Status LaunchKthSelect(const float* d32, int32_t gn, int32_t n_rows, int32_t k, float* kth, cudaStream_t stream);

}  // namespace gpu
}  // namespace genie

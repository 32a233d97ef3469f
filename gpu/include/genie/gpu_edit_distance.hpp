// Batch edit-distance verification on the GPU: plain C++, no CUDA types.
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/sequence.hpp"
#include "genie/status.hpp"

namespace genie {

// The same values CpuEditDistances computes, for every (query, candidate)
// pair of the batch, on device `device_ordinal`: one thread per pair,
// bit-parallel Myers when the shorter string has <= kMyersMaxLength code
// points, banded DP with doubling thresholds beyond (a workspace of
// min(|q|, |s|) + 1 ints per such pair in device memory).
//
// Errors: InvalidArgument for a malformed batch; DeviceUnavailable when there
// is no usable GPU (no driver, no device, bad ordinal, no kernel image);
// DeviceOutOfMemory when the batch does not fit (callers may fall back to
// CpuEditDistances or split the batch); DeviceError for other CUDA failures.
// An empty batch returns Ok without touching the device.  cancel is polled
// on entry and just before the launch (Status::Cancelled()); the kernel
// itself runs to its end.
Status GpuEditDistances(const EditDistanceBatch& batch, int32_t device_ordinal,
                        std::vector<int32_t>* distances,
                        const CancelCheck& cancel = CancelCheck());

}  // namespace genie

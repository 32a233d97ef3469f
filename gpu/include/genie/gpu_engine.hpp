// The CUDA engine's host interface: plain C++, no CUDA types, so the C API (capi/)
// can call it without including CUDA headers.
#pragma once
#include <memory>
#include <vector>

#include "genie/engine.hpp"
#include "genie/types.h"

namespace genie {

// The GPUs the CUDA runtime sees; empty when there is no driver or device.
// Never initialises anything beyond the probe and never fails hard.
std::vector<genie_device_info> ListGpuDevices();

// CUDA runtime version compiled against (e.g. 13000).
int CudaRuntimeVersion();

// The c-PQ engine (paper section III-C) with multiple loading (III-D).
// Returns nullptr and sets *status (GENIE_DEVICE_UNAVAILABLE when no usable
// GPU) on failure.
std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options, Status* status);

// Baseline for the benchmark (the paper's GPU-SPQ): a full count table per
// query and a top-k selection; exact, memory-hungry.
std::unique_ptr<Engine> MakeGpuCountTableEngine(const EngineOptions& options, Status* status);

}  // namespace genie

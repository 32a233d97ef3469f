// Device probing: safe in a process with no driver and no device.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_engine.hpp"
#include "kernels.hpp"

namespace genie {

int CudaRuntimeVersion() { return CUDART_VERSION; }

void ReleaseDeviceBlockCache() { gpu::DeviceMemory::ReleaseAllCaches(); }

void PrepareDevice(int ordinal) noexcept {
  try {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && ordinal >= 0 && ordinal < count) {
      gpu::DeviceGuard guard;
      if (guard.Enter(ordinal).ok()) {
        (void)cudaFree(nullptr);  // makes the primary context
        (void)gpu::ProbeKernelImage();
      }
    }
  } catch (...) {
    // a failed allocation of a Status message: the search will meet the same
  }
  (void)cudaGetLastError();
}

std::vector<genie_device_info> ListGpuDevices() {
  std::vector<genie_device_info> devices;
  try {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      // cudaErrorNoDevice, cudaErrorInsufficientDriver, ...: no GPU rows.
      (void)cudaGetLastError();
      return devices;
    }
    for (int i = 0; i < count; ++i) {
      genie_device_info info;
      std::memset(&info, 0, sizeof(info));
      info.kind = GENIE_DEVICE_GPU;
      info.ordinal = i;
      cudaDeviceProp prop;
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
        (void)cudaGetLastError();
        std::snprintf(info.name, sizeof(info.name), "CUDA device %d", i);
        std::snprintf(info.note, sizeof(info.note), "cudaGetDeviceProperties failed");
        devices.push_back(info);
        continue;
      }
      std::snprintf(info.name, sizeof(info.name), "%s", prop.name);
      info.memory_bytes = prop.totalGlobalMem;
      info.compute_major = prop.major;
      info.compute_minor = prop.minor;
      info.processors = prop.multiProcessorCount;
      info.usable = 0;
      int compute_mode = cudaComputeModeDefault;
      if (cudaDeviceGetAttribute(&compute_mode, cudaDevAttrComputeMode, i) != cudaSuccess) {
        (void)cudaGetLastError();
      }
      if (compute_mode == cudaComputeModeProhibited) {
        std::snprintf(info.note, sizeof(info.note), "compute mode is prohibited");
        devices.push_back(info);
        continue;
      }
      gpu::DeviceGuard guard;
      Status status = guard.Enter(i);
      if (status.ok()) {
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
          info.free_memory_bytes = free_bytes;
        } else {
          (void)cudaGetLastError();
        }
        status = gpu::ProbeKernelImage();
      }
      if (status.ok()) {
        info.usable = 1;
      } else {
        std::snprintf(info.note, sizeof(info.note),
                      "cannot run genie's kernels (built for compute capability 8.0 and 9.0, "
                      "PTX 9.0): %s",
                      status.message().c_str());
      }
      devices.push_back(info);
    }
  } catch (...) {
    // A failed allocation here just hides the remaining rows.
  }
  return devices;
}

}  // namespace genie

#include "cuda_util.hpp"

#include <atomic>
#include <cstring>
#include <string>

namespace genie {
namespace gpu {

bool IsUnavailableError(cudaError_t error) {
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorNotSupported:
      return true;
    default:
      return false;
  }
}

Status CudaStatus(cudaError_t error, const char* what, const char* file, int line) {
  // Clear the (non-sticky) error so the next call starts clean.  A sticky
  // error (a faulting kernel) stays, and every later call reports it.
  (void)cudaGetLastError();
  const char* base = std::strrchr(file, '/');
  std::string where = base ? base + 1 : file;
  std::string message = std::string("CUDA error in ") + what + " at " + where + ":" +
                        std::to_string(line) + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")";
  if (error == cudaErrorMemoryAllocation) return Status::DeviceOutOfMemory(std::move(message));
  if (IsUnavailableError(error)) return Status::DeviceUnavailable(std::move(message));
  return Status::DeviceError(std::move(message));
}

Status DeviceGuard::Enter(int ordinal) {
  int current = -1;
  GENIE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (current != ordinal) {
    GENIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
    previous_ = current;
  }
  return Status::Ok();
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

namespace {
std::atomic<uint64_t> g_live_bytes{0};
std::atomic<uint64_t> g_peak_bytes{0};

void AddLive(uint64_t bytes) {
  const uint64_t now = g_live_bytes.fetch_add(bytes) + bytes;
  uint64_t peak = g_peak_bytes.load();
  while (now > peak && !g_peak_bytes.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

Status DeviceMemory::Allocate(std::size_t bytes, const char* what) {
  Reset();
  if (bytes == 0) return Status::Ok();
  void* ptr = nullptr;
  cudaError_t error = cudaMalloc(&ptr, bytes);
  if (error != cudaSuccess) {
    Status status = CudaStatus(error, "cudaMalloc", __FILE__, __LINE__);
    return Status(status.code(), status.message() + " allocating " + std::to_string(bytes) +
                                     " bytes for " + what);
  }
  ptr_ = ptr;
  bytes_ = bytes;
  AddLive(bytes);
  return Status::Ok();
}

void DeviceMemory::Reset() {
  if (ptr_ != nullptr) {
    (void)cudaFree(ptr_);
    g_live_bytes.fetch_sub(bytes_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

uint64_t DeviceMemory::LiveBytes() { return g_live_bytes.load(); }
uint64_t DeviceMemory::PeakBytes() { return g_peak_bytes.load(); }
void DeviceMemory::ResetPeak() { g_peak_bytes.store(g_live_bytes.load()); }

bool HostRegistration::Register(const void* ptr, std::size_t bytes) {
  Reset();
  if (ptr == nullptr || bytes == 0) return false;
  void* p = const_cast<void*>(ptr);
  if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  ptr_ = p;
  return true;
}

void HostRegistration::Reset() {
  if (ptr_ != nullptr) (void)cudaHostUnregister(ptr_);
  ptr_ = nullptr;
}

Status Stream::Create() {
  Reset();
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  return Status::Ok();
}

void Stream::Reset() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

Status Event::Create(bool timing) {
  Reset();
  GENIE_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Status::Ok();
}

void Event::Reset() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
  event_ = nullptr;
}

}  // namespace gpu
}  // namespace genie

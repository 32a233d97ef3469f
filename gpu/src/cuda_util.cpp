#include "cuda_util.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

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

namespace {

// The block cache (see DeviceMemory).  Never destroyed: blocks are released
// with the process, like the CUDA context.
constexpr std::size_t kBlockMinBytes = 4096;
constexpr std::size_t kBlockMaxBytes = std::size_t{16} << 20;  // larger ones are not cached
constexpr std::size_t kBlockCacheBytes = std::size_t{64} << 20;

struct CachedBlock {
  int device;
  std::size_t bytes;
  void* ptr;
};

std::mutex g_cache_mutex;
std::vector<CachedBlock>* g_cache = new std::vector<CachedBlock>();
std::atomic<uint64_t> g_cache_bytes{0};

thread_local int t_scope_depth = 0;
thread_local std::vector<CachedBlock>* t_deferred = nullptr;

std::size_t SizeClass(std::size_t bytes) {
  std::size_t c = kBlockMinBytes;
  while (c < bytes) c <<= 1;
  return c;
}

int CurrentDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

void* TakeCached(int device, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (std::size_t i = 0; i < g_cache->size(); ++i) {
    if ((*g_cache)[i].device == device && (*g_cache)[i].bytes == bytes) {
      void* ptr = (*g_cache)[i].ptr;
      (*g_cache)[i] = g_cache->back();
      g_cache->pop_back();
      g_cache_bytes.fetch_sub(bytes);
      return ptr;
    }
  }
  return nullptr;
}

}  // namespace

Status DeviceMemory::Allocate(std::size_t bytes, const char* what) {
  Reset();
  if (bytes == 0) return Status::Ok();
  const bool small = bytes <= kBlockMaxBytes;
  const std::size_t capacity = small ? SizeClass(bytes) : bytes;
  void* ptr = small ? TakeCached(CurrentDevice(), capacity) : nullptr;
  if (ptr == nullptr) {
    cudaError_t error = cudaMalloc(&ptr, capacity);
    if (error == cudaErrorMemoryAllocation && CachedBytes() > 0) {
      (void)cudaGetLastError();
      ReleaseCache();
      error = cudaMalloc(&ptr, capacity);
    }
    if (error != cudaSuccess) {
      Status status = CudaStatus(error, "cudaMalloc", __FILE__, __LINE__);
      return Status(status.code(), status.message() + " allocating " + std::to_string(bytes) +
                                       " bytes for " + what);
    }
  }
  ptr_ = ptr;
  bytes_ = bytes;
  capacity_ = capacity;
  AddLive(bytes);
  return Status::Ok();
}

void DeviceMemory::Reset() {
  if (ptr_ != nullptr) {
    g_live_bytes.fetch_sub(bytes_);
    const int device = t_scope_depth > 0 && capacity_ <= kBlockMaxBytes ? CurrentDevice() : -1;
    bool kept = false;
    if (device >= 0) {
      try {
        t_deferred->push_back(CachedBlock{device, capacity_, ptr_});
        kept = true;
      } catch (const std::bad_alloc&) {
      }
    }
    if (!kept) (void)cudaFree(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
  capacity_ = 0;
}

void DeviceMemory::ReleaseCache() {
  const int device = CurrentDevice();
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (std::size_t i = 0; i < g_cache->size();) {
    if ((*g_cache)[i].device == device) {
      (void)cudaFree((*g_cache)[i].ptr);
      g_cache_bytes.fetch_sub((*g_cache)[i].bytes);
      (*g_cache)[i] = g_cache->back();
      g_cache->pop_back();
    } else {
      ++i;
    }
  }
}

void DeviceMemory::ReleaseAllCaches() {
  int previous = -1;
  const bool known = cudaGetDevice(&previous) == cudaSuccess;
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (const CachedBlock& b : *g_cache) {
    if (cudaSetDevice(b.device) == cudaSuccess) (void)cudaFree(b.ptr);
    g_cache_bytes.fetch_sub(b.bytes);
  }
  g_cache->clear();
  if (known) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

uint64_t DeviceMemory::CachedBytes() { return g_cache_bytes.load(); }

DeviceBlockScope::DeviceBlockScope() {
  if (t_scope_depth++ == 0 && t_deferred == nullptr) {
    try {
      t_deferred = new std::vector<CachedBlock>();  // per thread, kept
    } catch (const std::bad_alloc&) {
      --t_scope_depth;  // no scope: blocks are freed at once
      throw;
    }
  }
}

DeviceBlockScope::~DeviceBlockScope() {
  if (--t_scope_depth > 0 || t_deferred->empty()) return;
  // Every use of the deferred blocks was queued before this point.
  const bool idle = cudaDeviceSynchronize() == cudaSuccess;
  if (!idle) (void)cudaGetLastError();
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (const CachedBlock& b : *t_deferred) {
    // after a device error, or beyond the cap, a block is freed
    bool kept = false;
    if (idle && g_cache_bytes.load() + b.bytes <= kBlockCacheBytes) {
      try {
        g_cache->push_back(b);
        g_cache_bytes.fetch_add(b.bytes);
        kept = true;
      } catch (const std::bad_alloc&) {
      }
    }
    if (!kept) (void)cudaFree(b.ptr);
  }
  t_deferred->clear();
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

Status CheckDevice(int32_t device_ordinal) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::DeviceUnavailable(std::string("no usable GPU: cudaGetDeviceCount failed: ") +
                                     cudaGetErrorName(error));
  }
  if (device_ordinal < 0 || device_ordinal >= count) {
    return Status::DeviceUnavailable("no usable GPU: device_ordinal " + std::to_string(device_ordinal) +
                                     " does not exist (" + std::to_string(count) + " CUDA device(s))");
  }
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

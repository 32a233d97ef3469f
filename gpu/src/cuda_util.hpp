// CUDA error handling and RAII wrappers for the GPU engine.  Internal to
// gpu/src: it includes the CUDA runtime API, which gpu/include never does.
//
// Every CUDA call goes through GENIE_CUDA_RETURN_IF_ERROR, every launch is
// followed by GENIE_CUDA_CHECK_LAUNCH; the error becomes a genie::Status:
//   cudaErrorMemoryAllocation               -> DeviceOutOfMemory
//   no driver / no device / no kernel image -> DeviceUnavailable
//   anything else                           -> DeviceError (call site + CUDA's string)
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

// True for the errors that mean "there is no usable GPU here".
bool IsUnavailableError(cudaError_t error);

// Builds the Status for a failed call and clears the runtime's (non-sticky)
// last-error state so that later calls are not blamed for it.
Status CudaStatus(cudaError_t error, const char* what, const char* file, int line);

#define GENIE_CUDA_RETURN_IF_ERROR(call)                                              \
  do {                                                                                \
    cudaError_t genie_cuda_error_ = (call);                                           \
    if (genie_cuda_error_ != cudaSuccess)                                             \
      return ::genie::gpu::CudaStatus(genie_cuda_error_, #call, __FILE__, __LINE__);  \
  } while (0)

// After a kernel launch: launch-configuration errors show up here.
#define GENIE_CUDA_CHECK_LAUNCH(kernel_name)                                          \
  do {                                                                                \
    cudaError_t genie_cuda_error_ = cudaGetLastError();                               \
    if (genie_cuda_error_ != cudaSuccess)                                             \
      return ::genie::gpu::CudaStatus(genie_cuda_error_, "launch of " kernel_name,    \
                                      __FILE__, __LINE__);                            \
  } while (0)

// DeviceUnavailable unless CUDA sees a device numbered device_ordinal.
Status CheckDevice(int32_t device_ordinal);

// Makes device `ordinal` current for the calling thread for the lifetime of
// the guard (CUDA's current device is per thread; PostgreSQL backends and the
// tests may call from different threads).
class DeviceGuard {
 public:
  DeviceGuard() = default;
  Status Enter(int ordinal);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Device memory.  Freed in the destructor; cudaFree waits for the work that
// might still use it, so an early return on an error path is safe.
//
// Inside a DeviceBlockScope (a search) blocks up to 256 MB are not freed
// but kept for reuse: cudaMalloc and cudaFree cost tens of microseconds
// each (cudaFree also waits for the device), and a search of a handful of
// queries makes a dozen of them.  A block freed in a scope becomes reusable
// only when the outermost scope ends, after the device has finished the
// work queued so far; later allocations of the same size class (a power
// of two up to 16 MB, an eighth of one above) take it.  At most a 32nd of the device's memory (64 MB to 1 GB)
// stays cached; an allocation that finds the device out of memory frees
// the cache and the blocks its own scope freed, and tries again.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { Reset(); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)),
        capacity_(std::exchange(other.capacity_, 0)),
        device_(std::exchange(other.device_, -1)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      device_ = std::exchange(other.device_, -1);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // what names the buffer in the error message.
  Status Allocate(std::size_t bytes, const char* what);
  void Reset();
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

  // Frees every cached block of the current device.
  static void ReleaseCache();
  // Frees every cached block of every device (the current device is kept).
  static void ReleaseAllCaches();
  // Bytes of device memory cached for reuse (all devices).
  static uint64_t CachedBytes();

  // Process-wide count of bytes held by DeviceMemory objects, and its peak
  // since the last ResetPeak (for the benchmark's memory-per-query figure).
  static uint64_t LiveBytes();
  static uint64_t PeakBytes();
  static void ResetPeak();

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;     // asked for
  std::size_t capacity_ = 0;  // allocated (the size class when cached)
  int device_ = -1;          // where it was allocated (a cached block returns there)
};

// Marks the calling thread's searches (see DeviceMemory); nests.  The
// outermost scope's end waits for the current device to finish its work.
class DeviceBlockScope {
 public:
  DeviceBlockScope();
  ~DeviceBlockScope();
  DeviceBlockScope(const DeviceBlockScope&) = delete;
  DeviceBlockScope& operator=(const DeviceBlockScope&) = delete;
};

template <typename T>
class DeviceArray {
 public:
  Status Allocate(std::size_t count, const char* what) {
    count_ = 0;
    GENIE_RETURN_IF_ERROR(memory_.Allocate(count * sizeof(T), what));
    count_ = count;
    return Status::Ok();
  }
  void Reset() {
    memory_.Reset();
    count_ = 0;
  }
  T* get() const { return static_cast<T*>(memory_.get()); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  DeviceMemory memory_;
  std::size_t count_ = 0;
};

// Small host arrays gathered into one buffer and uploaded with one copy: a
// pageable cudaMemcpyAsync costs microseconds, which a call of a few
// queries would otherwise pay once per array.  Sections are 16-byte aligned.
class PinnedPool;

// The most a search stages through pinned memory in one slot: an engine
// keeps its slots, and a one-off batch should not pin gigabytes for good.
constexpr std::size_t kMaxPinnedBytes = std::size_t{64} << 20;
// Take adds a slot rather than wait for a busy one (none idle) while the
// engine has fewer than kMaxPinnedSlots and the copy is at most
// kGrowPinnedBytes; a slot is also added whenever every slot is taken.
constexpr std::size_t kMaxPinnedSlots = 8;
constexpr std::size_t kGrowPinnedBytes = std::size_t{8} << 20;

class UploadBatch {
 public:
  // Adds count elements at src, which must stay unchanged until Upload (the
  // bytes are copied once, into the staging slot, not gathered first).
  template <typename T>
  std::size_t Add(const T* src, std::size_t count) {
    const std::size_t offset = (size_ + 15) / 16 * 16;
    parts_.push_back({src, count * sizeof(T), offset});
    size_ = offset + std::max<std::size_t>(count, 1) * sizeof(T);
    return offset;
  }
  template <typename T>
  std::size_t Add(const std::vector<T>& src) {
    return Add(src.data(), src.size());
  }
  // Through pageable memory (gathered here, then one copy).
  Status Upload(DeviceMemory* dst, cudaStream_t stream, const char* what);
  // The same through page-locked staging from pool: the copy is then truly
  // asynchronous (a copy from pageable memory blocks the host until the
  // device has drained the stream ahead of it: a whole kernel of the piece
  // before, in a pipelined search).
  Status Upload(DeviceMemory* dst, cudaStream_t stream, const char* what, PinnedPool* pool);
  template <typename T>
  static T* At(const DeviceMemory& memory, std::size_t offset) {
    return reinterpret_cast<T*>(static_cast<unsigned char*>(memory.get()) + offset);
  }

 private:
  struct Part {
    const void* src;
    std::size_t bytes;
    std::size_t offset;
  };
  void Gather(unsigned char* dst) const;
  std::vector<Part> parts_;
  std::size_t size_ = 0;
};

// Blocks of per_block threads (or items) that cover items.
inline unsigned GridBlocks(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

// A new device array holding count elements copied from host (at least
// one element allocated, so that an empty array still has an address).
template <typename T>
Status Upload(const T* host, std::size_t count, DeviceArray<T>* dev, const char* what) {
  GENIE_RETURN_IF_ERROR(dev->Allocate(count > 0 ? count : 1, what));
  if (count > 0) {
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dev->get(), host, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

// Pinned host memory: existing host pages locked in place (cudaHostRegister),
// so that asynchronous copies from them really are asynchronous.
class HostRegistration {
 public:
  HostRegistration() = default;
  ~HostRegistration() { Reset(); }
  HostRegistration(HostRegistration&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  HostRegistration& operator=(HostRegistration&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  // Returns false (and leaves nothing registered, the error cleared) when the
  // pages cannot be locked; copies then still work, only synchronously.
  bool Register(const void* ptr, std::size_t bytes);
  void Reset();

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() = default;
  ~Stream() { Reset(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Status Create();
  void Reset();
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  ~Event() { Reset(); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Status Create(bool timing = false);
  void Reset();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory a search stages its copies in, kept from call to
// call (cudaMallocHost costs milliseconds for megabytes), with an event
// recorded after the last copy that used it: reused only when that copy is
// done.
class PinnedSlot {
 public:
  PinnedSlot() = default;
  ~PinnedSlot();
  PinnedSlot(const PinnedSlot&) = delete;
  PinnedSlot& operator=(const PinnedSlot&) = delete;
  // At least bytes (grown by doubling; the contents are not kept).
  Status Reserve(std::size_t bytes);
  unsigned char* data() const { return static_cast<unsigned char*>(ptr_); }
  std::size_t capacity() const { return capacity_; }
  // Records the event after the copies queued so far on stream.
  Status MarkUsed(cudaStream_t stream);
  // Whether those copies are done (without waiting).
  bool Idle();
  // Waits for those copies (at once when there were none).
  Status WaitIdle();

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
  Event done_;
  bool recorded_ = false;
};

// An engine's pinned slots: taken for a copy (or a deferred fetch) and given
// back; a taken slot is never handed out again until given back.
class PinnedPool {
 public:
  // A slot not taken, of at least bytes: an idle one, else a new one (see
  // kMaxPinnedSlots), else the call waits for a busy one.
  Status Take(std::size_t bytes, PinnedSlot** slot);
  void Give(PinnedSlot* slot);
  // Frees every slot (none may be taken).
  void Reset() {
    slots_.clear();
    taken_.clear();
  }

 private:
  std::vector<std::unique_ptr<PinnedSlot>> slots_;
  std::vector<bool> taken_;
};

}  // namespace gpu
}  // namespace genie

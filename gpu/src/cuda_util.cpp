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
// Larger ones are not cached.  A pipelined LSH batch at 4.5M objects takes
// tables and tile bounds of about 40 MB a piece: under a lower limit each
// piece paid a cudaMalloc and a cudaFree, which waits for the device, in
// the middle of the pipeline.
constexpr std::size_t kBlockMaxBytes = std::size_t{256} << 20;

// At most this much stays cached: a 32nd of the first device's memory,
// between 64 MB and 1 GB (4 pieces of such a batch take about 600 MB).
std::size_t BlockCacheBytes() {
  static const std::size_t cap = [] {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      total_bytes = 0;
    }
    return std::min<std::size_t>(std::max<std::size_t>(total_bytes / 32, std::size_t{64} << 20),
                                 std::size_t{1} << 30);
  }();
  return cap;
}

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
thread_local std::size_t t_deferred_bytes = 0;

// Powers of two up to 16 MB; above, eighths of the power of two, so that a
// large block wastes at most an eighth (the planner budgets exact bytes).
std::size_t SizeClass(std::size_t bytes) {
  std::size_t c = kBlockMinBytes;
  while (c < bytes) c <<= 1;
  if (c <= (std::size_t{16} << 20)) return c;
  const std::size_t step = c / 8;
  return (bytes + step - 1) / step * step;
}

int CurrentDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

// The blocks this thread's search freed on the current device, which wait
// for the end of its scope: freed now, once the device has finished the
// work queued so far (an allocation that found the device full).
void ReleaseDeferred() {
  if (t_deferred == nullptr || t_deferred->empty()) return;
  const int device = CurrentDevice();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // a device error: the blocks wait for the scope's end
  }
  for (std::size_t i = 0; i < t_deferred->size();) {
    if ((*t_deferred)[i].device == device) {
      (void)cudaFree((*t_deferred)[i].ptr);
      t_deferred_bytes -= (*t_deferred)[i].bytes;
      (*t_deferred)[i] = t_deferred->back();
      t_deferred->pop_back();
    } else {
      ++i;
    }
  }
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
    if (error == cudaErrorMemoryAllocation &&
        (CachedBytes() > 0 || (t_deferred != nullptr && !t_deferred->empty()))) {
      (void)cudaGetLastError();
      ReleaseDeferred();
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
  device_ = CurrentDevice();
  AddLive(bytes);
  return Status::Ok();
}

void DeviceMemory::Reset() {
  if (ptr_ != nullptr) {
    g_live_bytes.fetch_sub(bytes_);
    // Kept for the end of the scope while a search's freed blocks stay
    // within what the cache may hold; beyond, freed now (cudaFree waits for
    // the device), so that a long pipelined search does not pile up pieces.
    const bool defer = t_scope_depth > 0 && capacity_ <= kBlockMaxBytes && device_ >= 0 &&
                       t_deferred_bytes + capacity_ <= BlockCacheBytes();
    bool kept = false;
    if (defer) {
      try {
        t_deferred->push_back(CachedBlock{device_, capacity_, ptr_});
        t_deferred_bytes += capacity_;
        kept = true;
      } catch (const std::bad_alloc&) {
      }
    }
    if (!kept) (void)cudaFree(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
  capacity_ = 0;
  device_ = -1;
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
    if (idle && g_cache_bytes.load() + b.bytes <= BlockCacheBytes()) {
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
  t_deferred_bytes = 0;
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

PinnedSlot::~PinnedSlot() {
  if (ptr_ != nullptr) {
    if (recorded_) (void)cudaEventSynchronize(done_.get());
    (void)cudaFreeHost(ptr_);
  }
}

Status PinnedSlot::Reserve(std::size_t bytes) {
  if (bytes <= capacity_ && ptr_ != nullptr) return Status::Ok();
  GENIE_RETURN_IF_ERROR(WaitIdle());
  const std::size_t want = std::max<std::size_t>({bytes, capacity_ * 2, 64 << 10});
  if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
  ptr_ = nullptr;
  capacity_ = 0;
  cudaError_t error = cudaMallocHost(&ptr_, want);
  if (error != cudaSuccess) {
    ptr_ = nullptr;
    return CudaStatus(error, "cudaMallocHost (staging)", __FILE__, __LINE__);
  }
  capacity_ = want;
  return Status::Ok();
}

Status PinnedSlot::MarkUsed(cudaStream_t stream) {
  if (done_.get() == nullptr) GENIE_RETURN_IF_ERROR(done_.Create());
  GENIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_.get(), stream));
  recorded_ = true;
  return Status::Ok();
}

bool PinnedSlot::Idle() {
  if (!recorded_) return true;
  const cudaError_t state = cudaEventQuery(done_.get());
  if (state == cudaErrorNotReady) return false;
  (void)cudaGetLastError();  // an error shows again at WaitIdle
  if (state == cudaSuccess) recorded_ = false;
  return state == cudaSuccess;
}

Status PinnedSlot::WaitIdle() {
  if (!recorded_) return Status::Ok();
  GENIE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_.get()));
  recorded_ = false;
  return Status::Ok();
}

Status PinnedPool::Take(std::size_t bytes, PinnedSlot** slot) {
  *slot = nullptr;
  std::size_t pick = slots_.size();
  bool pick_idle = false;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (taken_[i]) continue;
    // an idle slot before one whose copies are still queued (waiting for
    // those would wait for the work ahead of them); then the smallest that
    // holds bytes, else the largest
    const bool idle = slots_[i]->Idle();
    if (pick == slots_.size() || (idle && !pick_idle)) {
      pick = i;
      pick_idle = idle;
      continue;
    }
    if (idle != pick_idle) continue;
    const std::size_t have = slots_[pick]->capacity(), cap = slots_[i]->capacity();
    const bool fits = cap >= bytes, pick_fits = have >= bytes;
    if ((fits && (!pick_fits || cap < have)) || (!fits && !pick_fits && cap > have)) pick = i;
  }
  // A new slot rather than waiting for a busy one: in a pipelined search the
  // slots not taken hold uploads queued behind the kernel the device is
  // running, and waiting for them held the host for that kernel (1 ms a
  // piece of an LSH batch) instead of preparing the next piece.  Only for
  // small copies (the slots are kept for the engine's life, and pinning
  // tens of MB costs more than the wait) and up to kMaxPinnedSlots.
  if (pick == slots_.size() ||
      (!pick_idle && bytes <= kGrowPinnedBytes && slots_.size() < kMaxPinnedSlots)) {
    slots_.push_back(std::make_unique<PinnedSlot>());
    taken_.push_back(false);
    pick = slots_.size() - 1;
  }
  PinnedSlot* s = slots_[pick].get();
  GENIE_RETURN_IF_ERROR(s->WaitIdle());
  GENIE_RETURN_IF_ERROR(s->Reserve(bytes));
  taken_[pick] = true;
  *slot = s;
  return Status::Ok();
}

void PinnedPool::Give(PinnedSlot* slot) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].get() == slot) taken_[i] = false;
  }
}

void UploadBatch::Gather(unsigned char* dst) const {
  for (const Part& part : parts_) {
    if (part.bytes > 0) std::memcpy(dst + part.offset, part.src, part.bytes);
  }
}

Status UploadBatch::Upload(DeviceMemory* dst, cudaStream_t stream, const char* what) {
  GENIE_RETURN_IF_ERROR(dst->Allocate(std::max<std::size_t>(size_, 16), what));
  if (size_ == 0) return Status::Ok();
  std::vector<unsigned char> host(size_);
  Gather(host.data());
  // From pageable memory the call returns once host has been copied to the
  // driver's staging memory (CUDA's "API synchronization behavior"), so
  // host may go when it returns, as the old gathered buffer did with the batch.
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->get(), host.data(), size_, cudaMemcpyHostToDevice, stream));
  return Status::Ok();
}

Status UploadBatch::Upload(DeviceMemory* dst, cudaStream_t stream, const char* what, PinnedPool* pool) {
  // (more than kMaxPinnedBytes, or no pinned memory to be had: pageable)
  if (pool == nullptr || size_ == 0 || size_ > kMaxPinnedBytes) return Upload(dst, stream, what);
  PinnedSlot* slot = nullptr;
  if (!pool->Take(size_, &slot).ok()) return Upload(dst, stream, what);
  Status allocated = dst->Allocate(size_, what);
  if (!allocated.ok()) {
    pool->Give(slot);
    return allocated;
  }
  Gather(slot->data());
  const cudaError_t error = cudaMemcpyAsync(dst->get(), slot->data(), size_, cudaMemcpyHostToDevice, stream);
  const Status status = error == cudaSuccess
                            ? slot->MarkUsed(stream)
                            : CudaStatus(error, "cudaMemcpyAsync (staged upload)", __FILE__, __LINE__);
  pool->Give(slot);  // idle again once the copy is done (Take waits for it)
  return status;
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

// Set predicates on the device: the kernels (set_match.hpp says what each
// does and how the range contraction works).
#include "set_match.hpp"

#include <cub/device/device_select.cuh>

#include "cuda_util.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;

// The i-th id of list l.  Packed: its pack tile t is the last one whose
// directory entry is at most i (the entries ascend, the row's last is the
// list's length).
__device__ __forceinline__ int32_t IdAt(const ListArrayView& v, const SetList& l, int64_t i) {
  if (v.full != nullptr) return v.full[l.begin + i];
  const uint32_t* row = v.dir + static_cast<int64_t>(l.keyword) * (v.pack_tiles + 1);
  int32_t lo = 0, hi = v.pack_tiles;  // row[lo] <= i < row[hi]
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (static_cast<int64_t>(row[mid]) <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return static_cast<int32_t>((static_cast<uint32_t>(lo) << 16) | v.packed[l.begin + i]);
}

// Whether key is among values[lo, hi) (ascending), searched from guess:
// a gallop away from it to bracket key, then a binary search.
template <typename T>
__device__ __forceinline__ bool FoundFrom(const T* values, int64_t lo, int64_t hi, int32_t key,
                                          int64_t guess) {
  if (lo >= hi) return false;
  guess = guess < lo ? lo : (guess >= hi ? hi - 1 : guess);
  const int32_t at = static_cast<int32_t>(values[guess]);
  if (at == key) return true;
  int64_t a, b;  // key, if present, is in [a, b)
  if (at < key) {
    a = guess + 1;
    int64_t step = 1;
    while (a + step - 1 < hi && static_cast<int32_t>(values[a + step - 1]) < key) {
      a += step;
      step <<= 1;
    }
    b = a + step < hi ? a + step : hi;
  } else {
    b = guess;
    int64_t step = 1;
    while (b - step >= lo && static_cast<int32_t>(values[b - step]) > key) {
      b -= step;
      step <<= 1;
    }
    a = b - step > lo ? b - step : lo;
  }
  while (a < b) {  // the first position in [a, b) whose value is >= key
    const int64_t mid = (a + b) >> 1;
    if (static_cast<int32_t>(values[mid]) < key) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  return a < hi && static_cast<int32_t>(values[a]) == key;
}

// Whether list l holds object x: LR over a 4-byte list, HS + LR packed.
__device__ __forceinline__ bool ListHolds(const ListArrayView& v, const SetList& l, int32_t x) {
  if (v.full != nullptr) {
    const int32_t* list = v.full + l.begin;
    const int32_t first = list[0], last = list[l.length - 1];
    if (x < first || x > last) return false;
    const int64_t guess =
        last == first ? 0
                      : static_cast<int64_t>(x - first) * (l.length - 1) / (last - first);
    return FoundFrom(list, 0, l.length, x, guess);
  }
  const int32_t t = static_cast<int32_t>(static_cast<uint32_t>(x) >> 16);
  if (t >= v.pack_tiles) return false;
  const uint32_t* row = v.dir + static_cast<int64_t>(l.keyword) * (v.pack_tiles + 1);
  const int64_t s0 = row[t], s1 = row[t + 1];
  const int32_t low = x & 0xFFFF;
  const int64_t guess = s0 + ((static_cast<int64_t>(low) * (s1 - s0)) >> 16);
  return FoundFrom(v.packed + l.begin, s0, s1, low, guess);
}

__global__ void __launch_bounds__(kThreads)
    ContainsKernel(ListArrayView v, const SetList* lists, int32_t n_lists, int64_t first_length,
                   int32_t* ids, uint8_t* flags) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= first_length) return;
  const int32_t x = IdAt(v, lists[0], i);
  bool all = true;
  for (int32_t j = 1; j < n_lists && all; ++j) all = ListHolds(v, lists[j], x);
  ids[i] = x;
  flags[i] = all ? 1 : 0;
}

__global__ void __launch_bounds__(kThreads)
    MarkKernel(ListArrayView v, const SetList* lists, const int64_t* starts, int32_t n_lists,
               int64_t total, uint8_t* marks, int32_t* counts) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= total) return;
  int32_t lo = 0, hi = n_lists;  // starts[lo] <= g < starts[hi]
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (starts[mid] <= g) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int32_t x = IdAt(v, lists[lo], g - starts[lo]);
  if (marks != nullptr) {
    marks[x] = 1;
  } else {
    atomicAdd(counts + x, 1);
  }
}

__global__ void __launch_bounds__(kThreads)
    ObjectFlagsKernel(const int32_t* counts, const int32_t* sizes, int32_t n, int32_t* ids,
                      uint8_t* flags) {
  const int32_t o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= n) return;
  ids[o] = o;
  if (sizes != nullptr) flags[o] = counts[o] == sizes[o] ? 1 : 0;
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

Status LaunchContains(const ListArrayView& view, const SetList* lists, int32_t n_lists,
                      int64_t first_length, int32_t* ids, uint8_t* flags, cudaStream_t stream) {
  if (first_length <= 0) return Status::Ok();
  ContainsKernel<<<Blocks(first_length), kThreads, 0, stream>>>(view, lists, n_lists,
                                                               first_length, ids, flags);
  GENIE_CUDA_CHECK_LAUNCH("ContainsKernel");
  return Status::Ok();
}

Status LaunchMarkPostings(const ListArrayView& view, const SetList* lists, const int64_t* starts,
                          int32_t n_lists, int64_t total, uint8_t* marks, int32_t* counts,
                          cudaStream_t stream) {
  if (total <= 0) return Status::Ok();
  MarkKernel<<<Blocks(total), kThreads, 0, stream>>>(view, lists, starts, n_lists, total, marks,
                                                     counts);
  GENIE_CUDA_CHECK_LAUNCH("MarkKernel");
  return Status::Ok();
}

Status LaunchObjectFlags(const int32_t* counts, const int32_t* sizes, int32_t n, int32_t* ids,
                         uint8_t* flags, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  ObjectFlagsKernel<<<Blocks(n), kThreads, 0, stream>>>(counts, sizes, n, ids, flags);
  GENIE_CUDA_CHECK_LAUNCH("ObjectFlagsKernel");
  return Status::Ok();
}

Status SelectFlagged(void* temp, std::size_t* temp_bytes, const int32_t* ids, const uint8_t* flags,
                     int32_t* out, int32_t* count, int64_t n, cudaStream_t stream) {
  GENIE_CUDA_RETURN_IF_ERROR(
      cub::DeviceSelect::Flagged(temp, *temp_bytes, ids, flags, out, count, n, stream));
  if (temp != nullptr) GENIE_CUDA_CHECK_LAUNCH("cub::DeviceSelect::Flagged");
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

// Host arrays the size of an index's stored values (hundreds of MB) that
// their loader fills itself.  std::vector<T>(n) writes every element once
// on the calling thread, and that first touch of a fresh allocation is what
// costs: each 4 KB page faults in and the kernel clears it (a 188 MB set of
// Fashion-MNIST vectors spent most of a backend's load there,
// bench/cold.md).  A HostArray leaves its elements as the allocation left
// them, and ResizeZeroed writes the zeros on several threads, so that the
// pages fault in side by side.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "genie/parallel.hpp"

namespace genie {

// std::allocator, except that value-initialization (resize, the size
// constructor) default-initializes: a trivial element is not written.
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using HostArray = std::vector<T, DefaultInitAllocator<T>>;

// *array becomes count zeros, written by ZeroOnThreads on up to threads
// threads (0: every core; the caller's among them).
template <typename T>
void ResizeZeroed(HostArray<T>* array, std::size_t count, int32_t threads) {
  static_assert(std::is_trivial<T>::value, "ResizeZeroed writes zero bytes");
  array->clear();
  array->resize(count);
  (void)ZeroOnThreads(array->data(), count * sizeof(T), threads);  // no cancel: every byte written
}

}  // namespace genie

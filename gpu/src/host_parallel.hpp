// A parallel-for for the engine's host work (compiling and preparing a
// batch).  It runs inside PostgreSQL backends: workers start with every
// signal blocked, run plain C++ only, and report failures as a Status; the
// calling thread works too, and every worker is joined however we leave.
#pragma once
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

inline int HostThreads(int32_t requested) {
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  if (hw <= 0) hw = 1;
  const int t = requested > 0 ? requested : hw;
  return std::max(1, std::min(t, 64));
}

// Runs fn(i) for every i in [0, n), on up to `threads` threads.
inline Status ParallelFor(int64_t n, int threads, const std::function<Status(int64_t)>& fn) {
  if (n <= 0) return Status::Ok();
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  Status error;
  auto work = [&]() {
    try {
      for (;;) {
        if (failed.load(std::memory_order_relaxed)) return;
        const int64_t i = next.fetch_add(1);
        if (i >= n) return;
        Status s = fn(i);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!failed.load()) error = std::move(s);
          failed.store(true);
          return;
        }
      }
    } catch (const std::bad_alloc&) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!failed.load()) error = Status::OutOfMemory("out of host memory in a GPU engine worker");
      failed.store(true);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!failed.load()) error = Status::Internal("GPU engine worker failed");
      failed.store(true);
    }
  };
  const int64_t workers = std::min<int64_t>(threads, n) - 1;
  std::vector<std::thread> pool;
  struct Joiner {
    std::vector<std::thread>* pool;
    ~Joiner() {
      for (std::thread& t : *pool) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{&pool};
  if (workers > 0) {
    pool.reserve(static_cast<std::size_t>(workers));
    sigset_t all, saved;
    sigfillset(&all);
    const bool blocked = pthread_sigmask(SIG_BLOCK, &all, &saved) == 0;
    for (int64_t t = 0; t < workers; ++t) {
      try {
        pool.emplace_back(work);  // inherits the full signal mask
      } catch (const std::system_error&) {
        break;  // out of threads: the ones running share the work
      } catch (const std::bad_alloc&) {
        break;
      }
    }
    if (blocked) pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  work();
  for (std::thread& t : pool) t.join();
  if (failed.load()) return error;
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

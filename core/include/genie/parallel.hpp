// Host threads for the engines.  They run inside PostgreSQL backends, so a
// worker starts with every signal blocked (signals stay with the backend's
// own thread) and runs plain C++ only; a call returns only when every
// thread has finished its part, however the work ends.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "genie/cancel.hpp"
#include "genie/status.hpp"

namespace genie {

// Runs worker() on up to `threads` threads, the calling thread included,
// and returns when every one has finished.  The other threads come from
// pools kept for the life of the process, one a concurrent caller (up to 8;
// beyond, a call starts threads of its own).  When no more threads can be started, the ones running do all
// the work.  worker must not throw.
void RunOnThreads(int32_t threads, const std::function<void()>& worker) noexcept;

// Runs fn(i) for every i in [0, n) on up to `threads` threads (0 or less:
// every core, as ResolveThreads reads it; each index once, in no
// particular order).  The first failure (a Status, or anything
// thrown) stops the remaining indexes and is returned.  cancel is polled
// before each index: when it asks, the remaining indexes are dropped and
// Status::Cancelled() is returned (keep an index's work small enough).
Status ParallelFor(int64_t n, int32_t threads, const std::function<Status(int64_t)>& fn,
                   const CancelCheck& cancel = CancelCheck());

// bytes of memory at data set to zero, in pieces of 8 MB on up to threads
// threads (as ParallelFor): the first touch of a fresh allocation of 100s of
// MB (each page faulted in and cleared by the kernel) then runs side by side
// (bench/cold.md).  cancel is polled before each piece; Cancelled() leaves
// the rest unwritten.  Anything else that stops the threads: the calling
// thread writes every byte.
Status ZeroOnThreads(void* data, std::size_t bytes, int32_t threads, const CancelCheck& cancel = CancelCheck());

// One thread of the caller's own beside it, started with every signal
// blocked (as the pool's), joined by Join() or by the destructor however the
// caller's work ends.  For work that must run beside the caller while the
// caller blocks (the GPU engine's pipelined search), without holding the pool
// that the work's own ParallelFor calls need.
class JoinedThread {
 public:
  JoinedThread() = default;
  ~JoinedThread() { Join(); }
  JoinedThread(const JoinedThread&) = delete;
  JoinedThread& operator=(const JoinedThread&) = delete;

  // Starts fn (which must not throw); false when no thread could be started
  // (fn does not run).
  bool Start(std::function<void()> fn) noexcept;
  void Join() noexcept;

 private:
  std::thread thread_;
};

// The first failure of a group of workers: later ones are dropped, and
// workers poll failed() to stop early.
class FirstFailure {
 public:
  void Record(Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_.load()) error_ = std::move(status);
    failed_.store(true);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // Ok when nothing failed; call once every worker has finished.
  Status Take() { return failed_.load() ? std::move(error_) : Status::Ok(); }

  // Runs body and records what it throws; `who` names the worker in the
  // message ("an engine worker").  Never throws.
  template <typename Body>
  void Guard(const char* who, Body&& body) noexcept {
    try {
      body();
    } catch (const std::bad_alloc&) {
      Record(Status::OutOfMemory(std::string("out of host memory in ") + who));
    } catch (const std::exception& e) {
      Record(Status::Internal(std::string(who) + " failed: " + e.what()));
    } catch (...) {
      Record(Status::Internal(std::string(who) + " failed"));
    }
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  Status error_;
};

// threads as the engines read it: 0 (or less) means every core; at most 1024.
int32_t ResolveThreads(int32_t requested);

}  // namespace genie

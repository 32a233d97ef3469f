// Host threads for the engines (see parallel.hpp).
#include "genie/parallel.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace genie {

int32_t ResolveThreads(int32_t requested) {
  int32_t threads = requested > 0 ? requested
                                  : static_cast<int32_t>(std::thread::hardware_concurrency());
  return std::clamp(threads, 1, 1024);
}

void RunOnThreads(int32_t threads, const std::function<void()>& worker) noexcept {
  std::vector<std::thread> pool;
  // A joinable std::thread destroyed unjoined would terminate the backend.
  struct Joiner {
    std::vector<std::thread>* pool;
    ~Joiner() {
      for (std::thread& t : *pool) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{&pool};

  if (threads > 1) {
    // Threads inherit the creating thread's mask: block everything while
    // starting them, so no signal can reach a worker even for an instant.
    sigset_t all, saved;
    sigfillset(&all);
    const bool blocked = pthread_sigmask(SIG_BLOCK, &all, &saved) == 0;
    try {
      pool.reserve(static_cast<std::size_t>(threads - 1));
      for (int32_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    } catch (const std::system_error&) {
      // out of threads: the ones running, and this one, share the work
    } catch (const std::bad_alloc&) {
    }
    if (blocked) pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  // The calling thread works too, with its own signal mask.
  worker();
}

Status ParallelFor(int64_t n, int32_t threads, const std::function<Status(int64_t)>& fn,
                   const CancelCheck& cancel) {
  if (n <= 0) return Status::Ok();
  std::atomic<int64_t> next{0};
  FirstFailure failure;
  RunOnThreads(static_cast<int32_t>(std::min<int64_t>(threads, n)), [&]() {
    failure.Guard("an engine worker", [&]() {
      while (!failure.failed()) {
        const int64_t i = next.fetch_add(1);
        if (i >= n) return;
        if (cancel.requested()) return failure.Record(Status::Cancelled());
        Status s = fn(i);
        if (!s.ok()) return failure.Record(std::move(s));
      }
    });
  });
  return failure.Take();
}

}  // namespace genie

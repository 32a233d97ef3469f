// Host threads for the engines (see parallel.hpp).
#include "genie/parallel.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
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

namespace {

// Starts a thread with every signal blocked (threads inherit the creating
// thread's mask), so no signal can reach it even for an instant.
template <typename Fn>
bool StartBlocked(std::vector<std::thread>* threads, Fn&& fn) noexcept {
  sigset_t all, saved;
  sigfillset(&all);
  const bool blocked = pthread_sigmask(SIG_BLOCK, &all, &saved) == 0;
  bool started = true;
  try {
    threads->emplace_back(std::forward<Fn>(fn));
  } catch (const std::system_error&) {
    started = false;  // out of threads
  } catch (const std::bad_alloc&) {
    started = false;
  }
  if (blocked) pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return started;
}

// Workers kept for the life of the process: starting threads costs tens of
// microseconds each, which small batches (the genie service runs a call
// per handful of queries) would pay on every call.  One job at a time; a
// caller that finds the pool busy (a nested or concurrent call) tries the
// next pool (RunOnAPool).  The pool is never destroyed: its threads
// sleep on condition variables and end with the process.
//
// A job wakes about the workers it wants, not the whole pool: with one
// condition variable, a job of a few tasks on a pool that an earlier job
// had grown to a host's 15 or more workers woke every one of them, each
// taking the mutex to go back to sleep, and on a loaded host those
// wake-ups cost more CPU than the job (bench/pool-wake-2core.txt: 4 tasks
// with threads 16, 1.2-1.5x faster, about half the CPU).  Workers sleep in
// groups by slot (0-1, 2-3, 4-7, 8-15, ...), and a job of h helpers
// broadcasts to the groups of slots below h: fewer than 2h woken, in
// log2(h) system calls.  (A job wanting every worker pays those extra
// calls: 0.87-0.97x with 16 threads on 2 cores, likely as a woken group
// preempts the caller there before its next broadcast.)

// A pool's workers at most (ResolveThreads' bound: a job has at most
// 1,023 helpers), and their groups by slot: slots 0-1 are group 0, then
// [2^g, 2^(g+1)) group g.
constexpr int32_t kMaxWorkers = 1023;
constexpr int kGroups = 10;
constexpr int Group(std::size_t slot) {
  int g = 0;
  while ((slot >> (g + 1)) != 0) ++g;
  return g;
}
static_assert(Group(kMaxWorkers - 1) + 1 == kGroups, "a group for every worker");

class Pool {
 public:
  // Runs worker on `helpers` pool threads besides the caller's, or returns
  // false (nothing run) when the pool is busy.
  bool Run(int32_t helpers, const std::function<void()>& worker) noexcept {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int32_t>(threads_.size()) < std::min<int32_t>(helpers, kMaxWorkers)) {
        const std::size_t slot = threads_.size();
        if (!StartBlocked(&threads_, [this, slot] { Loop(slot); })) break;
      }
      helpers = std::min<int32_t>(helpers, static_cast<int32_t>(threads_.size()));
      job_ = &worker;
      wanted_ = helpers;
      running_ = helpers;
      ++generation_;
    }
    if (helpers > 0) {
      for (int g = 0; g <= Group(static_cast<std::size_t>(helpers) - 1); ++g) wakes_[g].notify_all();
    }
    worker();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
    return true;
  }

 private:
  void Loop(std::size_t slot) noexcept {
    std::condition_variable& wake = wakes_[Group(slot)];
    uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        // a worker takes part, once, in a job whose helpers its slot is
        // among (Run waits for every one of them, so the job cannot pass
        // it by); the others of its group go back to sleep
        wake.wait(lock, [&] { return generation_ != seen && slot < static_cast<std::size_t>(wanted_); });
        seen = generation_;
        job = job_;
      }
      (*job)();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;   // held by the caller of Run for the whole job
  std::mutex mutex_;  // the fields below
  std::condition_variable done_;
  std::condition_variable wakes_[kGroups];  // the workers' groups (Group)
  std::vector<std::thread> threads_;
  const std::function<void()>* job_ = nullptr;
  int32_t wanted_ = 0, running_ = 0;
  uint64_t generation_ = 0;
};

// A few pools, made as concurrent callers first need them: the GPUs of a
// device group each prepare their part at once (genie/multi_device.hpp),
// and a caller that found the only pool busy started and joined dozens of
// threads on every call (on 4 GPUs that tripled each one's host phases).
constexpr int kPools = 8;

// The pools this thread runs a job on: a nested call skips them (trying a
// mutex the thread already holds is undefined for std::mutex).
thread_local uint32_t t_pools_held = 0;

bool RunOnAPool(int32_t helpers, const std::function<void()>& worker) noexcept {
  static std::atomic<Pool*> pools[kPools] = {};
  static std::mutex making;
  for (int i = 0; i < kPools; ++i) {
    auto& slot = pools[i];
    const uint32_t bit = uint32_t{1} << i;
    if (t_pools_held & bit) continue;
    Pool* pool = slot.load(std::memory_order_acquire);
    if (pool == nullptr) {
      std::lock_guard<std::mutex> lock(making);
      pool = slot.load(std::memory_order_acquire);
      if (pool == nullptr) {
        pool = new (std::nothrow) Pool();  // never destroyed: see Pool
        if (pool == nullptr) return false;
        slot.store(pool, std::memory_order_release);
      }
    }
    t_pools_held |= bit;
    const bool ran = pool->Run(helpers, worker);
    t_pools_held &= ~bit;
    if (ran) return true;
  }
  return false;
}

}  // namespace

void RunOnThreads(int32_t threads, const std::function<void()>& worker) noexcept {
  if (threads <= 1) {
    worker();
    return;
  }
  if (RunOnAPool(threads - 1, worker)) return;

  // Every pool is busy: threads of this call's own, joined however it ends
  // (a joinable std::thread destroyed unjoined would terminate the backend).
  std::vector<std::thread> pool;
  struct Joiner {
    std::vector<std::thread>* pool;
    ~Joiner() {
      for (std::thread& t : *pool) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{&pool};
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int32_t t = 1; t < threads; ++t) {
    if (!StartBlocked(&pool, worker)) break;  // the ones running share the work
  }
  // The calling thread works too, with its own signal mask.
  worker();
}

bool JoinedThread::Start(std::function<void()> fn) noexcept {
  if (thread_.joinable()) return false;
  std::vector<std::thread> one;
  if (!StartBlocked(&one, std::move(fn))) return false;
  thread_ = std::move(one.front());
  return true;
}

void JoinedThread::Join() noexcept {
  if (thread_.joinable()) thread_.join();
}

Status ParallelFor(int64_t n, int32_t threads, const std::function<Status(int64_t)>& fn,
                   const CancelCheck& cancel) {
  if (n <= 0) return Status::Ok();
  std::atomic<int64_t> next{0};
  FirstFailure failure;
  // threads as the engines pass it: 0 is every core (before this resolved it,
  // the string and vector scans ran on one thread by default)
  RunOnThreads(static_cast<int32_t>(std::min<int64_t>(ResolveThreads(threads), n)), [&]() {
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

Status ZeroOnThreads(void* data, std::size_t bytes, int32_t threads, const CancelCheck& cancel) {
  constexpr std::size_t kPiece = std::size_t{8} << 20;
  char* base = static_cast<char*>(data);
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  if (pieces > 1) {
    const Status s = ParallelFor(
        pieces, threads,
        [&](int64_t p) {
          const std::size_t first = static_cast<std::size_t>(p) * kPiece;
          std::memset(base + first, 0, std::min(kPiece, bytes - first));
          return Status::Ok();
        },
        cancel);
    if (s.ok() || s.code() == GENIE_CANCELLED) return s;
  }
  // a few MB (not worth waking the threads), or the threads stopped otherwise
  if (bytes > 0) std::memset(base, 0, bytes);
  return Status::Ok();
}

}  // namespace genie

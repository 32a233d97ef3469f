// Host threads for the engines.  They run inside PostgreSQL backends, so a
// worker starts with every signal blocked (signals stay with the backend's
// own thread), runs plain C++ only, and is joined however the caller leaves.
#pragma once
#include <cstdint>
#include <functional>

#include "genie/status.hpp"

namespace genie {

// Runs worker() on up to `threads` threads, the calling thread included,
// and returns when every one has finished.  When no more threads can be
// started, the ones running do all the work.  worker must not throw.
void RunOnThreads(int32_t threads, const std::function<void()>& worker) noexcept;

// Runs fn(i) for every i in [0, n) on up to `threads` threads (each index
// once, in no particular order).  The first failure (a Status, or anything
// thrown) stops the remaining indexes and is returned.
Status ParallelFor(int64_t n, int32_t threads, const std::function<Status(int64_t)>& fn);

// threads as the engines read it: 0 (or less) means every core; at most 1024.
int32_t ResolveThreads(int32_t requested);

}  // namespace genie

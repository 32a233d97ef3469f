// A parallel LSD radix sort of 64-bit keys: what an index build sorts its
// (keyword, object) pairs with when they fit in memory.
//
// Keys are ordered as signed integers.  Each pass sorts by 16 bits, least
// significant first, stably; a pass whose 16 bits are the same in every key
// (the high bits of small object ids, of a narrow keyword range) is
// skipped, so pairs of EWH keywords (m * 2^h values) over a few million
// objects take two or three passes.  A pass splits the keys among the
// threads: each counts its share's digits, the counts are summed in
// (digit, thread) order, and each thread scatters its share, so the sort is
// stable and its result does not depend on the number of threads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "genie/cancel.hpp"
#include "genie/status.hpp"

namespace genie {

// Sorts keys[0..n) ascending on up to `threads` threads (0: every core),
// with a scratch copy of n keys (OutOfMemory when it cannot be had, before
// any key changed).  cancel is polled between passes and every million
// keys of a thread; Cancelled leaves the keys changed (discard them).
Status RadixSortInt64(int64_t* keys, std::size_t n, int32_t threads, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

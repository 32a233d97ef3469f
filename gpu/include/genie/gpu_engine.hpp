// The CUDA engine's host interface: plain C++, no CUDA types, so the C API (capi/)
// can call it without including CUDA headers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/engine.hpp"
#include "genie/types.h"

namespace genie {

// The GPUs the CUDA runtime sees; empty when there is no driver or device.
// Never initialises anything beyond the probe and never fails hard.
std::vector<genie_device_info> ListGpuDevices();

// Frees the small device blocks the GPU engines keep for reuse from one
// search to the next (at most 64 MB a process, kept while it lives), on
// every device.  For a leak check at the end of a process (the GPU tests);
// the next search allocates anew.
void ReleaseDeviceBlockCache();

// Makes the CUDA runtime's primary context on GPU `ordinal` and loads genie's
// kernels into it, so that a first search finds them made; blocks for as
// long as that takes (a quarter of a second on the H100 hosts).  Any failure
// is left for the search to meet and report.  Never throws.
void PrepareDevice(int ordinal) noexcept;

// CUDA runtime version compiled against (e.g. 13000).
int CudaRuntimeVersion();

// Which matcher the GPU engine runs (queries whose score bound exceeds what
// c-PQ handles, and c-PQ queries whose hash table overflowed, always go to
// the count table; results are exact either way).
enum class GpuMatcher {
  kTiled,       // tiled c-PQ: the Bitmap Counter of an object tile in shared memory
  kFaithful,    // faithful c-PQ (paper III-C): a global Bitmap Counter
  kCountTable,  // the paper's GPU-SPQ baseline: a full count table per query
};

// How the tiled matcher's resident index holds the List Array on the device.
enum class GpuPostings {
  kAuto,    // packed where its directory is small beside the saving (PackingPays)
  kPacked,  // 16-bit ids local to 65,536-object tiles plus a per-list tile directory
  kFull,    // 4-byte object ids
};

// The GPU engine's own settings, fixed when the engine is made.
struct GpuEngineOptions {
  GpuMatcher matcher = GpuMatcher::kTiled;
  // Faithful c-PQ only: true chooses the ties at the k-th score by lowest
  // object id, as the CPU engines do (hit-for-hit equal results); false keeps
  // the paper's selection (any tied objects, from the hash table).
  bool exact_ties = true;
  // Test hook: 0 sizes the c-PQ hash tables from k and the score bound; N > 0
  // forces N slots (rounded up to a power of two, at most 2^30) per query, so
  // tiny values exercise the overflow path.
  uint32_t hash_table_slots = 0;
  // Times the phases of every search (gpu::SearchStats::profile); the engine
  // then synchronises after each phase, which costs a little overlap.
  bool profile = false;
  // Tiled c-PQ: Bitmap Counter words per tile in shared memory, a multiple
  // of 512 in [512, 49152] (default 16384 words = 64 KiB).
  int32_t tile_words = 16384;
  // Tiled c-PQ with the index resident: the device form of the postings.
  // Packed halves the bytes the kernel reads (see core/include/genie/packed_postings.hpp);
  // queries routed to the count table then get the 4-byte List Array too,
  // uploaded on first need.  Multiple loading moves parts in the same form
  // (4-byte parts for a batch with count-table queries).
  GpuPostings postings = GpuPostings::kAuto;
  // Set predicates (Engine::MatchSet) run on the device when the query's
  // lists hold at least this many postings and the index is resident; on
  // the host otherwise, where short lists are cheaper than the launches
  // (bench/set_match_bench on the H100: @> over 3.8K postings 0.013 ms on
  // the CPU, 0.036 on the device; over 34K 0.120 and 0.041).  0: always on
  // the device (tests).
  int64_t set_match_min_postings = int64_t{1} << 14;
};

// The largest device form of an index (its List Array, packed or not, with
// the pack directory) that the c-PQ engine keeps resident under an explicit
// device budget (EngineOptions::memory_budget_bytes, genie.device_memory_limit):
// all but the room a batch's search state needs, an eighth of the budget,
// at least kMinSearchRoomBytes, at most half.  Query groups fit a batch into
// that room; an index beyond it is searched in parts (multiple loading),
// which copies the whole index to the device on every search.  Without an
// explicit budget (most of the free memory, which other indexes and copies
// share and which changes after the upload) the index must leave half.  A
// batch with a query whose state does not fit beside the resident index is
// searched in parts in the room it leaves (an index at most half the budget
// once had the other half for them).
constexpr uint64_t kMinSearchRoomBytes = uint64_t{24} << 20;
constexpr uint64_t ResidentIndexLimit(uint64_t budget) {
  return budget - std::min(budget / 2, std::max(budget / 8, kMinSearchRoomBytes));
}

// The c-PQ engine (paper section III-C) with multiple loading (III-D).
// Returns nullptr and sets *status on failure: GENIE_DEVICE_UNAVAILABLE when
// no usable GPU, GENIE_INVALID_ARGUMENT for out-of-range gpu_options.
std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options,
                                      const GpuEngineOptions& gpu_options, Status* status);
// The same with the default GpuEngineOptions.
std::unique_ptr<Engine> MakeGpuEngine(const EngineOptions& options, Status* status);

// Baseline for the benchmark (the paper's GPU-SPQ): a full count table per
// query and a top-k selection; exact, memory-hungry.  MakeGpuEngine with
// GpuMatcher::kCountTable and otherwise default GpuEngineOptions.
std::unique_ptr<Engine> MakeGpuCountTableEngine(const EngineOptions& options, Status* status);

}  // namespace genie

// Introspection of the GPU engines (a public header of gpu/, for the GPU
// tests and the benchmark).  Plain C++ (no CUDA types).
//
// Engine selection (read when an engine is made, MakeGpuEngine only):
//   GENIE_GPU_MATCHER   tiled (default) | faithful   which c-PQ matcher runs
//   GENIE_GPU_TIES      exact (default) | paper      faithful only: how ties at
//                       the k-th score are chosen (exact: the lowest object
//                       ids, as the CPU engines; paper: any, from the hash table)
//   GENIE_GPU_HT_SLOTS  N (power of two)             test hook: force the c-PQ
//                       hash-table capacity (tiny values exercise the overflow path)
//   GENIE_GPU_PROFILE   1                            time the phases of each search
//   GENIE_GPU_TILE_WORDS N (multiple of 512)         tiled: Bitmap Counter words
//                       per tile in shared memory (default 16384 = 64 KiB)
#pragma once
#include <cstdint>
#include <string>

#include "genie/engine.hpp"

namespace genie {
namespace gpu {

struct SearchStats {
  std::string matcher;             // "tiled", "faithful" or "count-table"
  int32_t parts = 0;               // object parts (1: resident index)
  int32_t query_groups = 0;        // device passes over query groups (summed over parts)
  int32_t cpq_queries = 0;         // queries matched with c-PQ (summed over parts)
  int32_t count_queries = 0;       // queries matched with the count table
  int32_t overflow_queries = 0;    // c-PQ hash-table overflows recomputed exactly
  uint64_t index_device_bytes = 0; // resident List Array
  uint64_t peak_device_bytes = 0;  // peak of all engine device memory during the search
  double device_seconds = 0;       // wall time of the search (host clock, synchronised)
  // With GENIE_GPU_PROFILE=1: "phase ms; phase ms; ..." (the engine then
  // synchronises after every phase, which costs a little overlap).
  std::string profile;
};

// False when engine is not a GPU engine.
bool GetLastSearchStats(const Engine* engine, SearchStats* stats);

}  // namespace gpu
}  // namespace genie

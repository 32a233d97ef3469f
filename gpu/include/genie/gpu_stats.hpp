// Introspection of the GPU engines (a public header of gpu/, for the GPU
// tests and the benchmark).  Plain C++ (no CUDA types).
//
// The engine's settings are GpuEngineOptions (genie/gpu_engine.hpp).
#pragma once
#include <cstdint>
#include <string>

#include "genie/engine.hpp"

namespace genie {
namespace gpu {

struct SearchStats {
  std::string matcher;             // "tiled", "faithful" or "count-table"
  int32_t parts = 0;               // object parts (1: resident index)
  bool parts_packed = false;       // parts streamed as packed postings
  int32_t query_groups = 0;        // device passes over query groups (summed over parts)
  int32_t cpq_queries = 0;         // queries matched with c-PQ (summed over parts)
  int32_t count_queries = 0;       // queries matched with the count table
  int32_t overflow_queries = 0;    // c-PQ hash-table overflows recomputed exactly
  int32_t list_queries = 0;        // c-PQ queries of the tiled matcher's list mode (no Gate)
  uint64_t index_device_bytes = 0; // resident List Array
  uint64_t peak_device_bytes = 0;  // peak of all engine device memory during the search
  double device_seconds = 0;       // wall time of the search (host clock, synchronised; from the
                                   // call's start: its host stage and any wait for the device too)
  // With profiling on (GpuEngineOptions::profile or SetProfile): "phase ms;
  // phase ms; ..." (the engine then synchronises after every phase, which
  // costs the overlap); with SetTimeline, the timeline.
  std::string profile;
};

// False when engine is not a GPU engine.  (Of the search that took the
// device last: read it where no other search runs.)
bool GetLastSearchStats(const Engine* engine, SearchStats* stats);

// Turns the per-phase profile of the following searches on or off (initially
// GpuEngineOptions::profile).  False when engine is not a GPU engine.  On a
// device group (genie/multi_device.hpp), each GPU member's, as the next one.
bool SetProfile(Engine* engine, bool enabled);

// Instead of phases, a timeline of the following searches in
// SearchStats::profile (or off): "mark host/device ms; ..." where each mark
// notes when the host got there and when the device had done the work
// queued before it, without waiting for the device (so the overlap is the
// search's own).  False when engine is not a GPU engine.
bool SetTimeline(Engine* engine, bool enabled);

// Sets GpuEngineOptions::set_match_min_postings of a made engine (for the
// searches that follow; a device group's GPU members all).  False when
// engine is not a GPU engine or postings is negative.
bool SetSetMatchMinPostings(Engine* engine, int64_t postings);

}  // namespace gpu
}  // namespace genie

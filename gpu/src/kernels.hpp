// The GPU engine's kernels, as host-callable launchers.  Internal to gpu/src.
// One file per matcher (matcher_faithful.cu, matcher_tiled.cu,
// matcher_count_table.cu) and select_kernels.cu for what they share (probe,
// AuditThreshold init, selection tail); device helpers in device_util.cuh
// and, for the c-PQ Gate and hash table, gate.cuh.
//
// Three matchers share one selection tail:
//   * faithful c-PQ (paper III-C): one block per group of <= 2 List Array
//     slices of one query (III-B load balancing); a global Bitmap Counter of
//     `bits` bits per object per query; Algorithm 1 per posting with the Gate
//     (ZipperArray + AuditThreshold) and the modified Robin Hood hash table.
//   * tiled c-PQ: one block per (object tile, query); the tile's Bitmap
//     Counter lives in shared memory while the block scans the tile's part of
//     every list of the query, so when the scan ends the tile's counts are
//     final; the block then feeds them through the same global Gate and hash
//     table (Algorithm 1 with each object's whole count as one update).
//   * count table (the paper's GPU-SPQ): a 32-bit counter per object per
//     query, atomicAdd per posting, radix selection of the k-th count.
// Tail: per query, candidates (sort keys) are collected into a region of a
// candidate buffer, sorted by CUB's segmented sort, deduplicated and cut to k.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

constexpr uint32_t kEmptyKey = 0xFFFFFFFFu;
// c-PQ handles queries whose score bound is at most this; the ZipperArray and
// the tiled kernel's shared-memory histogram have max_score + 2 entries.
// Queries with a larger bound go to the count table (exact either way).
constexpr int32_t kCpqMaxScore = 4095;
constexpr int kScanThreads = 256;      // faithful c-PQ and count-table scan blocks
constexpr int kSlicesPerBlock = 2;     // paper III-B: "each block takes two sublists at most"
constexpr int kTiledThreads = 512;
constexpr int kDefaultTileWords = 16384;  // 64 KiB of shared memory per tile

struct DevSlice {
  int64_t begin;   // List Array position
  int32_t length;  // postings
  int32_t weight;
};

struct WorkItem {
  int32_t query;        // index within the group
  int32_t first_slice;  // [first_slice, end_slice) into the group's slices
  int32_t end_slice;
};

// Per query of a group.
struct QueryParams {
  int64_t bc_offset;    // first Bitmap Counter word (faithful) / first counter (count table)
  int64_t ht_offset;    // first hash-table slot
  int64_t za_offset;    // first ZipperArray entry (max_score + 2 of them)
  int64_t cand_offset;  // first candidate slot
  int32_t max_score;    // score bound (>= 1)
  int32_t bits;         // Bitmap Counter bits per object
  int32_t per_word;     // counters per 32-bit word (never straddling words)
  uint32_t ht_mask;     // hash-table capacity - 1 (capacity is a power of two)
};

// Written by the step that fixes the k-th score (HtCollect / CountSelect),
// read by OrderedCollect.
struct SelectState {
  int32_t tie_level;  // the k-th score T; objects scoring T are ties
  int32_t need_ties;  // how many ties (lowest object ids first) complete the top-k
  int32_t n_above;    // objects scoring above T still to collect (count table)
  int32_t collected;  // candidates already written (from the hash table)
};

struct GateState {
  const QueryParams* queries;
  uint32_t* bc;             // faithful: Bitmap Counters; count table: counters
  int32_t* za;              // ZipperArrays
  int32_t* at;              // AuditThresholds
  unsigned long long* ht;   // hash tables: key (object) low 32 bits, value (count) high 32
  int32_t* overflow;        // per query: 1 when the hash table overflowed
  int32_t k;
  int32_t num_queries;
};

struct CandState {
  unsigned long long* keys;  // candidate sort keys, one region per query
  int64_t* seg_begin;        // per query, for the segmented sort
  int64_t* seg_end;
  SelectState* select;
};

struct DevHit {
  int32_t object;
  int32_t score;
};

struct TiledParams {
  const int32_t* postings;     // 4-byte ids, or
  const uint16_t* packed;      // (not nullptr) packed ids: genie/packed_postings.hpp
  const int64_t* seg_begin;    // per segment (a sorted run of one list): List Array position
  const uint32_t* bounds;      // per segment, num_tiles + 1 offsets into it
  const int64_t* seg_offsets;  // per query: its segments (num_queries + 1)
  const int32_t* seg_weight;
  int32_t num_tiles;
  int32_t tile_objects;
  int32_t tile_words;
  int32_t n_objects;
  int32_t bits;       // batch-wide (max over the group's queries)
  int32_t per_word;   // 32 / bits; bits (TiledBitsFor) and so per_word are powers of two
  int32_t hist_bins;  // max over the group's queries of max_score + 2
  // List mode (GpuEngine::ListMode): each block writes its tile's own
  // top-k, at most k entries, to the query's table at tile * k, with no
  // hash probing, no ZipperArray and no AuditThreshold; the selection then
  // takes every entry.  Exact: an object outside its tile's top-k is beaten
  // by k objects of that tile.
  int32_t list_mode;
};

// A trivial kernel's attributes: fails when this binary has no code the
// device can run (e.g. a compute capability below 8.0).
Status ProbeKernelImage();

Status LaunchInitAt(int32_t* at, int32_t n, cudaStream_t stream);

Status LaunchCpqScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                     const DevSlice* slices, const GateState& gate, cudaStream_t stream);

Status LaunchCountScan(const int32_t* postings, const WorkItem* items, int64_t num_items,
                       const DevSlice* slices, const QueryParams* queries, uint32_t* table,
                       cudaStream_t stream);

Status LaunchTileBounds(const int32_t* postings, const int64_t* span_begin,
                        const int32_t* span_length, int32_t num_spans, int32_t num_tiles,
                        int32_t tile_objects, uint32_t* bounds, cudaStream_t stream);

Status LaunchPackedTileBounds(const uint16_t* packed, const uint32_t* pack_dir, int32_t pack_tiles,
                              const int64_t* span_begin, const int32_t* span_length,
                              const int64_t* span_list, const int64_t* list_begin,
                              int32_t num_spans, int32_t num_tiles, int32_t tile_objects,
                              uint32_t* bounds, cudaStream_t stream);

std::size_t TiledSharedBytes(int32_t tile_words, int32_t hist_bins);

Status LaunchTiled(const TiledParams& params, const GateState& gate, cudaStream_t stream);

// mode_exact_ties: candidates are the entries scoring >= AT and the ties at
// AT-1 come from OrderedCollect over the Bitmap Counters (faithful), or
// (false) the entries scoring >= max(AT-1, 1) (tiled; paper's selection).
// from_bc: true reads each key's true count from the Bitmap Counter.
Status LaunchHtCollect(const GateState& gate, const CandState& cand, bool from_bc,
                       bool exact_ties, cudaStream_t stream);

Status LaunchCountSelect(const QueryParams* queries, const uint32_t* table, int32_t n_objects,
                         int32_t k, int32_t num_queries, const CandState& cand,
                         cudaStream_t stream);

// LaunchCountSelect and LaunchOrderedCollect(collect_above) in one, each
// query's counters cut into `slices` slices with a block each (for a small
// group, which one block a query would leave on a few SMs): the same
// candidates.  digits: the most 12-bit digits of any query's max_score;
// scratch: CountSpreadScratchInts(num_queries, slices) int32, zeroed, on
// the stream before.
std::size_t CountSpreadScratchInts(int32_t num_queries, int32_t slices);
Status LaunchCountSelectSpread(const QueryParams* queries, const uint32_t* table, int32_t n_objects, int32_t k,
                               int32_t num_queries, int32_t digits, int32_t slices, int32_t* scratch,
                               const CandState& cand, cudaStream_t stream);

Status LaunchOrderedCollect(const QueryParams* queries, const uint32_t* counters,
                            int32_t n_objects, int32_t num_queries, const CandState& cand,
                            bool collect_above, cudaStream_t stream);

// CUB segmented sort of the candidates: call with temp == nullptr to size.
Status SortCandidates(void* temp, std::size_t* temp_bytes, const unsigned long long* keys_in,
                      unsigned long long* keys_out, int64_t num_items, int32_t num_queries,
                      const int64_t* seg_begin, const int64_t* seg_end, cudaStream_t stream);

// The tiled matcher's list mode with at most kListSelectSlots table slots a
// query: each query's first k entries by (score desc, object asc) straight
// from the first `slots` (tiles * k) of its table into out (k a query) and
// counts, one block a query; object ids below n_objects.
constexpr uint32_t kListSelectSlots = 4096;
Status LaunchListSelect(const GateState& gate, int32_t k, int32_t slots, int32_t n_objects, DevHit* out,
                        int32_t* counts, cudaStream_t stream);

Status LaunchEmit(const unsigned long long* sorted, const CandState& cand, int32_t num_queries,
                  int32_t k, DevHit* out, int32_t* counts, cudaStream_t stream);

}  // namespace gpu
}  // namespace genie

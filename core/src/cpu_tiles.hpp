// The CPU engine's batch order: the objects in tiles, and every query of the
// batch counting its postings in one tile before any query moves to the next.
// Internal to core/src (cpu_engine.cpp chooses the order).
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/packed_postings.hpp"
#include "genie/query.hpp"
#include "genie/status.hpp"

namespace genie {

// Objects a tile holds when EngineOptions::cpu_tile_objects leaves it to the
// engine: its counters (counter_width bytes each) fit a core's L2.
int64_t DefaultTileObjects(int counter_width);

// The order for a batch of n_queries scanning total_postings over size
// objects, for the option (EngineOptions::cpu_tile_objects): the objects a
// tile holds, or 0 for one query at a time.
int64_t ChooseTileObjects(int64_t option, int32_t n_queries, int64_t total_postings, int32_t size,
                          int counter_width);

// The objects [base, base + size) counted tile by tile (tile_objects each;
// a multiple of 64) on up to `threads` threads.  Fills per_query[q] with the
// query's exact top-k, ordered by HitBefore, object ids relative to base.
// k is at most size; the batch holds only postings of those objects.
// packed (or nullptr): the index's packed postings, read instead of its
// 4-byte ids where base is 0 and tiles are whole pack tiles.
Status SearchObjectsByTiles(const InvertedIndex& index, const CompiledBatch& compiled,
                            int32_t base, int32_t size, int32_t k, int32_t threads,
                            int64_t tile_objects, int counter_width,
                            const PackedPostings* packed, const CancelCheck& cancel,
                            std::vector<std::vector<Hit>>* per_query);

}  // namespace genie

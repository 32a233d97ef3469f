// Set predicates on the device (the GPU engine's MatchSet; the host form is
// core's set_match.hpp, whose answers these equal).  Internal to gpu/src.
//
// Over the resident List Array, in either form:
//   contains      one thread per id of the shortest list, searched in each
//                 other list with range contraction (below), the ids found
//                 in all of them kept;
//   overlaps      one thread per posting of the query's lists, marking its
//                 object; the marked objects kept;
//   contained by  one thread per posting, counting its object; the objects
//                 whose count is their number of keywords kept.
// Kept ids leave in ascending order (a stable device select).
//
// Range contraction (the list-intersection seed's LR and HS): a search for
// id x in a list starts at a predicted position and gallops from it, so it
// costs the log of the prediction's error, not of the list's length.  4-byte
// lists predict by the line through their first and last ids (LR).  Packed
// lists are already hash-segmented by x's high 16 bits (the pack directory
// gives the segment of x's pack tile: HS), and predict within the segment by
// the line through it (low 16 bits).  Galloping keeps every search exact
// whatever the error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "genie/status.hpp"

namespace genie {
namespace gpu {

// The resident List Array: 4-byte ids, or packed ids and their directory.
struct ListArrayView {
  const int32_t* full = nullptr;
  const uint16_t* packed = nullptr;
  const uint32_t* dir = nullptr;
  int32_t pack_tiles = 0;
};

// One of the query's keyword lists.
struct SetList {
  int64_t begin;    // its first position in the List Array
  int64_t length;   // > 0
  int32_t keyword;  // its row of the pack directory
};

// ids[i] = list 0's i-th id, flags[i] = 1 when every other list holds it.
Status LaunchContains(const ListArrayView& view, const SetList* lists, int32_t n_lists,
                      int64_t first_length, int32_t* ids, uint8_t* flags, cudaStream_t stream);

// For every posting of the lists (starts: their first global position,
// n_lists + 1 of them, the last the total): marks[object] = 1 when marks
// is not null, else ++counts[object].
Status LaunchMarkPostings(const ListArrayView& view, const SetList* lists, const int64_t* starts,
                          int32_t n_lists, int64_t total, uint8_t* marks, int32_t* counts,
                          cudaStream_t stream);

// ids[o] = o and flags[o] = (counts[o] == sizes[o]) for the n objects; with
// sizes null only ids.
Status LaunchObjectFlags(const int32_t* counts, const int32_t* sizes, int32_t n, int32_t* ids,
                         uint8_t* flags, cudaStream_t stream);

// The ids whose flag is set, in order, into out and their number into
// *count (device).  temp null: *temp_bytes receives the scratch needed.
Status SelectFlagged(void* temp, std::size_t* temp_bytes, const int32_t* ids, const uint8_t* flags,
                     int32_t* out, int32_t* count, int64_t n, cudaStream_t stream);

}  // namespace gpu
}  // namespace genie

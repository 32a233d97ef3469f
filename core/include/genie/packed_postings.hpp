// Packed postings: the List Array as the GPU engine's tiled matcher holds it
// on the device and the CPU engine's tile order may read it on the host.
//
// Why this form (issue 15): the tiled kernel reads every posting of a query
// once from HBM, so at 4-byte ids it runs at the memory-bandwidth wall.  It
// also only ever needs an id relative to its object tile.  So the device keeps
// each posting as the low 16 bits of its object id (2 bytes, the same List
// Array positions as the 4-byte array), plus, per keyword list, the position
// where each 65,536-object pack tile starts (the pack directory).  A kernel
// tile lies inside one pack tile (its object count is a power of two dividing
// 65,536), so object = tile base + (low 16 bits - tile base's low 16 bits),
// with no decoding work beyond a subtraction.  The bit-packed gap codec of the
// pages (core/postings_codec.hpp) reads fewer bytes still, but its decoding is
// serial within a 128-posting block and its blocks do not start at tile
// boundaries; 16-bit tile-local ids halve the bytes at no compute cost.
//
// The directory costs keywords x (pack tiles + 1) x 4 bytes: small for the
// long lists of LSH and keyword sets, large for many short lists (n-grams),
// where packing is not chosen (PackingPays).
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/index.hpp"
#include "genie/status.hpp"

namespace genie {

constexpr int kPackShift = 16;
constexpr int64_t kPackObjects = int64_t{1} << kPackShift;

inline int32_t PackTiles(int32_t num_objects) {
  return static_cast<int32_t>((static_cast<int64_t>(num_objects) + kPackObjects - 1) >> kPackShift);
}

// Entries of the pack directory: per keyword, pack tiles + 1 offsets into its list.
inline uint64_t PackDirectoryEntries(const InvertedIndex& index) {
  const uint64_t keywords = index.keyword_offsets().size() > 0 ? index.keyword_offsets().size() - 1 : 0;
  return keywords * (static_cast<uint64_t>(PackTiles(index.num_objects())) + 1);
}

// Packing pays when its directory costs at most a quarter of the two bytes a
// posting it saves.
inline bool PackingPays(const InvertedIndex& index) {
  const uint64_t saved = static_cast<uint64_t>(index.num_postings()) * 2;
  return index.num_postings() > 0 && PackDirectoryEntries(index) * 4 * 4 <= saved;
}

// dir[kw * (pack_tiles + 1) + t] = the offset in keyword kw's list of its
// first posting whose object is >= t * 65,536 (the list's length for
// t = pack_tiles).
Status BuildPackDirectory(const InvertedIndex& index, int threads, const CancelCheck& cancel,
                          std::vector<uint32_t>* dir);

// The low 16 bits of postings [begin, end) of the List Array into out.
Status PackLowBits(const InvertedIndex& index, int64_t begin, int64_t end, int threads,
                   const CancelCheck& cancel, uint16_t* out);

// The packed form whole on the host (the GPU engine uploads it a chunk at
// a time instead).
struct PackedPostings {
  int32_t pack_tiles = 0;
  std::vector<uint32_t> directory;  // BuildPackDirectory's
  std::vector<uint16_t> low;        // PackLowBits' of every posting

  uint64_t bytes() const { return directory.size() * 4 + low.size() * 2; }
};

Status BuildPackedPostings(const InvertedIndex& index, int threads, const CancelCheck& cancel,
                           PackedPostings* out);

}  // namespace genie

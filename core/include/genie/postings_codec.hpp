// Packed postings: how a genie index keeps its List Array in its pages.
//
// One keyword's postings (object ids, ascending and distinct) become blocks
// of kPackedBlock gaps, gap = id - previous id - 1 (the first id's previous
// is -1, so a list that starts at 0 and is dense packs to zero bits).  A
// block is one byte, its bit width w (0..31: the widest gap's), followed by
// its gaps as w-bit fields, little-endian, in ceil(n * w / 8) bytes (n is
// 128 but for a list's last block).  The lists follow one another in keyword
// order with no header: their lengths are the Position Map's counts.
//
// Why this codec: the index pages hold the postings once and are read when
// a backend or the service loads an index, so what matters there is size
// and a decode that is bounds-checked and runs at memory speed.  Blocks of
// 128 give each region of a list its own width, so the frequent keywords
// of skewed data (small gaps) pack to a few bits a posting and rare ones
// cost at most their 32-bit ids plus a byte.  Tile-local 16-bit offsets
// would cost 2 bytes a posting whatever the gaps, and the linear-regression
// codecs of the list-intersection paper pay off for random access into a
// compressed list, which a load that decodes every list does not need.
#pragma once
#include <cstddef>
#include <cstdint>

#include "genie/cancel.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

constexpr int kPackedBlock = 128;

// The most bytes count postings can pack to.
std::size_t PackedPostingsBound(std::size_t count);

// Packs one keyword's postings into out (at least PackedPostingsBound(ids
// .size()) bytes); *written receives the bytes used.  InvalidArgument when
// the ids are not ascending, distinct and non-negative.
Status PackPostings(Span<int32_t> ids, uint8_t* out, std::size_t* written);

// Unpacks the postings of every keyword: the lists of keyword_offsets.size()
// - 1 keywords, keyword k's being postings[offsets[k], offsets[k + 1]),
// from exactly size bytes.  postings has room for postings_size ids.  The
// offsets must start at 0, never decrease and end at most at postings_size
// (checked before anything is written), and every id must be below
// n_objects.  A packing that is cut short, too long, has a width over 31 or
// an id out of range is an error (what an index page damaged on disk
// gives), never a read beyond the input or a write beyond postings.  Polls
// cancel about every 64K postings.
Status UnpackPostings(const uint8_t* in, std::size_t size, Span<int64_t> keyword_offsets,
                      int32_t n_objects, int32_t* postings, std::size_t postings_size,
                      const CancelCheck& cancel);

}  // namespace genie

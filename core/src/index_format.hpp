// The serialised InvertedIndex layout.  Internal to core/: index.cpp writes
// and reads it, and the tests use it to forge buffers whose checksum is valid
// but whose structure is not, which is the only way to reach the structural
// checks behind the checksum.
//
// All fields little-endian, no padding, no alignment assumed by the reader:
//
//   offset  size  field
//        0     4  magic  "GNIE" (0x45494E47)
//        4     4  format version (kIndexFormatVersion)
//        8     8  checksum of bytes [16, end)
//       16     4  num_objects          (int32, >= 0)
//       20     4  split_length         (int32, >= 1)
//       24     4  max_object_keywords  (int32, >= 0; a bound, checked)
//       28     4  reserved, 0
//       32     8  num_keywords K       (int64)
//       40     8  num_postings P       (int64)
//       48  8K+8  keyword offsets      (int64[K + 1])
//            4K   keywords             (int32[K], strictly ascending)
//            4P   postings             (int32[P])
#pragma once
#include <cstddef>
#include <cstdint>

namespace genie {
namespace detail {

constexpr uint32_t kIndexMagic = 0x45494E47u;  // "GNIE" as little-endian bytes
constexpr uint32_t kIndexFormatVersion = 1;
constexpr std::size_t kIndexHeaderBytes = 48;
constexpr std::size_t kIndexChecksumOffset = 8;
constexpr std::size_t kIndexChecksummedFrom = 16;

// A 64-bit checksum in the style of xxHash64 (four independent lanes, so it
// runs at several GB/s); not bit-compatible with xxHash.  It guards the
// derived on-disk copy against corruption that structural checks cannot see,
// such as one valid object id replaced by another.
uint64_t IndexChecksum(const void* data, std::size_t size);

}  // namespace detail
}  // namespace genie

#include "genie/postings_codec.hpp"

#include <algorithm>
#include <string>

namespace genie {

namespace {

int BitWidth(uint32_t v) { return v == 0 ? 0 : 32 - __builtin_clz(v); }

std::size_t BlockBytes(std::size_t n, int width) {
  return (n * static_cast<std::size_t>(width) + 7) / 8;
}

}  // namespace

std::size_t PackedPostingsBound(std::size_t count) {
  const std::size_t blocks = (count + kPackedBlock - 1) / kPackedBlock;
  return blocks + BlockBytes(count, 32);
}

Status PackPostings(Span<int32_t> ids, uint8_t* out, std::size_t* written) {
  std::size_t pos = 0;
  int64_t previous = -1;
  uint32_t gaps[kPackedBlock];

  for (std::size_t begin = 0; begin < ids.size(); begin += kPackedBlock) {
    const std::size_t n = std::min<std::size_t>(kPackedBlock, ids.size() - begin);
    uint32_t widest = 0;
    for (std::size_t i = 0; i < n; i++) {
      const int64_t id = ids[begin + i];
      if (id <= previous)
        return Status::InvalidArgument("postings to pack must be ascending, distinct and >= 0 (id " +
                                       std::to_string(id) + " after " + std::to_string(previous) +
                                       ")");
      gaps[i] = static_cast<uint32_t>(id - previous - 1);
      widest |= gaps[i];
      previous = id;
    }
    const int width = BitWidth(widest);
    out[pos++] = static_cast<uint8_t>(width);
    uint64_t acc = 0;
    int bits = 0;
    for (std::size_t i = 0; i < n; i++) {
      acc |= static_cast<uint64_t>(gaps[i]) << bits;
      bits += width;
      while (bits >= 8) {
        out[pos++] = static_cast<uint8_t>(acc);
        acc >>= 8;
        bits -= 8;
      }
    }
    if (bits > 0) out[pos++] = static_cast<uint8_t>(acc);
  }
  *written = pos;
  return Status::Ok();
}

Status UnpackPostings(const uint8_t* in, std::size_t size, Span<int64_t> keyword_offsets,
                      int32_t n_objects, int32_t* postings, std::size_t postings_size,
                      const CancelCheck& cancel) {
  constexpr int64_t kPollPostings = 1 << 16;
  std::size_t pos = 0;
  int64_t next_poll = kPollPostings;
  const auto corrupt = [](const std::string& what) {
    return Status::InvalidArgument("packed postings are corrupt: " + what);
  };

  if (keyword_offsets.empty()) return size == 0 ? Status::Ok() : corrupt("bytes without keywords");
  // every write lands in [offsets[0], offsets.back()): check them all first
  if (keyword_offsets[0] != 0) return corrupt("the first keyword's postings do not start at 0");
  for (std::size_t k = 0; k + 1 < keyword_offsets.size(); k++)
    if (keyword_offsets[k + 1] < keyword_offsets[k]) return corrupt("keyword offsets out of order");
  if (static_cast<uint64_t>(keyword_offsets[keyword_offsets.size() - 1]) > postings_size)
    return corrupt("more postings than there is room for");
  for (std::size_t k = 0; k + 1 < keyword_offsets.size(); k++) {
    const int64_t first = keyword_offsets[k];
    const int64_t end = keyword_offsets[k + 1];
    if (end >= next_poll) {
      next_poll = end + kPollPostings;
      if (cancel.requested()) return Status::Cancelled();
    }
    int64_t previous = -1;
    for (int64_t begin = first; begin < end; begin += kPackedBlock) {
      const std::size_t n = static_cast<std::size_t>(std::min<int64_t>(kPackedBlock, end - begin));
      if (pos >= size) return corrupt("cut short in keyword " + std::to_string(k));
      const int width = in[pos++];
      if (width > 31) return corrupt("a block of width " + std::to_string(width));
      const std::size_t bytes = BlockBytes(n, width);
      if (bytes > size - pos) return corrupt("cut short in keyword " + std::to_string(k));
      const uint8_t* p = in + pos;
      const uint64_t mask = (uint64_t{1} << width) - 1;
      uint64_t acc = 0;
      int bits = 0;
      int32_t* dst = postings + begin;
      for (std::size_t i = 0; i < n; i++) {
        while (bits < width) {
          acc |= static_cast<uint64_t>(*p++) << bits;
          bits += 8;
        }
        previous += static_cast<int64_t>(acc & mask) + 1;
        acc >>= width;
        bits -= width;
        if (previous >= n_objects)
          return corrupt("object " + std::to_string(previous) + " of keyword " + std::to_string(k) +
                         " is beyond the " + std::to_string(n_objects) + " objects");
        dst[i] = static_cast<int32_t>(previous);
      }
      pos += bytes;
    }
  }
  if (pos != size)
    return corrupt(std::to_string(size - pos) + " bytes left over after the last keyword");
  return Status::Ok();
}

}  // namespace genie

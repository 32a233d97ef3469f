// Packed postings (genie/packed_postings.hpp): the pack directory and the
// low 16 bits of the ids, built on the host threads.
#include "genie/packed_postings.hpp"

#include <algorithm>
#include <cstddef>

#include "genie/parallel.hpp"

namespace genie {

Status BuildPackDirectory(const InvertedIndex& index, int threads, const CancelCheck& cancel,
                          std::vector<uint32_t>* dir) {
  const Span<int64_t> offs = index.keyword_offsets();
  const Span<int32_t> postings = index.postings();
  const int64_t keywords = offs.size() > 0 ? static_cast<int64_t>(offs.size()) - 1 : 0;
  const int32_t tiles = PackTiles(index.num_objects());
  const std::size_t row = static_cast<std::size_t>(tiles) + 1;
  dir->assign(static_cast<std::size_t>(keywords) * row, 0);
  constexpr int64_t kPerTask = 256;  // keywords per task: small enough to poll cancel
  return ParallelFor((keywords + kPerTask - 1) / kPerTask, threads, [&](int64_t task) -> Status {
    const int64_t last = std::min(keywords, (task + 1) * kPerTask);
    for (int64_t kw = task * kPerTask; kw < last; ++kw) {
      const int32_t* list = postings.data() + offs[static_cast<std::size_t>(kw)];
      const int64_t length = offs[static_cast<std::size_t>(kw) + 1] - offs[static_cast<std::size_t>(kw)];
      if (length > UINT32_MAX) return Status::Internal("a keyword list too long to pack");
      uint32_t* out = dir->data() + static_cast<std::size_t>(kw) * row;
      // One walk of the sorted list: the first position at or past each tile start.
      int64_t p = 0;
      for (int32_t t = 0; t <= tiles; ++t) {
        const int64_t start = static_cast<int64_t>(t) << kPackShift;
        while (p < length && static_cast<int64_t>(list[p]) < start) ++p;
        out[t] = static_cast<uint32_t>(p);
      }
    }
    return Status::Ok();
  }, cancel);
}

Status PackLowBits(const InvertedIndex& index, int64_t begin, int64_t end, int threads,
                   const CancelCheck& cancel, uint16_t* out) {
  const int32_t* src = index.postings().data();
  constexpr int64_t kPerTask = 1 << 20;
  const int64_t count = end - begin;
  return ParallelFor((count + kPerTask - 1) / kPerTask, threads, [&](int64_t task) -> Status {
    const int64_t from = begin + task * kPerTask, to = std::min(end, from + kPerTask);
    for (int64_t i = from; i < to; ++i) {
      out[i - begin] = static_cast<uint16_t>(static_cast<uint32_t>(src[i]) & 0xFFFFu);
    }
    return Status::Ok();
  }, cancel);
}

Status BuildPackedPostings(const InvertedIndex& index, int threads, const CancelCheck& cancel,
                           PackedPostings* out) {
  PackedPostings packed;
  packed.pack_tiles = PackTiles(index.num_objects());
  GENIE_RETURN_IF_ERROR(BuildPackDirectory(index, threads, cancel, &packed.directory));
  packed.low.resize(static_cast<std::size_t>(index.num_postings()));
  GENIE_RETURN_IF_ERROR(
      PackLowBits(index, 0, index.num_postings(), threads, cancel, packed.low.data()));
  *out = std::move(packed);
  return Status::Ok();
}

}  // namespace genie

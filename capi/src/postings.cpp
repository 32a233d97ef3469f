// The C API of packed postings and set predicates (genie.h): the codec the
// access method stores its List Array with, and @> / && / <@ from postings.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "genie/genie.h"
#include "genie/postings_codec.hpp"
#include "genie/radix_sort.hpp"
#include "genie/set_match.hpp"
#include "capi_util.hpp"

using genie::capi::Guarded;

size_t genie_postings_pack_bound(int64_t count) {
  return count <= 0 ? 0 : genie::PackedPostingsBound(static_cast<std::size_t>(count));
}

genie_status genie_sort_int64(int64_t* keys, size_t n, int32_t threads, int (*cancel)(void*), void* cancel_arg,
                              genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    return genie::RadixSortInt64(keys, n, threads, genie::CancelCheck{cancel, cancel_arg});
  });
}

genie_status genie_postings_pack(const int32_t* ids, int64_t count, uint8_t* out, size_t* written,
                                 genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (written == nullptr || count < 0 || (count > 0 && (ids == nullptr || out == nullptr)))
      return genie::Status::InvalidArgument("genie_postings_pack: bad arguments");
    *written = 0;
    return genie::PackPostings(genie::Span<int32_t>(ids, static_cast<std::size_t>(count)), out,
                               written);
  });
}

genie_status genie_postings_unpack(const uint8_t* in, size_t size, int32_t n_keywords,
                                   const int64_t* keyword_offsets, int32_t n_objects,
                                   int32_t* postings, int64_t n_postings,
                                   int (*cancel)(void* arg), void* cancel_arg, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (n_keywords < 0 || n_objects < 0 || n_postings < 0 || keyword_offsets == nullptr ||
        (size > 0 && in == nullptr) || (n_postings > 0 && postings == nullptr))
      return genie::Status::InvalidArgument("genie_postings_unpack: bad arguments");
    genie::CancelCheck check;
    check.fn = cancel;
    check.arg = cancel_arg;
    return genie::UnpackPostings(
        in, size, genie::Span<int64_t>(keyword_offsets, static_cast<std::size_t>(n_keywords) + 1),
        n_objects, postings, static_cast<std::size_t>(n_postings), check);
  });
}

namespace genie {
namespace capi {

Status ToSetPredicate(genie_set_predicate predicate, SetPredicate* out) {
  switch (predicate) {
    case GENIE_SET_CONTAINS: *out = SetPredicate::kContains; return Status::Ok();
    case GENIE_SET_OVERLAPS: *out = SetPredicate::kOverlaps; return Status::Ok();
    case GENIE_SET_CONTAINED_BY: *out = SetPredicate::kContainedBy; return Status::Ok();
  }
  return Status::InvalidArgument("unknown set predicate");
}

Status IndexObjectSizes(const genie_index* index, SetPredicate predicate,
                        const CancelCheck& cancel, Span<int32_t>* sizes) {
  *sizes = Span<int32_t>();
  if (predicate != SetPredicate::kContainedBy) return Status::Ok();
  std::lock_guard<std::mutex> lock(index->sizes_mutex);
  if (!index->sizes_ready) {
    GENIE_RETURN_IF_ERROR(ObjectSizes(*index->index, cancel, &index->object_sizes));
    index->sizes_ready = true;
  }
  // never changed once ready: read without the lock
  *sizes = index->object_sizes;
  return Status::Ok();
}

Status CopyIds(const std::vector<int32_t>& found, int32_t** ids, int64_t* count) {
  if (found.empty()) return Status::Ok();
  *ids = static_cast<int32_t*>(std::malloc(found.size() * sizeof(int32_t)));
  if (*ids == nullptr) return Status::OutOfMemory("out of host memory");
  std::memcpy(*ids, found.data(), found.size() * sizeof(int32_t));
  *count = static_cast<int64_t>(found.size());
  return Status::Ok();
}

}  // namespace capi
}  // namespace genie

genie_status genie_index_match_set(const genie_index* index, genie_set_predicate predicate,
                                   const int32_t* keywords, int32_t n_keywords,
                                   int (*cancel)(void* arg), void* cancel_arg, int32_t** ids,
                                   int64_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (index == nullptr || ids == nullptr || count == nullptr || n_keywords < 0 ||
        (n_keywords > 0 && keywords == nullptr))
      return genie::Status::InvalidArgument("genie_index_match_set: bad arguments");
    *ids = nullptr;
    *count = 0;
    genie::SetPredicate p;
    GENIE_RETURN_IF_ERROR(genie::capi::ToSetPredicate(predicate, &p));
    genie::CancelCheck check;
    check.fn = cancel;
    check.arg = cancel_arg;
    genie::Span<int32_t> sizes;
    GENIE_RETURN_IF_ERROR(genie::capi::IndexObjectSizes(index, p, check, &sizes));
    std::vector<int32_t> out;
    GENIE_RETURN_IF_ERROR(genie::MatchSet(*index->index, p,
                                          genie::Span<int32_t>(keywords, static_cast<std::size_t>(n_keywords)),
                                          sizes, check, &out));
    return genie::capi::CopyIds(out, ids, count);
  });
}

void genie_ids_free(int32_t* ids) { std::free(ids); }

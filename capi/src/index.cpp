// The C API of the host inverted index (genie.h): made from objects or from
// a grouped List Array (copied, or borrowed in place), its sizes, and its
// serialised form.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "genie/genie.h"
#include "genie/index.hpp"
#include "capi_util.hpp"

using genie::capi::Guarded;

genie_status genie_index_create(const int64_t* offsets, int32_t n_objects, const int32_t* keywords,
                                const genie_index_options* options, genie_index** index,
                                genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (index == nullptr) return genie::Status::InvalidArgument("genie_index_create: null output");
    *index = nullptr;
    if (n_objects < 0) return genie::Status::InvalidArgument("number of objects must not be negative");
    if (offsets == nullptr) return genie::Status::InvalidArgument("genie_index_create: null offsets");
    int64_t n_postings = offsets[n_objects];
    if (n_postings > 0 && keywords == nullptr)
      return genie::Status::InvalidArgument("genie_index_create: null keywords");
    genie::IndexOptions index_options;
    if (options != nullptr && options->split_length != 0) index_options.split_length = options->split_length;
    auto built = std::make_shared<genie::InvertedIndex>();
    GENIE_RETURN_IF_ERROR(genie::InvertedIndex::Build(
        genie::Span<int64_t>(offsets, size_t(n_objects) + 1),
        genie::Span<int32_t>(keywords, n_postings > 0 ? size_t(n_postings) : 0), index_options,
        built.get()));
    auto handle = std::make_unique<genie_index>();
    handle->index = std::move(built);
    *index = handle.release();
    return genie::Status::Ok();
  });
}

namespace {

// A List Array handed in as genie_index_create_from_postings and
// genie_index_borrow take it: the arguments checked, as spans, with the
// options; then made (copied or borrowed) into *index.
template <typename Make>
genie::Status FromListArray(const char* name, int32_t n_objects, int32_t n_keywords,
                            const int32_t* keywords, const int64_t* keyword_offsets,
                            const int32_t* postings, const genie_index_options* options,
                            genie_index** index, Make make) {
  if (index == nullptr) return genie::Status::InvalidArgument(std::string(name) + ": null output");
  *index = nullptr;
  if (n_objects < 0 || n_keywords < 0)
    return genie::Status::InvalidArgument("counts must not be negative");
  if (keyword_offsets == nullptr || (n_keywords > 0 && keywords == nullptr))
    return genie::Status::InvalidArgument(std::string(name) + ": null arrays");
  const int64_t n_postings = keyword_offsets[n_keywords];
  if (n_postings < 0 || (n_postings > 0 && postings == nullptr))
    return genie::Status::InvalidArgument(std::string(name) + ": bad postings");
  genie::IndexOptions index_options;
  if (options != nullptr && options->split_length != 0) index_options.split_length = options->split_length;
  auto made = std::make_shared<genie::InvertedIndex>();
  GENIE_RETURN_IF_ERROR(make(genie::Span<int32_t>(keywords, size_t(n_keywords)),
                             genie::Span<int64_t>(keyword_offsets, size_t(n_keywords) + 1),
                             genie::Span<int32_t>(postings, size_t(n_postings)), index_options,
                             made.get()));
  auto handle = std::make_unique<genie_index>();
  handle->index = std::move(made);
  *index = handle.release();
  return genie::Status::Ok();
}

}  // namespace

genie_status genie_index_create_from_postings(int32_t n_objects, int32_t n_keywords,
                                              const int32_t* keywords,
                                              const int64_t* keyword_offsets,
                                              const int32_t* postings,
                                              const genie_index_options* options,
                                              genie_index** index, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    return FromListArray("genie_index_create_from_postings", n_objects, n_keywords, keywords,
                         keyword_offsets, postings, options, index,
                         [&](auto kw, auto offsets, auto ids, const genie::IndexOptions& o,
                             genie::InvertedIndex* out) {
                           return genie::InvertedIndex::FromPostings(n_objects, kw, offsets, ids, o, out);
                         });
  });
}

genie_status genie_index_borrow(int32_t n_objects, int32_t n_keywords, const int32_t* keywords,
                                const int64_t* keyword_offsets, const int32_t* postings,
                                int32_t max_object_keywords, const genie_index_options* options,
                                genie_index** index, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    return FromListArray("genie_index_borrow", n_objects, n_keywords, keywords, keyword_offsets,
                         postings, options, index,
                         [&](auto kw, auto offsets, auto ids, const genie::IndexOptions& o,
                             genie::InvertedIndex* out) {
                           return genie::InvertedIndex::Borrow(n_objects, kw, offsets, ids,
                                                               max_object_keywords, o, out);
                         });
  });
}

int32_t genie_index_max_object_keywords(const genie_index* index) {
  return index != nullptr ? index->index->max_object_keywords() : 0;
}

size_t genie_index_memory_bytes(const genie_index* index) {
  if (index == nullptr) return 0;
  std::lock_guard<std::mutex> lock(index->sizes_mutex);
  return index->index->MemoryBytes() + index->object_sizes.capacity() * sizeof(int32_t);
}

void genie_index_free(genie_index* index) { std::unique_ptr<genie_index> owned(index); }

int32_t genie_index_num_objects(const genie_index* index) {
  return index != nullptr ? index->index->num_objects() : 0;
}

int64_t genie_index_num_postings(const genie_index* index) {
  return index != nullptr ? index->index->num_postings() : 0;
}

genie_status genie_index_serialized_size(const genie_index* index, size_t* size, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (index == nullptr || size == nullptr)
      return genie::Status::InvalidArgument("genie_index_serialized_size: null argument");
    *size = index->index->SerializedSize();
    return genie::Status::Ok();
  });
}

genie_status genie_index_serialize(const genie_index* index, void* buffer, size_t size,
                                   genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (index == nullptr || buffer == nullptr)
      return genie::Status::InvalidArgument("genie_index_serialize: null argument");
    return index->index->Serialize(buffer, size);
  });
}

genie_status genie_index_deserialize(const void* buffer, size_t size, genie_index** index,
                                     genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (index == nullptr || (buffer == nullptr && size > 0))
      return genie::Status::InvalidArgument("genie_index_deserialize: null argument");
    *index = nullptr;
    auto loaded = std::make_shared<genie::InvertedIndex>();
    GENIE_RETURN_IF_ERROR(genie::InvertedIndex::Deserialize(buffer, size, loaded.get()));
    auto handle = std::make_unique<genie_index>();
    handle->index = std::move(loaded);
    *index = handle.release();
    return genie::Status::Ok();
  });
}

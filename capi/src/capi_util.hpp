// Helpers shared by the C API's source files (capi/src only): statuses and
// messages, the catch-all around every entry point, options and strings.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/index.hpp"
#include "genie/sequence.hpp"
#include "genie/set_match.hpp"
#include "genie/status.hpp"

// The handle behind genie_index (shared by the files of capi/src).
struct genie_index {
  std::shared_ptr<const genie::InvertedIndex> index;
  // Each object's number of distinct keywords, made by the first
  // GENIE_SET_CONTAINED_BY search of the index that runs to its end
  // (genie_index_match_set; a cancelled one leaves it to the next).
  mutable std::mutex sizes_mutex;
  mutable bool sizes_ready = false;
  mutable std::vector<int32_t> object_sizes;
};

namespace genie {
namespace capi {

// A scan's rows (offsets, objects, distances: the core's CSR result) as the
// C API's malloc'd result struct of the same fields (genie_string_results,
// genie_vector_results, genie_code_results), freed by free_results on
// failure; the caller fills in the struct's other fields.
template <typename CResults, typename Rows>
genie::Status CopyScanRows(const Rows& r, genie_engine_kind device, void (*free_results)(CResults*),
                           CResults** out) {
  using Distance = std::remove_pointer_t<decltype(CResults::distances)>;
  const std::size_t nq = r.offsets.size() - 1;
  const std::size_t rows = r.objects.size();
  auto* res = static_cast<CResults*>(std::calloc(1, sizeof(CResults)));
  if (res == nullptr) return genie::Status::OutOfMemory("out of host memory for scan results");
  res->n_queries = static_cast<int32_t>(nq);
  res->device = device;
  res->query_offsets = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (nq + 1)));
  res->objects = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * (rows + 1)));
  res->distances = static_cast<Distance*>(std::malloc(sizeof(Distance) * (rows + 1)));
  if (res->query_offsets == nullptr || res->objects == nullptr || res->distances == nullptr) {
    free_results(res);
    return genie::Status::OutOfMemory("out of host memory for scan results");
  }
  static_assert(sizeof(r.distances[0]) == sizeof(Distance), "the core's distances are the C API's");
  std::memcpy(res->query_offsets, r.offsets.data(), sizeof(int64_t) * (nq + 1));
  if (rows > 0) {
    std::memcpy(res->objects, r.objects.data(), sizeof(int32_t) * rows);
    std::memcpy(res->distances, r.distances.data(), sizeof(Distance) * rows);
  }
  *out = res;
  return genie::Status::Ok();
}

inline genie_status Report(const genie::Status& status, genie_error* err) {
  if (err != nullptr) {
    err->status = status.code();
    std::snprintf(err->message, sizeof(err->message), "%s", status.message().c_str());
  }
  return status.code();
}


// Runs body, which returns a genie::Status, and converts anything thrown.
template <typename Body>
inline genie_status Guarded(genie_error* err, Body&& body) {
  try {
    return Report(body(), err);
  } catch (const std::bad_alloc&) {
    return Report(genie::Status::OutOfMemory("out of host memory"), err);
  } catch (const std::exception& e) {
    return Report(genie::Status::Internal(std::string("unexpected C++ exception: ") + e.what()), err);
  } catch (...) {
    return Report(genie::Status::Internal("unexpected C++ exception"), err);
  }
}

// Set predicates (postings.cpp): the C enum as core's; each object's
// number of keywords for kContainedBy (computed once per index, kept with
// it; empty for the other predicates); found ids into malloc'd *ids.
Status ToSetPredicate(genie_set_predicate predicate, SetPredicate* out);
Status IndexObjectSizes(const genie_index* index, SetPredicate predicate,
                        const CancelCheck& cancel, Span<int32_t>* sizes);
Status CopyIds(const std::vector<int32_t>& found, int32_t** ids, int64_t* count);

inline genie::EngineOptions ToEngineOptions(const genie_engine_options* options) {
  genie::EngineOptions out;
  if (options != nullptr) {
    out.threads = options->threads;
    out.device_ordinal = options->device_ordinal;
    out.device_mask = options->device_mask;
    out.placement = options->placement;
    out.memory_budget_bytes = options->memory_budget_bytes;
    out.cancel.fn = options->cancel;
    out.cancel.arg = options->cancel_arg;
  }
  return out;
}

inline genie::Status CheckText(const char* text, size_t size, const char* what) {
  if (text == nullptr && size > 0) return genie::Status::InvalidArgument(std::string(what) + " is NULL");
  return genie::Status::Ok();
}

// Decodes count UTF-8 strings in CSR form (text + byte offsets) into out.
inline genie::Status AddStrings(const char* text, const int64_t* offsets, int64_t count,
                         genie::CodePointStrings* out) {
  if (count > 0 && offsets == nullptr) return genie::Status::InvalidArgument("NULL string offsets");
  for (int64_t i = 0; i < count; ++i) {
    if (offsets[i] < 0 || offsets[i + 1] < offsets[i])
      return genie::Status::InvalidArgument("string offsets are not ascending");
    const size_t size = static_cast<size_t>(offsets[i + 1] - offsets[i]);
    GENIE_RETURN_IF_ERROR(CheckText(text, size, "string text"));
    GENIE_RETURN_IF_ERROR(out->AddUtf8(size > 0 ? text + offsets[i] : "", size));
  }
  return genie::Status::Ok();
}

// The GPUs the CUDA runtime sees, probed once per process (empty without
// CUDA support or a driver).
const std::vector<genie_device_info>& GpuDevices();

// options->placement is a genie_placement.
inline Status CheckPlacement(const genie_engine_options* options) {
  if (options != nullptr && (options->placement < GENIE_PLACEMENT_AUTO || options->placement > GENIE_PLACEMENT_SHARD))
    return Status::InvalidArgument("unknown placement " + std::to_string(options->placement));
  return Status::Ok();
}

// One GPU of a device group and what an index copy may take on it.
struct GroupDevice {
  int32_t ordinal;
  uint64_t capacity_bytes;
};

// The usable GPUs options->device_mask names, when more than one: a device
// group.  Otherwise empty, and a mask that names one GPU (usable or not)
// becomes options->device_ordinal, so that a single GPU's path runs (and
// reports an unusable one).  Capacity: the memory budget, else 90% of the
// free memory the probe saw.
std::vector<GroupDevice> GroupDevices(EngineOptions* options);

}  // namespace capi
}  // namespace genie

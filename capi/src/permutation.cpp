// The C API of the permutation index (genie_permutation_*, genie_permutants_choose):
// the rows themselves are made by genie_strings_permutations and
// genie_vectors_permutations beside their sets.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "capi_util.hpp"
#include "genie/genie.h"
#include "genie/permutation.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_permutation.hpp"
#endif

using genie::capi::Guarded;
using genie::capi::ToEngineOptions;

struct genie_permutation_rows {
  genie::PermutationTable table;
#ifdef GENIE_WITH_CUDA
  mutable std::mutex gpu_mutex;  // the GPU copy is made on first use
  std::unique_ptr<genie::GpuPermutationRows> gpu;
#endif
};

namespace {

#ifdef GENIE_WITH_CUDA
// The rows' GPU copy on device_ordinal, made on first use.
genie::Status GpuCopy(genie_permutation_rows* rows, int32_t device_ordinal, genie::GpuPermutationRows** out) {
  std::lock_guard<std::mutex> lock(rows->gpu_mutex);
  if (rows->gpu == nullptr || rows->gpu->device() != device_ordinal) {
    rows->gpu.reset();
    GENIE_RETURN_IF_ERROR(genie::GpuPermutationRows::Create(rows->table.rows(), device_ordinal, &rows->gpu));
  }
  *out = rows->gpu.get();
  return genie::Status::Ok();
}
#endif

genie::Status ToCCandidates(const genie::PermutationCandidates& c, genie_engine_kind device,
                            genie_permutation_candidates** out) {
  const std::size_t nq = c.offsets.size() - 1;
  auto* res = static_cast<genie_permutation_candidates*>(std::calloc(1, sizeof(genie_permutation_candidates)));
  if (res == nullptr) return genie::Status::OutOfMemory("out of host memory for permutation candidates");
  res->n_queries = static_cast<int32_t>(nq);
  res->device = device;
  res->query_offsets = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (nq + 1)));
  res->objects = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * (c.objects.size() + 1)));
  if (res->query_offsets == nullptr || res->objects == nullptr) {
    genie_permutation_candidates_free(res);
    return genie::Status::OutOfMemory("out of host memory for permutation candidates");
  }
  std::memcpy(res->query_offsets, c.offsets.data(), sizeof(int64_t) * (nq + 1));
  if (!c.objects.empty()) std::memcpy(res->objects, c.objects.data(), sizeof(int32_t) * c.objects.size());
  *out = res;
  return genie::Status::Ok();
}

}  // namespace

extern "C" {

int32_t genie_permutation_stride(int32_t m) { return genie::PermutationStride(m); }

genie_status genie_permutants_choose(int32_t n, const uint8_t* excluded, int32_t m, uint64_t seed,
                                     int32_t* ids, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (ids == nullptr) return genie::Status::InvalidArgument("genie_permutants_choose: NULL output");
    if (n < 0) return genie::Status::InvalidArgument("negative number of objects");
    std::vector<int32_t> chosen;
    GENIE_RETURN_IF_ERROR(genie::ChoosePermutants(
        n, excluded != nullptr ? genie::Span<uint8_t>(excluded, static_cast<size_t>(n)) : genie::Span<uint8_t>(),
        m, seed, &chosen));
    std::memcpy(ids, chosen.data(), sizeof(int32_t) * chosen.size());
    return genie::Status::Ok();
  });
}

void genie_permutation_candidates_free(genie_permutation_candidates* candidates) {
  if (candidates == nullptr) return;
  std::free(candidates->query_offsets);
  std::free(candidates->objects);
  std::free(candidates);
}

genie_status genie_permutation_rows_create(int32_t m, int32_t n, genie_permutation_rows** rows,
                                           uint8_t** data, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (rows == nullptr || data == nullptr)
      return genie::Status::InvalidArgument("genie_permutation_rows_create: NULL output");
    auto owned = std::make_unique<genie_permutation_rows>();
    GENIE_RETURN_IF_ERROR(genie::MakePermutationTable(m, n, &owned->table));
    *data = owned->table.positions.data();
    *rows = owned.release();
    return genie::Status::Ok();
  });
}

void genie_permutation_rows_free(genie_permutation_rows* rows) { delete rows; }

size_t genie_permutation_rows_device_bytes(const genie_permutation_rows* rows) {
#ifdef GENIE_WITH_CUDA
  if (rows == nullptr) return 0;
  std::lock_guard<std::mutex> lock(rows->gpu_mutex);
  return rows->gpu != nullptr ? rows->gpu->device_bytes() : 0;
#else
  (void) rows;
  return 0;
#endif
}

genie_status genie_permutation_select(genie_permutation_rows* rows, genie_engine_kind device,
                                      const genie_engine_options* options, const uint8_t* excluded,
                                      const uint8_t* queries, int32_t n_queries, int32_t candidates,
                                      genie_permutation_candidates** out, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (rows == nullptr || out == nullptr)
      return genie::Status::InvalidArgument("genie_permutation_select: NULL argument");
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    const genie::PermutationRows objects = rows->table.rows();
    // the core reads the queries through a view; nothing writes them
    const genie::PermutationRows query_rows{objects.m, objects.stride, n_queries, const_cast<uint8_t*>(queries)};
    GENIE_RETURN_IF_ERROR(genie::CheckPermutationRows(query_rows));
    const genie::Span<uint8_t> flags =
        excluded != nullptr ? genie::Span<uint8_t>(excluded, static_cast<size_t>(objects.n)) : genie::Span<uint8_t>();
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    genie::PermutationCandidates found;
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      genie::GpuPermutationRows* gpu = nullptr;
      genie::Status status = GpuCopy(rows, engine_options.device_ordinal, &gpu);
      if (status.ok()) {
        GENIE_RETURN_IF_ERROR(gpu->Select(query_rows, flags, candidates, engine_options.memory_budget_bytes,
                                          &found, engine_options.cancel));
        return ToCCandidates(found, GENIE_ENGINE_GPU, out);
      }
      // AUTO without a usable GPU selects on the CPU; every other failure goes to the caller
      if (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    GENIE_RETURN_IF_ERROR(genie::CpuPermutationSelect(objects, query_rows, flags, candidates,
                                                      engine_options.threads, &found, engine_options.cancel));
    return ToCCandidates(found, GENIE_ENGINE_CPU, out);
  });
}

}  // extern "C"

// The C API of code sets and the Hamming scan (genie_codes_*).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "capi_util.hpp"
#include "genie/codes.hpp"
#include "genie/ewh.hpp"
#include "genie/genie.h"
#ifdef GENIE_WITH_CUDA
#include "device_group.hpp"
#include "genie/gpu_code_scan.hpp"
#endif

using genie::capi::Guarded;
using genie::capi::ToEngineOptions;

#ifdef GENIE_WITH_CUDA
using CodeGroup = genie::capi::DeviceGroup<genie::CodeSet, genie::GpuCodeSet>;
#endif

static_assert(GENIE_MAX_CODE_BITS == genie::kMaxCodeBits, "the C API's code bound is the core's");
static_assert(GENIE_EWH_MAX_SAMPLE_BITS == genie::kMaxEwhSampleBits && GENIE_EWH_MAX_ERRORS == genie::kMaxEwhErrors,
              "the C API's EWH bounds are the core's");

struct genie_ewh {
  std::unique_ptr<genie::EwhFunctions> functions;
};

struct genie_codes {
  genie::CodeSet set;
  bool sealed = false;  // no scan until genie_codes_seal checked the rows
#ifdef GENIE_WITH_CUDA
  // The GPU copy is made on first use; shared, so that a scan keeps the one
  // it read while another call (other options) replaces it, and the genie
  // service's stats read its size from another thread under the mutex.
  mutable std::mutex gpu_mutex;
  std::shared_ptr<genie::GpuCodeSet> gpu;
  int32_t gpu_device = -1;
  uint64_t gpu_budget = 0;
  // With more than one GPU in the options' mask: the set's copies on each,
  // replicated or sharded (capi/src/device_group.hpp), as for vectors and
  // strings; slice_bytes: a sharded group's second copy of the rows on the host.
  std::shared_ptr<CodeGroup> group;
  std::atomic<std::size_t> slice_bytes{0};
#endif
};

namespace {

genie::Status ToCResults(const genie::CodeScanResult& r, genie_engine_kind device, genie_code_results** out) {
  return genie::capi::CopyScanRows(r, device, genie_code_results_free, out);
}

#ifdef GENIE_WITH_CUDA
// The set's GPU copy for this device and budget, made on first use.
genie::Status GpuCopy(genie_codes* codes, const genie::EngineOptions& options,
                      std::shared_ptr<genie::GpuCodeSet>* out) {
  std::lock_guard<std::mutex> lock(codes->gpu_mutex);
  if (codes->gpu == nullptr || codes->gpu_device != options.device_ordinal ||
      codes->gpu_budget != options.memory_budget_bytes) {
    codes->gpu.reset();
    std::unique_ptr<genie::GpuCodeSet> made;
    GENIE_RETURN_IF_ERROR(
        genie::GpuCodeSet::Create(codes->set, options.device_ordinal, options.memory_budget_bytes, &made));
    codes->gpu = std::move(made);
    codes->gpu_device = options.device_ordinal;
    codes->gpu_budget = options.memory_budget_bytes;
  }
  *out = codes->gpu;
  return genie::Status::Ok();
}

// The set's copies on the GPUs of a device group, made on first use and
// again when the options name other GPUs (as vectors.cpp's GroupCopies).
genie::Status GroupCopies(genie_codes* codes, const std::vector<genie::capi::GroupDevice>& devices,
                          const genie::EngineOptions& options, std::shared_ptr<CodeGroup>* out) {
  std::lock_guard<std::mutex> lock(codes->gpu_mutex);
  const genie::CodeSet& set = codes->set;
  auto slice = [&set](int32_t first, int32_t end, genie::CodeSet* rows) {
    rows->bits = set.bits;
    rows->words = set.words;
    rows->n = end - first;
    rows->values.assign(set.row(first), set.row(end));
    return genie::Status::Ok();
  };
  auto make_gpu = [](const genie::CodeSet& rows, int32_t ordinal, uint64_t budget,
                     std::unique_ptr<genie::GpuCodeSet>* gpu) {
    return genie::GpuCodeSet::Create(rows, ordinal, budget, gpu);
  };
  const bool remade = codes->group == nullptr || !codes->group->MadeFor(options);
  if (remade) codes->slice_bytes.store(0);  // the old group's go with it
  // a GPU copy needs room for one query's distances beside the codes (GpuCodeSet: it
  // cannot stream), so auto placement weighs both against each GPU
  const uint64_t needs = static_cast<uint64_t>(set.values.size()) * sizeof(uint64_t) +
                         static_cast<uint64_t>(std::max(set.n, 1)) * sizeof(uint16_t) + (16u << 20);
  GENIE_RETURN_IF_ERROR(
      genie::capi::EnsureDeviceGroup(set, set.n, needs, devices, options, slice, make_gpu, &codes->group));
  if (remade) {
    std::size_t slices = 0;
    for (const auto& c : codes->group->copies)
      if (c->slice != nullptr) slices += c->slice->values.capacity() * sizeof(uint64_t);
    codes->slice_bytes.store(slices);
  }
  *out = codes->group;  // this search's reference
  return genie::Status::Ok();
}

// The Hamming scan over a device group: a replicated batch's queries split
// among the GPUs, or every query over each shard and the rows merged by
// (distance, id), as one scan orders them.
genie::Status GroupScan(const genie::CodeSet& set, CodeGroup* g, const genie::EngineOptions& options,
                        const genie::CodeScanRequest& request, genie::CodeScanResult* out, bool* on_gpu) {
  // (checked whole first: the parts below point into the queries and the excluded flags)
  GENIE_RETURN_IF_ERROR(genie::ValidateCodeScanRequest(set, request));
  auto scan = [&](genie::GpuCodeSet* gpu, const genie::CodeSet& rows, int32_t first_object, int32_t q0, int32_t q1,
                  genie::CodeScanResult* found) {
    genie::CodeScanRequest r = request;
    r.queries = request.queries + static_cast<std::size_t>(q0) * static_cast<std::size_t>(set.words);
    r.n_queries = q1 - q0;
    if (request.excluded.size() > 0)
      r.excluded = genie::Span<uint8_t>(request.excluded.data() + first_object, static_cast<std::size_t>(rows.n));
    return gpu != nullptr ? gpu->Scan(rows, r, found, options.cancel)
                          : genie::CpuCodeScan(rows, r, options.threads, found, options.cancel);
  };
  return genie::capi::ScanDeviceGroup(set, g, request.n_queries, request.k, scan, std::less<>(), out, on_gpu);
}
#endif

}  // namespace

extern "C" {

int32_t genie_code_words(int32_t bits) { return genie::WordsForBits(bits); }

int32_t genie_hamming_distance(const uint64_t* a, const uint64_t* b, int32_t words) {
  return genie::HammingDistance(a, b, words);
}

genie_status genie_codes_create_unsealed(int32_t n, int32_t bits, int32_t threads, genie_codes** codes, uint64_t** rows,
                                         genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (codes == nullptr || rows == nullptr)
      return genie::Status::InvalidArgument("genie_codes_create_unsealed: NULL output");
    if (n < 0 || bits < 1 || bits > genie::kMaxCodeBits)
      return genie::Status::InvalidArgument("genie_codes_create_unsealed: bad n or bits");
    auto owned = std::make_unique<genie_codes>();
    owned->set.bits = bits;
    owned->set.words = genie::WordsForBits(bits);
    owned->set.n = n;
    // zeroed: a row the caller leaves alone (a NULL value) is the zero code
    genie::ResizeZeroed(&owned->set.values, static_cast<std::size_t>(n) * static_cast<std::size_t>(owned->set.words),
                        threads);
    *rows = owned->set.values.data();
    *codes = owned.release();
    return genie::Status::Ok();
  });
}

genie_status genie_codes_seal(genie_codes* codes, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (codes == nullptr) return genie::Status::InvalidArgument("genie_codes_seal: NULL codes");
    GENIE_RETURN_IF_ERROR(
        genie::CheckCodes(codes->set.values.data(), codes->set.n, codes->set.bits, "stored code"));
    codes->sealed = true;
    return genie::Status::Ok();
  });
}

void genie_codes_free(genie_codes* codes) { std::unique_ptr<genie_codes> owned(codes); }

size_t genie_codes_memory_bytes(const genie_codes* codes) {
  if (codes == nullptr) return 0;
  std::size_t bytes = codes->set.values.capacity() * sizeof(uint64_t);
#ifdef GENIE_WITH_CUDA
  bytes += codes->slice_bytes.load();
#endif
  return bytes;
}

size_t genie_codes_device_bytes(const genie_codes* codes) {
#ifdef GENIE_WITH_CUDA
  if (codes == nullptr) return 0;
  std::lock_guard<std::mutex> lock(codes->gpu_mutex);
  std::size_t bytes = codes->gpu != nullptr ? codes->gpu->device_bytes() : 0;
  if (codes->group != nullptr) bytes += codes->group->device_bytes();
  return bytes;
#endif
  (void)codes;
  return 0;
}

int32_t genie_codes_count(const genie_codes* codes) { return codes == nullptr ? 0 : codes->set.size(); }

int32_t genie_codes_bits(const genie_codes* codes) { return codes == nullptr ? 0 : codes->set.bits; }

void genie_code_results_free(genie_code_results* results) {
  if (results == nullptr) return;
  std::free(results->query_offsets);
  std::free(results->objects);
  std::free(results->distances);
  std::free(results);
}

genie_status genie_codes_scan(genie_codes* codes, genie_engine_kind device, const genie_engine_options* options,
                              const genie_code_scan* scan, genie_code_results** results, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (codes == nullptr || scan == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_codes_scan: NULL argument");
    if (!codes->sealed) return genie::Status::InvalidArgument("genie_codes_scan: the set is not sealed");
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
    const genie::CodeSet& set = codes->set;
    genie::CodeScanRequest request;
    request.n_queries = scan->n_queries;
    request.queries = scan->queries;
    request.k = scan->k;
    if (scan->excluded != nullptr)
      request.excluded = genie::Span<uint8_t>(scan->excluded, static_cast<size_t>(set.size()));
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    genie::CodeScanResult found;
    if (scan->candidate_offsets != nullptr) {
      // re-ranking a shortlist reads a few codes per query: the CPU's work, whatever device says
      const int64_t n_candidates = scan->n_queries > 0 ? scan->candidate_offsets[scan->n_queries] : 0;
      if (scan->n_queries < 0 || n_candidates < 0 || (n_candidates > 0 && scan->candidates == nullptr))
        return genie::Status::InvalidArgument("bad candidate list");
      GENIE_RETURN_IF_ERROR(genie::RerankCodes(
          set, scan->queries, scan->n_queries, scan->k,
          genie::Span<int64_t>(scan->candidate_offsets, static_cast<size_t>(scan->n_queries) + 1),
          genie::Span<int32_t>(scan->candidates, static_cast<size_t>(n_candidates)), request.excluded,
          engine_options.threads, &found, engine_options.cancel));
      return ToCResults(found, GENIE_ENGINE_CPU, results);
    }
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      // several GPUs in the mask: the group's; one: that GPU (the mask's, not ordinal 0)
      genie::EngineOptions one = engine_options;
      const auto group = genie::capi::GroupDevices(&one);
      if (!group.empty()) {
        std::shared_ptr<CodeGroup> g;
        GENIE_RETURN_IF_ERROR(GroupCopies(codes, group, engine_options, &g));
        bool on_gpu = false;
        GENIE_RETURN_IF_ERROR(GroupScan(set, g.get(), engine_options, request, &found, &on_gpu));
        return ToCResults(found, on_gpu ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU, results);
      }
      std::shared_ptr<genie::GpuCodeSet> gpu;
      genie::Status status = GpuCopy(codes, one, &gpu);
      if (status.ok()) {
        GENIE_RETURN_IF_ERROR(gpu->Scan(set, request, &found, engine_options.cancel));
        return ToCResults(found, GENIE_ENGINE_GPU, results);
      }
      // AUTO without a usable GPU scans on the CPU; every other failure goes to the caller
      if (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    GENIE_RETURN_IF_ERROR(genie::CpuCodeScan(set, request, engine_options.threads, &found, engine_options.cancel));
    return ToCResults(found, GENIE_ENGINE_CPU, results);
  });
}

genie_status genie_ewh_create(const genie_ewh_params* params, genie_ewh** ewh, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (params == nullptr || ewh == nullptr) return genie::Status::InvalidArgument("genie_ewh_create: NULL argument");
    genie::EwhParams p;
    p.bits = params->bits;
    p.functions = params->functions;
    p.sample_bits = params->sample_bits;
    p.seed = params->seed;
    auto owned = std::make_unique<genie_ewh>();
    GENIE_RETURN_IF_ERROR(genie::EwhFunctions::Create(p, &owned->functions));
    *ewh = owned.release();
    return genie::Status::Ok();
  });
}

void genie_ewh_free(genie_ewh* ewh) { std::unique_ptr<genie_ewh> owned(ewh); }

void genie_ewh_keywords(const genie_ewh* ewh, const uint64_t* code, int32_t* keywords) {
  ewh->functions->Keywords(code, keywords);
}

int64_t genie_ewh_query_buckets(const genie_ewh* ewh, int32_t errors) {
  return ewh->functions->QueryBuckets(errors);
}

void genie_ewh_query_keywords(const genie_ewh* ewh, const uint64_t* code, int32_t errors, int32_t* keywords) {
  ewh->functions->QueryKeywords(code, errors, keywords);
}

}  // extern "C"

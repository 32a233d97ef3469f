// The C API (capi/): turns C++ results and failures into status + message.  Every
// entry point catches everything, so nothing thrown reaches PostgreSQL.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <utility>
#include <thread>
#include <variant>
#include <unistd.h>
#include <vector>

#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/index.hpp"
#include "genie/parallel.hpp"
#include "genie/query.hpp"
#include "genie/sequence.hpp"
#include "genie/status.hpp"
#include "capi_util.hpp"
#include "genie/multi_device.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_edit_distance.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/gpu_stats.hpp"
#endif

#ifndef GENIE_VERSION
#define GENIE_VERSION "0.0.0"
#endif

// Calls of one engine from several threads (the genie service's runners):
// searches run side by side (shared) where the engine takes them so (the
// CPU engine; a GPU engine, which does their host work side by side and
// takes its device one call at a time; a device group: genie/multi_device.hpp),
// and an upload or drop waits for every search (exclusive).
struct genie_engine {
  std::unique_ptr<genie::Engine> engine;
  std::shared_mutex calls;

  std::unique_lock<std::shared_mutex> Exclusive() { return std::unique_lock<std::shared_mutex>(calls); }
  using Lock = std::variant<std::shared_lock<std::shared_mutex>, std::unique_lock<std::shared_mutex>>;
  // A search: shared where the engine takes concurrent searches.
  Lock ForSearch() {
    if (engine->ConcurrentSearches()) return std::shared_lock<std::shared_mutex>(calls);
    return Exclusive();
  }
  // A set match: shared on the CPU engine only (a GPU engine's device
  // threshold is set for the call).
  Lock ForMatchSet() {
    if (engine->kind() == GENIE_ENGINE_CPU) return std::shared_lock<std::shared_mutex>(calls);
    return Exclusive();
  }
};

using genie::capi::AddStrings;
using genie::capi::GpuDevices;
using genie::capi::GroupDevice;
using genie::capi::GroupDevices;
using genie::capi::CheckText;
using genie::capi::Guarded;
using genie::capi::Report;
using genie::capi::ToEngineOptions;

namespace {


std::string ReadCpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
      }
    }
  }
  return "CPU";
}

genie_device_info CpuDeviceInfo() {
  genie_device_info info{};
  info.kind = GENIE_DEVICE_CPU;
  info.ordinal = 0;
  std::snprintf(info.name, sizeof(info.name), "%s", ReadCpuModel().c_str());
  long pages = sysconf(_SC_PHYS_PAGES);
  long avail = sysconf(_SC_AVPHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  info.memory_bytes = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
  info.free_memory_bytes = avail > 0 && page_size > 0 ? uint64_t(avail) * uint64_t(page_size) : 0;
  info.processors = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  info.usable = 1;
  return info;
}


genie::Status MakeGpu(const genie::EngineOptions& group_options, std::unique_ptr<genie::Engine>* out) {
#ifdef GENIE_WITH_CUDA
  genie::EngineOptions options = group_options;
  const std::vector<GroupDevice> group = GroupDevices(&options);
  genie::Status status;
  if (group.empty()) {
    *out = genie::MakeGpuEngine(options, &status);
    if (*out == nullptr && status.ok()) status = genie::Status::Internal("GPU engine creation failed");
    return status;
  }
  std::vector<genie::DeviceMember> members;
  // the GPUs prepare their parts at once: the host's cores shared among them
  const int32_t threads = std::max<int32_t>(1, genie::ResolveThreads(options.threads) / static_cast<int32_t>(group.size()));
  for (const GroupDevice& d : group) {
    genie::EngineOptions one = options;
    one.device_ordinal = d.ordinal;
    one.threads = threads;
    genie::DeviceMember member;
    member.device = d.ordinal;
    member.capacity_bytes = d.capacity_bytes;
    member.engine = genie::MakeGpuEngine(one, &status);
    if (member.engine == nullptr) {
      // a GPU the probe called usable that will not make an engine is left out
      if (genie::DeviceFailed(status)) continue;
      return status.ok() ? genie::Status::Internal("GPU engine creation failed") : status;
    }
    members.push_back(std::move(member));
  }
  if (members.empty()) return status;
  const genie::EngineOptions host = options;
  *out = std::make_unique<genie::MultiDeviceEngine>(
      std::move(members), [host] { return genie::MakeCpuEngine(host); },
      static_cast<genie::Placement>(options.placement), options.threads, options.cancel);
  return genie::Status::Ok();
#else
  (void)group_options;
  out->reset();
  return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
}

// Plain malloc'd arrays so C callers can own them without C++.
genie::Status ToCResults(const genie::TopKResults& found, genie_results** results) {
  const size_t n_queries = found.query_offsets.size() - 1;
  const size_t n_hits = found.hits.size();
  auto* out = static_cast<genie_results*>(std::calloc(1, sizeof(genie_results)));
  if (out == nullptr) return genie::Status::OutOfMemory("out of host memory for results");
  out->n_queries = static_cast<int32_t>(n_queries);
  out->query_offsets = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (n_queries + 1)));
  out->objects = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * std::max<size_t>(n_hits, 1)));
  out->scores = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * std::max<size_t>(n_hits, 1)));
  if (out->query_offsets == nullptr || out->objects == nullptr || out->scores == nullptr) {
    genie_results_free(out);
    return genie::Status::OutOfMemory("out of host memory for results");
  }
  std::copy(found.query_offsets.begin(), found.query_offsets.end(), out->query_offsets);
  for (size_t i = 0; i < n_hits; ++i) {
    out->objects[i] = found.hits[i].object;
    out->scores[i] = found.hits[i].score;
  }
  *results = out;
  return genie::Status::Ok();
}

// genie_gpu_prepare's state: one preparation a process, on a thread of its
// own.  Never destroyed (the thread may outlive static destruction at exit,
// which is why callers wait for it first).
struct GpuPreparation {
  std::mutex mutex;
  std::condition_variable finished;
  bool started = false;
  bool done = false;
  genie::JoinedThread thread;
};

GpuPreparation& Preparation() {
  static auto* preparation = new GpuPreparation();
  return *preparation;
}

}  // namespace

namespace genie {
namespace capi {

// The GPU probe initialises the CUDA runtime, so it runs once per process.
const std::vector<genie_device_info>& GpuDevices() {
  static std::once_flag once;
  static std::vector<genie_device_info> devices;
#ifdef GENIE_WITH_CUDA
  std::call_once(once, [] { devices = genie::ListGpuDevices(); });
#else
  std::call_once(once, [] {});
#endif
  return devices;
}

std::vector<GroupDevice> GroupDevices(EngineOptions* options) {
  std::vector<GroupDevice> group;
  const uint64_t mask = options->device_mask;
  if (mask == 0) return group;
  for (const genie_device_info& d : GpuDevices()) {
    if (!d.usable || d.ordinal < 0 || d.ordinal >= 64 || (mask & (uint64_t{1} << d.ordinal)) == 0) continue;
    const uint64_t capacity = options->memory_budget_bytes != 0 ? options->memory_budget_bytes
                                                                : d.free_memory_bytes / 10 * 9;
    group.push_back({d.ordinal, capacity});
  }
  if (group.size() <= 1) {
    int32_t first = 0;
    while (first < 63 && (mask & (uint64_t{1} << first)) == 0) ++first;
    options->device_ordinal = group.empty() ? first : group[0].ordinal;
    group.clear();
  }
  return group;
}

}  // namespace capi
}  // namespace genie

extern "C" {

const char* genie_status_name(genie_status status) {
  switch (status) {
    case GENIE_OK: return "ok";
    case GENIE_INVALID_ARGUMENT: return "invalid argument";
    case GENIE_OUT_OF_MEMORY: return "out of memory";
    case GENIE_DEVICE_OUT_OF_MEMORY: return "device out of memory";
    case GENIE_DEVICE_UNAVAILABLE: return "device unavailable";
    case GENIE_DEVICE_ERROR: return "device error";
    case GENIE_INTERNAL_ERROR: return "internal error";
    case GENIE_CANCELLED: return "cancelled";
  }
  return "unknown status";
}

void genie_get_build_info(genie_build_info* info) {
  if (info == nullptr) return;
  info->version = GENIE_VERSION;
#ifdef GENIE_WITH_CUDA
  info->with_cuda = 1;
  info->cuda_version = genie::CudaRuntimeVersion();
#else
  info->with_cuda = 0;
  info->cuda_version = 0;
#endif
}

genie_status genie_list_devices(genie_device_info* devices, size_t capacity, size_t* count,
                                genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (count == nullptr || (devices == nullptr && capacity > 0))
      return genie::Status::InvalidArgument("genie_list_devices: null output");
    std::vector<genie_device_info> all{CpuDeviceInfo()};
    const auto& gpus = GpuDevices();
    all.insert(all.end(), gpus.begin(), gpus.end());
    size_t n = std::min(capacity, all.size());
    std::copy_n(all.begin(), n, devices);
    *count = n;
    return genie::Status::Ok();
  });
}

void genie_gpu_prepare(int32_t ordinal) {
#ifdef GENIE_WITH_CUDA
  try {
    GpuPreparation& p = Preparation();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.started) return;
    p.started = true;
    const bool running = p.thread.Start([&p, ordinal] {
      genie::PrepareDevice(ordinal);
      std::lock_guard<std::mutex> done(p.mutex);
      p.done = true;
      p.finished.notify_all();
    });
    if (!running) p.done = true;  // no thread: the first search makes the context
  } catch (...) {
    // std::system_error from the mutex: nothing was started
  }
#else
  (void)ordinal;
#endif
}

int genie_gpu_prepare_wait(int32_t timeout_ms) {
  try {
    GpuPreparation& p = Preparation();
    std::unique_lock<std::mutex> lock(p.mutex);
    if (!p.started) return 1;
    if (!p.finished.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, 0)),
                             [&p] { return p.done; }))
      return 0;
    lock.unlock();
    // done is set just before the thread ends: joined, it has left the CUDA
    // runtime (its per-thread state included), so exit() may tear it down
    p.thread.Join();
    return 1;
  } catch (...) {
    return 0;
  }
}

genie_status genie_score_int4(const int32_t* object, size_t object_len,
                              const genie_query_batch* query, int64_t* score, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (score == nullptr || query == nullptr || (object == nullptr && object_len > 0))
      return genie::Status::InvalidArgument("genie_score_int4: null input");
    if (query->n_queries != 1)
      return genie::Status::InvalidArgument("genie_score_int4: the batch must hold exactly one query");
    GENIE_RETURN_IF_ERROR(genie::ValidateBatch(*query));
    std::vector<int32_t> o(object, object + object_len);
    std::sort(o.begin(), o.end());
    o.erase(std::unique(o.begin(), o.end()), o.end());
    int64_t total = 0;
    std::vector<genie::KeywordRange> ranges;
    for (int64_t item = query->query_offsets[0]; item < query->query_offsets[1]; ++item) {
      // An item is the union of its ranges: merge them before counting.
      ranges.clear();
      for (int64_t r = query->item_offsets[item]; r < query->item_offsets[item + 1]; ++r)
        ranges.push_back({query->ranges_lo[r], query->ranges_hi[r]});
      std::sort(ranges.begin(), ranges.end(),
                [](const genie::KeywordRange& a, const genie::KeywordRange& b) { return a.lo < b.lo; });
      int64_t covered = 0;
      int64_t next_lo = INT64_MIN;  // keywords below this were counted already
      for (const auto& r : ranges) {
        int64_t lo = std::max<int64_t>(r.lo, next_lo);
        if (lo > r.hi) continue;
        auto first = std::lower_bound(o.begin(), o.end(), lo);
        auto last = std::upper_bound(o.begin(), o.end(), r.hi);
        covered += last - first;
        next_lo = int64_t(r.hi) + 1;
      }
      int64_t weight = query->item_weights != nullptr ? query->item_weights[item] : 1;
      total += weight * covered;
    }
    *score = total;
    return genie::Status::Ok();
  });
}

void genie_results_free(genie_results* results) {
  if (results == nullptr) return;
  std::free(results->query_offsets);
  std::free(results->objects);
  std::free(results->scores);
  std::free(results);
}

genie_status genie_engine_create(genie_engine_kind kind, const genie_engine_options* options,
                                 genie_engine** engine, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr) return genie::Status::InvalidArgument("genie_engine_create: null output");
    *engine = nullptr;
    GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
    genie::EngineOptions engine_options = ToEngineOptions(options);
    std::unique_ptr<genie::Engine> made;
    switch (kind) {
      case GENIE_ENGINE_CPU_REFERENCE:
        made = genie::MakeReferenceEngine();
        break;
      case GENIE_ENGINE_CPU:
        made = genie::MakeCpuEngine(engine_options);
        break;
      case GENIE_ENGINE_GPU:
        GENIE_RETURN_IF_ERROR(MakeGpu(engine_options, &made));
        break;
      case GENIE_ENGINE_AUTO: {
        genie::Status gpu = MakeGpu(engine_options, &made);
        if (!gpu.ok()) {
          if (gpu.code() != GENIE_DEVICE_UNAVAILABLE) return gpu;
          made = genie::MakeCpuEngine(engine_options);
        }
        break;
      }
      default:
        return genie::Status::InvalidArgument("unknown engine kind " + std::to_string(int(kind)));
    }
    auto handle = std::make_unique<genie_engine>();
    handle->engine = std::move(made);
    *engine = handle.release();
    return genie::Status::Ok();
  });
}

void genie_engine_free(genie_engine* engine) {
  // Destructors release device memory; they must not throw, but be sure.
  try {
    std::unique_ptr<genie_engine> owned(engine);
  } catch (...) {
  }
}

genie_engine_kind genie_engine_get_kind(const genie_engine* engine) {
  return engine != nullptr ? engine->engine->kind() : GENIE_ENGINE_CPU;
}

genie_status genie_engine_upload(genie_engine* engine, const genie_index* index, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr || index == nullptr)
      return genie::Status::InvalidArgument("genie_engine_upload: null argument");
    const auto lock = engine->Exclusive();
    return engine->engine->Upload(index->index);
  });
}

genie_status genie_engine_drop(genie_engine* engine, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr) return genie::Status::InvalidArgument("genie_engine_drop: null engine");
    const auto lock = engine->Exclusive();
    return engine->engine->Drop();
  });
}

namespace {

// genie_engine_search and genie_engine_search_with_cancel; cancel.fn NULL:
// the engine's own cancel callback.
genie_status SearchEngine(genie_engine* engine, const genie_query_batch* queries, int32_t k,
                          const genie::CancelCheck& cancel, genie_results** results,
                          genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr || queries == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_engine_search: null argument");
    *results = nullptr;
    GENIE_RETURN_IF_ERROR(genie::ValidateK(k));
    GENIE_RETURN_IF_ERROR(genie::ValidateBatch(*queries));
    genie::TopKResults found;
    {
      const auto lock = engine->ForSearch();
      GENIE_RETURN_IF_ERROR(cancel.fn != nullptr
                                ? engine->engine->SearchCancellable(*queries, k, cancel, &found)
                                : engine->engine->Search(*queries, k, &found));
    }
    if (found.query_offsets.size() != size_t(queries->n_queries) + 1)
      return genie::Status::Internal("engine returned results for the wrong number of queries");
    return ToCResults(found, results);
  });
}

}  // namespace

genie_status genie_engine_search(genie_engine* engine, const genie_query_batch* queries, int32_t k,
                                 genie_results** results, genie_error* err) {
  return SearchEngine(engine, queries, k, genie::CancelCheck(), results, err);
}

genie_status genie_engine_search_with_cancel(genie_engine* engine, const genie_query_batch* queries,
                                             int32_t k, int (*cancel)(void* arg), void* cancel_arg,
                                             genie_results** results, genie_error* err) {
  genie::CancelCheck check;
  check.fn = cancel;
  check.arg = cancel_arg;
  return SearchEngine(engine, queries, k, check, results, err);
}

genie_status genie_engine_match_set(genie_engine* engine, const genie_index* index,
                                    genie_set_predicate predicate, const int32_t* keywords,
                                    int32_t n_keywords, int64_t device_min_postings,
                                    int32_t** ids, int64_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr || index == nullptr || ids == nullptr || count == nullptr ||
        n_keywords < 0 || (n_keywords > 0 && keywords == nullptr))
      return genie::Status::InvalidArgument("genie_engine_match_set: bad arguments");
    *ids = nullptr;
    *count = 0;
    genie::SetPredicate p;
    GENIE_RETURN_IF_ERROR(genie::capi::ToSetPredicate(predicate, &p));
    genie::Span<int32_t> sizes;
    GENIE_RETURN_IF_ERROR(genie::capi::IndexObjectSizes(index, p, genie::CancelCheck(), &sizes));
    const auto lock = engine->ForMatchSet();
#ifdef GENIE_WITH_CUDA
    if (device_min_postings >= 0) genie::gpu::SetSetMatchMinPostings(engine->engine.get(), device_min_postings);
#else
    (void)device_min_postings;
#endif
    std::vector<int32_t> out;
    GENIE_RETURN_IF_ERROR(engine->engine->MatchSet(
        p, genie::Span<int32_t>(keywords, static_cast<std::size_t>(n_keywords)), sizes, &out));
    return genie::capi::CopyIds(out, ids, count);
  });
}

genie_status genie_engine_devices(const genie_engine* engine, genie_engine_device* devices, size_t capacity,
                                  size_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (engine == nullptr || count == nullptr || (devices == nullptr && capacity > 0))
      return genie::Status::InvalidArgument("genie_engine_devices: NULL argument");
    *count = 0;
    const auto* group = dynamic_cast<const genie::MultiDeviceEngine*>(engine->engine.get());
    if (group == nullptr) return genie::Status::Ok();
    const std::vector<genie::DeviceReport> report = group->Report();
    *count = report.size();
    for (size_t i = 0; i < report.size() && i < capacity; ++i) {
      genie_engine_device& d = devices[i];
      d = genie_engine_device{};
      d.ordinal = report[i].device;
      d.dropped = report[i].dropped ? 1 : 0;
      d.sharded = report[i].sharded ? 1 : 0;
      d.first_object = report[i].first_object;
      d.end_object = report[i].end_object;
      d.index_bytes = report[i].index_bytes;
      d.searches = report[i].searches;
      d.seconds = report[i].seconds;
      std::snprintf(d.failure, sizeof(d.failure), "%s", report[i].failure.c_str());
    }
    return genie::Status::Ok();
  });
}

genie_status genie_results_merge(const genie_results* const* parts, const int32_t* part_first_object,
                                 int32_t n_parts, int32_t k, genie_results** merged,
                                 genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (merged == nullptr) return genie::Status::InvalidArgument("genie_results_merge: null output");
    *merged = nullptr;
    if (parts == nullptr || part_first_object == nullptr)
      return genie::Status::InvalidArgument("genie_results_merge: null parts");
    if (n_parts < 1) return genie::Status::InvalidArgument("genie_results_merge: n_parts must be at least 1");
    GENIE_RETURN_IF_ERROR(genie::ValidateK(k));
    const int32_t n_queries = parts[0] != nullptr ? parts[0]->n_queries : 0;
    std::vector<genie::TopKResults> local(static_cast<size_t>(n_parts));
    // [begin, end) of global ids per part: a part ends where the next begins.
    std::vector<std::pair<int32_t, int32_t>> ranges(static_cast<size_t>(n_parts));
    for (int32_t p = 0; p < n_parts; ++p) {
      const genie_results* part = parts[p];
      const std::string which = "genie_results_merge: part " + std::to_string(p);
      if (part == nullptr) return genie::Status::InvalidArgument(which + " is NULL");
      if (part->n_queries < 0 || part->n_queries != n_queries)
        return genie::Status::InvalidArgument(which + " has " + std::to_string(part->n_queries) +
                                              " queries, part 0 has " + std::to_string(n_queries));
      const int64_t begin = part_first_object[p];
      const int64_t end = p + 1 < n_parts ? int64_t{part_first_object[p + 1]} : int64_t{INT32_MAX} + 1;
      if (begin < 0 || end < begin)
        return genie::Status::InvalidArgument(
            which + ": part_first_object must be non-negative and ascending");
      ranges[static_cast<size_t>(p)] = {static_cast<int32_t>(begin),
                                        static_cast<int32_t>(std::min<int64_t>(end, INT32_MAX))};
      if (n_queries > 0 && part->query_offsets == nullptr)
        return genie::Status::InvalidArgument(which + ": NULL query_offsets");
      const int64_t n_hits = n_queries > 0 ? part->query_offsets[n_queries] : 0;
      if (n_queries > 0 && part->query_offsets[0] != 0)
        return genie::Status::InvalidArgument(which + ": query_offsets must start at 0");
      if (n_hits > 0 && (part->objects == nullptr || part->scores == nullptr))
        return genie::Status::InvalidArgument(which + ": NULL objects or scores");
      genie::TopKResults& r = local[static_cast<size_t>(p)];
      r.query_offsets.assign(part->query_offsets, part->query_offsets + (n_queries > 0 ? n_queries + 1 : 1));
      if (n_queries == 0) r.query_offsets.assign(1, 0);
      for (int32_t q = 0; q < n_queries; ++q) {
        if (r.query_offsets[static_cast<size_t>(q) + 1] < r.query_offsets[static_cast<size_t>(q)])
          return genie::Status::InvalidArgument(which + ": query_offsets decrease");
      }
      r.hits.resize(static_cast<size_t>(n_hits));
      for (int64_t i = 0; i < n_hits; ++i) {
        const int32_t object = part->objects[i];
        if (object < 0 || begin + object >= end)
          return genie::Status::InvalidArgument(
              which + ": object " + std::to_string(object) + " lies outside the part (" +
              std::to_string(end - begin) + " objects before the next part)");
        r.hits[static_cast<size_t>(i)] = {object, part->scores[i]};
      }
      // MergePartResults takes each part's hits in output order; a caller's may not be
      for (int32_t q = 0; q < n_queries; ++q)
        std::sort(r.hits.begin() + r.query_offsets[static_cast<size_t>(q)],
                  r.hits.begin() + r.query_offsets[static_cast<size_t>(q) + 1], genie::HitBefore);
    }
    genie::TopKResults out;
    // Uses each range's begin; the ends were only checked here.
    genie::MergePartResults(local, ranges, k, &out);
    if (out.query_offsets.size() != static_cast<size_t>(n_queries) + 1) {
      // n_queries == 0: MergePartResults leaves {0}, which is right; anything else is a bug.
      return genie::Status::Internal("genie_results_merge: wrong number of merged queries");
    }
    return ToCResults(out, merged);
  });
}

}  // extern "C"

namespace {


genie::Status Keywords(const char* text, size_t size, int32_t n, genie::NgramKeywords* out) {
  GENIE_RETURN_IF_ERROR(CheckText(text, size, "text"));
  genie::NgramOptions options;
  options.n = n;
  return genie::ComputeNgramKeywordsUtf8(text, size, options, out);
}


}  // namespace

extern "C" {

genie_status genie_ngram_keywords(const char* text, size_t size, int32_t n, int32_t* keywords,
                                  size_t capacity, int32_t* n_keywords, int32_t* length,
                                  int32_t* lost, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (n_keywords == nullptr || length == nullptr || lost == nullptr)
      return genie::Status::InvalidArgument("genie_ngram_keywords: NULL output");
    genie::NgramKeywords grams;
    GENIE_RETURN_IF_ERROR(Keywords(text, size, n, &grams));
    if (grams.keywords.size() > capacity || (keywords == nullptr && !grams.keywords.empty()))
      return genie::Status::InvalidArgument("genie_ngram_keywords: keyword buffer too small");
    std::copy(grams.keywords.begin(), grams.keywords.end(), keywords);
    *n_keywords = static_cast<int32_t>(grams.keywords.size());
    *length = grams.length;
    *lost = grams.lost;
    return genie::Status::Ok();
  });
}

int64_t genie_ngram_keywords_bound(const int64_t* offsets, int32_t count, int32_t n) {
  return offsets == nullptr || count <= 0 ? 0 : genie::NgramKeywordsBound(offsets, count, n);
}

genie_status genie_ngram_keywords_batch(const char* text, const int64_t* offsets, int32_t count, int32_t n,
                                        int32_t threads, int (*cancel)(void*), void* cancel_arg,
                                        int32_t* keywords, int64_t* starts, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    genie::NgramOptions options;
    options.n = n;
    return genie::ComputeNgramKeywordsBatch(text, offsets, count, options, threads,
                                            genie::CancelCheck{cancel, cancel_arg}, keywords, starts);
  });
}

genie_status genie_ngram_count(const char* a, size_t a_size, const char* b, size_t b_size,
                               int32_t n, int32_t* count, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (count == nullptr) return genie::Status::InvalidArgument("genie_ngram_count: NULL output");
    genie::NgramKeywords ga, gb;
    GENIE_RETURN_IF_ERROR(Keywords(a, a_size, n, &ga));
    GENIE_RETURN_IF_ERROR(Keywords(b, b_size, n, &gb));
    *count = genie::KeywordSetCount(ga.keywords, gb.keywords);
    return genie::Status::Ok();
  });
}

genie_status genie_edit_distance(const char* a, size_t a_size, const char* b, size_t b_size,
                                 const genie_engine_options* options, int32_t* distance,
                                 genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (distance == nullptr) return genie::Status::InvalidArgument("genie_edit_distance: NULL output");
    GENIE_RETURN_IF_ERROR(CheckText(a, a_size, "text"));
    GENIE_RETURN_IF_ERROR(CheckText(b, b_size, "text"));
    std::vector<genie::CodePoint> ca, cb;
    GENIE_RETURN_IF_ERROR(genie::DecodeUtf8(a_size > 0 ? a : "", a_size, &ca));
    GENIE_RETURN_IF_ERROR(genie::DecodeUtf8(b_size > 0 ? b : "", b_size, &cb));
    return genie::Levenshtein(ca, cb, ToEngineOptions(options).cancel, distance);
  });
}

int32_t genie_ngram_distance_lower_bound(int32_t query_length, int32_t query_lost, int32_t count,
                                         int32_t n) {
  if (n < genie::kMinGramLength || n > genie::kMaxGramLength || query_length < 0) return 0;
  return genie::UnseenLowerBound(query_length, int64_t{count} + std::max(query_lost, 0), n);
}

genie_status genie_similar_verify(const genie_similar_batch* batch, genie_engine_kind device,
                                  const genie_engine_options* options,
                                  genie_similar_verdict* verdict, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (batch == nullptr || verdict == nullptr)
      return genie::Status::InvalidArgument("genie_similar_verify: NULL argument");
    if (batch->n_queries < 0) return genie::Status::InvalidArgument("negative number of queries");
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    const int32_t nq = batch->n_queries;
    if (nq > 0 && (batch->candidate_offsets == nullptr || batch->unseen_count_bound == nullptr))
      return genie::Status::InvalidArgument("genie_similar_verify: NULL offsets");
    const int64_t n_candidates = nq > 0 ? batch->candidate_offsets[nq] : 0;
    if (n_candidates > 0 && batch->candidate_counts == nullptr)
      return genie::Status::InvalidArgument("genie_similar_verify: NULL counts");
    if (n_candidates > INT32_MAX) return genie::Status::InvalidArgument("too many candidates");

    genie::SimilarBatch in;
    in.n = batch->n;
    in.k = batch->k;
    GENIE_RETURN_IF_ERROR(AddStrings(batch->query_text, batch->query_text_offsets, nq, &in.queries));
    GENIE_RETURN_IF_ERROR(AddStrings(batch->candidate_text, batch->candidate_text_offsets,
                                     n_candidates, &in.candidates));
    in.candidate_offsets.assign(batch->candidate_offsets, batch->candidate_offsets + nq + 1);
    if (nq == 0) in.candidate_offsets.assign(1, 0);
    in.candidate_counts.assign(batch->candidate_counts, batch->candidate_counts + n_candidates);
    in.unseen_count_bound.assign(batch->unseen_count_bound, batch->unseen_count_bound + nq);

    const genie::EngineOptions engine_options = ToEngineOptions(options);
    genie_engine_kind used = GENIE_ENGINE_CPU;
    bool try_gpu = device != GENIE_ENGINE_CPU;
#ifndef GENIE_WITH_CUDA
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
    try_gpu = false;
#endif
    (void)try_gpu;
    auto distances = [&](const genie::EditDistanceBatch& pass, std::vector<int32_t>* out) {
#ifdef GENIE_WITH_CUDA
      if (try_gpu) {
        genie::Status status =
            genie::GpuEditDistances(pass, engine_options.device_ordinal, out, engine_options.cancel);
        if (status.ok()) {
          used = GENIE_ENGINE_GPU;
          return status;
        }
        // AUTO without a usable GPU: the CPU from now on.  Every other
        // failure, device out of memory included, goes to the caller, which
        // decides whether to retry on the CPU (one layer decides fallback).
        if (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
        try_gpu = false;
      }
#endif
      return genie::CpuEditDistances(pass, engine_options.threads, out, engine_options.cancel);
    };
    genie::SimilarVerdict out;
    GENIE_RETURN_IF_ERROR(genie::VerifySimilarBatch(in, distances, &out, engine_options.cancel));
    if (n_candidates > 0 && (verdict->distances == nullptr || verdict->exact == nullptr))
      return genie::Status::InvalidArgument("genie_similar_verify: NULL candidate outputs");
    if (nq > 0 && (verdict->certified == nullptr || verdict->open_bound == nullptr))
      return genie::Status::InvalidArgument("genie_similar_verify: NULL query outputs");
    for (int64_t j = 0; j < n_candidates; ++j) {
      verdict->distances[j] = out.candidates[static_cast<size_t>(j)].distance;
      verdict->exact[j] = out.candidates[static_cast<size_t>(j)].exact ? 1 : 0;
    }
    for (int32_t q = 0; q < nq; ++q) {
      const genie::TopKCertificate& c = out.certificates[static_cast<size_t>(q)];
      verdict->certified[q] = c.exact ? 1 : 0;
      verdict->open_bound[q] = std::min(c.open_lower_bound, c.unseen_lower_bound);
    }
    verdict->distances_computed = out.distances_computed;
    verdict->device = used;
    return genie::Status::Ok();
  });
}

}  // extern "C"

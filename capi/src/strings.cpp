// The C API of string sets and the string scan (genie_strings_*).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "capi_util.hpp"
#include "cluster_list.hpp"
#include "device_group.hpp"
#include "genie/genie.h"
#include "genie/multi_device.hpp"
#include "genie/permutation.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_permutation.hpp"
#endif
#include "genie/string_scan.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_string_scan.hpp"
#include "range_group.hpp"
#endif

using genie::capi::AddStrings;
using genie::capi::Guarded;
using genie::capi::ToEngineOptions;

#ifdef GENIE_WITH_CUDA
using StringGroup = genie::capi::DeviceGroup<genie::StringSet, genie::GpuStringSet>;
#endif

struct genie_strings {
  genie::StringSet set;
#ifdef GENIE_WITH_CUDA
  mutable std::mutex gpu_mutex;  // the GPU copies are made on first use
  // shared: a call keeps its copy while another, on another device, makes a new one
  std::shared_ptr<genie::GpuStringSet> gpu;
  int32_t gpu_device = -1;
  std::shared_ptr<StringGroup> group;  // several GPUs
  // the group's shards' host copies (slices), for genie_strings_memory_bytes
  // without gpu_mutex (a group's copies take seconds to make under it)
  std::atomic<std::size_t> slice_bytes{0};
#endif
};

namespace {

// A string set's host memory (genie_strings_memory_bytes).
std::size_t StringSetHostBytes(const genie::StringSet& s) {
  return s.strings.code_points.capacity() * sizeof(genie::CodePoint) +
         s.strings.offsets.capacity() * sizeof(int64_t) + s.order.capacity() * sizeof(int32_t) +
         s.length_begin.capacity() * sizeof(int64_t) + s.signatures.capacity() * sizeof(genie::StringSignature);
}

genie::Status ToCResults(const genie::StringScanResult& r, genie_engine_kind device,
                         genie_string_results** out) {
  return genie::capi::CopyScanRows(r, device, genie_string_results_free, out);
}

#ifdef GENIE_WITH_CUDA
// The set's GPU copy on the device of options, made on first use; *out is
// the call's reference (calls may run concurrently from several threads,
// and one on another device replaces the set's copy, not the caller's).
genie::Status GpuCopy(genie_strings* strings, int32_t device_ordinal, std::shared_ptr<genie::GpuStringSet>* out) {
  std::lock_guard<std::mutex> lock(strings->gpu_mutex);
  if (strings->gpu == nullptr || strings->gpu_device != device_ordinal) {
    strings->gpu.reset();
    std::unique_ptr<genie::GpuStringSet> made;
    GENIE_RETURN_IF_ERROR(genie::GpuStringSet::Create(strings->set, device_ordinal, &made));
    strings->gpu = std::move(made);
    strings->gpu_device = device_ordinal;
  }
  *out = strings->gpu;
  return genie::Status::Ok();
}

// What a set's copy takes on a GPU, as a device group places it.
uint64_t StringSetBytes(const genie::StringSet& set) {
  return set.strings.code_points.size() * sizeof(genie::CodePoint) + set.strings.offsets.size() * sizeof(int64_t);
}

// The set's copies on the GPUs of a device group (capi/src/device_group.hpp),
// made on first use and again when the options name other GPUs.
genie::Status GroupCopies(genie_strings* strings, const std::vector<genie::capi::GroupDevice>& devices,
                          const genie::EngineOptions& options, std::shared_ptr<StringGroup>* out) {
  std::lock_guard<std::mutex> lock(strings->gpu_mutex);
  const genie::StringSet& set = strings->set;
  auto slice = [&set](int32_t first, int32_t end, genie::StringSet* rows) {
    genie::CodePointStrings part;
    for (int32_t id = first; id < end; ++id) part.Add(set.strings.Get(id));
    return genie::BuildStringSet(std::move(part), rows);
  };
  auto make_gpu = [](const genie::StringSet& rows, int32_t ordinal, uint64_t,
                     std::unique_ptr<genie::GpuStringSet>* gpu) {
    return genie::GpuStringSet::Create(rows, ordinal, gpu);
  };
  // (re)made by this call: its slices counted once (an address may come back, MadeFor tells)
  const bool remade = strings->group == nullptr || !strings->group->MadeFor(options);
  if (remade) strings->slice_bytes.store(0);  // the old group's go with it
  GENIE_RETURN_IF_ERROR(genie::capi::EnsureDeviceGroup(set, set.size(), StringSetBytes(set), devices, options, slice,
                                                       make_gpu, &strings->group));
  if (remade) {
    std::size_t slices = 0;
    for (const auto& c : strings->group->copies)
      if (c->slice != nullptr) slices += StringSetHostBytes(*c->slice);
    strings->slice_bytes.store(slices);
  }
  *out = strings->group;  // this search's reference
  return genie::Status::Ok();
}

// A range search's device pass on one GPU copy (capi/src/cluster_list.hpp):
// queries [first_query, first_query + n_queries) over their length windows
// of set (the plan's items are every object a query; set may be a shard,
// excluded then its part of the flags, candidates' ids the shard's), and
// the queries past the device's prepared pattern on the CPU engine.  gpu,
// set, queries and options must outlive the pass.
genie::capi::RangeDevicePass WithinPass(genie::GpuStringSet* gpu, const genie::StringSet& set,
                                        const genie::CodePointStrings& queries, genie::Span<uint8_t> excluded,
                                        double radius, const genie::EngineOptions& options) {
  return [gpu, &set, &queries, excluded, radius, &options](int32_t first_query, int32_t n_queries,
                                                           const genie::RangePlan&,
                                                           std::vector<genie::RangeCandidate>* out,
                                                           genie::capi::RangePassRead* read) {
    genie::CodePointStrings batch;
    for (int32_t q = first_query; q < first_query + n_queries; ++q) batch.Add(queries.Get(q));
    std::vector<int32_t> host;
    GENIE_RETURN_IF_ERROR(gpu->Within(set, batch, radius, excluded, out, &host, &read->computed, options.cancel));
    if (host.empty()) return genie::Status::Ok();
    // queries past the device's prepared pattern: the CPU engine's range search
    read->on_host = true;
    if (static_cast<int32_t>(host.size()) == n_queries) read->on_gpu = false;
    genie::CodePointStrings long_queries;
    for (int32_t q : host) long_queries.Add(batch.Get(q));
    genie::RangeRequest request;
    request.n_queries = long_queries.size();
    request.radius = radius;
    request.n_objects = set.size();
    request.excluded = excluded;
    genie::RangeResult found;
    GENIE_RETURN_IF_ERROR(genie::CpuRangeSearch(genie::WholeList(set.size()),
                                                genie::StringQueryMetrics(set.strings, long_queries, options.cancel),
                                                request, options.threads, &found, options.cancel));
    for (std::size_t i = 0; i < host.size(); ++i)
      for (int64_t r = found.offsets[i]; r < found.offsets[i + 1]; ++r)
        out->push_back(genie::RangeCandidate{host[i], found.objects[static_cast<std::size_t>(r)],
                                             found.distances[static_cast<std::size_t>(r)]});
    read->computed += found.distances_computed;
    return genie::Status::Ok();
  };
}

// The scan over a device group: rows merged by distance, length, then id,
// as every string scan orders them.
genie::Status GroupScan(const genie::StringSet& set, StringGroup* g, const genie::EngineOptions& options,
                        const genie::StringScanRequest& request, genie::StringScanResult* out, bool* on_gpu) {
  const int32_t nq = request.queries.size();
  auto scan = [&](genie::GpuStringSet* gpu, const genie::StringSet& rows, int32_t first_object, int32_t q0,
                  int32_t q1, genie::StringScanResult* found) {
    genie::StringScanRequest r;
    r.k = request.k;
    for (int32_t q = q0; q < q1; ++q) r.queries.Add(request.queries.Get(q));
    if (!request.caps.empty()) r.caps.assign(request.caps.begin() + q0, request.caps.begin() + q1);
    if (request.excluded.size() > 0)
      r.excluded = genie::Span<uint8_t>(request.excluded.data() + first_object, static_cast<std::size_t>(rows.size()));
    return gpu != nullptr ? gpu->Scan(rows, r, options.threads, found, options.cancel)
                          : genie::CpuStringScan(rows, r, options.threads, found, options.cancel);
  };
  auto before = [&set](const std::pair<int32_t, int32_t>& a, const std::pair<int32_t, int32_t>& b) {
    if (a.first != b.first) return a.first < b.first;
    const int32_t la = set.length(a.second), lb = set.length(b.second);
    return la != lb ? la < lb : a.second < b.second;
  };
  return genie::capi::ScanDeviceGroup(set, g, nq, request.k, scan, before, out, on_gpu);
}
#endif

}  // namespace

extern "C" {

genie_status genie_strings_create(const char* text, const int64_t* offsets, int32_t n,
                                  genie_strings** strings, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (strings == nullptr) return genie::Status::InvalidArgument("genie_strings_create: NULL output");
    if (n < 0) return genie::Status::InvalidArgument("negative number of strings");
    genie::CodePointStrings decoded;
    GENIE_RETURN_IF_ERROR(AddStrings(text, offsets, n, &decoded));
    auto owned = std::make_unique<genie_strings>();
    GENIE_RETURN_IF_ERROR(genie::BuildStringSet(std::move(decoded), &owned->set));
    *strings = owned.release();
    return genie::Status::Ok();
  });
}

void genie_strings_free(genie_strings* strings) { std::unique_ptr<genie_strings> owned(strings); }

size_t genie_strings_memory_bytes(const genie_strings* strings) {
  if (strings == nullptr) return 0;
  std::size_t bytes = StringSetHostBytes(strings->set);
#ifdef GENIE_WITH_CUDA
  bytes += strings->slice_bytes.load();  // a sharded group's second copy of the strings on the host
#endif
  return bytes;
}

size_t genie_strings_device_bytes(const genie_strings* strings) {
#ifdef GENIE_WITH_CUDA
  if (strings == nullptr) return 0;
  std::lock_guard<std::mutex> lock(strings->gpu_mutex);
  return (strings->gpu != nullptr ? strings->gpu->device_bytes() : 0) +
         (strings->group != nullptr ? strings->group->device_bytes() : 0);
#endif
  (void)strings;
  return 0;
}

int32_t genie_strings_count(const genie_strings* strings) {
  return strings == nullptr ? 0 : strings->set.size();
}

int32_t genie_strings_length(const genie_strings* strings, int32_t id) {
  if (strings == nullptr || id < 0 || id >= strings->set.size()) return -1;
  return strings->set.length(id);
}

void genie_string_results_free(genie_string_results* results) {
  if (results == nullptr) return;
  std::free(results->query_offsets);
  std::free(results->objects);
  std::free(results->distances);
  std::free(results);
}

genie_status genie_strings_scan(genie_strings* strings, genie_engine_kind device,
                                const genie_engine_options* options, const genie_string_scan* scan,
                                genie_string_results** results, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (strings == nullptr || scan == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_strings_scan: NULL argument");
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    if (scan->n_queries < 0) return genie::Status::InvalidArgument("negative number of queries");
    GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
    genie::StringScanRequest request;
    request.k = scan->k;
    GENIE_RETURN_IF_ERROR(AddStrings(scan->query_text, scan->query_text_offsets, scan->n_queries,
                                     &request.queries));
    if (scan->caps != nullptr) request.caps.assign(scan->caps, scan->caps + scan->n_queries);
    if (scan->excluded != nullptr) {
      request.excluded = genie::Span<uint8_t>(scan->excluded, static_cast<size_t>(strings->set.size()));
    }
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    genie::StringScanResult found;
    if (scan->candidate_offsets != nullptr) {
      const int64_t n_candidates = scan->n_queries > 0 ? scan->candidate_offsets[scan->n_queries] : 0;
      if (n_candidates < 0 || (n_candidates > 0 && scan->candidates == nullptr))
        return genie::Status::InvalidArgument("bad candidate list");
      GENIE_RETURN_IF_ERROR(genie::RerankStrings(
          strings->set, request.queries, request.k,
          genie::Span<int64_t>(scan->candidate_offsets, static_cast<size_t>(scan->n_queries) + 1),
          genie::Span<int32_t>(scan->candidates, static_cast<size_t>(n_candidates)), request.excluded,
          engine_options.threads, &found, engine_options.cancel));
      return ToCResults(found, GENIE_ENGINE_CPU, results);
    }
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      genie::EngineOptions one = engine_options;
      const auto group = genie::capi::GroupDevices(&one);
      if (!group.empty()) {
        std::shared_ptr<StringGroup> g;
        GENIE_RETURN_IF_ERROR(GroupCopies(strings, group, engine_options, &g));
        bool on_gpu = false;
        GENIE_RETURN_IF_ERROR(GroupScan(strings->set, g.get(), engine_options, request, &found, &on_gpu));
        return ToCResults(found, on_gpu ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU, results);
      }
      std::shared_ptr<genie::GpuStringSet> gpu;
      genie::Status status = GpuCopy(strings, one.device_ordinal, &gpu);
      if (status.ok()) {
        GENIE_RETURN_IF_ERROR(gpu->Scan(strings->set, request, engine_options.threads, &found,
                                        engine_options.cancel));
        return ToCResults(found, GENIE_ENGINE_GPU, results);
      }
      // AUTO without a usable GPU scans on the CPU; every other failure goes to the caller
      if (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    GENIE_RETURN_IF_ERROR(genie::CpuStringScan(strings->set, request, engine_options.threads, &found,
                                               engine_options.cancel));
    return ToCResults(found, GENIE_ENGINE_CPU, results);
  });
}

genie_status genie_strings_permutations(const genie_strings* objects, const genie_strings* permutants,
                                        genie_engine_kind device, const genie_engine_options* options,
                                        uint8_t* rows, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (objects == nullptr || permutants == nullptr || (rows == nullptr && objects->set.size() > 0))
      return genie::Status::InvalidArgument("genie_strings_permutations: NULL argument");
    const int32_t m = permutants->set.size();
    if (m < 1 || m > genie::kMaxPermutants)
      return genie::Status::InvalidArgument("permutants must be between 1 and 128");
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    const genie::PermutationRows table{m, genie::PermutationStride(m), objects->set.size(), rows};
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    std::memset(rows, 0, static_cast<size_t>(table.n) * static_cast<size_t>(table.stride));
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      genie::Status status = genie::GpuStringPermutations(objects->set.strings, permutants->set.strings,
                                                          engine_options.device_ordinal,
                                                          engine_options.memory_budget_bytes, table,
                                                          engine_options.cancel);
      // AUTO without a usable GPU computes on the CPU; every other failure goes to the caller
      if (status.ok() || device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    return genie::StringPermutations(objects->set.strings, permutants->set.strings, 0,
                                     engine_options.threads, table, engine_options.cancel);
  });
}

}  // extern "C"

extern "C" {

genie_status genie_strings_cluster_list(const genie_strings* objects, const uint8_t* excluded,
                                        int32_t cluster_size, int32_t supercluster_clusters,
                                        genie_cluster_centres centres,
                                        const genie_engine_options* options,
                                        genie_cluster_list** list, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (objects == nullptr) return genie::Status::InvalidArgument("genie_strings_cluster_list: NULL set");
    auto metric = genie::StringObjectMetric(objects->set.strings);
    return genie::capi::BuildClusterListHandle(*metric, objects->set.size(), excluded, cluster_size,
                                               supercluster_clusters, centres, options, list);
  });
}

genie_status genie_strings_within(genie_strings* strings, genie_engine_kind device,
                                  const genie_engine_options* options, const genie_range_scan* scan,
                                  genie_range_results** results, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (strings == nullptr || scan == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_strings_within: NULL argument");
    if (scan->n_queries < 0) return genie::Status::InvalidArgument("negative number of queries");
    genie::CodePointStrings queries;
    GENIE_RETURN_IF_ERROR(AddStrings(scan->query_text, scan->query_text_offsets, scan->n_queries, &queries));
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    const genie::QueryMetricFactory metrics =
        genie::StringQueryMetrics(strings->set.strings, queries, engine_options.cancel);
#ifdef GENIE_WITH_CUDA
    // given candidates are the CPU's (RangeSearchHandle): no device copy for them
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_AUTO && device != GENIE_ENGINE_GPU)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    if (device != GENIE_ENGINE_CPU && scan->candidate_offsets == nullptr) {
      GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
      // The device reads each query's length window whole, which beats any
      // list on the CPU; a list's members are in no length order, so the
      // device would gather them, and it is left unread.
      genie_range_scan whole = *scan;
      whole.list = nullptr;
      const genie::StringSet& set = strings->set;
      // Several GPUs (the scans' copies): replicated, each with the whole
      // set, a batch's queries split among them; sharded, every query's
      // window read by each GPU over its own strings.
      const genie::Span<uint8_t> excluded =
          scan->excluded != nullptr ? genie::Span<uint8_t>(scan->excluded, static_cast<std::size_t>(set.size()))
                                    : genie::Span<uint8_t>();
      genie::EngineOptions one = engine_options;
      const auto devices = genie::capi::GroupDevices(&one);
      if (!devices.empty()) one.device_ordinal = devices[0].ordinal;  // one of the mask's GPUs
      genie::Status status = genie::Status::Ok();
      // The group decides, not the test: a group kept from an earlier call
      // (made when another capacity placed it) may be sharded where the set
      // now fits each GPU, and the other way round.
      if (!devices.empty() &&
          (genie::capi::Replicated(devices, StringSetBytes(set), set.size(), engine_options.placement) ||
           genie::capi::Sharded(devices, StringSetBytes(set), set.size(), engine_options.placement))) {
        std::shared_ptr<StringGroup> g;  // this search's reference
        GENIE_RETURN_IF_ERROR(GroupCopies(strings, devices, engine_options, &g));
        if (!g->sharded) {
          std::vector<genie::capi::RangeGroupGpu> gpus;
          for (const auto& c : g->copies)
            if (!c->dropped && c->gpu != nullptr)
              gpus.push_back(
                  {[g, pass = WithinPass(c->gpu.get(), set, queries, excluded, scan->radius, engine_options)](
                       int32_t first_query, int32_t n_queries, const genie::RangePlan& plan,
                       std::vector<genie::RangeCandidate>* out,
                       genie::capi::RangePassRead* read) { return pass(first_query, n_queries, plan, out, read); },
                   &c->dropped});
          if (!gpus.empty())
            return genie::capi::RangeSearchHandle(
                set.size(), metrics, GENIE_ENGINE_GPU, options, &whole,
                genie::capi::GroupRangePass(std::move(gpus), false, genie::capi::kMinRangeShareQueries * set.size(),
                                            &g->range_turn),
                nullptr, results);
        } else {
          std::vector<genie::capi::RangeShard> shards;
          bool any = false;
          for (const auto& c : g->copies) {
            genie::capi::RangeShard shard;
            shard.first = c->range.first;
            shard.end = c->range.second;
            shard.dropped = &c->dropped;
            // a GPU out of the group: the host reads its shard (ShardedRangePass),
            // every string of it, not a length window (a rare path)
            if (!c->dropped && c->gpu != nullptr && c->slice != nullptr) {
              any = true;
              const genie::Span<uint8_t> mine =
                  excluded.empty() ? excluded
                                   : genie::Span<uint8_t>(excluded.data() + shard.first,
                                                          static_cast<std::size_t>(shard.end - shard.first));
              shard.pass = [g, pass = WithinPass(c->gpu.get(), *c->slice, queries, mine, scan->radius,
                                                 engine_options)](int32_t first_query, int32_t n_queries,
                                                                  const genie::RangePlan& plan,
                                                                  std::vector<genie::RangeCandidate>* out,
                                                                  genie::capi::RangePassRead* read) {
                return pass(first_query, n_queries, plan, out, read);
              };
            }
            shards.push_back(std::move(shard));
          }
          if (any)
            return genie::capi::RangeSearchHandle(
                set.size(), metrics, GENIE_ENGINE_GPU, options, &whole,
                genie::capi::ShardedRangePass(
                    std::move(shards),
                    genie::capi::RangeShardHost{metrics, scan->radius, engine_options.threads, engine_options.cancel}),
                nullptr, results);
        }
        status = genie::Status::DeviceUnavailable("every GPU of the device group has failed");
      }
      std::shared_ptr<genie::GpuStringSet> gpu;
      if (status.ok()) status = GpuCopy(strings, one.device_ordinal, &gpu);
      // AUTO without a usable GPU searches on the CPU; every other failure goes to the caller
      if (!status.ok() && (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE)) return status;
      if (status.ok())
        return genie::capi::RangeSearchHandle(
            set.size(), metrics, GENIE_ENGINE_GPU, options, &whole,
            [gpu, pass = WithinPass(gpu.get(), set, queries, excluded, scan->radius, engine_options)](
                int32_t first_query, int32_t n_queries, const genie::RangePlan& plan,
                std::vector<genie::RangeCandidate>* out,
                genie::capi::RangePassRead* read) { return pass(first_query, n_queries, plan, out, read); },
            nullptr, results);
    }
#endif
    return genie::capi::RangeSearchHandle(strings->set.size(), metrics, device, options, scan, nullptr, nullptr,
                                          results);
  });
}

}  // extern "C"

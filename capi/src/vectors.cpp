// The C API of vector sets, the vector scan and LSH (genie_vectors_*,
// genie_lsh_*).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "capi_util.hpp"
#include "cluster_list.hpp"
#include "device_group.hpp"
#include "genie/genie.h"
#include "genie/lsh.hpp"
#include "genie/multi_device.hpp"
#include "genie/parallel.hpp"
#include "genie/permutation.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_permutation.hpp"
#endif
#include "genie/vectors.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_vector_scan.hpp"
#include "range_group.hpp"
#endif

using genie::capi::Guarded;
using genie::capi::ToEngineOptions;

#ifdef GENIE_WITH_CUDA
using VectorGroup = genie::capi::DeviceGroup<genie::VectorSet, genie::GpuVectorSet>;
#endif

namespace {
uint64_t NextGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

struct genie_vectors {
  genie::VectorSet set;
  // Which set this is, for the lists' copies of its rows (rows_of,
  // Shard::of): an address may come back for another set once this one is
  // freed, a generation does not.
  const uint64_t generation = NextGeneration();
  // genie_vectors_create_unsealed: rows the caller is still writing; no
  // scan until genie_vectors_seal checked them
  bool sealed = true;
#ifdef GENIE_WITH_CUDA
  mutable std::mutex gpu_mutex;  // the GPU copies are made on first use
  // shared: a call keeps its copy while another, with other options, makes a new one
  std::shared_ptr<genie::GpuVectorSet> gpu;
  int32_t gpu_device = -1;
  uint64_t gpu_budget = 0;
  std::shared_ptr<VectorGroup> group;  // several GPUs: made on first use too
  // the group's shards' host copies (slices), for genie_vectors_memory_bytes
  // without gpu_mutex (a group's copies take seconds to make under it)
  std::atomic<std::size_t> slice_bytes{0};
#endif
};

struct genie_lsh {
  std::unique_ptr<genie::LshFunctions> functions;
};

namespace genie {
class GpuHostRegistration;  // gpu_vector_scan.hpp, in CUDA builds
}  // namespace genie

namespace {

// Each member's distance to its cluster's centre in the set
// (genie::MemberDistances), made by the first range search that reads
// them (on options.threads, polling its cancel) and kept with the list;
// *out is this search's reference (NULL when the list is of more objects
// than the set).
genie::Status ListDistances(genie_cluster_list* list, const genie_vectors* vectors,
                            const genie::EngineOptions& options, std::shared_ptr<const std::vector<double>>* out) {
  std::lock_guard<std::mutex> lock(list->rows_mutex);
  if (list->distances_of != vectors->generation && list->list.n_objects <= vectors->set.size()) {
    auto made = std::make_shared<std::vector<double>>();
    const auto metric = genie::VectorObjectMetric(vectors->set);
    GENIE_RETURN_IF_ERROR(genie::MemberDistances(*metric, list->list, options.threads, made.get(), options.cancel));
    list->member_distances = std::move(made);
    list->distances_of = vectors->generation;
  }
  if (list->distances_of == vectors->generation) *out = list->member_distances;
  return genie::Status::Ok();
}

// The set's rows in list's order (genie::MemberRows), made by the first
// search that reads them (on options.threads, polling its cancel) and kept with the list for the next; *rows is this
// search's reference (NULL when the list is of more objects than the set).
// pin_device >= 0 (CUDA builds): also page-lock them in that device's
// context for a streamed GPU search, when they are at most
// PageLockableBytes() (*pinned NULL otherwise, or when the driver refuses:
// the rows are then gathered on the host), in pieces, cancel polled
// between them.
genie::Status ListRows(genie_cluster_list* list, const genie_vectors* vectors, int32_t pin_device,
                       const genie::EngineOptions& options, std::shared_ptr<const genie::HostArray<float>>* rows,
                       std::shared_ptr<genie::GpuHostRegistration>* pinned) {
  std::lock_guard<std::mutex> lock(list->rows_mutex);
  if (list->rows_of != vectors->generation && list->list.n_objects <= vectors->set.size()) {
    auto made = std::make_shared<genie::HostArray<float>>();
    GENIE_RETURN_IF_ERROR(genie::MemberRows(vectors->set, list->list, made.get(), options.cancel, options.threads));
#ifdef GENIE_WITH_CUDA
    list->rows_pin.reset();  // before the rows it locks go
    list->rows_pin_refused = false;
#endif
    list->member_rows = std::move(made);
    list->rows_of = vectors->generation;
  }
  if (list->rows_of != vectors->generation) return genie::Status::Ok();
  *rows = list->member_rows;
#ifdef GENIE_WITH_CUDA
  const std::size_t bytes = list->member_rows->size() * sizeof(float);
  if (pin_device >= 0 && list->rows_pin == nullptr && !list->rows_pin_refused && bytes > 0) {
    std::unique_ptr<genie::GpuHostRegistration> made;
    const genie::Status locked =
        genie::GpuHostRegistration::Create(list->member_rows->data(), bytes, pin_device, &made, options.cancel);
    if (locked.code() == GENIE_CANCELLED) return locked;  // tried again by the next search
    if (locked.ok()) list->rows_pin = std::move(made);
    else list->rows_pin_refused = true;  // the driver or PageLockableBytes(): gathered on the host from now on
  }
  if (pin_device >= 0 && pinned != nullptr) *pinned = list->rows_pin;
#else
  (void)pin_device;
  (void)pinned;
#endif
  return genie::Status::Ok();
}

genie::Status ToCResults(const genie::VectorScanResult& r, genie_engine_kind device, int32_t parts,
                         genie_vector_results** out) {
  GENIE_RETURN_IF_ERROR(genie::capi::CopyScanRows(r, device, genie_vector_results_free, out));
  (*out)->parts = parts;
  return genie::Status::Ok();
}

#ifdef GENIE_WITH_CUDA
// The set's GPU copy for this device and budget, made on first use; *out
// is the call's reference (calls may run concurrently from several threads,
// and one with other options replaces the set's copy, not the caller's).
genie::Status GpuCopy(genie_vectors* vectors, const genie::EngineOptions& options,
                      std::shared_ptr<genie::GpuVectorSet>* out) {
  std::lock_guard<std::mutex> lock(vectors->gpu_mutex);
  if (vectors->gpu == nullptr || vectors->gpu_device != options.device_ordinal ||
      vectors->gpu_budget != options.memory_budget_bytes) {
    vectors->gpu.reset();
    std::unique_ptr<genie::GpuVectorSet> made;
    GENIE_RETURN_IF_ERROR(genie::GpuVectorSet::Create(vectors->set, options.device_ordinal,
                                                      options.memory_budget_bytes, &made));
    vectors->gpu = std::move(made);
    vectors->gpu_device = options.device_ordinal;
    vectors->gpu_budget = options.memory_budget_bytes;
  }
  *out = vectors->gpu;
  return genie::Status::Ok();
}

// The set's copies on the GPUs of a device group (capi/src/device_group.hpp),
// made on first use and again when the options name other GPUs.
genie::Status GroupCopies(genie_vectors* vectors, const std::vector<genie::capi::GroupDevice>& devices,
                          const genie::EngineOptions& options, std::shared_ptr<VectorGroup>* out) {
  std::lock_guard<std::mutex> lock(vectors->gpu_mutex);
  const genie::VectorSet& set = vectors->set;
  auto slice = [&set](int32_t first, int32_t end, genie::VectorSet* rows) {
    rows->dim = set.dim;
    rows->n = end - first;
    rows->values.assign(set.row(first), set.row(end));
    return genie::Status::Ok();
  };
  auto make_gpu = [](const genie::VectorSet& rows, int32_t ordinal, uint64_t budget,
                     std::unique_ptr<genie::GpuVectorSet>* gpu) {
    return genie::GpuVectorSet::Create(rows, ordinal, budget, gpu);
  };
  // (re)made by this call: its slices counted once (an address may come back, MadeFor tells)
  const bool remade = vectors->group == nullptr || !vectors->group->MadeFor(options);
  if (remade) vectors->slice_bytes.store(0);  // the old group's go with it
  GENIE_RETURN_IF_ERROR(genie::capi::EnsureDeviceGroup(set, set.n, static_cast<uint64_t>(set.values.size()) * sizeof(float),
                                                       devices, options, slice, make_gpu, &vectors->group));
  if (remade) {
    std::size_t slices = 0;
    for (const auto& c : vectors->group->copies)
      if (c->slice != nullptr) slices += c->slice->values.capacity() * sizeof(float);
    vectors->slice_bytes.store(slices);
  }
  *out = vectors->group;  // this search's reference
  return genie::Status::Ok();
}

// The list's members on GPU ordinal, copied there by the first search
// that reads them on it; *out is the search's reference.
genie::Status MembersOn(genie_cluster_list* list, int32_t ordinal, std::shared_ptr<genie::GpuClusterMembers>* out) {
  if (ordinal < 0) return genie::Status::InvalidArgument("no GPU ordinal for the list's members");
  std::lock_guard<std::mutex> lock(list->gpu_mutex);
  if (list->gpu.size() <= static_cast<std::size_t>(ordinal)) list->gpu.resize(static_cast<std::size_t>(ordinal) + 1);
  auto& on = list->gpu[static_cast<std::size_t>(ordinal)];
  if (on == nullptr) {
    std::unique_ptr<genie::GpuClusterMembers> made;
    GENIE_RETURN_IF_ERROR(genie::GpuClusterMembers::Create(list->list.members, ordinal, &made));
    on = std::move(made);
  }
  *out = on;
  return genie::Status::Ok();
}

// What a shard of a sharded group needs of the list (range_group.hpp):
// its members, and on its GPU either their copy (its rows resident) or
// their rows in their order, page-locked (its rows streamed; only when at
// most kHostRegistrationPieceBytes: a larger shard, or one whose rows the
// host cannot hold or lock, gathers its rows by id).  A GPU that is out
// needs the members alone (the host reads its shard).
enum class ShardNeed { kMembers, kDeviceMembers, kPinnedRows };
struct ShardView {
  std::shared_ptr<const genie::capi::RangeShardMembers> members;
  std::shared_ptr<genie::GpuClusterMembers> gpu_members;
  std::shared_ptr<const genie_cluster_list::ShardRows> rows;
};

// The view of shard [first, end) of the set of generation `of` (rows: the shard's own)
// on device, made on first use and kept with the list, one shard a GPU
// (another set's, or the GPU's other shard, replaced: at most the set's
// size in rows).  The caller gets its own references.
genie::Status ShardViewOn(genie_cluster_list* list, uint64_t of, const genie::VectorSet* rows, int32_t first,
                          int32_t end, int32_t device, ShardNeed need, const genie::EngineOptions& options,
                          ShardView* out) {
  std::lock_guard<std::mutex> lock(list->gpu_mutex);
  auto shard = std::find_if(list->shards.begin(), list->shards.end(), [&](const genie_cluster_list::Shard& s) {
    return s.of == of && s.first == first && s.end == end && s.device == device;
  });
  bool changed = false;  // the list's shard views, counted again only then
  if (shard == list->shards.end()) {
    changed = true;
    list->shards.erase(std::remove_if(list->shards.begin(), list->shards.end(),
                                      [&](const genie_cluster_list::Shard& s) {
                                        return s.of != of || s.device == device;
                                      }),
                       list->shards.end());
    auto members = std::make_shared<genie::capi::RangeShardMembers>();
    GENIE_RETURN_IF_ERROR(
        genie::capi::ShardMembers(genie::Span<int32_t>(list->list.members), first, end, members.get(), options.cancel));
    genie_cluster_list::Shard made;
    made.of = of;
    made.first = first;
    made.end = end;
    made.device = device;
    made.members = std::move(members);
    list->shards.push_back(std::move(made));
    shard = list->shards.end() - 1;
  }
  const std::vector<int32_t>& members = shard->members->members;
  if (need == ShardNeed::kDeviceMembers && shard->gpu_members == nullptr) {
    std::unique_ptr<genie::GpuClusterMembers> made;
    GENIE_RETURN_IF_ERROR(genie::GpuClusterMembers::Create(genie::Span<int32_t>(members), device, &made));
    shard->gpu_members = std::move(made);
  }
  const std::size_t dim = static_cast<std::size_t>(rows != nullptr ? rows->dim : 0);
  const std::size_t bytes = members.size() * dim * sizeof(float);
  if (need == ShardNeed::kPinnedRows && shard->rows == nullptr && !shard->rows_refused && bytes > 0 &&
      bytes <= genie::kHostRegistrationPieceBytes) {
    auto made = std::make_shared<genie_cluster_list::ShardRows>();
    bool held = true;
    try {
      made->values.resize(members.size() * dim);
    } catch (const std::bad_alloc&) {
      held = false;  // no room on the host: gathered by id, as without them
    }
    if (held) {
      constexpr int64_t kPiece = 4096;  // rows a task, the cancel polled between
      GENIE_RETURN_IF_ERROR(genie::ParallelFor(
          (static_cast<int64_t>(members.size()) + kPiece - 1) / kPiece, options.threads,
          [&](int64_t piece) {
            const std::size_t b = static_cast<std::size_t>(piece * kPiece);
            const std::size_t e = std::min(members.size(), b + static_cast<std::size_t>(kPiece));
            for (std::size_t i = b; i < e; ++i)
              std::memcpy(&made->values[i * dim], rows->row(members[i]), dim * sizeof(float));
            return genie::Status::Ok();
          },
          options.cancel));
    }
    // kept only locked; rows the host or the driver refuse are gathered by
    // id from then on, not gathered again for every search
    if (held && genie::GpuHostRegistration::Create(made->values.data(), bytes, device, &made->pin).ok()) {
      shard->rows = std::move(made);
      changed = true;
    } else {
      shard->rows_refused = true;
    }
  }
  if (changed) {  // for genie_cluster_list_memory_bytes
    std::size_t kept = 0;
    for (const auto& v : list->shards) {
      kept += (v.members->members.capacity() + v.members->before.capacity()) * sizeof(int32_t);
      if (v.rows != nullptr) kept += v.rows->values.capacity() * sizeof(float);
    }
    list->shard_bytes.store(kept);
  }
  out->members = shard->members;
  out->gpu_members = need == ShardNeed::kDeviceMembers ? shard->gpu_members : nullptr;
  out->rows = need == ShardNeed::kPinnedRows ? shard->rows : nullptr;
  return genie::Status::Ok();
}

// The range search's pass over a sharded group (range_group.hpp): each
// GPU reads its own objects' part of every item, resident or streamed; a
// GPU that is out, or fails, has its shard read on the host.  *pass stays
// empty when every GPU of the group is out.
genie::Status ShardedWithin(genie_vectors* vectors, const std::shared_ptr<VectorGroup>& g,
                            const genie_range_scan* scan, const genie::EngineOptions& engine_options,
                            genie::capi::RangeDevicePass* pass) {
  std::vector<genie::capi::RangeShard> shards;
  bool any = false;
  for (const auto& c : g->copies) {
    const bool out_of_service = c->dropped || c->gpu == nullptr;
    const bool resident = !out_of_service && c->gpu->parts() == 1;
    ShardView view;  // this search's references
    if (scan->list != nullptr) {
      auto view_for = [&](ShardNeed need) {
        return ShardViewOn(const_cast<genie_cluster_list*>(scan->list), vectors->generation, c->slice.get(),
                           c->range.first, c->range.second, c->device, need, engine_options, &view);
      };
      const ShardNeed need =
          out_of_service ? ShardNeed::kMembers : resident ? ShardNeed::kDeviceMembers : ShardNeed::kPinnedRows;
      genie::Status made = view_for(need);
      // rows the host cannot hold: gathered by id
      if (!made.ok() && need == ShardNeed::kPinnedRows && made.code() == GENIE_OUT_OF_MEMORY)
        made = view_for(ShardNeed::kMembers);
      if (genie::DeviceFailed(made)) {
        c->dropped = true;  // for good, as a failed search drops it; the host reads its shard
        made = view_for(ShardNeed::kMembers);
      }
      GENIE_RETURN_IF_ERROR(made);
    }
    genie::capi::RangeShard shard;
    shard.first = c->range.first;
    shard.end = c->range.second;
    shard.members = view.members;
    shard.dropped = &c->dropped;
    if (!out_of_service && !c->dropped) {
      any = true;
      genie::GpuVectorSet* copy = c->gpu.get();
      const genie::VectorSet* rows = c->slice.get();
      shard.pass = [g, copy, rows, view, scan, &engine_options](int32_t first_query, int32_t n_queries,
                                                                const genie::RangePlan& plan,
                                                                std::vector<genie::RangeCandidate>* out,
                                                                genie::capi::RangePassRead*) {
        genie::GpuRangeRequest request;
        request.queries =
            scan->queries + static_cast<std::size_t>(first_query) * static_cast<std::size_t>(rows->dim);
        request.n_queries = n_queries;
        request.radius = scan->radius;
        request.device_members = view.gpu_members.get();
        if (view.members != nullptr) request.members = genie::Span<int32_t>(view.members->members);
        // runs of members copied by DMA from their rows in order (a shard's
        // are kept only page-locked), else gathered by id
        if (view.rows != nullptr) {
          request.member_rows = view.rows->values.data();
          request.member_rows_pinned = true;
          request.member_rows_one_piece = view.rows->pin->pieces() == 1;
        }
        request.threads = engine_options.threads;
        return copy->RangeCandidates(*rows, request, plan, out, engine_options.cancel);
      };
    }  // else no pass: the host reads the shard
    shards.push_back(std::move(shard));
  }
  if (!any) return genie::Status::Ok();
  genie::capi::RangeShardHost host{genie::VectorQueryMetrics(vectors->set, scan->queries), scan->radius,
                                   engine_options.threads, engine_options.cancel};
  // (the live shards' passes hold the group, whose copies' flags every shard points to)
  *pass = genie::capi::ShardedRangePass(std::move(shards), std::move(host));
  return genie::Status::Ok();
}

// The exact scan over a device group (rows merged by distance, then id).
genie::Status GroupScan(const genie::VectorSet& set, VectorGroup* g, const genie::EngineOptions& options,
                        const genie::VectorScanRequest& request, genie::VectorScanResult* out, int32_t* parts,
                        bool* on_gpu) {
  *parts = 1;
  for (const auto& c : g->copies)
    if (c->gpu != nullptr) *parts = std::max(*parts, c->gpu->parts());
  auto scan = [&](genie::GpuVectorSet* gpu, const genie::VectorSet& rows, int32_t first_object, int32_t q0,
                  int32_t q1, genie::VectorScanResult* found) {
    genie::VectorScanRequest r = request;
    r.queries = request.queries + static_cast<std::size_t>(q0) * static_cast<std::size_t>(set.dim);
    r.n_queries = q1 - q0;
    if (request.excluded.size() > 0)
      r.excluded = genie::Span<uint8_t>(request.excluded.data() + first_object, static_cast<std::size_t>(rows.n));
    return gpu != nullptr ? gpu->Scan(rows, r, found, options.cancel)
                          : genie::CpuVectorScan(rows, r, options.threads, found, options.cancel);
  };
  return genie::capi::ScanDeviceGroup(set, g, request.n_queries, request.k, scan, std::less<>(), out, on_gpu);
}
#endif

}  // namespace

extern "C" {

double genie_l2_distance(const float* a, const float* b, int32_t dim) { return genie::L2Distance(a, b, dim); }

genie_status genie_vectors_create(const float* values, int32_t n, int32_t dim, genie_vectors** vectors,
                                  genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (vectors == nullptr) return genie::Status::InvalidArgument("genie_vectors_create: NULL output");
    if (n < 0 || dim < 1) return genie::Status::InvalidArgument("genie_vectors_create: bad n or dim");
    if (n > 0 && values == nullptr) return genie::Status::InvalidArgument("genie_vectors_create: NULL values");
    const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(dim);
    auto owned = std::make_unique<genie_vectors>();
    GENIE_RETURN_IF_ERROR(genie::BuildVectorSet(dim, n, genie::HostArray<float>(values, values + count), &owned->set));
    *vectors = owned.release();
    return genie::Status::Ok();
  });
}

genie_status genie_vectors_create_unsealed(int32_t n, int32_t dim, int32_t threads, genie_vectors** vectors, float** rows,
                                           genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (vectors == nullptr || rows == nullptr)
      return genie::Status::InvalidArgument("genie_vectors_create_unsealed: NULL output");
    if (n < 0 || dim < 1) return genie::Status::InvalidArgument("genie_vectors_create_unsealed: bad n or dim");
    auto owned = std::make_unique<genie_vectors>();
    owned->set.dim = dim;
    owned->set.n = n;
    // zeroed: a row the caller leaves alone (a NULL value) is the zero vector;
    // on the threads, where the pages of a fresh set fault in (bench/cold.md)
    genie::ResizeZeroed(&owned->set.values, static_cast<std::size_t>(n) * static_cast<std::size_t>(dim), threads);
    owned->sealed = false;
    *rows = owned->set.values.data();
    *vectors = owned.release();
    return genie::Status::Ok();
  });
}

genie_status genie_vectors_seal(genie_vectors* vectors, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (vectors == nullptr) return genie::Status::InvalidArgument("genie_vectors_seal: NULL vectors");
    GENIE_RETURN_IF_ERROR(genie::CheckFinite(vectors->set.values.data(), vectors->set.values.size(),
                                             "a stored vector"));
    vectors->sealed = true;
    return genie::Status::Ok();
  });
}

void genie_vectors_free(genie_vectors* vectors) { std::unique_ptr<genie_vectors> owned(vectors); }

size_t genie_vectors_memory_bytes(const genie_vectors* vectors) {
  if (vectors == nullptr) return 0;
  std::size_t bytes = vectors->set.values.capacity() * sizeof(float);
#ifdef GENIE_WITH_CUDA
  bytes += vectors->slice_bytes.load();  // a sharded group's second copy of the rows on the host
#endif
  return bytes;
}

size_t genie_vectors_device_bytes(const genie_vectors* vectors) {
#ifdef GENIE_WITH_CUDA
  if (vectors == nullptr) return 0;
  std::lock_guard<std::mutex> lock(vectors->gpu_mutex);
  std::size_t bytes = vectors->gpu != nullptr ? vectors->gpu->device_bytes() : 0;
  if (vectors->group != nullptr) bytes += vectors->group->device_bytes();
  return bytes;
#endif
  (void)vectors;
  return 0;
}

int32_t genie_vectors_count(const genie_vectors* vectors) { return vectors == nullptr ? 0 : vectors->set.size(); }

int32_t genie_vectors_dim(const genie_vectors* vectors) { return vectors == nullptr ? 0 : vectors->set.dim; }

const float* genie_vectors_row(const genie_vectors* vectors, int32_t id) {
  if (vectors == nullptr || id < 0 || id >= vectors->set.size()) return nullptr;
  return vectors->set.row(id);
}

void genie_vector_results_free(genie_vector_results* results) {
  if (results == nullptr) return;
  std::free(results->query_offsets);
  std::free(results->objects);
  std::free(results->distances);
  std::free(results);
}

genie_status genie_vectors_scan(genie_vectors* vectors, genie_engine_kind device,
                                const genie_engine_options* options, const genie_vector_scan* scan,
                                genie_vector_results** results, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (vectors == nullptr || scan == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_vectors_scan: NULL argument");
    if (!vectors->sealed) return genie::Status::InvalidArgument("genie_vectors_scan: the set is not sealed");
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
    const genie::VectorSet& set = vectors->set;
    genie::VectorScanRequest request;
    request.n_queries = scan->n_queries;
    request.queries = scan->queries;
    request.k = scan->k;
    if (scan->excluded != nullptr)
      request.excluded = genie::Span<uint8_t>(scan->excluded, static_cast<size_t>(set.size()));
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    genie::VectorScanResult found;
    if (scan->candidate_offsets != nullptr) {
      if (scan->n_queries < 0) return genie::Status::InvalidArgument("negative number of queries");
      const int64_t n_candidates = scan->n_queries > 0 ? scan->candidate_offsets[scan->n_queries] : 0;
      if (n_candidates < 0 || (n_candidates > 0 && scan->candidates == nullptr))
        return genie::Status::InvalidArgument("bad candidate list");
      GENIE_RETURN_IF_ERROR(genie::RerankVectors(
          set, scan->queries, scan->n_queries, scan->k,
          genie::Span<int64_t>(scan->candidate_offsets, static_cast<size_t>(scan->n_queries) + 1),
          genie::Span<int32_t>(scan->candidates, static_cast<size_t>(n_candidates)), request.excluded,
          engine_options.threads, &found, engine_options.cancel));
      return ToCResults(found, GENIE_ENGINE_CPU, 0, results);
    }
    if (scan->list_use < GENIE_LIST_AUTO || scan->list_use > GENIE_LIST_NEVER)
      return genie::Status::InvalidArgument("list_use must be AUTO, ALWAYS or NEVER");
    // the list is the CPU engine's (the GPU reads every vector faster:
    // bench/range.md): ALWAYS reads it whatever the device, AUTO where the
    // search runs on the CPU (CPU, or AUTO without a usable GPU)
    auto list_knn = [&]() -> genie::Status {
      genie_cluster_list* list = const_cast<genie_cluster_list*>(scan->list);
      std::shared_ptr<const genie::HostArray<float>> member_rows;  // this search's reference
      const genie::Status rows = ListRows(list, vectors, -1, engine_options, &member_rows, nullptr);
      // (without host memory for them, the rows are gathered by id)
      if (!rows.ok() && rows.code() != GENIE_OUT_OF_MEMORY) return rows;
      int32_t listed = 0;
      int64_t list_distances = 0;
      GENIE_RETURN_IF_ERROR(genie::capi::ListKnn(list, set, member_rows ? member_rows->data() : nullptr, scan,
                                                 request, engine_options, &found, &listed, &list_distances));
      GENIE_RETURN_IF_ERROR(ToCResults(found, GENIE_ENGINE_CPU, 0, results));
      (*results)->listed = listed;
      (*results)->list_distances = list_distances;
      return genie::Status::Ok();
    };
    if (scan->list != nullptr && scan->list_use == GENIE_LIST_ALWAYS) return list_knn();
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      genie::EngineOptions one = engine_options;
      const auto group = genie::capi::GroupDevices(&one);
      if (!group.empty()) {
        std::shared_ptr<VectorGroup> g;
        GENIE_RETURN_IF_ERROR(GroupCopies(vectors, group, engine_options, &g));
        int32_t parts = 1;
        bool on_gpu = false;
        GENIE_RETURN_IF_ERROR(GroupScan(set, g.get(), engine_options, request, &found, &parts, &on_gpu));
        return on_gpu ? ToCResults(found, GENIE_ENGINE_GPU, parts, results)
                      : ToCResults(found, GENIE_ENGINE_CPU, 0, results);
      }
      std::shared_ptr<genie::GpuVectorSet> gpu;
      genie::Status status = GpuCopy(vectors, one, &gpu);
      if (status.ok()) {
        GENIE_RETURN_IF_ERROR(gpu->Scan(set, request, &found, engine_options.cancel));
        return ToCResults(found, GENIE_ENGINE_GPU, gpu->parts(), results);
      }
      // AUTO without a usable GPU scans on the CPU; every other failure goes to the caller
      if (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    if (scan->list != nullptr && scan->list_use == GENIE_LIST_AUTO) return list_knn();
    GENIE_RETURN_IF_ERROR(genie::CpuVectorScan(set, request, engine_options.threads, &found, engine_options.cancel));
    return ToCResults(found, GENIE_ENGINE_CPU, 0, results);
  });
}

genie_status genie_lsh_create(const genie_lsh_params* params, int (*cancel)(void*), void* cancel_arg,
                              genie_lsh** lsh, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (params == nullptr || lsh == nullptr) return genie::Status::InvalidArgument("genie_lsh_create: NULL argument");
    genie::LshParams p;
    p.family = static_cast<genie::LshFamily>(params->family);
    p.dim = params->dim;
    p.functions = params->functions;
    p.buckets = params->buckets;
    p.width = params->width;
    p.seed = params->seed;
    auto owned = std::make_unique<genie_lsh>();
    GENIE_RETURN_IF_ERROR(
        genie::LshFunctions::Create(p, &owned->functions, genie::CancelCheck{cancel, cancel_arg}, params->threads));
    *lsh = owned.release();
    return genie::Status::Ok();
  });
}

void genie_lsh_free(genie_lsh* lsh) { std::unique_ptr<genie_lsh> owned(lsh); }

genie_status genie_lsh_keywords(const genie_lsh* lsh, const float* vector, int32_t* keywords, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (lsh == nullptr || vector == nullptr || keywords == nullptr)
      return genie::Status::InvalidArgument("genie_lsh_keywords: NULL argument");
    GENIE_RETURN_IF_ERROR(genie::CheckFinite(vector, static_cast<std::size_t>(lsh->functions->params().dim), "a vector"));
    lsh->functions->Keywords(vector, keywords);
    return genie::Status::Ok();
  });
}

genie_status genie_lsh_keywords_batch(const genie_lsh* lsh, const float* vectors, int64_t count, int32_t threads,
                                      int (*cancel)(void*), void* cancel_arg, int32_t* keywords, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (lsh == nullptr || count < 0 || (count > 0 && (vectors == nullptr || keywords == nullptr)))
      return genie::Status::InvalidArgument("genie_lsh_keywords_batch: NULL or negative argument");
    GENIE_RETURN_IF_ERROR(genie::CheckFinite(
        vectors, static_cast<std::size_t>(count) * static_cast<std::size_t>(lsh->functions->params().dim), "a vector"));
    return lsh->functions->KeywordsBatch(vectors, count, threads, genie::CancelCheck{cancel, cancel_arg}, keywords);
  });
}

int32_t genie_lsh_functions_for(double epsilon, double delta) { return genie::LshFunctionsFor(epsilon, delta); }

genie_status genie_lsh_estimate_width(int32_t family, const float* sample, int32_t count, int32_t dim,
                                      int (*cancel)(void*), void* cancel_arg, double* width, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    return genie::EstimateLshWidth(static_cast<genie::LshFamily>(family), sample, count, dim,
                                   genie::CancelCheck{cancel, cancel_arg}, width);
  });
}

genie_status genie_vectors_permutations(const genie_vectors* objects, const genie_vectors* permutants,
                                        genie_engine_kind device, const genie_engine_options* options,
                                        uint8_t* rows, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (objects == nullptr || permutants == nullptr || (rows == nullptr && objects->set.n > 0))
      return genie::Status::InvalidArgument("genie_vectors_permutations: NULL argument");
    if (!objects->sealed || !permutants->sealed)
      return genie::Status::InvalidArgument("genie_vectors_permutations: vectors not sealed");
    const int32_t m = permutants->set.n;
    if (m < 1 || m > genie::kMaxPermutants)
      return genie::Status::InvalidArgument("permutants must be between 1 and 128");
    const genie::EngineOptions engine_options = ToEngineOptions(options);
    const genie::PermutationRows table{m, genie::PermutationStride(m), objects->set.n, rows};
    if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_GPU && device != GENIE_ENGINE_AUTO)
      return genie::Status::InvalidArgument("device must be CPU, GPU or AUTO");
    std::memset(rows, 0, static_cast<size_t>(table.n) * static_cast<size_t>(table.stride));
#ifdef GENIE_WITH_CUDA
    if (device != GENIE_ENGINE_CPU) {
      genie::Status status = genie::GpuVectorPermutations(objects->set, permutants->set, engine_options.device_ordinal,
                                                          engine_options.memory_budget_bytes, table,
                                                          engine_options.cancel);
      // AUTO without a usable GPU computes on the CPU; every other failure goes to the caller
      if (status.ok() || device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE) return status;
    }
#else
    if (device == GENIE_ENGINE_GPU)
      return genie::Status::DeviceUnavailable("genie was built without CUDA support");
#endif
    return genie::VectorPermutations(objects->set, permutants->set, 0, engine_options.threads, table,
                                     engine_options.cancel);
  });
}

}  // extern "C"

extern "C" {

genie_status genie_vectors_cluster_list(const genie_vectors* objects, const uint8_t* excluded,
                                        int32_t cluster_size, int32_t supercluster_clusters,
                                        genie_cluster_centres centres,
                                        const genie_engine_options* options,
                                        genie_cluster_list** list, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (objects == nullptr) return genie::Status::InvalidArgument("genie_vectors_cluster_list: NULL set");
    if (!objects->sealed)
      return genie::Status::InvalidArgument("genie_vectors_cluster_list: the set is not sealed");
    auto metric = genie::VectorObjectMetric(objects->set);
    return genie::capi::BuildClusterListHandle(*metric, objects->set.size(), excluded, cluster_size,
                                               supercluster_clusters, centres, options, list);
  });
}

genie_status genie_vectors_within(genie_vectors* vectors, genie_engine_kind device,
                                  const genie_engine_options* options, const genie_range_scan* scan,
                                  genie_range_results** results, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (vectors == nullptr || scan == nullptr || results == nullptr)
      return genie::Status::InvalidArgument("genie_vectors_within: NULL argument");
    if (!vectors->sealed) return genie::Status::InvalidArgument("genie_vectors_within: the set is not sealed");
    if (scan->n_queries < 0) return genie::Status::InvalidArgument("negative number of queries");
    if (scan->n_queries > 0 && scan->queries == nullptr)
      return genie::Status::InvalidArgument("genie_vectors_within: NULL queries");
    const genie::VectorSet& set = vectors->set;
    GENIE_RETURN_IF_ERROR(genie::CheckFinite(
        scan->queries, static_cast<std::size_t>(scan->n_queries) * static_cast<std::size_t>(set.dim),
        "a query vector"));
    // A list's clusters read only in each query's ring where that reads
    // less (bench/range.md, "Each cluster's ring"): on the CPU engine, and
    // for a single query over a streamed set (its rows gathered anyway, on
    // the device or the host, so fewer rows cost less).  A GPU holding the
    // set reads whole clusters faster, and a batch's rings together cover
    // them.  whole_clusters < 0 reads rings there too (for comparisons).
    std::shared_ptr<const std::vector<double>> distances;  // this search's reference
    auto distances_for_rings = [&](genie::Span<double>* out) -> genie::Status {
      *out = genie::Span<double>();
      if (scan->list == nullptr || scan->candidate_offsets != nullptr || scan->whole_clusters > 0 ||
          scan->n_queries == 0)
        return genie::Status::Ok();
      GENIE_RETURN_IF_ERROR(
          ListDistances(const_cast<genie_cluster_list*>(scan->list), vectors, ToEngineOptions(options), &distances));
      if (distances != nullptr) *out = genie::Span<double>(*distances);
      return genie::Status::Ok();
    };
    genie::capi::RangeDevicePass device_pass;
    // without a list the CPU engine reads every row as the kNN scan does:
    // blocks of queries against tiles of rows
    const genie::capi::RangeCpuScan scan_all = [&set, scan](const genie::RangeRequest& request, int32_t threads,
                                                            genie::RangeResult* out, const genie::CancelCheck& cancel) {
      return genie::CpuVectorRangeScan(set, scan->queries, request, threads, out, cancel);
    };
#ifdef GENIE_WITH_CUDA
    // given candidates are the CPU's (RangeSearchHandle): no device copy for them
    if (device != GENIE_ENGINE_CPU && scan->candidate_offsets == nullptr) {
      const genie::EngineOptions engine_options = ToEngineOptions(options);
      GENIE_RETURN_IF_ERROR(genie::capi::CheckPlacement(options));
      // Several GPUs (the kNN scans' copies, range_group.hpp): replicated,
      // each holds the whole set and reads a share of each batch's plan;
      // sharded, each reads its own objects' part of every item, resident or
      // streamed.  A replicated group whose copies stream lends its first
      // GPU's copy (no second copy there).
      genie::EngineOptions one = engine_options;
      const auto devices = genie::capi::GroupDevices(&one);
      if (!devices.empty()) one.device_ordinal = devices[0].ordinal;  // one of the mask's GPUs
      std::shared_ptr<genie::GpuVectorSet> gpu;  // the one GPU's copy
      int32_t ordinal = one.device_ordinal;     // and its GPU
      genie::Status status = genie::Status::Ok();
      if (!devices.empty()) {
        std::shared_ptr<VectorGroup> g;  // this search's reference
        GENIE_RETURN_IF_ERROR(GroupCopies(vectors, devices, engine_options, &g));
        std::vector<genie::capi::GroupCopy<genie::VectorSet, genie::GpuVectorSet>*> live;
        bool resident = true;
        for (const auto& c : g->copies) {
          if (c->dropped || c->gpu == nullptr) continue;
          live.push_back(c.get());
          resident = resident && c->gpu->parts() == 1;
        }
        if (g->sharded) {
          genie::capi::RangeDevicePass sharded;
          GENIE_RETURN_IF_ERROR(ShardedWithin(vectors, g, scan, engine_options, &sharded));
          if (sharded != nullptr)
            return genie::capi::RangeSearchHandle(set.size(), genie::VectorQueryMetrics(set, scan->queries),
                                                  GENIE_ENGINE_GPU, options, scan, sharded, scan_all, results);
          status = genie::Status::DeviceUnavailable("every GPU of the device group has failed");
        } else if (!live.empty() && !resident) {
          gpu = std::shared_ptr<genie::GpuVectorSet>(g, live[0]->gpu.get());  // holds the group
          ordinal = live[0]->device;
        } else if (!live.empty()) {
          std::vector<genie::capi::RangeGroupGpu> gpus;
          for (auto* c : live) {
            std::shared_ptr<genie::GpuClusterMembers> on;  // this search's reference
            if (scan->list != nullptr) {
              const genie::Status made = MembersOn(const_cast<genie_cluster_list*>(scan->list), c->device, &on);
              if (genie::DeviceFailed(made)) {
                c->dropped = true;  // for good, as a failed search drops it
                continue;
              }
              GENIE_RETURN_IF_ERROR(made);
            }
            genie::GpuVectorSet* copy = c->gpu.get();
            gpus.push_back(genie::capi::RangeGroupGpu{
                [g, copy, vectors, scan, on, &engine_options](int32_t first_query, int32_t n_queries,
                                                              const genie::RangePlan& plan,
                                                              std::vector<genie::RangeCandidate>* out,
                                                              genie::capi::RangePassRead*) {
                  genie::GpuRangeRequest request;
                  request.queries = scan->queries + static_cast<std::size_t>(first_query) *
                                                        static_cast<std::size_t>(vectors->set.dim);
                  request.n_queries = n_queries;
                  request.radius = scan->radius;
                  request.device_members = on.get();
                  if (scan->list != nullptr) request.members = genie::Span<int32_t>(scan->list->list.members);
                  request.threads = engine_options.threads;
                  return copy->RangeCandidates(vectors->set, request, plan, out, engine_options.cancel);
                },
                &c->dropped});
          }
          if (!gpus.empty())
            return genie::capi::RangeSearchHandle(
                set.size(), genie::VectorQueryMetrics(set, scan->queries), GENIE_ENGINE_GPU, options, scan,
                genie::capi::GroupRangePass(std::move(gpus), true, genie::capi::kMinRangeShareFloats / set.dim,
                                            &g->range_turn),
                scan_all, results);
        }
        if (gpu == nullptr && !g->sharded)
          status = genie::Status::DeviceUnavailable("every GPU of the device group has failed");
      }
      if (gpu == nullptr && status.ok()) status = GpuCopy(vectors, one, &gpu);
      // AUTO without a usable GPU searches on the CPU; every other failure goes to the caller
      if (!status.ok() && (device != GENIE_ENGINE_AUTO || status.code() != GENIE_DEVICE_UNAVAILABLE)) return status;
      // a resident set reads the list's members on the device; a streamed
      // one gathers its rows by the host's
      std::shared_ptr<genie::GpuClusterMembers> members;
      if (status.ok() && gpu->parts() == 1 && scan->list != nullptr)
        GENIE_RETURN_IF_ERROR(MembersOn(const_cast<genie_cluster_list*>(scan->list), ordinal, &members));
      // a streamed set copies runs of the list's members from its rows in
      // the list's order, page-locked
      // (without them, for lack of host memory, the rows are gathered by id)
      struct PinnedRows {
        std::shared_ptr<const genie::HostArray<float>> rows;
        std::shared_ptr<genie::GpuHostRegistration> pin;
        ~PinnedRows() { pin.reset(); }  // unlocked before the rows can go
      };
      const auto rows_ref = std::make_shared<PinnedRows>();
      if (status.ok() && gpu->parts() > 1 && scan->list != nullptr) {
        const genie::Status listed = ListRows(const_cast<genie_cluster_list*>(scan->list), vectors, ordinal,
                                              engine_options, &rows_ref->rows, &rows_ref->pin);
        if (!listed.ok() && listed.code() != GENIE_OUT_OF_MEMORY) return listed;
      }
      if (status.ok()) {
        genie::GpuRangeRequest request;
        if (rows_ref->rows != nullptr) {
          request.member_rows = rows_ref->rows->data();
          request.member_rows_pinned = rows_ref->pin != nullptr;
          request.member_rows_one_piece = rows_ref->pin != nullptr && rows_ref->pin->pieces() == 1;
        }
        request.queries = scan->queries;
        request.n_queries = scan->n_queries;
        request.radius = scan->radius;
        request.device_members = members.get();
        if (scan->list != nullptr) request.members = genie::Span<int32_t>(scan->list->list.members);
        request.threads = engine_options.threads;
        device_pass = [gpu, vectors, request, members, rows_ref, &engine_options](
                          int32_t first_query, int32_t n_queries, const genie::RangePlan& plan,
                          std::vector<genie::RangeCandidate>* out, genie::capi::RangePassRead*) {
          genie::GpuRangeRequest batch = request;
          batch.queries += static_cast<std::size_t>(first_query) * static_cast<std::size_t>(vectors->set.dim);
          batch.n_queries = n_queries;
          return gpu->RangeCandidates(vectors->set, batch, plan, out, engine_options.cancel);
        };
      }
      genie::Span<double> member_distances;
      if (device_pass == nullptr || scan->whole_clusters < 0 || (gpu->parts() > 1 && scan->n_queries == 1))
        GENIE_RETURN_IF_ERROR(distances_for_rings(&member_distances));
      return genie::capi::RangeSearchHandle(set.size(), genie::VectorQueryMetrics(set, scan->queries),
                                            device_pass != nullptr ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU, options,
                                            scan, device_pass, scan_all, results, member_distances);
    }
#endif
    // the CPU reads each cluster's rows contiguously, from a copy in the list's order
    std::shared_ptr<const genie::HostArray<float>> member_rows;  // this search's reference
    if (scan->list != nullptr && scan->candidate_offsets == nullptr)
      GENIE_RETURN_IF_ERROR(ListRows(const_cast<genie_cluster_list*>(scan->list), vectors, -1,
                                     ToEngineOptions(options), &member_rows, nullptr));
    genie::Span<double> member_distances;
    GENIE_RETURN_IF_ERROR(distances_for_rings(&member_distances));
    return genie::capi::RangeSearchHandle(
        set.size(), genie::VectorQueryMetrics(set, scan->queries, member_rows ? member_rows->data() : nullptr),
        device, options, scan, device_pass, scan_all, results, member_distances);
  });
}

}  // extern "C"

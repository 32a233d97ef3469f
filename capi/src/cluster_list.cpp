// The C API of the List of Clusters and of range search (genie_cluster_list_*,
// genie_range_results_free); genie_strings_within and genie_vectors_within
// live beside their sets and meet here.
#include "cluster_list.hpp"
#include "range_group.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "genie/parallel.hpp"

using genie::capi::Guarded;
using genie::capi::ToEngineOptions;

static_assert(GENIE_CLUSTER_CENTRES_SUM == static_cast<int>(genie::ClusterCentres::kSum) &&
                  GENIE_CLUSTER_CENTRES_FARTHEST == static_cast<int>(genie::ClusterCentres::kFarthest),
              "the C API's centre rules are the core's");

namespace genie {
namespace capi {

Status BuildClusterListHandle(const ObjectMetric& metric, int32_t n_objects, const uint8_t* excluded,
                              int32_t cluster_size, int32_t supercluster_clusters,
                              genie_cluster_centres centres, const genie_engine_options* options,
                              genie_cluster_list** out) {
  if (out == nullptr) return Status::InvalidArgument("genie_*_cluster_list: NULL output");
  const EngineOptions engine_options = ToEngineOptions(options);
  auto handle = std::unique_ptr<genie_cluster_list>(new (std::nothrow) genie_cluster_list);
  if (handle == nullptr) return Status::OutOfMemory("out of host memory for a list of clusters");
  GENIE_RETURN_IF_ERROR(BuildClusterList(
      metric, n_objects,
      excluded != nullptr ? Span<uint8_t>(excluded, static_cast<std::size_t>(n_objects)) : Span<uint8_t>(),
      cluster_size, supercluster_clusters, static_cast<ClusterCentres>(centres),
      engine_options.threads, &handle->list,
      engine_options.cancel));
  *out = handle.release();
  return Status::Ok();
}

namespace {

// GENIE_LIST_AUTO's rule (bench/range.md, "The k nearest through the
// list") is timed, not modelled: what the list saves depends on the data
// (the share of the rows it reads), the cores (one query's clusters shared
// by 2 or 16 threads) and the batch (the exact scan reads each row once for
// four queries a pass).  On 2 cores one Fashion-MNIST query took 0.47 of
// the exact scan's time through the list and one of the Gaussian mixture
// 0.38; on the H200 host's 16 cores 0.43 and 1.0; batches through the list
// took 0.8-2.2x the scan's time.  So each list keeps the time a query took
// each way, single queries and batches apart, and takes the faster.
//
// Each way is timed kListKnnSamples times before the two are compared, by
// the least of their last samples (noise only adds time: a mean let one
// slow sample send a connection the slower way for dozens of calls).
//
// A batch answers one query in kListProbeEvery through the list (at least
// one, at most kListProbeQueries) when it times the list: a few per cent
// of a batch whose other queries then go the other way.
constexpr int32_t kListProbeEvery = 16;
constexpr int32_t kListProbeQueries = 8;
// Every this many calls the slower way is timed again (its share of the
// calls: the cost of following a change, say the data's).
constexpr uint32_t kListRemeasureCalls = 64;

// Whether the list's least sample is no more than the exact scan's (both
// timed enough; under times->mutex).
bool ListFaster(const ListKnnTimes& times) {
  auto least = [&times](int way) { return *std::min_element(times.ms[way], times.ms[way] + kListKnnSamples); };
  return least(0) <= least(1);
}

// Whether the next call goes through the list.
bool NextByList(ListKnnTimes* times) {
  std::lock_guard<std::mutex> lock(times->mutex);
  const uint32_t call = ++times->calls;
  for (int way = 0; way < 2; ++way)
    if (times->taken[way] < kListKnnSamples) return way == 0;
  return ListFaster(*times) != (call % kListRemeasureCalls == 0);
}

// Whether the rest of a batch whose first queries went through the list goes the same way.
bool RestByList(ListKnnTimes* times) {
  std::lock_guard<std::mutex> lock(times->mutex);
  if (times->taken[1] < kListKnnSamples) return false;  // the exact scan not timed enough yet
  if (times->taken[0] < kListKnnSamples) return true;
  return ListFaster(*times);
}

void Remember(ListKnnTimes* times, bool by_list, double ms) {
  std::lock_guard<std::mutex> lock(times->mutex);
  const int way = by_list ? 0 : 1;
  times->ms[way][times->taken[way]++ % kListKnnSamples] = ms;
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// part's rows after out's.
void AppendRows(const VectorScanResult& part, VectorScanResult* out) {
  const int64_t base = out->offsets.back();
  out->objects.insert(out->objects.end(), part.objects.begin(), part.objects.end());
  out->distances.insert(out->distances.end(), part.distances.begin(), part.distances.end());
  for (std::size_t q = 1; q < part.offsets.size(); ++q) out->offsets.push_back(base + part.offsets[q]);
}

// Queries a device pass searches at a time (and the CPU plans beside it).
constexpr int32_t kRangeBatchQueries = 512;

// The given candidates' distances, those within the radius, on the CPU.
Status CandidateRange(const QueryMetricFactory& metrics, const RangeRequest& request,
                      const genie_range_scan* scan, const EngineOptions& engine_options, RangeResult* found) {
  const int32_t nq = scan->n_queries;
  if (nq < 0) return Status::InvalidArgument("negative number of queries");
  // the last offset bounds the candidates; CandidateRangeSearch checks every
  // offset against it before reading one
  const int64_t total = scan->candidate_offsets[nq];
  if (total < 0 || (total > 0 && scan->candidates == nullptr)) return Status::InvalidArgument("bad candidate list");
  return CandidateRangeSearch(metrics, request, Span<int64_t>(scan->candidate_offsets, static_cast<std::size_t>(nq) + 1),
                              Span<int32_t>(scan->candidates, static_cast<std::size_t>(total)),
                              engine_options.threads, found, engine_options.cancel);
}

// Every object within the radius, through the scan's list when it has one:
// planned on the CPU and read by the device pass where there is one, else
// on the CPU.
Status ListRange(int32_t n_objects, const QueryMetricFactory& metrics, genie_engine_kind device,
                 const genie_range_scan* scan, const RangeDevicePass& device_pass, const RangeCpuScan& cpu_scan,
                 const RangeRequest& request, const EngineOptions& engine_options, RangeResult* found,
                 genie_engine_kind* ran_on) {
  if (device_pass == nullptr && device == GENIE_ENGINE_GPU)
    return Status::DeviceUnavailable("no usable GPU for this range search");
  if (device != GENIE_ENGINE_CPU && device != GENIE_ENGINE_AUTO && device != GENIE_ENGINE_GPU)
    return Status::InvalidArgument("device must be CPU, GPU or AUTO");
  if (scan->list != nullptr && scan->list->list.n_objects > n_objects)
    return Status::InvalidArgument("the list of clusters is of another set: " +
                                   std::to_string(scan->list->list.n_objects) + " objects, not " +
                                   std::to_string(n_objects));
  // without a list every object is read: as a whole list on the CPU; on
  // the device, past an empty list (the plan's one item a query)
  if (scan->list == nullptr && device_pass == nullptr && cpu_scan != nullptr)
    return cpu_scan(request, engine_options.threads, found, engine_options.cancel);
  ClusterList whole;
  if (scan->list == nullptr && device_pass == nullptr) whole = WholeList(n_objects);
  const ClusterList& list = scan->list != nullptr ? scan->list->list : whole;
  if (device_pass == nullptr)
    return CpuRangeSearch(list, metrics, request, engine_options.threads, found, engine_options.cancel);
  RangeResult read;  // what the plans and passes read
  // The paper's pipeline over batches of queries (section 3.5): CPU threads
  // plan the next batch (its centres' distances, the superclusters and
  // clusters discarded) while the device searches this one.
  const int32_t nq = request.n_queries;
  auto plan_batch = [&](int32_t first, RangePlan* plan) -> Status {
    RangeRequest batch = request;
    batch.n_queries = std::min(kRangeBatchQueries, nq - first);
    const QueryMetricFactory shifted = [&metrics, first](int32_t q) { return metrics(first + q); };
    return PlanRangeSearch(list, shifted, batch, engine_options.threads, plan, engine_options.cancel);
  };
  std::vector<RangeCandidate> candidates;
  bool on_gpu = false;   // whether a GPU read any batch's plan
  bool on_host = false;  // and the host
  RangePlan plan;
  if (nq > 0) GENIE_RETURN_IF_ERROR(plan_batch(0, &plan));
  for (int32_t first = 0; first < nq; first += kRangeBatchQueries) {
    const int32_t next_first = first + kRangeBatchQueries;
    RangePlan next;
    Status planned = Status::Ok();
    JoinedThread planner;  // joined before next and planned go
    // (nothing may leave a thread of its own: a failure, or an exception
    // such as bad_alloc outside ParallelFor's guard, becomes a Status)
    const bool beside = next_first < nq && planner.Start([&] {
      try {
        planned = plan_batch(next_first, &next);
      } catch (const std::bad_alloc&) {
        planned = Status::OutOfMemory("out of host memory planning a range search");
      } catch (...) {
        planned = Status::Internal("planning a range search failed");
      }
    });
    std::vector<RangeCandidate> batch_candidates;
    RangePassRead pass_read;  // every member of the plan's items, unless the pass says otherwise
    for (const RangeItem& item : plan.items) pass_read.computed += item.count;
    const Status searched =
        device_pass(first, std::min(kRangeBatchQueries, nq - first), plan, &batch_candidates, &pass_read);
    planner.Join();
    GENIE_RETURN_IF_ERROR(searched);
    if (next_first < nq && !beside) planned = plan_batch(next_first, &next);
    GENIE_RETURN_IF_ERROR(planned);
    for (RangeCandidate& c : batch_candidates) c.query += first;
    candidates.insert(candidates.end(), batch_candidates.begin(), batch_candidates.end());
    // the centres here, what the pass read there
    read.distances_computed += plan.distances_computed + pass_read.computed;
    on_gpu = on_gpu || pass_read.on_gpu;
    on_host = on_host || pass_read.on_host;
    read.superclusters_discarded += plan.superclusters_discarded;
    read.clusters_discarded += plan.clusters_discarded;
    plan = std::move(next);
  }
  GENIE_RETURN_IF_ERROR(FinishRangeSearch(metrics, request, std::move(candidates), engine_options.threads, found,
                                          engine_options.cancel));
  found->distances_computed += read.distances_computed;
  found->superclusters_discarded = read.superclusters_discarded;
  found->clusters_discarded = read.clusters_discarded;
  // (a search that read nothing anywhere: the device asked for)
  *ran_on = on_gpu || !on_host ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU;
  return Status::Ok();
}

}  // namespace

Status RangeSearchHandle(int32_t n_objects, const QueryMetricFactory& metrics,
                         genie_engine_kind device, const genie_engine_options* options,
                         const genie_range_scan* scan, const RangeDevicePass& device_pass,
                         const RangeCpuScan& cpu_scan, genie_range_results** out,
                         Span<double> member_distances) {
  const EngineOptions engine_options = ToEngineOptions(options);
  RangeRequest request;
  if (scan->list != nullptr) request.member_distances = member_distances;
  request.n_queries = scan->n_queries;
  request.radius = scan->radius;
  request.n_objects = n_objects;
  if (scan->excluded != nullptr)
    request.excluded = Span<uint8_t>(scan->excluded, static_cast<std::size_t>(n_objects));
  RangeResult found;
  genie_engine_kind ran_on = GENIE_ENGINE_CPU;
  GENIE_RETURN_IF_ERROR(scan->candidate_offsets != nullptr
                            ? CandidateRange(metrics, request, scan, engine_options, &found)
                            : ListRange(n_objects, metrics, device, scan, device_pass, cpu_scan, request,
                                        engine_options, &found, &ran_on));
  genie_range_results* res = nullptr;
  GENIE_RETURN_IF_ERROR(CopyScanRows(found, ran_on, genie_range_results_free, &res));
  res->distances_computed = found.distances_computed;
  res->superclusters_discarded = found.superclusters_discarded;
  res->clusters_discarded = found.clusters_discarded;
  *out = res;
  return Status::Ok();
}

Status ListKnn(genie_cluster_list* list, const VectorSet& set, const float* member_rows,
               const genie_vector_scan* scan, const VectorScanRequest& request, const EngineOptions& options,
               VectorScanResult* found, int32_t* listed, int64_t* list_distances) {
  *listed = 0;
  *list_distances = 0;
  const int32_t nq = request.n_queries;
  // queries [first, first + count) through the list, or by the exact scan
  auto part = [&](int32_t first, int32_t count) {
    VectorScanRequest r = request;
    r.queries += static_cast<std::size_t>(first) * static_cast<std::size_t>(set.dim);
    r.n_queries = count;
    return r;
  };
  auto through_list = [&](int32_t first, int32_t count, VectorScanResult* out) -> Status {
    int64_t computed = 0;
    GENIE_RETURN_IF_ERROR(CpuVectorListKnn(set, list->list, member_rows, part(first, count), options.threads, out,
                                           &computed, options.cancel));
    *listed += count;
    *list_distances += computed;
    return Status::Ok();
  };
  if (scan->list_use == GENIE_LIST_ALWAYS || nq == 0) return through_list(0, nq, found);
  // GENIE_LIST_AUTO: the way that took less a query lately
  ListKnnTimes* times = &list->knn_times[nq == 1 ? 0 : 1];
  auto timed = [&](int32_t first, int32_t count, bool by_list, VectorScanResult* out) -> Status {
    const double t0 = NowMs();
    GENIE_RETURN_IF_ERROR(by_list ? through_list(first, count, out)
                                  : CpuVectorScan(set, part(first, count), options.threads, out, options.cancel));
    Remember(times, by_list, (NowMs() - t0) / count);
    return Status::Ok();
  };
  if (!NextByList(times)) return timed(0, nq, false, found);
  // through the list: a batch its first queries, then the rest the way now faster
  const int32_t probe = nq == 1 ? 1 : std::max(1, std::min(nq / kListProbeEvery, kListProbeQueries));
  VectorScanResult head, rest;
  GENIE_RETURN_IF_ERROR(timed(0, probe, true, &head));
  if (probe < nq) GENIE_RETURN_IF_ERROR(timed(probe, nq - probe, RestByList(times), &rest));
  AppendRows(rest, &head);
  *found = std::move(head);
  return Status::Ok();
}

}  // namespace capi
}  // namespace genie

extern "C" {

void genie_cluster_list_free(genie_cluster_list* list) { delete list; }

size_t genie_cluster_list_stored_size(const genie_cluster_list* list) {
  return list == nullptr ? 0 : genie::SerializeClusterList(list->list).size();
}

void genie_cluster_list_store(const genie_cluster_list* list, void* out) {
  if (list == nullptr || out == nullptr) return;
  const std::vector<uint8_t> bytes = genie::SerializeClusterList(list->list);
  std::memcpy(out, bytes.data(), bytes.size());
}

genie_status genie_cluster_list_load(const void* data, size_t size, genie_cluster_list** list,
                                     genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (list == nullptr || (data == nullptr && size > 0))
      return genie::Status::InvalidArgument("genie_cluster_list_load: NULL argument");
    auto handle = std::unique_ptr<genie_cluster_list>(new (std::nothrow) genie_cluster_list);
    if (handle == nullptr) return genie::Status::OutOfMemory("out of host memory for a list of clusters");
    GENIE_RETURN_IF_ERROR(
        genie::DeserializeClusterList(static_cast<const uint8_t*>(data), size, &handle->list));
    *list = handle.release();
    return genie::Status::Ok();
  });
}

int32_t genie_cluster_list_objects(const genie_cluster_list* list) {
  return list == nullptr ? 0 : list->list.n_objects;
}

int32_t genie_cluster_list_clusters(const genie_cluster_list* list) {
  return list == nullptr ? 0 : static_cast<int32_t>(list->list.clusters.size());
}

int32_t genie_cluster_list_superclusters(const genie_cluster_list* list) {
  return list == nullptr ? 0 : static_cast<int32_t>(list->list.superclusters.size());
}

size_t genie_cluster_list_memory_bytes(const genie_cluster_list* list) {
  if (list == nullptr) return 0;
  std::size_t rows = 0;
  {
    std::lock_guard<std::mutex> lock(const_cast<genie_cluster_list*>(list)->rows_mutex);
    if (list->member_rows != nullptr) rows = list->member_rows->capacity() * sizeof(float);
    if (list->member_distances != nullptr) rows += list->member_distances->capacity() * sizeof(double);
  }
#ifdef GENIE_WITH_CUDA
  rows += list->shard_bytes.load();  // a sharded group's views (range_group.hpp)
#endif
  return sizeof(*list) + list->list.members.capacity() * sizeof(int32_t) + rows +
         list->list.clusters.capacity() * sizeof(genie::Cluster) +
         list->list.superclusters.capacity() * sizeof(genie::Supercluster);
}

void genie_range_results_free(genie_range_results* results) {
  if (results == nullptr) return;
  std::free(results->query_offsets);
  std::free(results->objects);
  std::free(results->distances);
  std::free(results);
}

}  // extern "C"

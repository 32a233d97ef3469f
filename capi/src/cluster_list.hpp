// The C API's List of Clusters (capi-internal): the handle, and the build
// and range search that genie_strings_* and genie_vectors_* share once they
// have their metric.
#pragma once
#include "capi_util.hpp"
#include "genie/cluster_list.hpp"
#include "genie/genie.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_vector_scan.hpp"
#endif

namespace genie {
namespace capi {

// The ms a kNN query took through a list and by the exact scan, the last
// kListKnnSamples of each way (0: none yet), and the calls so far.
constexpr uint64_t kListKnnSamples = 3;
struct ListKnnTimes {
  std::mutex mutex;
  double ms[2][kListKnnSamples] = {};  // [0]: through the list, [1]: the exact scan
  uint64_t taken[2] = {0, 0};          // samples taken each way, in all
  uint32_t calls = 0;
};

}  // namespace capi
}  // namespace genie

namespace genie {
namespace capi {
struct RangeShardMembers;  // range_group.hpp
}  // namespace capi
}  // namespace genie

struct genie_cluster_list {
  genie::ClusterList list;
  // A vector set's rows in the list's member order (genie::MemberRows),
  // made by the first CPU search of that set; rows_of says which set.  A
  // search holds its own reference, so that another one replacing them (a
  // search of another set) frees nothing it reads.
  std::mutex rows_mutex;
  uint64_t rows_of = 0;  // a genie_vectors' generation (0: none)
  std::shared_ptr<const genie::HostArray<float>> member_rows;
  // Each member's distance to its cluster's centre (genie::MemberDistances)
  // in that set, made beside member_rows by the first range search of a
  // set (distances_of: which one), under rows_mutex: range searches then
  // read only each cluster's ring (RangeRequest::member_distances).
  uint64_t distances_of = 0;
  std::shared_ptr<const std::vector<double>> member_distances;
  // GENIE_LIST_AUTO's measures (ListKnn): single queries, then batches
  genie::capi::ListKnnTimes knn_times[2];
#ifdef GENIE_WITH_CUDA
  // member_rows page-locked for streamed GPU searches (made by the first;
  // declared after the rows, so freed before them); under rows_mutex
  std::shared_ptr<genie::GpuHostRegistration> rows_pin;
  bool rows_pin_refused = false;  // these rows: gathered on the host, not locked again each search
  // the members' copy on each GPU (by CUDA ordinal), made on first use;
  // shared as the rows
  std::mutex gpu_mutex;
  std::vector<std::shared_ptr<genie::GpuClusterMembers>> gpu;
  // A streamed shard's rows of its members, in their order, page-locked
  // (as member_rows and rows_pin for one GPU): its runs then go by DMA.
  struct ShardRows {
    genie::HostArray<float> values;
    std::unique_ptr<genie::GpuHostRegistration> pin;  // declared after values: unlocked first
  };
  // a sharded device group's views of the members (range_group.hpp), one
  // a shard: with their copy on the shard's GPU when its rows are resident,
  // else with their rows when small enough to lock; made on first use,
  // under gpu_mutex, for one set and one shard a GPU (a group remade
  // replaces its GPUs' shards)
  struct Shard {
    uint64_t of = 0;  // the generation of the vector set (a genie_vectors) the rows are of
    int32_t first = 0;
    int32_t end = 0;
    int32_t device = -1;
    std::shared_ptr<const genie::capi::RangeShardMembers> members;
    std::shared_ptr<genie::GpuClusterMembers> gpu_members;
    std::shared_ptr<const ShardRows> rows;
    bool rows_refused = false;  // the host or the driver would not hold them locked
  };
  std::vector<Shard> shards;
  std::atomic<std::size_t> shard_bytes{0};  // their host bytes, read without gpu_mutex
#endif
};

namespace genie {
namespace capi {

// genie_*_cluster_list once the set's metric is made.
Status BuildClusterListHandle(const ObjectMetric& metric, int32_t n_objects, const uint8_t* excluded,
                              int32_t cluster_size, int32_t supercluster_clusters,
                              genie_cluster_centres centres, const genie_engine_options* options,
                              genie_cluster_list** out);

// A device pass over a plan's members (GpuVectorSet::RangeCandidates with
// its set, queries and the list's members bound; for strings, which no list
// orders by length, GpuStringSet::Within over each query's length window),
// or empty without one: the plan of queries [first_query, first_query +
// n_queries), its items' queries counted from first_query, the candidates'
// from 0, and what it read (*read).
//
// read->computed comes set to the plan's items' members, the distances a
// pass that reads them all computes; a pass that reads others sets it.
// Where the plan was read, so that the results name the engine that
// computed them: on_gpu comes true and on_host false (one GPU's pass); a
// pass that read none of it on a GPU sets on_gpu false (a sharded group's
// whose every GPU failed), and one that read some of it on the host sets
// on_host (a lost shard, the strings too long for the device's pattern).
// An empty plan is read nowhere: both false.
struct RangePassRead {
  int64_t computed = 0;
  bool on_gpu = true;
  bool on_host = false;
};
using RangeDevicePass = std::function<Status(int32_t first_query, int32_t n_queries, const RangePlan& plan,
                                             std::vector<RangeCandidate>* out, RangePassRead* read)>;

// A kind's own search of every object on the CPU (vectors:
// CpuVectorRangeScan, blocks of queries against tiles of rows), or empty:
// CpuRangeSearch over the whole list, query by query.
using RangeCpuScan = std::function<Status(const RangeRequest& request, int32_t threads, RangeResult* out,
                                          const CancelCheck& cancel)>;

// genie_*_within once the queries' metrics are made: with candidates, their
// distances on the CPU (whatever the device); else checks the list against
// the set's n_objects; with a device pass, plans on the CPU, runs the pass
// and finishes on the CPU (device GPU in the results, CPU when no batch's
// pass read on a GPU and some read on the host), else searches on the CPU
// (device must then be CPU or AUTO).  member_distances: empty, or the
// list's MemberDistances (RangeRequest::member_distances).
Status RangeSearchHandle(int32_t n_objects, const QueryMetricFactory& metrics,
                         genie_engine_kind device, const genie_engine_options* options,
                         const genie_range_scan* scan, const RangeDevicePass& device_pass,
                         const RangeCpuScan& cpu_scan, genie_range_results** out,
                         Span<double> member_distances = Span<double>());

// genie_vectors_scan with a list whose use (scan->list_use) and device
// call for it on the CPU engine: through the list or, when GENIE_LIST_AUTO
// finds the exact scan faster, by the exact scan (*listed: the queries
// that went through the list).  member_rows: the set's rows in the list's
// order, or NULL.  GENIE_LIST_AUTO times both ways (see cluster_list.cpp).
Status ListKnn(genie_cluster_list* list, const VectorSet& set, const float* member_rows,
               const genie_vector_scan* scan, const VectorScanRequest& request, const EngineOptions& options,
               VectorScanResult* found, int32_t* listed, int64_t* list_distances);

}  // namespace capi
}  // namespace genie

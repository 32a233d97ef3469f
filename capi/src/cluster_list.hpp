// The C API's List of Clusters (capi-internal): the handle, and the build
// and range search that genie_strings_* and genie_vectors_* share once they
// have their metric.
#pragma once
#include "capi_util.hpp"
#include "genie/cluster_list.hpp"
#include "genie/genie.h"

struct genie_cluster_list {
  genie::ClusterList list;
};

namespace genie {
namespace capi {

// genie_*_cluster_list once the set's metric is made.
Status BuildClusterListHandle(const ObjectMetric& metric, int32_t n_objects, const uint8_t* excluded,
                              int32_t cluster_size, int32_t supercluster_clusters,
                              const genie_engine_options* options, genie_cluster_list** out);

// genie_*_within once the queries' metrics are made: checks the device and
// the list against the set's n_objects, searches on the CPU.
Status RangeSearchHandle(int32_t n_objects, const QueryMetricFactory& metrics,
                         genie_engine_kind device, const genie_engine_options* options,
                         const genie_range_scan* scan, genie_range_results** out);

}  // namespace capi
}  // namespace genie

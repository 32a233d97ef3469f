// Range search of vectors on the device (range_search.cu), internal to
// gpu/src: what GpuVectorSet::RangeCandidates runs on its resident rows.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/gpu_vector_scan.hpp"

namespace genie {
namespace gpu {

// The items of plan over rows (row-major, dimp floats a row, dim used; a
// device pointer) against queries (host, dim floats each): the members
// within radius with their L2Distance (see range_search.cu).  The caller
// holds the device current.
Status RangeOnDevice(const float* rows, int32_t dimp, int32_t dim, const float* queries, int32_t n_queries,
                     double radius, const RangePlan& plan, const int32_t* members,
                     std::vector<RangeCandidate>* out, const CancelCheck& cancel);

Status CreateClusterMembers(Span<int32_t> members, int32_t device_ordinal,
                            std::unique_ptr<GpuClusterMembers>* out);

}  // namespace gpu
}  // namespace genie

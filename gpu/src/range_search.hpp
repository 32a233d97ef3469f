// Range search of vectors on the device (range_search.cu), internal to
// gpu/src: what GpuVectorSet::RangeCandidates runs on its rows, resident or
// streamed.
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

class PinnedPool;

// What a streamed range search reads its rows from, and where it puts them.
struct StreamedRows {
  const VectorSet* set = nullptr;  // the rows by id
  bool set_pinned = false;         // set's rows page-locked in place
  Span<int32_t> members;           // the list's, when an item is listed
  // the set's rows in the list's order (dim floats each), or NULL; copied
  // from directly only when page-locked
  const float* member_rows = nullptr;
  bool member_rows_pinned = false;
  bool member_rows_one_piece = false;  // page-locked in one registration: a DMA may read any run
  float* slots = nullptr;          // device: two slots of slot_rows x dimp floats
  int32_t slot_rows = 0;
  int32_t dimp = 0;
  int32_t dim = 0;
  int32_t threads = 0;             // host threads that gather rows (0: every core)
  PinnedPool* pinned = nullptr;    // the gathered rows' staging
};

// The multi-pipeline of seed 004 (section 3.5) for a set that is not
// resident: the rows the plan's items read, each once, in runs of the
// list's order (then the objects past it), go through the two slots, one
// stream a slot; while the device copies and searches one, the host
// collects the other's answers and prepares its next rows.  A segment of a
// few runs is copied run by run straight from page-locked rows (one DMA
// each, as the paper copies a supercluster); one of many runs of
// page-locked rows is gathered by the device itself, reading them over the
// bus (GatherRuns); one with pageable rows is gathered on the host into
// pinned staging and copied once.  The same answers as RangeOnDevice.
Status RangeStreamed(const StreamedRows& rows, const float* queries, int32_t n_queries, double radius,
                     const RangePlan& plan, std::vector<RangeCandidate>* out, const CancelCheck& cancel);

Status CreateClusterMembers(Span<int32_t> members, int32_t device_ordinal,
                            std::unique_ptr<GpuClusterMembers>* out);

}  // namespace gpu
}  // namespace genie

// The exact vector scan (genie/vectors.hpp) on the GPU: plain C++, no CUDA
// types.  A GpuVectorSet is the device copy of a VectorSet, made once per
// index version and kept with it; Scan answers a batch of queries with the
// very rows CpuVectorScan gives (same rows, same order, same float64
// distances).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/cluster_list.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"
#include "genie/vectors.hpp"

namespace genie {

// A List of Clusters' members (genie/cluster_list.hpp) on one device, for
// range searches of the sets whose list it is; made once per list.
class GpuClusterMembers {
 public:
  static Status Create(Span<int32_t> members, int32_t device_ordinal,
                       std::unique_ptr<GpuClusterMembers>* out);
  virtual ~GpuClusterMembers() = default;
  virtual int32_t device() const = 0;
  virtual const int32_t* data() const = 0;  // a device pointer
  virtual std::size_t device_bytes() const = 0;
};

// A range search's queries and list, for GpuVectorSet::RangeCandidates.
struct GpuRangeRequest {
  const float* queries = nullptr;  // n_queries x dim floats, host memory
  int32_t n_queries = 0;
  double radius = 0;
  // The list's members, when an item is listed: on this device for a
  // resident set, on the host for a streamed one.
  const GpuClusterMembers* device_members = nullptr;
  Span<int32_t> members;
  // A streamed set's rows in the list's order (dim floats each), or NULL:
  // runs of members are then gathered from it a run at a time, not row by
  // row by id; and copied from it directly when member_rows_pinned (host
  // memory page-locked by a GpuHostRegistration).
  const float* member_rows = nullptr;
  bool member_rows_pinned = false;
  // and in one driver registration (GpuHostRegistration::pieces() == 1):
  // runs are then copied by DMA, which cannot cross two registrations; rows
  // locked in pieces are gathered by the device, reading them over the bus
  bool member_rows_one_piece = false;
  int32_t threads = 0;  // host threads that gather a streamed set's rows (0: every core)
};

// Host memory page-locked in place while this lives (cudaHostRegister), so
// that the device copies from it by DMA, without a pass through staging,
// and (where the device reads registered memory at its host address) a
// kernel reads it straight over the bus.  The memory must outlive it.
// Registering costs time in proportion to the bytes (pages locked one by
// one) and one driver call cannot be cancelled: memory beyond
// kHostRegistrationPieceBytes is registered in pieces of at most that,
// with cancel polled between them (a piece is well within a cancel's 100
// ms).  The set's own page-locking (GpuVectorSet) and the shards' rows
// lock one piece at most.
constexpr std::size_t kHostRegistrationPieceBytes = std::size_t{256} << 20;
// What the GpuHostRegistrations of this process may lock in all: a quarter
// of the host's physical memory, or of the control group's limit where
// that is lower (page-locked memory cannot be paged out, and the host's
// other work needs the rest).
std::size_t PageLockableBytes();
class GpuHostRegistration {
 public:
  // In device_ordinal's context.  DeviceError when the driver refuses or
  // the process would lock more than PageLockableBytes() (the memory then
  // stays pageable), Cancelled when cancel asked between two pieces
  // (nothing stays registered in either case).
  static Status Create(const void* data, std::size_t bytes, int32_t device_ordinal,
                       std::unique_ptr<GpuHostRegistration>* out, const CancelCheck& cancel = {});
  virtual ~GpuHostRegistration() = default;
  // the driver's registrations it holds (1 for at most kHostRegistrationPieceBytes)
  virtual std::size_t pieces() const = 0;
};

class GpuVectorSet {
 public:
  // Copies set to device device_ordinal.  memory_budget_bytes bounds the
  // device memory of the copy and a scan's buffers (0: most of the free
  // memory); a set beyond it stays on the host and every scan streams it
  // through the device in parts (multiple loading).  Errors:
  // DeviceUnavailable (no usable GPU), DeviceOutOfMemory, DeviceError.
  static Status Create(const VectorSet& set, int32_t device_ordinal, uint64_t memory_budget_bytes,
                       std::unique_ptr<GpuVectorSet>* out);
  virtual ~GpuVectorSet() = default;

  // The scan of request over this copy of set (the VectorSet it was made
  // from, still alive).  Per group of queries and part of the vectors: a
  // float32 pass writes an upper bound on every squared distance (the
  // expanded form plus its error bound; for more than 8 queries of values
  // 0 or within [2^-32, 2^32], products of values rounded to TF32 on the
  // tensor cores), a radix select finds each
  // query's k-th, the vectors whose lower bound is within it are gathered
  // and their L2Distance computed on the device, to the bit as the host
  // computes it; the host keeps the best k by (distance, id).
  // cancel is polled between groups and parts.  Scans may run
  // concurrently from several threads.
  virtual Status Scan(const VectorSet& set, const VectorScanRequest& request, VectorScanResult* out,
                      const CancelCheck& cancel = CancelCheck()) = 0;

  virtual std::size_t device_bytes() const = 0;
  // Parts a scan streams the set in (1 when the set is resident).
  virtual int32_t parts() const = 0;

  // Range search's device pass (genie/cluster_list.hpp): for each item of
  // plan (the CPU's discarding done), every member it names is read by a
  // warp in a float32 pass with the CPU's proven bound, and those that may
  // be within radius get their L2Distance on the device, to the bit; the
  // ones within radius are appended to out with it (excluded ones too: the
  // caller drops them).  set: the VectorSet this copy was made from.  A
  // resident set reads the list's members on the device; a streamed one
  // (parts() > 1) copies the rows the items read, each once, through two
  // slots of its part buffer on two streams, gathered on the host while the
  // device searches the slot before (the paper's multi-pipeline).  cancel
  // is polled between launches.
  virtual Status RangeCandidates(const VectorSet& set, const GpuRangeRequest& request, const RangePlan& plan,
                                 std::vector<RangeCandidate>* out, const CancelCheck& cancel = CancelCheck()) = 0;
};

// For tests of the exact scan's premise: the float32 upper bounds U that a
// scan's first pass computes for every (query, vector) pair (row-major,
// n_queries x set.size()), and the error bound e of each (U = s32 + e, and
// |s32 - s| <= e must hold for the true squared distance s).  tf32
// lets a group of more than 8 queries of values that allow it take the
// tensor cores' tiles, as scans do (the queries' range read from the
// device, as for many queries); tf32 in the answer says whether it
// did.  warpgroup lets a group of more than 64 take Hopper's warpgroup
// tiles on a device of compute capability 9.0 (else the warp tiles, as on
// other chips); warpgroup in the answer says whether it did.  One group,
// no excluded vectors, synchronous.
struct GpuVectorBounds {
  std::vector<float> upper;
  std::vector<float> error;
  bool tf32 = false;
  bool warpgroup = false;
  // the queries' |q|^2 and |q| as the device computed them (LaunchNorms),
  // and whether it found a value outside the tensor cores' range
  std::vector<float> query_squared, query_length;
  bool query_outside = false;
};
Status GpuVectorUpperBounds(const VectorSet& set, const float* queries, int32_t n_queries, int32_t device_ordinal,
                            bool tf32, GpuVectorBounds* out, bool warpgroup = true);

}  // namespace genie

// The exact Hamming scan (genie/codes.hpp) on the GPU: plain C++, no CUDA
// types.  A GpuCodeSet is the device copy of a CodeSet, made once per index
// version and kept with it; Scan answers a batch of queries with the very
// rows CpuCodeScan gives (same rows, same order, same distances).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "genie/cancel.hpp"
#include "genie/codes.hpp"
#include "genie/status.hpp"

namespace genie {

class GpuCodeSet {
 public:
  // Copies set to device device_ordinal.  memory_budget_bytes bounds the
  // copy and a scan's buffers (0: most of the free memory).  The codes stay
  // resident: a set beyond the budget is DeviceOutOfMemory (the callers'
  // auto mode then scans on the CPU).  Errors: DeviceUnavailable,
  // DeviceOutOfMemory, DeviceError.
  static Status Create(const CodeSet& set, int32_t device_ordinal, uint64_t memory_budget_bytes,
                       std::unique_ptr<GpuCodeSet>* out);
  virtual ~GpuCodeSet() = default;

  // The scan of request over this copy of set (the CodeSet it was made
  // from, still alive).  Per group of queries: one kernel writes every
  // (query, code) distance and each query's histogram of distances, a
  // second takes each query's k-th distance from its histogram and gathers
  // its rows in object id order (the ties at the k-th distance by a block
  // scan, so the first ones by id); the host orders them by distance.
  // cancel is polled between groups.  Scans may run concurrently.
  virtual Status Scan(const CodeSet& set, const CodeScanRequest& request, CodeScanResult* out,
                      const CancelCheck& cancel = CancelCheck()) = 0;

  virtual std::size_t device_bytes() const = 0;
};

}  // namespace genie

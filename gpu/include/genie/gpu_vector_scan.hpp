// The exact vector scan (genie/vectors.hpp) on the GPU: plain C++, no CUDA
// types.  A GpuVectorSet is the device copy of a VectorSet, made once per
// index version and kept with it; Scan answers a batch of queries with the
// very rows CpuVectorScan gives (same rows, same order, same float64
// distances).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "genie/cancel.hpp"
#include "genie/status.hpp"
#include "genie/vectors.hpp"

namespace genie {

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
  // tiled float32 kernel writes an upper bound on every squared distance
  // (the expanded form plus its error bound), a radix select finds each
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
};

}  // namespace genie

// The string scan (genie/string_scan.hpp) on the GPU: plain C++, no CUDA
// types.  A GpuStringSet is the device copy of a StringSet, made once per
// index version and kept with it; Scan answers a batch of queries with the
// very results CpuStringScan gives (same rows, same order).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/cluster_list.hpp"
#include "genie/status.hpp"
#include "genie/string_scan.hpp"

namespace genie {

class GpuStringSet {
 public:
  // Copies set to device device_ordinal.  Errors: DeviceUnavailable (no
  // usable GPU), DeviceOutOfMemory, DeviceError.
  static Status Create(const StringSet& set, int32_t device_ordinal,
                       std::unique_ptr<GpuStringSet>* out);
  virtual ~GpuStringSet() = default;

  // The scan of request over this copy of set (the StringSet it was made
  // from, still alive).  One thread block per query in a large batch: the
  // length order and the shrinking k-th distance (a histogram of the
  // distances found so far) in a first pass, then the rows in (distance,
  // length, id) order in a second.  A batch too small to fill the device
  // splits each query over several blocks that share the k-th distance.
  // Queries longer than kernel::kPatternMaxLength code points, and the rare
  // query whose k-th distance exceeds the histogram (1022), are answered by
  // CpuStringScan on `threads` host threads.  cancel is polled between
  // groups of queries.  Scans may run concurrently from several threads.
  virtual Status Scan(const StringSet& set, const StringScanRequest& request, int32_t threads,
                      StringScanResult* out, const CancelCheck& cancel = CancelCheck()) = 0;

  // The range search of queries over this copy of set: every string whose
  // edit distance to a query is at most radius, not excluded (by id; empty:
  // none), as RangeCandidates (query numbered in queries, object id, its
  // distance).  The device reads each query's length window whole (strings
  // of length within radius of the query's), in chunks of one length, a
  // block a chunk, with the query's pattern made once on the device.  A
  // query longer than kernel::kPatternMaxLength code points is not searched
  // but listed in *host_queries, for the caller's CPU engine.  *computed:
  // the pairs of query and string in the windows searched (excluded strings
  // included).  cancel is polled between launches, each a bounded amount
  // of work.
  virtual Status Within(const StringSet& set, const CodePointStrings& queries, double radius,
                        Span<uint8_t> excluded, std::vector<RangeCandidate>* out,
                        std::vector<int32_t>* host_queries, int64_t* computed,
                        const CancelCheck& cancel = CancelCheck()) = 0;

  virtual std::size_t device_bytes() const = 0;
};

}  // namespace genie

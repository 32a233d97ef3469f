// The device copy of a StringSet as the string kernels read it (internal to
// gpu/src: string_scan.cu's k-nearest scan, string_range.cu's range search).
//
// The strings are stored by length bucket, in the set's (length, id) order,
// each bucket transposed: code point j of the i-th string of bucket L is at
// cps[bucket_cp[L] + j * count_L + i], so the threads of a warp, which take
// consecutive strings of a bucket, read consecutive words.
#pragma once
#include <cstdint>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/cluster_list.hpp"
#include "genie/myers_pattern.hpp"
#include "genie/sequence.hpp"
#include "genie/status.hpp"
#include "genie/string_scan.hpp"

namespace genie {
namespace gpu {

struct DeviceStringSet {
  const uint32_t* cps;
  const int64_t* bucket_begin;  // position of bucket L's first string in the order
  const int64_t* bucket_cp;     // its first code point
  int32_t max_length;
};

// The edit distance of the pattern to the i-th string of bucket L (count
// strings), or a value above cap once it cannot be within cap.
__device__ __forceinline__ int32_t DistanceAt(const kernel::MyersPattern& p, const DeviceStringSet& set,
                                              int32_t L, int64_t count, int64_t i, int32_t cap) {
  const uint32_t* base = set.cps + set.bucket_cp[L] + i;
  return kernel::PatternDistance(
      p, [base, count](int32_t j) { return base[static_cast<int64_t>(j) * count]; }, L, cap);
}

// The range search of queries over the device copy dset of set (see
// GpuStringSet::Within; excluded: by position in the set's order, on the
// device, or nullptr).  The caller holds the device current.
Status StringRangeOnDevice(const DeviceStringSet& dset, const StringSet& set, const uint8_t* excluded,
                           const CodePointStrings& queries, double radius, std::vector<RangeCandidate>* out,
                           std::vector<int32_t>* host_queries, int64_t* computed, const CancelCheck& cancel);

}  // namespace gpu
}  // namespace genie

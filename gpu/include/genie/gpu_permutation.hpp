// The permutation index's selection (genie/permutation.hpp) on the GPU:
// plain C++, no CUDA types.  A GpuPermutationRows is the device copy of an
// index version's rows, made once and kept with them; Select gives the very
// lists CpuPermutationSelect gives (same objects, ascending by id).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "genie/cancel.hpp"
#include "genie/permutation.hpp"
#include "genie/sequence.hpp"
#include "genie/vectors.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"

namespace genie {

class GpuPermutationRows {
 public:
  // Copies rows to device device_ordinal.  Errors: DeviceUnavailable,
  // DeviceOutOfMemory, DeviceError.
  static Status Create(const PermutationRows& rows, int32_t device_ordinal,
                       std::unique_ptr<GpuPermutationRows>* out);
  virtual ~GpuPermutationRows() = default;

  // Per group of queries (as many as memory_budget_bytes, 0: 256 MB, holds
  // footrules for): one kernel writes each (query, object) footrule and
  // counts them in the query's histogram, a block per query then walks its
  // footrules in id order and keeps those below the query's cut and the
  // first ones at it (block scans).  cancel is polled between groups.
  virtual Status Select(const PermutationRows& queries, Span<uint8_t> excluded, int32_t candidates,
                        uint64_t memory_budget_bytes, PermutationCandidates* out,
                        const CancelCheck& cancel = CancelCheck()) = 0;

  virtual int32_t device() const = 0;
  virtual std::size_t device_bytes() const = 0;
};

// The rows of every object against the permutants (as VectorPermutations
// and StringPermutations, the same bytes) on device device_ordinal: one
// thread per (object, permutant) distance, the objects in pieces that
// fit memory_budget_bytes (0: 256 MB), then one thread per object ranks its
// m distances.  Vectors sum their squared differences in double in element
// order with every operation rounded on its own (no fused multiply-add),
// as the CPU does; strings take the engines' one Levenshtein
// (genie/levenshtein_kernel.hpp).  cancel is polled between pieces.
Status GpuVectorPermutations(const VectorSet& objects, const VectorSet& permutants, int32_t device_ordinal,
                             uint64_t memory_budget_bytes, const PermutationRows& rows,
                             const CancelCheck& cancel = CancelCheck());
Status GpuStringPermutations(const CodePointStrings& objects, const CodePointStrings& permutants,
                             int32_t device_ordinal, uint64_t memory_budget_bytes, const PermutationRows& rows,
                             const CancelCheck& cancel = CancelCheck());

}  // namespace genie

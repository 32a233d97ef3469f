// The c-PQ Gate's device code shared by the faithful and the tiled matcher
// (internal to gpu/src; included only by their .cu files): the hash table
// with the modified Robin Hood scheme and the AuditThreshold advance.
// See the design notes in gpu_engine.cpp for the invariants.
#pragma once
#include "device_util.cuh"

namespace genie {
namespace gpu {
namespace {

__device__ __forceinline__ uint32_t HashKey(uint32_t k) {
  k ^= k >> 16;
  k *= 0x85EBCA6Bu;
  k ^= k >> 13;
  k *= 0xC2B2AE35u;
  k ^= k >> 16;
  return k;
}

__device__ __forceinline__ unsigned long long PackEntry(uint32_t key, uint32_t value) {
  return (static_cast<unsigned long long>(value) << 32) | key;
}

// The hash table with the modified Robin Hood scheme (paper III-C2).  The
// age of an entry is its probe distance from its home slot.  Probing from the
// key's home slot, an insertion takes a slot that is empty, holds the same
// key (keeping the larger count), or holds an entry whose count is below
// AT - 1: such an entry can no longer be a top-k candidate (Theorem 3.1), so
// it is overwritten regardless of its age.  Otherwise, as in Robin Hood
// hashing, an entry younger than the one being inserted is evicted and its
// insertion continues from the next slot.  Lock-free: every change is one
// 64-bit CAS; a lost race re-examines the slot.  A key may end up twice (a
// racing eviction, or an update finding a stale slot before the key's older
// entry); the final selection deduplicates.  Returns false when no slot was
// found within `capacity` probes: the caller flags the query and the host
// recomputes it exactly.
__device__ bool HtInsert(unsigned long long* table, uint32_t mask, uint32_t key, uint32_t value,
                         const int32_t* at) {
  uint32_t slot = HashKey(key) & mask;
  uint32_t dist = 0;
  for (uint32_t probes = 0; probes <= mask;) {
    const unsigned long long entry = LoadVolatile(table + slot);
    const uint32_t entry_key = static_cast<uint32_t>(entry);
    const uint32_t entry_value = static_cast<uint32_t>(entry >> 32);
    bool take = false, evict = false;
    uint32_t entry_dist = 0;
    if (entry_key == kEmptyKey) {
      take = true;
    } else if (entry_key == key) {
      if (entry_value >= value) return true;
      take = true;
    } else {
      const int32_t threshold = LoadVolatile(at) - 1;
      if (static_cast<int64_t>(entry_value) < threshold) {
        take = true;  // expired: below AT - 1
      } else {
        entry_dist = (slot - HashKey(entry_key)) & mask;
        evict = entry_dist < dist;
      }
    }
    if (take || evict) {
      const unsigned long long prev = atomicCAS(table + slot, entry, PackEntry(key, value));
      if (prev != entry) continue;  // lost a race: look at this slot again
      if (take) return true;
      // Carry the evicted (younger) entry on, unless it has expired meanwhile.
      if (static_cast<int64_t>(entry_value) < LoadVolatile(at) - 1) return true;
      key = entry_key;
      value = entry_value;
      dist = entry_dist;
    }
    slot = (slot + 1) & mask;
    ++dist;
    ++probes;
  }
  return false;
}

// Algorithm 1, lines 6-7: while ZA[AT] >= k, AT += 1.  atomicMax keeps AT
// monotone under concurrent advances.
__device__ __forceinline__ void AdvanceAt(int32_t* at, const int32_t* za, int32_t max_score,
                                          int32_t k) {
  int32_t a = LoadVolatile(at);
  while (a <= max_score && LoadVolatile(za + a) >= k) {
    atomicMax(at, a + 1);
    ++a;
  }
}

}  // namespace
}  // namespace gpu
}  // namespace genie

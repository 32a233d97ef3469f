// The parallel LSD radix sort of 64-bit keys (genie/radix_sort.hpp).
#include "genie/radix_sort.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "genie/parallel.hpp"

namespace genie {

namespace {

constexpr int kDigitBits = 16;
constexpr std::size_t kDigits = std::size_t{1} << kDigitBits;
constexpr uint64_t kSignBit = uint64_t{1} << 63;
// Below this many keys a share is not worth a thread.
constexpr std::size_t kMinShare = 1 << 16;
constexpr std::size_t kPollEvery = 1 << 20;

}  // namespace

Status RadixSortInt64(int64_t* keys, std::size_t n, int32_t threads, const CancelCheck& cancel) {
  if (n < 2) return Status::Ok();
  if (keys == nullptr) return Status::InvalidArgument("RadixSortInt64: NULL keys");
  const auto workers = static_cast<int32_t>(
      std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(ResolveThreads(threads)), n / kMinShare)));
  const std::size_t share = (n + static_cast<std::size_t>(workers) - 1) / static_cast<std::size_t>(workers);
  auto range = [&](int64_t t) {
    const std::size_t b = std::min(n, static_cast<std::size_t>(t) * share);
    return std::make_pair(b, std::min(n, b + share));
  };
  std::vector<uint64_t> scratch;
  std::vector<std::size_t> counts;
  try {
    scratch.resize(n);
    counts.resize(static_cast<std::size_t>(workers) * kDigits);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory sorting " + std::to_string(n) + " keys");
  }
  // as unsigned keys with the sign bit flipped, unsigned order is signed order;
  // the bits that differ from the first key tell which passes can be skipped
  auto* data = reinterpret_cast<uint64_t*>(keys);
  const uint64_t first = data[0] ^ kSignBit;
  std::vector<uint64_t> varies(static_cast<std::size_t>(workers), 0);
  GENIE_RETURN_IF_ERROR(ParallelFor(
      workers, workers,
      [&](int64_t t) -> Status {
        const auto [b, e] = range(t);
        uint64_t v = 0;
        for (std::size_t i = b; i < e; ++i) {
          data[i] ^= kSignBit;
          v |= data[i] ^ first;
        }
        varies[static_cast<std::size_t>(t)] = v;
        return Status::Ok();
      },
      cancel));
  uint64_t varying = 0;
  for (uint64_t v : varies) varying |= v;

  uint64_t* src = data;
  uint64_t* dst = scratch.data();
  for (int shift = 0; shift < 64; shift += kDigitBits) {
    if (((varying >> shift) & (kDigits - 1)) == 0) continue;
    std::fill(counts.begin(), counts.end(), 0);
    GENIE_RETURN_IF_ERROR(ParallelFor(
        workers, workers,
        [&](int64_t t) -> Status {
          const auto [b, e] = range(t);
          std::size_t* c = counts.data() + static_cast<std::size_t>(t) * kDigits;
          for (std::size_t i = b; i < e; ++i) {
            ++c[(src[i] >> shift) & (kDigits - 1)];
            if (((i - b) & (kPollEvery - 1)) == kPollEvery - 1 && cancel.requested()) return Status::Cancelled();
          }
          return Status::Ok();
        },
        cancel));
    // each (digit, thread) bucket's first place: digits ascending, threads in order within a digit
    std::size_t at = 0;
    for (std::size_t d = 0; d < kDigits; ++d) {
      for (int32_t t = 0; t < workers; ++t) {
        std::size_t& c = counts[static_cast<std::size_t>(t) * kDigits + d];
        const std::size_t here = c;
        c = at;
        at += here;
      }
    }
    GENIE_RETURN_IF_ERROR(ParallelFor(
        workers, workers,
        [&](int64_t t) -> Status {
          const auto [b, e] = range(t);
          std::size_t* next = counts.data() + static_cast<std::size_t>(t) * kDigits;
          for (std::size_t i = b; i < e; ++i) {
            dst[next[(src[i] >> shift) & (kDigits - 1)]++] = src[i];
            if (((i - b) & (kPollEvery - 1)) == kPollEvery - 1 && cancel.requested()) return Status::Cancelled();
          }
          return Status::Ok();
        },
        cancel));
    std::swap(src, dst);
  }
  // back into keys, the sign bit restored
  return ParallelFor(
      workers, workers,
      [&](int64_t t) -> Status {
        const auto [b, e] = range(t);
        for (std::size_t i = b; i < e; ++i) data[i] = src[i] ^ kSignBit;
        return Status::Ok();
      },
      cancel);
}

}  // namespace genie

// Range search of strings by edit distance on the GPU (see
// GpuStringSet::Within in genie/gpu_string_scan.hpp).
//
// A string within edit distance r of a query has a length within r of the
// query's, so the device reads each query's length window, bucket by bucket
// (the layout: string_device.cuh), in chunks of at most kChunkStrings
// strings of one length: a block a chunk, a thread a string, the distance
// capped at r (kernel::PatternDistance gives up once a string cannot be
// within it).  Each query's Myers pattern is made once, by PatternKernel,
// and each block copies its query's into shared memory.  Answers go through
// one counter, a warp's at once (answer_buffer.hpp: a launch whose answers
// outgrow the buffer runs again into one of their number).  A launch reads
// at most kPairsPerLaunch (query, string) pairs, which also bounds its
// answers, and kStepsPerLaunch code points times pattern words; cancel is
// polled between launches; a chunk of long strings holds fewer of them,
// so that one chunk alone stays within kStepsPerLaunch (a single string
// longer than that is a launch of its own).  Queries longer than the
// prepared pattern go back to the caller, whose CPU engine answers them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "answer_buffer.hpp"
#include "cuda_util.hpp"
#include "genie/myers_pattern.hpp"
#include "string_device.cuh"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr int32_t kChunkStrings = 2048;
constexpr int64_t kPairsPerLaunch = int64_t{1} << 24;  // answers: at most 192 MB
// a few ms of Myers steps on an H200 (each a word of the pattern against a code point)
constexpr int64_t kStepsPerLaunch = int64_t{1} << 31;
constexpr std::size_t kFirstCapacity = std::size_t{1} << 16;

struct Chunk {
  int64_t first;    // position in the set's order of the chunk's first string
  int64_t index;    // its index in bucket `length`
  int64_t stride;   // the bucket's string count (its transposition's stride)
  int32_t pattern;  // the query's pattern
  int32_t length;
  int32_t count;
  int32_t cap;      // the radius, at most the longer of the two lengths
};

struct Hit {
  int32_t pattern;
  int32_t position;
  int32_t distance;
};

__global__ void PatternKernel(const uint32_t* __restrict__ cps, const int64_t* __restrict__ offsets, int32_t n,
                              kernel::MyersPattern* __restrict__ out) {
  const int32_t q = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (q < n) kernel::PreparePattern(cps + offsets[q], static_cast<int32_t>(offsets[q + 1] - offsets[q]), &out[q]);
}

__global__ void __launch_bounds__(kThreads)
RangeKernel(DeviceStringSet set, const kernel::MyersPattern* __restrict__ patterns,
            const Chunk* __restrict__ chunks, const uint8_t* __restrict__ excluded, Hit* __restrict__ out,
            unsigned long long* __restrict__ count, unsigned long long capacity) {
  __shared__ alignas(16) unsigned long long pattern_words[sizeof(kernel::MyersPattern) / 8];
  static_assert(sizeof(kernel::MyersPattern) % 8 == 0, "the pattern is copied in 8-byte words");
  const Chunk chunk = chunks[blockIdx.x];
  const auto* src = reinterpret_cast<const unsigned long long*>(patterns + chunk.pattern);
  for (int w = static_cast<int>(threadIdx.x); w < static_cast<int>(sizeof(kernel::MyersPattern) / 8); w += kThreads)
    pattern_words[w] = src[w];
  __syncthreads();
  const auto& pattern = *reinterpret_cast<const kernel::MyersPattern*>(pattern_words);
  const unsigned lane = threadIdx.x & 31u;
  // every thread takes the same turns, so that a warp's lanes meet at the ballot
  for (int32_t base = 0; base < chunk.count; base += kThreads) {
    const int32_t i = base + static_cast<int32_t>(threadIdx.x);
    int32_t d = chunk.cap + 1;
    if (i < chunk.count && (excluded == nullptr || excluded[chunk.first + i] == 0))
      d = DistanceAt(pattern, set, chunk.length, chunk.stride, chunk.index + i, chunk.cap);
    const bool within = d <= chunk.cap;
    const unsigned hits = __ballot_sync(0xffffffffu, within);
    if (hits == 0) continue;
    unsigned long long first = 0;
    if (lane == 0) first = atomicAdd(count, static_cast<unsigned long long>(__popc(hits)));
    first = __shfl_sync(0xffffffffu, first, 0);
    if (within) {
      const unsigned long long slot = first + static_cast<unsigned>(__popc(hits & ((1u << lane) - 1u)));
      if (slot < capacity) out[slot] = Hit{chunk.pattern, static_cast<int32_t>(chunk.first + i), d};
    }
  }
}

}  // namespace

Status StringRangeOnDevice(const DeviceStringSet& dset, const StringSet& set, const uint8_t* excluded,
                           const CodePointStrings& queries, double radius, std::vector<RangeCandidate>* out,
                           std::vector<int32_t>* host_queries, int64_t* computed, const CancelCheck& cancel) {
  out->clear();
  host_queries->clear();
  *computed = 0;
  if (std::isnan(radius) || radius < 0) return Status::InvalidArgument("the radius must be a number at least 0");
  const int32_t nq = queries.size();
  if (nq == 0 || set.size() == 0) return Status::Ok();
  const int64_t max_length = set.max_length();
  // distances are whole numbers, at most the longer of the two lengths
  // (2^30 code points at most): d <= radius when d <= floor(radius)
  const int64_t whole = radius >= 4.0e9 ? int64_t{1} << 32 : static_cast<int64_t>(std::floor(radius));

  std::vector<uint32_t> cps;
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> pattern_query;  // the query of each pattern
  std::vector<Chunk> chunks;
  std::vector<int64_t> chunk_steps;
  for (int32_t q = 0; q < nq; ++q) {
    const Span<CodePoint> s = queries.Get(q);
    const int64_t lq = static_cast<int64_t>(s.size());
    const int64_t cap = std::min(whole, std::max(lq, max_length));
    const int64_t lo = std::max<int64_t>(0, lq - cap), hi = std::min(max_length, lq + cap);
    if (lq > kernel::kPatternMaxLength) {
      host_queries->push_back(q);  // no prepared pattern: the caller's CPU answers it
      continue;
    }
    const int32_t pattern = static_cast<int32_t>(pattern_query.size());
    pattern_query.push_back(q);
    cps.insert(cps.end(), s.begin(), s.end());
    offsets.push_back(static_cast<int64_t>(cps.size()));
    const int64_t words = std::max<int64_t>(1, (lq + 63) / 64);
    for (int64_t L = lo; L <= hi; ++L) {
      const int64_t begin = set.length_begin[static_cast<std::size_t>(L)];
      const int64_t stride = set.length_begin[static_cast<std::size_t>(L) + 1] - begin;
      *computed += stride;
      // long strings take fewer a chunk, so that one chunk stays within a launch's steps
      const int64_t per_chunk =
          std::max<int64_t>(1, std::min<int64_t>(kChunkStrings, kStepsPerLaunch / (std::max<int64_t>(1, L) * words)));
      for (int64_t at = 0; at < stride; at += per_chunk) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(per_chunk, stride - at));
        chunks.push_back(Chunk{begin + at, at, stride, pattern, static_cast<int32_t>(L), n, static_cast<int32_t>(cap)});
        chunk_steps.push_back(n * std::max<int64_t>(1, L) * words);
      }
    }
  }
  if (chunks.empty()) return Status::Ok();

  DeviceBlockScope blocks;
  DeviceArray<uint32_t> d_cps;
  DeviceArray<int64_t> d_offsets;
  DeviceArray<kernel::MyersPattern> d_patterns;
  DeviceArray<Chunk> d_chunks;
  GENIE_RETURN_IF_ERROR(Upload(cps.data(), cps.size(), &d_cps, "range queries"));
  GENIE_RETURN_IF_ERROR(Upload(offsets.data(), offsets.size(), &d_offsets, "range query offsets"));
  GENIE_RETURN_IF_ERROR(d_patterns.Allocate(pattern_query.size(), "range query patterns"));
  GENIE_RETURN_IF_ERROR(Upload(chunks.data(), chunks.size(), &d_chunks, "range chunks"));
  const int32_t n_patterns = static_cast<int32_t>(pattern_query.size());
  PatternKernel<<<static_cast<unsigned>((n_patterns + 127) / 128), 128>>>(d_cps.get(), d_offsets.get(), n_patterns,
                                                                          d_patterns.get());
  GENIE_CUDA_CHECK_LAUNCH("PatternKernel");

  AnswerBuffer<Hit> answers;
  GENIE_RETURN_IF_ERROR(answers.Init(kFirstCapacity, "range answers"));
  std::vector<Hit> hits;
  for (std::size_t c0 = 0; c0 < chunks.size();) {
    if (cancel.requested()) return Status::Cancelled();
    // this launch's chunks: at least one, then while within both bounds
    std::size_t c1 = c0;
    int64_t pairs = 0, steps = 0;
    do {
      pairs += chunks[c1].count;
      steps += chunk_steps[c1];
      ++c1;
    } while (c1 < chunks.size() && pairs + chunks[c1].count <= kPairsPerLaunch &&
             steps + chunk_steps[c1] <= kStepsPerLaunch);
    GENIE_RETURN_IF_ERROR(answers.Run(
        [&]() -> Status {
          RangeKernel<<<static_cast<unsigned>(c1 - c0), kThreads>>>(dset, d_patterns.get(), d_chunks.get() + c0,
                                                                    excluded, answers.answers(), answers.count(),
                                                                    answers.capacity());
          GENIE_CUDA_CHECK_LAUNCH("RangeKernel");
          return Status::Ok();
        },
        &hits));
    c0 = c1;
  }
  out->reserve(out->size() + hits.size());
  for (const Hit& h : hits)
    out->push_back(RangeCandidate{pattern_query[static_cast<std::size_t>(h.pattern)],
                                  set.order[static_cast<std::size_t>(h.position)], static_cast<double>(h.distance)});
  return Status::Ok();
}

}  // namespace gpu
}  // namespace genie

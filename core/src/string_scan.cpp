// The exact k nearest strings on the CPU (see genie/string_scan.hpp).
#include "genie/string_scan.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <memory>
#include <new>
#include <queue>
#include <string>
#include <thread>
#include <utility>

#include "genie/myers_pattern.hpp"
#include "genie/parallel.hpp"
#include "query_distance.hpp"

namespace genie {
namespace {

constexpr int64_t kMaxStringLength = int64_t{1} << 30;
// A stripe of a single query's scan covers at least this many strings.
constexpr int64_t kMinStripeStrings = 16384;
// cancel is polled every kPollStrings strings, and sooner when the strings
// are long: once the distances since the last poll cost kernel::kPollCells
// cells (about a millisecond), since 1024 distances of 1,000-character
// strings take seconds.
constexpr int32_t kPollStrings = 1024;

// A result's sort key: distance, then length, then id.
struct Hit {
  int32_t distance;
  int32_t length;
  int32_t id;
  bool operator<(const Hit& o) const {
    if (distance != o.distance) return distance < o.distance;
    if (length != o.length) return length < o.length;
    return id < o.id;
  }
};

// The k-th distance found so far by any stripe of a query: an upper bound
// on the final k-th distance, which every stripe uses as its cap.
struct SharedCap {
  std::atomic<int32_t> value{INT32_MAX - 1};
  void Lower(int32_t v) {
    int32_t cur = value.load(std::memory_order_relaxed);
    while (v < cur && !value.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }
};

// One stripe of one query's scan: its best k hits (a max-heap on Hit).
Status ScanStripe(const StringSet& set, const StringScanRequest& request, int32_t q,
                  int32_t stripe, int32_t stripes, SharedCap* cap, std::vector<Hit>* heap,
                  const CancelCheck& cancel) {
  const Span<CodePoint> query = request.queries.Get(q);
  const int32_t lq = static_cast<int32_t>(query.size());
  const std::size_t k = static_cast<std::size_t>(request.k);
  const int32_t max_length = set.max_length();
  QueryDistance distance(query);
  const StringSignature query_signature = MakeStringSignature(query);
  int32_t since_poll = 0;
  int64_t since_poll_cells = 0;
  // cells per character of a string: words of the pattern, or the DP's row
  const int64_t cells_per_char = lq <= kernel::kPatternMaxLength
      ? std::max<int64_t>(1, (static_cast<int64_t>(lq) + 63) / 64) : static_cast<int64_t>(lq);
  heap->clear();

  auto current_cap = [&]() {
    const int32_t shared = cap->value.load(std::memory_order_relaxed);
    return heap->size() == k ? std::min(shared, heap->front().distance) : shared;
  };
  for (int32_t delta = 0;; ++delta) {
    if (delta > current_cap() || (lq - delta < 0 && lq + delta > max_length)) break;
    for (int side = 0; side < 2; ++side) {
      const int32_t len = side == 0 ? lq - delta : lq + delta;
      if ((side == 1 && delta == 0) || len < 0 || len > max_length) continue;
      const int64_t begin = set.length_begin[static_cast<std::size_t>(len)];
      const int64_t count = set.length_begin[static_cast<std::size_t>(len) + 1] - begin;
      const int64_t lo = begin + count * stripe / stripes;
      const int64_t hi = begin + count * (stripe + 1) / stripes;
      for (int64_t pos = lo; pos < hi; ++pos) {
        since_poll_cells += static_cast<int64_t>(len) * cells_per_char;
        if (++since_poll == kPollStrings || since_poll_cells >= kernel::kPollCells) {
          since_poll = 0;
          since_poll_cells = 0;
          if (cancel.requested()) return Status::Cancelled();
        }
        const int32_t id = set.order[static_cast<std::size_t>(pos)];
        if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(id)] != 0) {
          continue;
        }
        const int32_t limit = current_cap();
        if (delta > limit) break;
        if (StringSignatureBound(set.signatures[static_cast<std::size_t>(pos)], query_signature) > limit) {
          continue;
        }
        const int32_t d = distance(set.strings.Get(id), limit, cancel);
        if (d == kernel::kStopped) return Status::Cancelled();
        if (d > limit) continue;
        const Hit hit{d, len, id};
        if (heap->size() < k) {
          heap->push_back(hit);
          std::push_heap(heap->begin(), heap->end());
          if (heap->size() == k) cap->Lower(heap->front().distance);
        } else if (hit < heap->front()) {
          std::pop_heap(heap->begin(), heap->end());
          heap->back() = hit;
          std::push_heap(heap->begin(), heap->end());
          cap->Lower(heap->front().distance);
        }
      }
    }
  }
  return Status::Ok();
}

Status Scan(const StringSet& set, const StringScanRequest& request, int32_t threads,
            StringScanResult* out, const CancelCheck& cancel) {
  GENIE_RETURN_IF_ERROR(ValidateStringScanRequest(set, request));
  const int32_t nq = request.queries.size();
  if (threads <= 0) threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  // A batch is parallel by query; fewer queries than threads share each
  // query's strings out in stripes.
  int32_t stripes = 1;
  if (nq > 0 && nq < threads) {
    const int64_t by_size = std::max<int64_t>(1, set.size() / kMinStripeStrings);
    stripes = static_cast<int32_t>(std::min<int64_t>((threads + nq - 1) / nq, by_size));
  }
  std::vector<std::unique_ptr<SharedCap>> caps(static_cast<std::size_t>(nq));
  for (int32_t q = 0; q < nq; ++q) {
    caps[static_cast<std::size_t>(q)] = std::make_unique<SharedCap>();
    if (!request.caps.empty() && request.caps[static_cast<std::size_t>(q)] >= 0) {
      caps[static_cast<std::size_t>(q)]->Lower(request.caps[static_cast<std::size_t>(q)]);
    }
  }
  std::vector<std::vector<Hit>> heaps(static_cast<std::size_t>(nq) * stripes);
  GENIE_RETURN_IF_ERROR(ParallelFor(
      static_cast<int64_t>(nq) * stripes, threads,
      [&](int64_t item) {
        const int32_t q = static_cast<int32_t>(item / stripes);
        const int32_t s = static_cast<int32_t>(item % stripes);
        return ScanStripe(set, request, q, s, stripes, caps[static_cast<std::size_t>(q)].get(),
                          &heaps[static_cast<std::size_t>(item)], cancel);
      },
      cancel));

  out->offsets.assign(1, 0);
  out->objects.clear();
  out->distances.clear();
  std::vector<Hit> merged;
  for (int32_t q = 0; q < nq; ++q) {
    merged.clear();
    for (int32_t s = 0; s < stripes; ++s) {
      const auto& h = heaps[static_cast<std::size_t>(q) * stripes + s];
      merged.insert(merged.end(), h.begin(), h.end());
    }
    std::sort(merged.begin(), merged.end());
    if (merged.size() > static_cast<std::size_t>(request.k)) merged.resize(request.k);
    for (const Hit& h : merged) {
      out->objects.push_back(h.id);
      out->distances.push_back(h.distance);
    }
    out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
  }
  return Status::Ok();
}

}  // namespace

Status BuildStringSet(CodePointStrings strings, StringSet* out) {
  if (out == nullptr) return Status::InvalidArgument("BuildStringSet: NULL output");
  try {
    const int32_t n = strings.size();
    int32_t max_length = 0;
    for (int32_t i = 0; i < n; ++i) {
      const int64_t len = strings.offsets[static_cast<std::size_t>(i) + 1] -
                          strings.offsets[static_cast<std::size_t>(i)];
      if (len < 0 || len > kMaxStringLength) {
        return Status::InvalidArgument("string " + std::to_string(i) + " is longer than 2^30 code points");
      }
      max_length = std::max(max_length, static_cast<int32_t>(len));
    }
    out->strings = std::move(strings);
    // a counting sort by length keeps ids ascending within a length
    out->length_begin.assign(static_cast<std::size_t>(max_length) + 2, 0);
    for (int32_t i = 0; i < n; ++i) ++out->length_begin[static_cast<std::size_t>(out->length(i)) + 1];
    for (std::size_t L = 1; L < out->length_begin.size(); ++L) {
      out->length_begin[L] += out->length_begin[L - 1];
    }
    std::vector<int64_t> next(out->length_begin.begin(), out->length_begin.end() - 1);
    out->order.assign(static_cast<std::size_t>(n), 0);
    for (int32_t i = 0; i < n; ++i) {
      out->order[static_cast<std::size_t>(next[static_cast<std::size_t>(out->length(i))]++)] = i;
    }
    out->signatures.resize(static_cast<std::size_t>(n));
    for (std::size_t pos = 0; pos < out->signatures.size(); ++pos) {
      out->signatures[pos] = MakeStringSignature(out->strings.Get(out->order[pos]));
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory building a string set");
  }
}

Status ValidateStringScanRequest(const StringSet& set, const StringScanRequest& request) {
  if (request.k < 1) return Status::InvalidArgument("string scan: k must be at least 1");
  if (!request.caps.empty() && request.caps.size() != static_cast<std::size_t>(request.queries.size())) {
    return Status::InvalidArgument("string scan: one cap per query, or none");
  }
  if (!request.excluded.empty() && request.excluded.size() != static_cast<std::size_t>(set.size())) {
    return Status::InvalidArgument("string scan: one excluded flag per string, or none");
  }
  if (set.length_begin.size() < 2 || set.order.size() != static_cast<std::size_t>(set.size()) ||
      set.signatures.size() != set.order.size()) {
    return Status::InvalidArgument("string scan: the string set was not built");
  }
  for (int32_t q = 0; q < request.queries.size(); ++q) {
    if (request.queries.Get(q).size() > static_cast<std::size_t>(kMaxStringLength)) {
      return Status::InvalidArgument("string scan: a query is longer than 2^30 code points");
    }
  }
  return Status::Ok();
}

Status CpuStringScan(const StringSet& set, const StringScanRequest& request, int32_t threads,
                     StringScanResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuStringScan: NULL output");
  try {
    return Scan(set, request, threads, out, cancel);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory in the string scan");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("string scan failed: ") + e.what());
  } catch (...) {
    return Status::Internal("string scan failed");
  }
}

Status RerankStrings(const StringSet& set, const CodePointStrings& queries, int32_t k,
                     Span<int64_t> candidate_offsets, Span<int32_t> candidates,
                     Span<uint8_t> excluded, int32_t threads, StringScanResult* out,
                     const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("RerankStrings: NULL output");
  if (k < 1) return Status::InvalidArgument("k must be at least 1");
  const int32_t nq = queries.size();
  if (candidate_offsets.size() != static_cast<std::size_t>(nq) + 1)
    return Status::InvalidArgument("candidate offsets do not match the queries");
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(set.size()))
    return Status::InvalidArgument("excluded flags do not match the string set");
  for (int32_t q = 0; q < nq; ++q) {
    if (candidate_offsets[q] < 0 || candidate_offsets[q + 1] < candidate_offsets[q] ||
        candidate_offsets[q + 1] > static_cast<int64_t>(candidates.size()))
      return Status::InvalidArgument("bad candidate offsets");
  }
  struct Ranked {
    int32_t distance;
    int32_t length;
    int32_t id;
    bool operator<(const Ranked& o) const {
      return distance != o.distance ? distance < o.distance
                                    : length != o.length ? length < o.length : id < o.id;
    }
  };
  try {
    std::vector<std::vector<Ranked>> best(static_cast<std::size_t>(nq));
    GENIE_RETURN_IF_ERROR(ParallelFor(
        nq, threads,
        [&](int64_t q) -> Status {
          try {
            std::vector<int32_t> ids(candidates.begin() + candidate_offsets[q],
                                     candidates.begin() + candidate_offsets[q + 1]);
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            std::vector<Ranked>& r = best[static_cast<std::size_t>(q)];
            const Span<CodePoint> query = queries.Get(static_cast<int32_t>(q));
            const int32_t lq = static_cast<int32_t>(query.size());
            QueryDistance distance(query);
            // r is a max-heap of the k best so far; once full, a candidate
            // whose length differs from the query's by more than the k-th
            // distance cannot enter, and the others are computed capped at it
            int64_t polled = 0;
            for (int32_t id : ids) {
              if (id < 0 || id >= set.size()) continue;
              if (!excluded.empty() && excluded[static_cast<std::size_t>(id)] != 0) continue;
              if ((++polled & 63) == 0 && cancel.requested()) return Status::Cancelled();
              const int32_t length = set.length(id);
              const bool full = r.size() == static_cast<std::size_t>(k);
              // uncapped, the distance is at most the longer length
              const int32_t cap = full ? r.front().distance : std::max(length, lq);
              if (full && std::abs(length - lq) > cap) continue;
              const int32_t d = distance(set.strings.Get(id), cap, cancel);
              if (d == kernel::kStopped) return Status::Cancelled();
              const Ranked c{d, length, id};
              if (!full) {
                r.push_back(c);
                std::push_heap(r.begin(), r.end());
              } else if (c < r.front()) {
                std::pop_heap(r.begin(), r.end());
                r.back() = c;
                std::push_heap(r.begin(), r.end());
              }
            }
            std::sort_heap(r.begin(), r.end());
          } catch (const std::bad_alloc&) {
            return Status::OutOfMemory("out of host memory re-ranking strings");
          }
          return Status::Ok();
        },
        cancel));
    out->offsets.assign(1, 0);
    out->objects.clear();
    out->distances.clear();
    for (const auto& r : best) {
      for (const Ranked& x : r) {
        out->objects.push_back(x.id);
        out->distances.push_back(x.distance);
      }
      out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory re-ranking strings");
  }
  return Status::Ok();
}

}  // namespace genie

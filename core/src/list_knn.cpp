// The exact k nearest vectors through a List of Clusters (genie/cluster_list.hpp,
// CpuVectorListKnn): the range search with a shrinking radius, the k-th
// distance found so far.
//
// A member u of cluster c is at least d(q, c) - radius(c) from the query,
// and a member of any cluster after c in c's list at least outside(c) -
// d(q, c) (outside: no later object is nearer to c's centre); a
// supercluster bounds its clusters the same way.  So every cluster gets a
// lower bound of its members' distances: the largest of its own, its
// supercluster's and the outside terms of the clusters before it.  The
// clusters are read in ascending order of that bound (best first, the
// superclusters' clusters bounded once their supercluster comes up), and
// the search stops when the next bound exceeds the k-th distance found:
// no member left can be nearer, nor as near (the tie at the k-th distance
// decided by id).  The centres' distances come from the float32 pass with
// its proven bound on both sides (no exact float64 sum per centre); the
// members' exact distances are L2Distance's, so the rows are CpuVectorScan's.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/parallel.hpp"
#include "genie/vectors.hpp"

namespace genie {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The objects past the list (an index's pending rows) are read in pieces of this many.
constexpr int64_t kTailPiece = 4096;
// cancel is polled every this many members within a cluster.
constexpr int64_t kPollMembers = 256;
// A reading thread takes items worth about this many floats at a time (a
// quarter of a megabyte: tens of microseconds of reading).
constexpr int64_t kTakeFloats = int64_t{1} << 16;

struct Best {
  double distance;
  int32_t object;
  bool operator<(const Best& o) const { return distance != o.distance ? distance < o.distance : object < o.object; }
};

// What is left to read: a supercluster (its clusters not bounded yet), a
// cluster, or a piece of the objects past the list.
struct Item {
  enum Kind : int8_t { kSupercluster, kCluster, kTail };
  double bound;  // no object of it is nearer to the query
  int32_t index;
  Kind kind;
};
struct FartherBound {
  bool operator()(const Item& a, const Item& b) const { return a.bound > b.bound; }
};

// A reading thread's buffers, kept from cluster to cluster.
struct Scratch {
  std::vector<float> s32;   // the members' float32 sums, NaN for an excluded one
  std::vector<float> live;  // those of the members not excluded
};

// One query's search, shared by the threads that read its clusters.
class QuerySearch {
 public:
  QuerySearch(const VectorSet& set, const ClusterList& list, const float* member_rows, const float* query,
              int32_t k, Span<uint8_t> excluded)
      : set_(set), list_(list), member_rows_(member_rows), query_(query), k_(k), excluded_(excluded) {}

  // The superclusters' bounds and the tail's pieces, before any thread
  // reads (a list of very many superclusters polls cancel as it goes).
  Status Start(const CancelCheck& cancel) {
    double after = -kInf;  // the outside terms of the superclusters so far
    for (int32_t s = 0; s < static_cast<int32_t>(list_.superclusters.size()); ++s) {
      if ((s % kPollMembers) == kPollMembers - 1 && cancel.requested()) return Status::Cancelled();
      const Cluster& ball = list_.superclusters[static_cast<std::size_t>(s)].ball;
      Push(Item{Bound(ball, &after), s, Item::kSupercluster});
      computed_ += std::isfinite(ball.radius) ? 1 : 0;
    }
    for (int64_t at = list_.n_objects; at < set_.size(); at += kTailPiece)
      Push(Item{0, static_cast<int32_t>((at - list_.n_objects) / kTailPiece), Item::kTail});
    return Status::Ok();
  }

  // Reads items until none left can hold a better row; several threads may
  // run it at once.  A thread takes items worth about kTakeFloats of rows at
  // a time (small clusters one by one made the threads queue at the lock),
  // and one that finds nothing to take waits while another reads (that one
  // may add clusters or stop the search) rather than leave.
  Status Run(const CancelCheck& cancel) {
    std::vector<Best> found;
    std::vector<Item> made, taken;
    std::vector<double> mine;  // a heap: the k nearest distances of a take
    Scratch scratch;
    for (;;) {
      double cap;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
          if (failed_) return Status::Ok();  // the failing thread reports it
          if (!items_.empty() && items_.front().bound <= Loose(Kth())) break;
          if (busy_ == 0) {
            idle_.notify_all();
            return Status::Ok();
          }
          idle_.wait(lock);
        }
        cap = Kth();
        taken.clear();
        for (int64_t floats = 0; !items_.empty() && items_.front().bound <= Loose(cap) && floats < kTakeFloats;) {
          std::pop_heap(items_.begin(), items_.end(), FartherBound());
          taken.push_back(items_.back());
          items_.pop_back();
          floats += Floats(taken.back());
        }
        ++busy_;
      }
      int64_t read = 0;
      Status status = cancel.requested() ? Status::Cancelled() : Status::Ok();
      // whatever happens, busy_ comes down and the waiting threads hear of
      // it (a thread left waiting would hang the backend past any cancel)
      try {
        found.clear();
        made.clear();
        // the k-th of what this take found lowers the cap of its later
        // items (those it passes are not put back: their bound is beyond it)
        mine.clear();
        for (std::size_t i = 0; i < taken.size() && status.ok(); ++i) {
          if (taken[i].bound > Loose(cap)) continue;
          const std::size_t before = found.size();
          status = Take(taken[i], cap, &scratch, &made, &found, &read, cancel);
          for (std::size_t f = before; f < found.size(); ++f) {
            mine.push_back(found[f].distance);
            std::push_heap(mine.begin(), mine.end());
            if (static_cast<int32_t>(mine.size()) > k_) {
              std::pop_heap(mine.begin(), mine.end());
              mine.pop_back();
            }
          }
          if (static_cast<int32_t>(mine.size()) == k_) cap = std::min(cap, mine.front());
        }
      } catch (const std::bad_alloc&) {
        status = Status::OutOfMemory("out of host memory for a search of a list of clusters");
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        try {
          if (status.ok()) {
            computed_ += read;
            for (const Item& m : made) Push(m);
            for (const Best& b : found) Offer(b);
          }
        } catch (const std::bad_alloc&) {
          status = Status::OutOfMemory("out of host memory for a search of a list of clusters");
        }
        failed_ = failed_ || !status.ok();
        --busy_;
      }
      idle_.notify_all();
      if (!status.ok()) return status;
    }
  }

  // The rows, nearest first, at the end of out.
  void Finish(VectorScanResult* out) {
    std::sort(best_.begin(), best_.end());
    for (const Best& b : best_) {
      out->objects.push_back(b.object);
      out->distances.push_back(b.distance);
    }
    out->offsets.push_back(static_cast<int64_t>(out->objects.size()));
  }
  int64_t computed() const { return computed_; }

 private:
  // Reads one item: a supercluster's clusters bounded into *made, a
  // cluster's or a tail piece's members that may be no farther than cap into *found.
  Status Take(const Item& item, double cap, Scratch* scratch, std::vector<Item>* made, std::vector<Best>* found,
              int64_t* read, const CancelCheck& cancel) const {
    if (item.kind == Item::kSupercluster) {
      const Supercluster& sc = list_.superclusters[static_cast<std::size_t>(item.index)];
      double after = -kInf;
      for (int32_t ci = sc.first_cluster; ci < sc.first_cluster + sc.n_clusters; ++ci) {
        const Cluster& c = list_.clusters[static_cast<std::size_t>(ci)];
        made->push_back(Item{std::max(item.bound, Bound(c, &after)), ci, Item::kCluster});
        *read += std::isfinite(c.radius) ? 1 : 0;
      }
      return Status::Ok();
    }
    if (item.kind == Item::kCluster) {
      const Cluster& c = list_.clusters[static_cast<std::size_t>(item.index)];
      return Read(c.begin, c.count, true, cap, scratch, found, read, cancel);
    }
    const int64_t first = list_.n_objects + static_cast<int64_t>(item.index) * kTailPiece;
    return Read(first, std::min<int64_t>(kTailPiece, set_.size() - first), false, cap, scratch, found, read, cancel);
  }

  // The floats an item reads: its members' rows, or its clusters' centres.
  int64_t Floats(const Item& item) const {
    int64_t rows = kTailPiece;
    if (item.kind == Item::kSupercluster)
      rows = list_.superclusters[static_cast<std::size_t>(item.index)].n_clusters;
    else if (item.kind == Item::kCluster)
      rows = list_.clusters[static_cast<std::size_t>(item.index)].count;
    return rows * set_.dim;
  }

  // The k-th distance found (+infinity before k rows); under mutex_.
  double Kth() const { return static_cast<int32_t>(best_.size()) < k_ ? kInf : best_.front().distance; }

  void Push(const Item& item) {
    items_.push_back(item);
    std::push_heap(items_.begin(), items_.end(), FartherBound());
  }
  void Offer(const Best& b) {
    if (static_cast<int32_t>(best_.size()) < k_) {
      best_.push_back(b);
      std::push_heap(best_.begin(), best_.end());
    } else if (b < best_.front()) {
      std::pop_heap(best_.begin(), best_.end());
      best_.back() = b;
      std::push_heap(best_.begin(), best_.end());
    }
  }

  // A lower bound of the members' distances of c, the next of its list
  // (*after: the outside terms of the clusters before it, which it then
  // takes in); an unbounded one (a whole list's piece) has none of its own.
  double Bound(const Cluster& c, double* after) const {
    double bound = *after;
    if (!std::isfinite(c.radius)) return bound;
    double low, up;
    CentreDistance(set_.row(c.centre), &low, &up);
    bound = std::max(bound, low - Loose(c.radius));
    *after = std::max(*after, Tight(c.outside) - up);
    return bound;
  }

  // low <= d(q, x) <= up from the float32 pass (Float32DistanceBounds), or
  // from the exact distance where that bound says little.
  void CentreDistance(const float* x, double* low, double* up) const {
    if (Float32DistanceBounds(set_.dim, SquaredL2Float32(query_, x, set_.dim), low, up)) return;
    const double d = L2Distance(query_, x, set_.dim);
    *low = Tight(d);
    *up = Loose(d);
  }

  // Members [begin, begin + count) of the list (listed) or objects from
  // begin: those that may be no farther than cap, at their exact distances,
  // into *found.  The float32 pass first; then its own k-th smallest s32
  // bounds the rest as CpuVectorScan's filter does.
  Status Read(int64_t begin, int64_t count, bool listed, double cap, Scratch* scratch,
              std::vector<Best>* found, int64_t* read, const CancelCheck& cancel) const {
    std::vector<float>* s32 = &scratch->s32;
    std::vector<float>& live = scratch->live;
    const std::size_t dim = static_cast<std::size_t>(set_.dim);
    auto object = [&](int64_t at) {
      return listed ? list_.members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at);
    };
    auto row = [&](int64_t at) {
      return listed && member_rows_ != nullptr ? member_rows_ + static_cast<std::size_t>(at) * dim
                                               : set_.row(object(at));
    };
    // NaN marks an excluded object (a float32 sum is never NaN: the values are finite)
    s32->assign(static_cast<std::size_t>(count), std::numeric_limits<float>::quiet_NaN());
    live.clear();
    for (int64_t i = 0; i < count; ++i) {
      if ((i % kPollMembers) == kPollMembers - 1 && cancel.requested()) return Status::Cancelled();
      const int32_t o = object(begin + i);
      if (!excluded_.empty() && excluded_[static_cast<std::size_t>(o)] != 0) continue;
      const float v = SquaredL2Float32(query_, row(begin + i), set_.dim);
      (*s32)[static_cast<std::size_t>(i)] = v;
      live.push_back(v);
    }
    *read += static_cast<int64_t>(live.size());
    double threshold = WithinThreshold(set_.dim, cap);
    if (static_cast<int64_t>(live.size()) > k_) {
      std::nth_element(live.begin(), live.begin() + (k_ - 1), live.end());
      threshold = std::min(threshold, FilterThreshold(set_.dim, live[static_cast<std::size_t>(k_ - 1)]));
    }
    for (int64_t i = 0; i < count; ++i) {
      if ((i % kPollMembers) == kPollMembers - 1 && cancel.requested()) return Status::Cancelled();
      const float v = (*s32)[static_cast<std::size_t>(i)];
      // (an overflow to infinity proves nothing: the exact distance decides)
      if (std::isnan(v) || (std::isfinite(v) && static_cast<double>(v) > threshold)) continue;
      const double d = L2Distance(query_, row(begin + i), set_.dim);
      if (d <= cap) found->push_back(Best{d, object(begin + i)});
    }
    return Status::Ok();
  }

  const VectorSet& set_;
  const ClusterList& list_;
  const float* member_rows_;
  const float* query_;
  const int32_t k_;
  const Span<uint8_t> excluded_;
  std::mutex mutex_;
  std::condition_variable idle_;  // a reading thread is done with what it took
  int32_t busy_ = 0;              // threads reading what they took
  bool failed_ = false;           // a thread failed (cancel, memory): the others stop
  std::vector<Item> items_;  // a heap, nearest bound first
  std::vector<Best> best_;   // a heap, the k-th row first
  int64_t computed_ = 0;  // distances read: centres and members (under mutex_ once threads run)
};

}  // namespace

Status CpuVectorListKnn(const VectorSet& set, const ClusterList& list, const float* member_rows,
                        const VectorScanRequest& request, int32_t threads, VectorScanResult* out,
                        int64_t* distances_computed, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuVectorListKnn: NULL output");
  GENIE_RETURN_IF_ERROR(ValidateVectorScanRequest(set, request));
  if (list.n_objects > set.size()) return Status::InvalidArgument("the list names more objects than the set holds");
  threads = ResolveThreads(threads);
  const int32_t nq = request.n_queries;
  const std::size_t dim = static_cast<std::size_t>(set.dim);
  // fewer queries than threads: each query's clusters are read by several
  const int32_t sharing = nq >= threads ? 1 : (threads + std::max(nq, 1) - 1) / std::max(nq, 1);
  std::vector<VectorScanResult> parts(static_cast<std::size_t>(nq));
  std::vector<int64_t> computed(static_cast<std::size_t>(nq), 0);
  std::vector<std::unique_ptr<QuerySearch>> searches(static_cast<std::size_t>(nq));
  auto make = [&](int32_t q, std::unique_ptr<QuerySearch>* search) {
    *search = std::make_unique<QuerySearch>(set, list, member_rows, request.queries + static_cast<std::size_t>(q) * dim,
                                            request.k, request.excluded);
    return (*search)->Start(cancel);
  };
  auto finish = [&](int32_t q, QuerySearch* search) {
    search->Finish(&parts[static_cast<std::size_t>(q)]);
    computed[static_cast<std::size_t>(q)] = search->computed();
  };
  if (sharing == 1) {
    GENIE_RETURN_IF_ERROR(ParallelFor(
        nq, threads,
        [&](int64_t q) -> Status {
          std::unique_ptr<QuerySearch> search;
          GENIE_RETURN_IF_ERROR(make(static_cast<int32_t>(q), &search));
          GENIE_RETURN_IF_ERROR(search->Run(cancel));
          finish(static_cast<int32_t>(q), search.get());
          return Status::Ok();
        },
        cancel));
  } else {
    for (int32_t q = 0; q < nq; ++q) GENIE_RETURN_IF_ERROR(make(q, &searches[static_cast<std::size_t>(q)]));
    GENIE_RETURN_IF_ERROR(ParallelFor(
        static_cast<int64_t>(nq) * sharing, threads,
        [&](int64_t u) { return searches[static_cast<std::size_t>(u / sharing)]->Run(cancel); }, cancel));
    for (int32_t q = 0; q < nq; ++q) finish(q, searches[static_cast<std::size_t>(q)].get());
  }
  VectorScanResult result;
  ConcatenateResults(parts, &result);
  *out = std::move(result);
  if (distances_computed != nullptr) {
    *distances_computed = 0;
    for (int64_t c : computed) *distances_computed += c;
  }
  return Status::Ok();
}

}  // namespace genie

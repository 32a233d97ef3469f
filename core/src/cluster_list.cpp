// The List of Clusters and of Superclusters on the CPU (see
// genie/cluster_list.hpp): the build and the range search (the stored form: cluster_list_format.cpp).
#include "genie/cluster_list.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "genie/candidates.hpp"
#include "genie/parallel.hpp"
#include "query_distance.hpp"

namespace genie {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The build computes a centre's distances in pieces of this many objects.
constexpr int64_t kBuildPiece = 2048;
// A whole list (no clusters built) groups this many objects a supercluster,
// the unit a single query's search is striped by.
constexpr int32_t kWholePiece = 16384;
// MemberRows copies rows in pieces of this many, polling cancel between them.
constexpr int64_t kMemberRowsPiece = 4096;
// cancel is polled every kPollDistances distances.
constexpr int32_t kPollDistances = 256;

// ---- metrics ----

class VectorObjects final : public ObjectMetric {
 public:
  explicit VectorObjects(const VectorSet& set) : set_(set) {}
  bool Distances(int32_t a, const int32_t* objects, int64_t n, double* out,
                 const CancelCheck&) const override {
    std::vector<const float*> rows(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = set_.row(objects[i]);
    L2Distances(set_.row(a), rows.data(), n, set_.dim, out);
    return true;
  }

 private:
  const VectorSet& set_;
};

class StringObjects final : public ObjectMetric {
 public:
  explicit StringObjects(const CodePointStrings& strings) : strings_(strings) {}
  bool Distances(int32_t a, const int32_t* objects, int64_t n, double* out,
                 const CancelCheck& cancel) const override {
    const Span<CodePoint> centre = strings_.Get(a);
    QueryDistance distance(centre);
    for (int64_t i = 0; i < n; ++i) {
      const Span<CodePoint> s = strings_.Get(objects[i]);
      // an edit distance never exceeds the longer length: that cap is none
      const int32_t cap = static_cast<int32_t>(std::max(centre.size(), s.size()));
      const int32_t d = distance(s, cap, cancel);
      if (d == kernel::kStopped) return false;
      out[i] = d;
      // long strings: every 64 distances (a short one costs nanoseconds)
      if ((i & 63) == 63 && cancel.requested()) return false;
    }
    return true;
  }

 private:
  const CodePointStrings& strings_;
};

// A query vector: a float32 pass with a proven bound (genie/vectors.hpp)
// rules most objects out before their exact L2Distance.
class VectorQuery final : public QueryMetric {
 public:
  VectorQuery(const VectorSet& set, const float* query, const float* member_rows)
      : set_(set), query_(query), member_rows_(member_rows) {}
  double Distance(int32_t object, double cap) override { return RowDistance(set_.row(object), cap); }
  // From the float32 pass alone (Float32DistanceBounds): the exact float64
  // sum (hundreds of dependent additions) was most of a walk's cost.  Where
  // that bound says little, the exact distance, as Distance gives it.
  void CentreBound(int32_t object, double cap, bool* beyond, double* lower, double* upper) override {
    const float* x = set_.row(object);
    const float s32 = SquaredL2Float32(query_, x, set_.dim);
    *beyond = std::isfinite(s32) && static_cast<double>(s32) > WithinThreshold(set_.dim, cap);
    if (*beyond) return;
    if (Float32DistanceBounds(set_.dim, s32, lower, upper)) return;
    *upper = L2Distance(query_, x, set_.dim);
    *lower = *upper;
    *beyond = *upper > cap;
  }
  int64_t Within(const int32_t* members, int64_t begin, int64_t count, double r, Span<uint8_t> excluded,
                 bool listed, std::vector<std::pair<double, int32_t>>* out) override {
    if (!listed || member_rows_ == nullptr) return QueryMetric::Within(members, begin, count, r, excluded, listed, out);
    const std::size_t dim = static_cast<std::size_t>(set_.dim);
    int64_t computed = 0;
    for (int64_t at = begin; at < begin + count; ++at) {
      const int32_t o = members[at];
      if (!excluded.empty() && excluded[static_cast<std::size_t>(o)] != 0) continue;
      const double d = RowDistance(member_rows_ + static_cast<std::size_t>(at) * dim, r);
      ++computed;
      if (d <= r) out->emplace_back(d, o);
    }
    return computed;
  }

 private:
  double RowDistance(const float* x, double cap) const {
    if (std::isfinite(cap)) {
      const double threshold = WithinThreshold(set_.dim, cap);
      const float s32 = SquaredL2Float32(query_, x, set_.dim);
      // (an overflow to infinity proves nothing: the exact distance decides)
      if (std::isfinite(s32) && static_cast<double>(s32) > threshold) return kInf;
    }
    return L2Distance(query_, x, set_.dim);
  }

  const VectorSet& set_;
  const float* query_;
  const float* member_rows_;
};

class StringQuery final : public QueryMetric {
 public:
  StringQuery(const CodePointStrings& strings, Span<CodePoint> query, const CancelCheck& cancel)
      : strings_(strings), query_(query), distance_(query), cancel_(cancel) {}
  double Distance(int32_t object, double cap) override {
    const Span<CodePoint> s = strings_.Get(object);
    const int64_t longer = static_cast<int64_t>(std::max(query_.size(), s.size()));
    const int32_t icap = cap >= static_cast<double>(longer) ? static_cast<int32_t>(longer)
                                                            : static_cast<int32_t>(std::floor(cap));
    const int64_t gap = static_cast<int64_t>(query_.size()) - static_cast<int64_t>(s.size());
    if (gap > icap || -gap > icap) return static_cast<double>(icap) + 1.0;  // the length filter
    const int32_t d = distance_(s, icap, cancel_);
    if (d == kernel::kStopped) return kInf;  // the search polls cancel itself right after
    return d;
  }

 private:
  const CodePointStrings& strings_;
  Span<CodePoint> query_;
  QueryDistance distance_;
  CancelCheck cancel_;
};

// ---- build ----

// One list of clusters of `size` over ids (ascending), its first centre
// ids[first], the next ones by `centres`: clusters appended to *clusters
// (begin counted from base), their members to *members.
Status BuildList(const ObjectMetric& metric, std::vector<int32_t> ids, std::size_t first,
                 int32_t size, ClusterCentres centres, int32_t threads, int64_t base,
                 std::vector<Cluster>* clusters, std::vector<int32_t>* members,
                 const CancelCheck& cancel) {
  const bool farthest = centres == ClusterCentres::kFarthest;
  // each object's score for the next centre: the sum of its distances to
  // the centres so far, or the nearest of them
  std::vector<double> sums(ids.size(), farthest ? kInf : 0.0);
  std::vector<double> d(ids.size());
  std::vector<std::size_t> others;
  std::vector<uint8_t> taken;
  std::size_t centre = first;
  while (!ids.empty()) {
    if (cancel.requested()) return Status::Cancelled();
    const int32_t c = ids[centre];
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t pieces = (n + kBuildPiece - 1) / kBuildPiece;
    auto piece = [&](int64_t p) {
      const int64_t lo = p * kBuildPiece;
      const int64_t hi = std::min(n, lo + kBuildPiece);
      return metric.Distances(c, ids.data() + lo, hi - lo, d.data() + lo, cancel) ? Status::Ok()
                                                                               : Status::Cancelled();
    };
    if (threads > 1 && pieces > 1) {
      Status s = ParallelFor(pieces, threads, piece, cancel);
      if (!s.ok()) return s;
    } else {
      for (int64_t p = 0; p < pieces; ++p) {
        GENIE_RETURN_IF_ERROR(piece(p));
        if (cancel.requested()) return Status::Cancelled();
      }
    }
    d[centre] = 0.0;

    // the centre and its size - 1 nearest others, by (distance, id)
    others.clear();
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (i != centre) others.push_back(i);
    const std::size_t take = std::min(others.size(), static_cast<std::size_t>(size) - 1);
    auto nearer = [&](std::size_t x, std::size_t y) {
      return d[x] != d[y] ? d[x] < d[y] : ids[x] < ids[y];
    };
    if (take < others.size())
      std::nth_element(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(take),
                       others.end(), nearer);
    std::sort(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(take), nearer);
    Cluster cluster;
    cluster.centre = c;
    cluster.count = static_cast<int32_t>(take + 1);
    cluster.begin = base + static_cast<int64_t>(members->size());
    cluster.radius = take > 0 ? d[others[take - 1]] : 0.0;
    cluster.outside = kInf;
    for (std::size_t j = take; j < others.size(); ++j)
      cluster.outside = std::min(cluster.outside, d[others[j]]);
    members->push_back(c);
    taken.assign(ids.size(), 0);
    taken[centre] = 1;
    for (std::size_t j = 0; j < take; ++j) {
      members->push_back(ids[others[j]]);
      taken[others[j]] = 1;
    }
    clusters->push_back(cluster);

    // the rest, still ascending; the next centre has the largest score (the
    // first of equal scores: lowest id)
    std::size_t kept = 0;
    std::size_t best = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (taken[i]) continue;
      ids[kept] = ids[i];
      sums[kept] = farthest ? std::min(sums[i], d[i]) : sums[i] + d[i];
      if (sums[kept] > sums[best]) best = kept;
      ++kept;
    }
    ids.resize(kept);
    sums.resize(kept);
    d.resize(kept);
    centre = best;
  }
  return Status::Ok();
}

// ---- search ----

struct Hit {
  double distance;
  int32_t object;
  bool operator<(const Hit& o) const {
    return distance != o.distance ? distance < o.distance : object < o.object;
  }
};

// One query's rows (sorted) at the end of result.
void AppendQueryRows(const std::vector<Hit>& hits, RangeResult* result) {
  for (const Hit& h : hits) {
    result->objects.push_back(h.object);
    result->distances.push_back(h.distance);
  }
  result->offsets.push_back(static_cast<int64_t>(result->objects.size()));
}

struct Counts {
  int64_t distances = 0;
  int64_t superclusters_discarded = 0;
  int64_t clusters_discarded = 0;
};

// A cluster's members [*begin, *begin + *count) (all of them on entry)
// narrowed to those whose distance to its centre, member_distances[i]
// (ascending in the cluster; NaN: not known, none narrowed), can be within
// r of the query's, lower <= d(q, c) <= upper:
// by the triangle inequality |d(q, c) - d(x, c)| <= d(q, x), so x is no
// answer when d(x, c) + r < d(q, c) or d(x, c) - r > d(q, c).  Both tests
// give away the margin of the others (kPruneSlack): the ring is never
// narrower than the exact one.
void NarrowToRing(Span<double> member_distances, double lower, double upper, double r, int64_t* begin,
                  int32_t* count) {
  const double* first = member_distances.data() + *begin;
  if (std::isnan(*first)) return;
  const double* last = first + *count;
  const double* lo = std::partition_point(first, last, [&](double dx) { return Loose(dx + r) < lower; });
  const double reach = Loose(upper + r);
  const double* hi = std::partition_point(lo, last, [&](double dx) { return dx <= reach; });
  *begin += lo - first;
  *count = static_cast<int32_t>(hi - lo);
}

// Superclusters [from, to) of one query (r its radius): the clusters its
// ball may meet, each handed to scan(cluster, begin, count), the members
// it must read (member_distances: empty, or the list's MemberDistances,
// which narrow them to the query's ring, NarrowToRing); *stop_at: no
// supercluster after it can hold an answer (shared by a query's stripes).
// A centre is discarded only when proven beyond its limit, a cluster's
// members only when proven outside the ring (between a lower and an upper
// bound of the centre's distance), and the early stops use the upper bound
// (QueryMetric::CentreBound): each can only read more than the exact
// distances would, never less.  A cluster of none to read counts as
// discarded.
template <typename Scan>
Status WalkStripe(const ClusterList& list, QueryMetric* metric, double r, Span<double> member_distances, int32_t from,
                  int32_t to, std::atomic<int32_t>* stop_at, Counts* counts, const CancelCheck& cancel,
                  Scan&& scan) {
  int32_t since_poll = 0;
  auto count = [&]() {
    ++counts->distances;
    if (++since_poll < kPollDistances) return false;
    since_poll = 0;
    return cancel.requested();
  };
  for (int32_t s = from; s < to; ++s) {
    if (s > stop_at->load(std::memory_order_relaxed)) break;
    const Supercluster& sc = list.superclusters[static_cast<std::size_t>(s)];
    const bool bounded = std::isfinite(sc.ball.radius);
    double ds = 0;  // at least the distance to the centre
    if (bounded) {
      bool beyond = false;
      double below;
      metric->CentreBound(sc.ball.centre, Loose(sc.ball.radius + r), &beyond, &below, &ds);
      if (count()) return Status::Cancelled();
      if (beyond) {
        ++counts->superclusters_discarded;
        continue;
      }
    }
    const int32_t last = sc.first_cluster + sc.n_clusters;
    for (int32_t ci = sc.first_cluster; ci < last; ++ci) {
      const Cluster& c = list.clusters[static_cast<std::size_t>(ci)];
      double dc = kInf;  // at least the distance to the centre
      int64_t begin = c.begin;
      int32_t n = c.count;
      const bool pruned_by_centre = std::isfinite(c.radius);
      if (pruned_by_centre) {
        bool beyond = false;
        double below;  // at most the distance to the centre
        metric->CentreBound(c.centre, Loose(c.radius + r), &beyond, &below, &dc);
        if (count()) return Status::Cancelled();
        if (!beyond && !member_distances.empty()) NarrowToRing(member_distances, below, dc, r, &begin, &n);
        if (beyond || n == 0) {
          ++counts->clusters_discarded;
          if (beyond) continue;
        }
      }
      if (n > 0) GENIE_RETURN_IF_ERROR(scan(c, begin, n));
      // the query's ball inside what no later cluster of this list reaches
      if (pruned_by_centre && Loose(dc + r) < c.outside) break;
    }
    if (bounded && Loose(ds + r) < sc.ball.outside) {
      int32_t seen = stop_at->load(std::memory_order_relaxed);
      while (s < seen && !stop_at->compare_exchange_weak(seen, s, std::memory_order_relaxed)) {
      }
      break;
    }
  }
  return cancel.requested() ? Status::Cancelled() : Status::Ok();
}

// The same, reading each member of the clusters met (listed: list is the
// one the metric was made for): its hits.
Status SearchStripe(const ClusterList& list, QueryMetric* metric, double r, Span<double> member_distances,
                    Span<uint8_t> excluded, bool listed, int32_t from, int32_t to,
                    std::atomic<int32_t>* stop_at, std::vector<Hit>* hits, Counts* counts,
                    const CancelCheck& cancel) {
  std::vector<std::pair<double, int32_t>> found;
  return WalkStripe(list, metric, r, member_distances, from, to, stop_at, counts, cancel,
                    [&](const Cluster&, int64_t begin, int32_t count) -> Status {
    // in pieces, cancel polled between them
    for (int64_t at = begin; at < begin + count; at += kPollDistances) {
      const int64_t n = std::min<int64_t>(kPollDistances, begin + count - at);
      found.clear();
      counts->distances += metric->Within(list.members.data(), at, n, r, excluded, listed, &found);
      for (const auto& f : found) hits->push_back(Hit{f.first, f.second});
      if (cancel.requested()) return Status::Cancelled();
    }
    return Status::Ok();
  });
}

// Objects [first, first + count) of n_objects in clusters of unbounded
// radius, each its own supercluster: read one by one, none pruned.
ClusterList WholeRange(int32_t first, int32_t count, int32_t n_objects) {
  ClusterList list;
  list.n_objects = n_objects;
  list.members.resize(static_cast<std::size_t>(std::max(count, 0)));
  for (int32_t i = 0; i < count; ++i) list.members[static_cast<std::size_t>(i)] = first + i;
  for (int32_t at = 0; at < count; at += kWholePiece) {
    Cluster c;
    c.centre = first + at;
    c.begin = at;
    c.count = std::min(kWholePiece, count - at);
    c.radius = kInf;  // no pruning and (outside 0) no stop: every object is read
    c.outside = 0;
    Supercluster sc;
    sc.ball = c;
    sc.first_cluster = static_cast<int32_t>(list.clusters.size());
    sc.n_clusters = 1;
    list.clusters.push_back(c);
    list.superclusters.push_back(sc);
  }
  return list;
}

// The request against the list: a radius, objects at least the list's, flags of their number.
// A batch is split by query; fewer queries than threads: each by stripes
// of its superclusters (at most n_super), which share its early stop.
int32_t QueryStripes(int32_t nq, int32_t threads, int32_t n_super) {
  if (nq >= threads) return 1;
  return std::max(1, std::min(n_super, (threads + nq - 1) / std::max(nq, 1)));
}

Status CheckRangeRequest(const ClusterList& list, const RangeRequest& request) {
  if (std::isnan(request.radius) || request.radius < 0)
    return Status::InvalidArgument("the radius must be a number at least 0");
  if (request.n_queries < 0) return Status::InvalidArgument("a negative number of queries");
  const int32_t n_objects = request.n_objects < 0 ? list.n_objects : request.n_objects;
  if (n_objects < list.n_objects)
    return Status::InvalidArgument("the list names more objects than are searched");
  if (!request.excluded.empty() && request.excluded.size() != static_cast<std::size_t>(n_objects))
    return Status::InvalidArgument("excluded flags of another size than the objects");
  if (!request.member_distances.empty() && request.member_distances.size() != list.members.size())
    return Status::InvalidArgument("member distances of another size than the list's members");
  return Status::Ok();
}

}  // namespace

bool Float32DistanceBounds(int32_t dim, float s32, double* low, double* up) {
  const double e = (static_cast<double>(dim) + 8.0) * 0x1p-23;
  const double a = (static_cast<double>(dim) + 1.0) * 0x1p-148;
  const double s = static_cast<double>(s32);
  if (!std::isfinite(s32) || s < a * 0x1p24 || e >= 0.5) return false;
  *low = std::sqrt(std::max(0.0, (s - a) / (1.0 + e))) * (1.0 - kPruneSlack);
  *up = std::sqrt((s + a) / (1.0 - e)) * (1.0 + kPruneSlack);
  return true;
}

std::unique_ptr<ObjectMetric> VectorObjectMetric(const VectorSet& set) {
  return std::make_unique<VectorObjects>(set);
}

std::unique_ptr<ObjectMetric> StringObjectMetric(const CodePointStrings& strings) {
  return std::make_unique<StringObjects>(strings);
}

QueryMetricFactory VectorQueryMetrics(const VectorSet& set, const float* queries,
                                      const float* member_rows) {
  return [&set, queries, member_rows](int32_t q) -> std::unique_ptr<QueryMetric> {
    return std::make_unique<VectorQuery>(
        set, queries + static_cast<std::size_t>(q) * static_cast<std::size_t>(set.dim), member_rows);
  };
}

Status MemberRows(const VectorSet& set, const ClusterList& list, HostArray<float>* out,
                  const CancelCheck& cancel, int32_t threads) {
  const std::size_t dim = static_cast<std::size_t>(set.dim);
  const int64_t n = static_cast<int64_t>(list.members.size());
  // (a new connection's first list search makes them: on every core, where
  // their pages fault in; unwritten until each row is copied)
  out->resize(list.members.size() * dim);
  return ParallelFor(
      (n + kMemberRowsPiece - 1) / kMemberRowsPiece, threads,
      [&](int64_t piece) {
        for (int64_t at = piece * kMemberRowsPiece; at < std::min(n, (piece + 1) * kMemberRowsPiece); ++at)
          std::copy_n(set.row(list.members[static_cast<std::size_t>(at)]), dim,
                      out->data() + static_cast<std::size_t>(at) * dim);
        return Status::Ok();
      },
      cancel);
}

int64_t QueryMetric::Within(const int32_t* members, int64_t begin, int64_t count, double r,
                            Span<uint8_t> excluded, bool, std::vector<std::pair<double, int32_t>>* out) {
  int64_t computed = 0;
  for (int64_t at = begin; at < begin + count; ++at) {
    const int32_t o = members[at];
    if (!excluded.empty() && excluded[static_cast<std::size_t>(o)] != 0) continue;
    const double d = Distance(o, r);
    ++computed;
    if (d <= r) out->emplace_back(d, o);
  }
  return computed;
}

QueryMetricFactory StringQueryMetrics(const CodePointStrings& strings,
                                      const CodePointStrings& queries,
                                      const CancelCheck& cancel) {
  return [&strings, &queries, cancel](int32_t q) -> std::unique_ptr<QueryMetric> {
    return std::make_unique<StringQuery>(strings, queries.Get(q), cancel);
  };
}

Status BuildClusterList(const ObjectMetric& metric, int32_t n_objects, Span<uint8_t> excluded,
                        int32_t cluster_size, int32_t supercluster_clusters,
                        ClusterCentres centres, int32_t threads, ClusterList* out,
                        const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("BuildClusterList: NULL output");
  if (n_objects < 0) return Status::InvalidArgument("a negative number of objects");
  if (cluster_size < kMinClusterSize || cluster_size > kMaxClusterSize)
    return Status::InvalidArgument("cluster_size must be between " +
                                   std::to_string(kMinClusterSize) + " and " +
                                   std::to_string(kMaxClusterSize));
  if (supercluster_clusters < 0 || supercluster_clusters > kMaxSuperclusterClusters)
    return Status::InvalidArgument("supercluster_clusters must be between 0 and " +
                                   std::to_string(kMaxSuperclusterClusters));
  if (centres != ClusterCentres::kSum && centres != ClusterCentres::kFarthest)
    return Status::InvalidArgument("an unknown rule for the clusters' centres");
  if (!excluded.empty() && excluded.size() != static_cast<std::size_t>(n_objects))
    return Status::InvalidArgument("excluded flags of another size than the objects");
  threads = ResolveThreads(threads);
  ClusterList list;
  list.n_objects = n_objects;
  list.cluster_size = cluster_size;
  list.supercluster_clusters = supercluster_clusters;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n_objects; ++i)
    if (excluded.empty() || excluded[static_cast<std::size_t>(i)] == 0) ids.push_back(i);
  if (ids.empty()) {
    *out = std::move(list);
    return Status::Ok();
  }
  if (supercluster_clusters == 0) {
    Status s = BuildList(metric, std::move(ids), 0, cluster_size, centres, threads, 0,
                         &list.clusters, &list.members, cancel);
    if (!s.ok()) return s;
    Supercluster all;
    all.ball.centre = list.members[0];
    all.ball.count = static_cast<int32_t>(list.members.size());
    all.ball.radius = kInf;  // nothing prunes it
    all.ball.outside = kInf;
    all.n_clusters = static_cast<int32_t>(list.clusters.size());
    list.superclusters.push_back(all);
    *out = std::move(list);
    return Status::Ok();
  }
  const int64_t ball_size = static_cast<int64_t>(cluster_size) * supercluster_clusters;
  std::vector<Cluster> balls;
  std::vector<int32_t> top_members;
  Status s = BuildList(metric, std::move(ids), 0,
                       static_cast<int32_t>(std::min<int64_t>(ball_size, n_objects)), centres,
                       threads, 0, &balls, &top_members, cancel);
  if (!s.ok()) return s;
  // each supercluster's own list, its first centre the supercluster's
  std::vector<std::vector<Cluster>> inner(balls.size());
  std::vector<std::vector<int32_t>> inner_members(balls.size());
  s = ParallelFor(
      static_cast<int64_t>(balls.size()), threads,
      [&](int64_t b) {
        const Cluster& ball = balls[static_cast<std::size_t>(b)];
        std::vector<int32_t> own(top_members.begin() + ball.begin,
                                 top_members.begin() + ball.begin + ball.count);
        std::sort(own.begin(), own.end());
        const std::size_t first = static_cast<std::size_t>(
            std::lower_bound(own.begin(), own.end(), ball.centre) - own.begin());
        return BuildList(metric, std::move(own), first, cluster_size, centres, 1, ball.begin,
                         &inner[static_cast<std::size_t>(b)],
                         &inner_members[static_cast<std::size_t>(b)], cancel);
      },
      cancel);
  if (!s.ok()) return s;
  for (std::size_t b = 0; b < balls.size(); ++b) {
    Supercluster sc;
    sc.ball = balls[b];
    sc.first_cluster = static_cast<int32_t>(list.clusters.size());
    sc.n_clusters = static_cast<int32_t>(inner[b].size());
    list.superclusters.push_back(sc);
    list.clusters.insert(list.clusters.end(), inner[b].begin(), inner[b].end());
    list.members.insert(list.members.end(), inner_members[b].begin(), inner_members[b].end());
  }
  *out = std::move(list);
  return Status::Ok();
}

ClusterList WholeList(int32_t n_objects) { return WholeRange(0, n_objects, n_objects); }

Status MemberDistances(const ObjectMetric& metric, const ClusterList& list, int32_t threads,
                       std::vector<double>* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("MemberDistances: NULL output");
  const int64_t n_members = static_cast<int64_t>(list.members.size());
  std::vector<double> d(list.members.size(), std::nan(""));
  GENIE_RETURN_IF_ERROR(ParallelFor(
      static_cast<int64_t>(list.clusters.size()), threads,
      [&](int64_t i) {
        const Cluster& c = list.clusters[static_cast<std::size_t>(i)];
        if (c.count < 1 || c.begin < 0 || c.begin + c.count > n_members ||
            list.members[static_cast<std::size_t>(c.begin)] != c.centre)
          return Status::Ok();  // not a cluster as built: left NaN, read whole
        double* at = d.data() + c.begin;
        if (!metric.Distances(c.centre, list.members.data() + c.begin, c.count, at, cancel))
          return Status::Cancelled();
        if (!std::is_sorted(at, at + c.count)) std::fill(at, at + c.count, std::nan(""));
        return Status::Ok();
      },
      cancel));
  *out = std::move(d);
  return Status::Ok();
}

Status CpuRangeSearch(const ClusterList& list, const QueryMetricFactory& metrics,
                      const RangeRequest& request, int32_t threads, RangeResult* out,
                      const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CpuRangeSearch: NULL output");
  GENIE_RETURN_IF_ERROR(CheckRangeRequest(list, request));
  const int32_t n_objects = request.n_objects < 0 ? list.n_objects : request.n_objects;
  threads = ResolveThreads(threads);
  // the objects past the list's, read one by one after it (never skipped by its stops)
  const ClusterList tail = WholeRange(list.n_objects, n_objects - list.n_objects, n_objects);
  const int32_t nq = request.n_queries;
  const int32_t n_super = static_cast<int32_t>(list.superclusters.size());
  const int32_t n_tail = static_cast<int32_t>(tail.superclusters.size());
  const int32_t stripes = QueryStripes(nq, threads, n_super + n_tail);
  const int64_t units = static_cast<int64_t>(nq) * stripes;
  std::vector<std::vector<Hit>> hits(static_cast<std::size_t>(units));
  std::vector<Counts> counts(static_cast<std::size_t>(units));
  std::vector<std::atomic<int32_t>> stop_at(static_cast<std::size_t>(std::max(nq, 1)));
  for (auto& s : stop_at) s.store(n_super);
  Status s = ParallelFor(
      units, threads,
      [&](int64_t u) {
        const int32_t q = static_cast<int32_t>(u / stripes);
        const int32_t stripe = static_cast<int32_t>(u % stripes);
        // stripe's share of the list's superclusters and of the tail's
        auto share = [&](int32_t n, int32_t* from, int32_t* to) {
          *from = static_cast<int32_t>(static_cast<int64_t>(n) * stripe / stripes);
          *to = static_cast<int32_t>(static_cast<int64_t>(n) * (stripe + 1) / stripes);
        };
        int32_t from, to;
        std::unique_ptr<QueryMetric> metric = metrics(q);
        std::vector<Hit>* h = &hits[static_cast<std::size_t>(u)];
        Counts* c = &counts[static_cast<std::size_t>(u)];
        share(n_super, &from, &to);
        GENIE_RETURN_IF_ERROR(SearchStripe(list, metric.get(), request.radius, request.member_distances,
                                           request.excluded, true, from, to,
                                           &stop_at[static_cast<std::size_t>(q)], h, c, cancel));
        std::atomic<int32_t> never(n_tail);
        share(n_tail, &from, &to);
        return SearchStripe(tail, metric.get(), request.radius, Span<double>(), request.excluded, false,
                            from, to, &never, h, c, cancel);
      },
      cancel);
  if (!s.ok()) return s;
  RangeResult result;
  result.offsets.assign(1, 0);
  std::vector<Hit> merged;
  for (int32_t q = 0; q < nq; ++q) {
    merged.clear();
    for (int32_t stripe = 0; stripe < stripes; ++stripe) {
      const std::size_t u = static_cast<std::size_t>(q) * static_cast<std::size_t>(stripes) +
                            static_cast<std::size_t>(stripe);
      merged.insert(merged.end(), hits[u].begin(), hits[u].end());
      std::vector<Hit>().swap(hits[u]);
      result.distances_computed += counts[u].distances;
      result.superclusters_discarded += counts[u].superclusters_discarded;
      result.clusters_discarded += counts[u].clusters_discarded;
    }
    std::sort(merged.begin(), merged.end());
    AppendQueryRows(merged, &result);
  }
  *out = std::move(result);
  return Status::Ok();
}

Status PlanRangeSearch(const ClusterList& list, const QueryMetricFactory& metrics,
                       const RangeRequest& request, int32_t threads, RangePlan* out,
                       const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("PlanRangeSearch: NULL output");
  GENIE_RETURN_IF_ERROR(CheckRangeRequest(list, request));
  const int32_t n_objects = request.n_objects < 0 ? list.n_objects : request.n_objects;
  const int32_t nq = request.n_queries;
  const int32_t n_super = static_cast<int32_t>(list.superclusters.size());
  threads = ResolveThreads(threads);
  // (a single query's walk of a long list is most of a GPU search's time)
  const int32_t stripes = QueryStripes(nq, threads, n_super);
  const int64_t units = static_cast<int64_t>(nq) * stripes;
  std::vector<std::vector<RangeItem>> items(static_cast<std::size_t>(units));
  std::vector<Counts> counts(static_cast<std::size_t>(units));
  std::vector<std::atomic<int32_t>> stop_at(static_cast<std::size_t>(std::max(nq, 1)));
  for (auto& a : stop_at) a.store(n_super);
  Status s = ParallelFor(
      units, threads,
      [&](int64_t u) {
        const int32_t q = static_cast<int32_t>(u / stripes);
        const int32_t stripe = static_cast<int32_t>(u % stripes);
        const int32_t from = static_cast<int32_t>(static_cast<int64_t>(n_super) * stripe / stripes);
        const int32_t to = static_cast<int32_t>(static_cast<int64_t>(n_super) * (stripe + 1) / stripes);
        std::unique_ptr<QueryMetric> metric = metrics(q);
        std::vector<RangeItem>* mine = &items[static_cast<std::size_t>(u)];
        GENIE_RETURN_IF_ERROR(WalkStripe(list, metric.get(), request.radius, request.member_distances, from,
                                         to, &stop_at[static_cast<std::size_t>(q)],
                                         &counts[static_cast<std::size_t>(u)], cancel,
                                         [&](const Cluster&, int64_t begin, int32_t count) {
          // clusters met one after another read as one range
          if (!mine->empty() && mine->back().listed && mine->back().begin + mine->back().count == begin &&
              mine->back().count <= INT32_MAX - count) {
            mine->back().count += count;
          } else {
            mine->push_back(RangeItem{q, count, begin, true});
          }
          return Status::Ok();
        }));
        if (stripe == stripes - 1 && n_objects > list.n_objects)
          mine->push_back(RangeItem{q, n_objects - list.n_objects, list.n_objects, false});
        return Status::Ok();
      },
      cancel);
  if (!s.ok()) return s;
  RangePlan plan;
  for (int64_t u = 0; u < units; ++u) {
    plan.items.insert(plan.items.end(), items[static_cast<std::size_t>(u)].begin(),
                      items[static_cast<std::size_t>(u)].end());
    plan.distances_computed += counts[static_cast<std::size_t>(u)].distances;
    plan.superclusters_discarded += counts[static_cast<std::size_t>(u)].superclusters_discarded;
    plan.clusters_discarded += counts[static_cast<std::size_t>(u)].clusters_discarded;
  }
  *out = std::move(plan);
  return Status::Ok();
}

Status FinishRangeSearch(const QueryMetricFactory& metrics, const RangeRequest& request,
                         std::vector<RangeCandidate> candidates, int32_t threads, RangeResult* out,
                         const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("FinishRangeSearch: NULL output");
  if (std::isnan(request.radius) || request.radius < 0)
    return Status::InvalidArgument("the radius must be a number at least 0");
  const int32_t nq = request.n_queries;
  // The candidates by query (a count, then each moved to its query's run),
  // then each query's sorted by object and deduplicated on the threads: a
  // batch's may be millions (a GPU pass at a wide radius), which one sort
  // on one thread took most of the search's time over.
  std::vector<std::size_t> first(static_cast<std::size_t>(nq) + 1, 0);
  for (const RangeCandidate& c : candidates) {
    if (c.query < 0 || c.query >= nq) return Status::Internal("a range candidate of no query");
    if (!request.excluded.empty() && (c.object < 0 || static_cast<std::size_t>(c.object) >= request.excluded.size()))
      return Status::Internal("a range candidate of no object");
    ++first[static_cast<std::size_t>(c.query) + 1];
  }
  for (int32_t q = 0; q < nq; ++q) first[static_cast<std::size_t>(q) + 1] += first[static_cast<std::size_t>(q)];
  std::vector<RangeCandidate> by_query(candidates.size());
  {
    std::vector<std::size_t> next(first.begin(), first.end() - 1);
    for (const RangeCandidate& c : candidates) by_query[next[static_cast<std::size_t>(c.query)]++] = c;
  }
  std::vector<RangeCandidate>().swap(candidates);
  std::vector<std::vector<Hit>> hits(static_cast<std::size_t>(nq));
  std::vector<int64_t> computed(static_cast<std::size_t>(nq), 0);
  Status s = ParallelFor(
      nq, ResolveThreads(threads),
      [&](int64_t qi) {
        const std::size_t q = static_cast<std::size_t>(qi);
        const auto begin = by_query.begin() + static_cast<std::ptrdiff_t>(first[q]);
        auto end = by_query.begin() + static_cast<std::ptrdiff_t>(first[q + 1]);
        if (begin == end) return Status::Ok();
        // a duplicate with its distance given first, so that unique keeps it
        // (the distances computed are then the same on every run)
        std::sort(begin, end, [](const RangeCandidate& a, const RangeCandidate& b) {
          return a.object != b.object ? a.object < b.object : !std::isnan(a.distance) && std::isnan(b.distance);
        });
        end = std::unique(begin, end,
                          [](const RangeCandidate& a, const RangeCandidate& b) { return a.object == b.object; });
        std::unique_ptr<QueryMetric> metric;
        for (auto it = begin; it != end && metric == nullptr; ++it)
          if (std::isnan(it->distance)) metric = metrics(static_cast<int32_t>(qi));
        int64_t seen = 0;
        for (auto it = begin; it != end; ++it) {
          const int32_t o = it->object;
          if ((++seen & 1023) == 0 && cancel.requested()) return Status::Cancelled();
          // (counted as the search computed it, excluded or not)
          if (std::isnan(it->distance)) ++computed[q];
          if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(o)] != 0) continue;
          const double d = std::isnan(it->distance) ? metric->Distance(o, request.radius) : it->distance;
          if (d <= request.radius) hits[q].push_back(Hit{d, o});
        }
        std::sort(hits[q].begin(), hits[q].end());
        return Status::Ok();
      },
      cancel);
  if (!s.ok()) return s;
  RangeResult result;
  result.offsets.assign(1, 0);
  for (int64_t c : computed) result.distances_computed += c;
  for (const std::vector<Hit>& h : hits) AppendQueryRows(h, &result);
  *out = std::move(result);
  return Status::Ok();
}

Status CandidateRangeSearch(const QueryMetricFactory& metrics, const RangeRequest& request,
                            Span<int64_t> offsets, Span<int32_t> candidates, int32_t threads,
                            RangeResult* out, const CancelCheck& cancel) {
  if (out == nullptr) return Status::InvalidArgument("CandidateRangeSearch: NULL output");
  if (std::isnan(request.radius) || request.radius < 0)
    return Status::InvalidArgument("the radius must be a number at least 0");
  const int32_t nq = request.n_queries;
  GENIE_RETURN_IF_ERROR(CheckCandidateOffsets(nq, offsets, candidates.size()));
  std::vector<std::vector<Hit>> hits(static_cast<std::size_t>(nq));
  std::vector<int64_t> computed(static_cast<std::size_t>(nq), 0);
  GENIE_RETURN_IF_ERROR(ParallelFor(
      nq, ResolveThreads(threads),
      [&](int64_t qi) {
        const std::size_t q = static_cast<std::size_t>(qi);
        std::vector<int32_t> ids(candidates.begin() + offsets[q], candidates.begin() + offsets[q + 1]);
        if (ids.empty()) return Status::Ok();
        if (!std::is_sorted(ids.begin(), ids.end())) std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        if (ids.front() < 0 || ids.back() >= request.n_objects)
          return Status::InvalidArgument("a candidate is not an object of the set");
        std::unique_ptr<QueryMetric> metric = metrics(static_cast<int32_t>(qi));
        for (std::size_t i = 0; i < ids.size(); ++i) {
          const int32_t o = ids[i];
          if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(o)] != 0) continue;
          const double d = metric->Distance(o, request.radius);
          ++computed[q];
          if (d <= request.radius) hits[q].push_back(Hit{d, o});
          if ((i & 1023) == 1023 && cancel.requested()) return Status::Cancelled();
        }
        std::sort(hits[q].begin(), hits[q].end());
        return Status::Ok();
      },
      cancel));
  RangeResult result;
  result.offsets.assign(1, 0);
  for (int32_t q = 0; q < nq; ++q) {
    result.distances_computed += computed[static_cast<std::size_t>(q)];
    AppendQueryRows(hits[static_cast<std::size_t>(q)], &result);
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace genie

// The List of Clusters and the List of Superclusters (seed 004: Barrientos,
// Gomez, Tenllado, Prieto, Zezula, "Multi-level clustering on metric spaces
// using a multi-GPU platform"): an index of a metric space that answers a
// range query (q, r), every object u with d(q, u) <= r, exactly, while
// skipping whole clusters by the triangle inequality.  One structure for
// both of genie's metrics: Euclidean distance on vectors (L2Distance) and
// edit distance on strings (code points).
//
// Build (the paper's, section 2.1, fixed cluster size K).  The first
// centre is the list's first object (the lowest id: reproducible); a
// cluster is its centre and the K - 1 objects nearest to it among those not
// yet in a cluster (ties by id); the next centre is the object not yet in a
// cluster whose distances to the previous centres have the largest sum (the
// heuristic the paper and Chavez and Navarro found best; ties by id).  The
// List of Superclusters (section 2.2) first builds such a list with
// clusters of K * N objects, the superclusters, then a list of clusters of
// K inside each, whose first centre is the supercluster's own.  Without
// superclusters (N = 0) the list is stored as one supercluster that no
// query prunes, so there is one search for both.
//
// Each cluster keeps two radii: `radius`, the largest distance from the
// centre to a member, and `outside`, the smallest distance from the centre
// to an object left for later clusters of the same list (+infinity when
// none is left; at least radius).  Search (section 2.1): a cluster whose
// ball cannot meet the query's, d(q, c) > radius + r, is skipped; once the
// query's ball lies strictly inside `outside`, d(q, c) + r < outside, no
// later cluster of that list can hold an answer and the list stops there.
// The paper's stop test uses the covering radius; `outside` is what makes
// it hold with ties at the radius (an object as far as the radius may be
// left for a later cluster) and is never smaller.
//
// Exactness.  Answers are decided by the metric's own exact distance,
// the one the SQL operators return; the pruning tests compare distances
// that may each carry a rounding error (L2Distance is a double sum, off by
// at most about dim * 2^-53 relative), so each test gives away a margin of
// 1e-9 relative (kPruneSlack) and can only search more than it must, never
// less.  Edit distances are whole numbers and the margin never moves them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/sequence.hpp"
#include "genie/span.hpp"
#include "genie/status.hpp"
#include "genie/vectors.hpp"

namespace genie {

// The relative margin of every pruning test (see above).
constexpr double kPruneSlack = 1e-9;

// x widened by the margin (the 1e-300 covers the double sum's underflow,
// far below any float32 input's square), and narrowed by it.
inline double Loose(double x) { return x + kPruneSlack * x + 1e-300; }
inline double Tight(double x) { return x - kPruneSlack * x; }

// What the float32 pass proves of the exact L2Distance d of two vectors of
// dim elements whose SquaredL2Float32 is s32: low <= d <= up, from |s32 - s|
// <= e s + a for the true squared distance s (genie/vectors.hpp), with
// kPruneSlack for the roundings of the exact distance and of these few
// operations.  False where the bound says little (near underflow, where a
// dominates, and after an overflow): the caller computes d.
bool Float32DistanceBounds(int32_t dim, float s32, double* low, double* up);

// Limits of the storage parameters.
constexpr int32_t kMinClusterSize = 2;
constexpr int32_t kMaxClusterSize = 1 << 16;
constexpr int32_t kMaxSuperclusterClusters = 1 << 12;

// How the build picks the next centre among the objects not yet listed
// (either way the top list's first centre is the lowest id and a
// supercluster's inner list starts at its centre; equal values: the lowest id).
enum class ClusterCentres : int32_t {
  // The paper's (section 2.1): the largest sum of distances to the centres
  // so far.
  kSum = 0,
  // The largest distance to the nearest centre so far (farthest-first
  // traversal).  On data of natural clusters a little larger than a
  // supercluster (the LSH workload's mixture, bench/range.md) the sum
  // rule picks the leftovers of clusters already listed before clusters
  // not yet touched, and mixes them into wide superclusters that nothing
  // prunes; this rule lists every untouched cluster first.
  kFarthest = 1,
};

// One cluster of either level: members [begin, begin + count) of the
// list's members, its centre first for a cluster (a supercluster's centre
// is the first member of its first cluster).
struct Cluster {
  int32_t centre = 0;
  int32_t count = 0;
  int64_t begin = 0;
  double radius = 0;   // no member is farther from the centre
  double outside = 0;  // no object of a later cluster of the same list is nearer
};

// A supercluster: its own ball, and clusters [first_cluster, first_cluster
// + n_clusters) of the list, whose members are exactly its members.
struct Supercluster {
  Cluster ball;
  int32_t first_cluster = 0;
  int32_t n_clusters = 0;
};

struct ClusterList {
  int32_t n_objects = 0;              // the ids members may name: [0, n_objects)
  int32_t cluster_size = 0;           // K
  int32_t supercluster_clusters = 0;  // N; 0: one supercluster that nothing prunes
  std::vector<int32_t> members;       // object ids, by supercluster, then cluster
  std::vector<Cluster> clusters;
  std::vector<Supercluster> superclusters;
};

// Distances between the objects being listed (thread-safe: the build asks
// from several threads).  out[i] = d(a, objects[i]), exact; false when
// cancel asked to stop on the way (long strings poll it inside one distance).
class ObjectMetric {
 public:
  virtual ~ObjectMetric() = default;
  virtual bool Distances(int32_t a, const int32_t* objects, int64_t n, double* out,
                         const CancelCheck& cancel) const = 0;
};

// One query's distance to objects (one per query and thread): the exact
// distance when it is at most cap, else any value above cap.
class QueryMetric {
 public:
  virtual ~QueryMetric() = default;
  virtual double Distance(int32_t object, double cap) = 0;
  // What a walk of the list needs of a centre: *beyond when the distance
  // is proven above cap (then *lower and *upper are meaningless), else
  // *lower <= the exact distance <= *upper (perhaps a little apart: the
  // early stop then fires a little less often, and the ring of members
  // read is a little wider).  By default both the exact distance.
  virtual void CentreBound(int32_t object, double cap, bool* beyond, double* lower, double* upper) {
    *upper = Distance(object, cap);
    *lower = *upper;
    *beyond = *upper > cap;
  }
  // The objects members[begin .. begin + count) of a list within r, by
  // their exact distances, appended to out as (distance, object); excluded
  // ones skipped; how many distances were computed.  listed: members is the
  // list the metric was made for (a vector metric may then read the rows
  // stored in its order).
  virtual int64_t Within(const int32_t* members, int64_t begin, int64_t count, double r,
                      Span<uint8_t> excluded, bool listed,
                      std::vector<std::pair<double, int32_t>>* out);
};
using QueryMetricFactory = std::function<std::unique_ptr<QueryMetric>(int32_t query)>;

// The metrics of genie's two kinds of values (the sets must outlive them).
std::unique_ptr<ObjectMetric> VectorObjectMetric(const VectorSet& set);
std::unique_ptr<ObjectMetric> StringObjectMetric(const CodePointStrings& strings);
// queries: n_queries * set.dim floats; strings: the query strings.
// member_rows: NULL, or the rows of a list's members in its order
// (MemberRows), which the list's scans then read contiguously, as the
// paper stores each cluster, instead of gathering the rows by id.
QueryMetricFactory VectorQueryMetrics(const VectorSet& set, const float* queries,
                                      const float* member_rows = nullptr);
// The set's rows of list's members, in the list's order, into *out, on up
// to `threads` threads (0: every core); cancel is polled every 4,096 rows.
Status MemberRows(const VectorSet& set, const ClusterList& list, HostArray<float>* out,
                  const CancelCheck& cancel = CancelCheck(), int32_t threads = 0);
QueryMetricFactory StringQueryMetrics(const CodePointStrings& strings,
                                      const CodePointStrings& queries,
                                      const CancelCheck& cancel);

// Lists the objects whose excluded flag is zero (excluded empty: all of
// [0, n_objects)), clusters of cluster_size, superclusters of
// supercluster_clusters clusters (0: none), each list's centres picked by
// `centres` (both levels), on up to `threads` threads; cancel is polled
// between pieces of work.  InvalidArgument for sizes out of range or an
// unknown rule.
Status BuildClusterList(const ObjectMetric& metric, int32_t n_objects, Span<uint8_t> excluded,
                        int32_t cluster_size, int32_t supercluster_clusters,
                        ClusterCentres centres, int32_t threads,
                        ClusterList* out, const CancelCheck& cancel = CancelCheck());

// Each member's distance to its cluster's centre, in the members' order,
// on up to `threads` threads; cancel polled between clusters.  The build
// lists a cluster's members by ascending distance to its centre (the
// centre first), which RangeRequest::member_distances relies on: a cluster
// whose members do not ascend so, or whose first member is not its centre
// (a list not built by BuildClusterList), gets NaN for every member, and
// is read whole.
Status MemberDistances(const ObjectMetric& metric, const ClusterList& list, int32_t threads,
                       std::vector<double>* out, const CancelCheck& cancel = CancelCheck());

// The list of every object in one cluster of unbounded radius: what a range
// search reads without a List of Clusters (every object, no pruning).
ClusterList WholeList(int32_t n_objects);

// A list as it was stored: every member an object id in range, each at most
// once, clusters covering the members in order, superclusters covering the
// clusters, radii not NaN.  InvalidArgument (a corrupt list) otherwise.
Status CheckClusterList(const ClusterList& list);

// The serialised form (little-endian, fixed widths; what the index pages
// hold) and back (CheckClusterList applied).
std::vector<uint8_t> SerializeClusterList(const ClusterList& list);
Status DeserializeClusterList(const uint8_t* data, std::size_t size, ClusterList* out);

struct RangeRequest {
  int32_t n_queries = 0;
  double radius = 0;  // >= 0, not NaN
  // The objects searched: the list's and, past them, objects it does not
  // name (an index's pending rows), each read (< 0: the list's alone).
  int32_t n_objects = -1;
  // Empty, or one per object: nonzero = not an answer (dead, NULL).
  Span<uint8_t> excluded;
  // Empty, or the list's MemberDistances: then a cluster's members are
  // read only in the ring where the triangle inequality lets them be
  // within the radius (|d(x, c) - d(q, c)| <= d(q, x) <= r, so d(x, c) in
  // [d(q, c) - r, d(q, c) + r]), found by two binary searches.
  Span<double> member_distances;
};

// Per query q: rows [offsets[q], offsets[q + 1]) by (distance, object id)
// ascending, every listed object within the radius; and what the search
// read, summed over the queries.
struct RangeResult {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> objects;
  std::vector<double> distances;
  int64_t distances_computed = 0;
  int64_t superclusters_discarded = 0;
  int64_t clusters_discarded = 0;
};

// The range search on up to `threads` threads: a batch by query, a single
// query by stripes of superclusters.  cancel is polled every few hundred
// distances.
Status CpuRangeSearch(const ClusterList& list, const QueryMetricFactory& metrics,
                      const RangeRequest& request, int32_t threads, RangeResult* out,
                      const CancelCheck& cancel = CancelCheck());

// The range search of vectors without a list (every object read), as
// CpuRangeSearch over WholeList(request.n_objects, or set.size() when < 0)
// answers it, row for row and with its distances_computed, but read as the
// exact kNN scan reads: blocks of queries against tiles of the rows, four
// queries a pass (vector_range.cpp).  queries: n_queries * set.dim floats,
// finite.  cancel is polled between tiles.
Status CpuVectorRangeScan(const VectorSet& set, const float* queries, const RangeRequest& request,
                          int32_t threads, RangeResult* out, const CancelCheck& cancel = CancelCheck());

// ---- the k nearest through the list: a shrinking radius ----

// The exact k nearest vectors of each query, as CpuVectorScan gives them
// (rows, distances and order, ties at the k-th distance by id), reading
// the list's clusters in ascending order of a lower bound of their members'
// distances (their radius, their supercluster's, and the outside of the
// clusters before them) until that bound passes the k-th distance found
// (list_knn.cpp).  The set's objects past list.n_objects (an index's
// pending rows) are each read.  member_rows: NULL, or MemberRows(set,
// list).  A batch by query; fewer queries than threads: each query's
// clusters read by several.  *distances_computed (may be NULL): the
// distances read, centres and members, over all queries.  cancel is polled
// every few hundred members.
Status CpuVectorListKnn(const VectorSet& set, const ClusterList& list, const float* member_rows,
                        const VectorScanRequest& request, int32_t threads, VectorScanResult* out,
                        int64_t* distances_computed, const CancelCheck& cancel = CancelCheck());

// ---- a range search whose members another engine reads (the GPU) ----

// Members one query must read: the list's members [begin, begin + count)
// when listed, else the objects [begin, begin + count) past the list.
struct RangeItem {
  int32_t query = 0;
  int32_t count = 0;
  int64_t begin = 0;
  bool listed = true;
};

struct RangePlan {
  std::vector<RangeItem> items;
  int64_t distances_computed = 0;  // to centres
  int64_t superclusters_discarded = 0;
  int64_t clusters_discarded = 0;
};

// What CpuRangeSearch reads, without reading a member: per query the
// clusters its ball may meet (their centres' distances computed here, on
// the CPU, as the paper's CPU threads discard superclusters), then the
// objects past the list, in pieces.
Status PlanRangeSearch(const ClusterList& list, const QueryMetricFactory& metrics,
                       const RangeRequest& request, int32_t threads, RangePlan* out,
                       const CancelCheck& cancel = CancelCheck());

// A member that another pass could not rule out for a query, with its
// exact distance when that pass computed it (the metric's, to the bit), else NaN.
struct RangeCandidate {
  int32_t query;
  int32_t object;
  double distance;
};

// The exact end of such a search (every answer among the candidates;
// duplicates allowed): each candidate's distance (by the metric where it
// has none), those within the radius and not excluded, in CpuRangeSearch's
// rows and order; distances_computed counts those computed here (the
// other fields are the caller's).
Status FinishRangeSearch(const QueryMetricFactory& metrics, const RangeRequest& request,
                         std::vector<RangeCandidate> candidates, int32_t threads, RangeResult* out,
                         const CancelCheck& cancel = CancelCheck());

// The range search of given candidates alone (the permutation index's):
// per query q, the objects candidates[offsets[q] .. offsets[q + 1]) (ids
// of [0, request.n_objects), duplicates allowed) within the radius and not
// excluded, in CpuRangeSearch's rows and order; distances_computed counts
// the distances computed.  By query on up to `threads` threads, each query's
// candidates sorted only when they do not ascend already, cancel polled
// every 1,024 candidates.  InvalidArgument for offsets that do not ascend
// within the candidates or an id of no object.
Status CandidateRangeSearch(const QueryMetricFactory& metrics, const RangeRequest& request,
                            Span<int64_t> offsets, Span<int32_t> candidates, int32_t threads,
                            RangeResult* out, const CancelCheck& cancel = CancelCheck());

}  // namespace genie

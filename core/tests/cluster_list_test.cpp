// Tests of the List of Clusters and of Superclusters on the CPU: the built
// structure against its definition (every member within its cluster's
// radius, every later object no nearer than `outside`, each object listed
// once), range answers against brute force by the exact distances
// (vectors of every shape, with ties at the radius and duplicates; strings
// by the reference Levenshtein), with and without superclusters, the whole
// list, excluded objects, batches and single queries in stripes, the stored
// form and its corruptions, cancel, and that pruning reads less; both rules
// for the next centre (the paper's sum of distances and the farthest from
// the nearest centre), each against its definition; each cluster read only
// in the query's ring of distances to its centre (MemberDistances), with
// the same rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "genie/cluster_list.hpp"
#include "genie/string_scan_fixture.hpp"
#include "genie/vector_fixture.hpp"

namespace genie {
namespace {

using testing::MakeSet;
using testing::MutateWord;
using testing::NearbyQueries;
using testing::RandomVectors;
using testing::RandomWords;
using testing::VectorShape;

// The oracle: every object not excluded (and listed) within r by the exact distance.
template <typename Dist>
RangeResult BruteForce(int32_t n, int32_t nq, double r, const std::vector<uint8_t>& excluded,
                       const std::vector<uint8_t>& unlisted, Dist dist) {
  RangeResult out;
  for (int32_t q = 0; q < nq; ++q) {
    std::vector<std::pair<double, int32_t>> hits;
    for (int32_t o = 0; o < n; ++o) {
      if ((!excluded.empty() && excluded[static_cast<std::size_t>(o)]) ||
          (!unlisted.empty() && unlisted[static_cast<std::size_t>(o)]))
        continue;
      const double d = dist(q, o);
      if (d <= r) hits.emplace_back(d, o);
    }
    std::sort(hits.begin(), hits.end());
    for (const auto& h : hits) {
      out.distances.push_back(h.first);
      out.objects.push_back(h.second);
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

void ExpectSame(const RangeResult& want, const RangeResult& got, const char* what) {
  ASSERT_EQ(want.offsets, got.offsets) << what;
  EXPECT_EQ(want.objects, got.objects) << what;
  EXPECT_EQ(want.distances, got.distances) << what;
}

// The definition of the structure, checked by brute force.
template <typename Dist>
void ExpectWellBuilt(const ClusterList& list, const std::vector<uint8_t>& unlisted, Dist dist) {
  ASSERT_TRUE(CheckClusterList(list).ok());
  std::vector<uint8_t> listed(static_cast<std::size_t>(list.n_objects), 0);
  for (int32_t o : list.members) listed[static_cast<std::size_t>(o)] = 1;
  for (int32_t o = 0; o < list.n_objects; ++o)
    EXPECT_EQ(listed[static_cast<std::size_t>(o)] != 0,
              unlisted.empty() || unlisted[static_cast<std::size_t>(o)] == 0)
        << o;
  auto check_level = [&](const Cluster& c, int64_t list_end) {
    for (int64_t at = c.begin; at < c.begin + c.count; ++at)
      EXPECT_LE(dist(c.centre, list.members[static_cast<std::size_t>(at)]), c.radius);
    for (int64_t at = c.begin + c.count; at < list_end; ++at)
      EXPECT_GE(dist(c.centre, list.members[static_cast<std::size_t>(at)]), c.outside);
    EXPECT_GE(c.outside, c.radius);
  };
  for (const Supercluster& sc : list.superclusters) {
    const int64_t end = sc.ball.begin + sc.ball.count;
    if (std::isfinite(sc.ball.radius)) check_level(sc.ball, static_cast<int64_t>(list.members.size()));
    for (int32_t i = sc.first_cluster; i < sc.first_cluster + sc.n_clusters; ++i)
      check_level(list.clusters[static_cast<std::size_t>(i)], end);
  }
}

// Every member of a plan's items (objects past the list by id), a
// candidate without its distance: what another engine would read.
std::vector<RangeCandidate> PlanCandidates(const RangePlan& plan, const ClusterList& list) {
  std::vector<RangeCandidate> out;
  for (const RangeItem& item : plan.items)
    for (int64_t i = item.begin; i < item.begin + item.count; ++i)
      out.push_back(RangeCandidate{
          item.query, item.listed ? list.members[static_cast<std::size_t>(i)] : static_cast<int32_t>(i), std::nan("")});
  return out;
}

struct VectorCase {
  VectorShape shape;
  int32_t supercluster_clusters;
  ClusterCentres centres = ClusterCentres::kSum;
};

class ClusterListVectors : public ::testing::TestWithParam<VectorCase> {};

TEST_P(ClusterListVectors, RangeAnswersEqualBruteForce) {
  const VectorCase c = GetParam();
  std::mt19937 rng(20261127u + static_cast<uint32_t>(c.shape) * 7u +
                   static_cast<uint32_t>(c.supercluster_clusters));
  const int32_t n = 1500, dim = 12, nq = 24;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, c.shape, n, dim));
  const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq, 0.05f);
  std::vector<uint8_t> unlisted(static_cast<std::size_t>(n), 0);
  for (int32_t i = 3; i < n; i += 11) unlisted[static_cast<std::size_t>(i)] = 1;

  auto object_metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*object_metric, n, unlisted, 16, c.supercluster_clusters, c.centres, 2, &list).ok());
  auto between = [&](int32_t a, int32_t b) { return L2Distance(set.row(a), set.row(b), dim); };
  ExpectWellBuilt(list, unlisted, between);
  auto to_query = [&](int32_t q, int32_t o) {
    return L2Distance(queries.data() + static_cast<std::size_t>(q) * dim, set.row(o), dim);
  };
  ClusterList head;
  ASSERT_TRUE(BuildClusterList(*object_metric, n - 300, {}, 16, c.supercluster_clusters, c.centres, 2, &head).ok());

  // radii: 0, a tie with an object's distance (the boundary), and wider ones
  std::vector<double> radii{0.0, to_query(1, 7), to_query(2, 100)};
  std::vector<double> all;
  for (int32_t o = 0; o < n; ++o) all.push_back(to_query(0, o));
  std::sort(all.begin(), all.end());
  radii.push_back(all[15]);
  radii.push_back(all[300]);
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 13) excluded[static_cast<std::size_t>(i)] = 1;
  for (double r : radii) {
    for (int32_t threads : {1, 3}) {
      RangeRequest request;
      request.n_queries = nq;
      request.radius = r;
      request.excluded = excluded;
      RangeResult got;
      ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), request, threads, &got).ok());
      ExpectSame(BruteForce(n, nq, r, excluded, unlisted, to_query), got, "list");
      // each cluster read only in the query's ring: the same rows, fewer distances
      std::vector<double> ring;
      ASSERT_TRUE(MemberDistances(*object_metric, list, threads, &ring).ok());
      ASSERT_EQ(ring.size(), list.members.size());
      RangeRequest ringed = request;
      ringed.member_distances = ring;
      RangeResult in_ring;
      ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), ringed, threads, &in_ring).ok());
      ExpectSame(got, in_ring, "ring");
      EXPECT_LE(in_ring.distances_computed, got.distances_computed);
      // the list's members read from their rows stored in its order
      HostArray<float> rows;
      ASSERT_TRUE(MemberRows(set, list, &rows).ok());
      RangeResult from_rows;
      ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data(), rows.data()), request, threads,
                                 &from_rows).ok());
      ExpectSame(got, from_rows, "member rows");
      // the whole list (no clusters) reads every object: it answers the same
      ClusterList whole = WholeList(n);
      RangeResult all_rows;
      ASSERT_TRUE(CpuRangeSearch(whole, VectorQueryMetrics(set, queries.data()), request, threads, &all_rows).ok());
      ExpectSame(BruteForce(n, nq, r, excluded, {}, to_query), all_rows, "whole");
      // one query alone, in stripes of superclusters
      RangeRequest one = request;
      one.n_queries = 1;
      RangeResult single;
      ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data() + 5 * dim), one, 4, &single).ok());
      auto from_five = [&](int32_t, int32_t o) { return to_query(5, o); };
      ExpectSame(BruteForce(n, 1, r, excluded, unlisted, from_five), single, "single");
      // a list of the first objects only (an index's main rows): the rest are read one by one
      RangeRequest with_tail = request;
      with_tail.n_objects = n;
      RangeResult tail_rows;
      HostArray<float> head_rows;
      ASSERT_TRUE(MemberRows(set, head, &head_rows).ok());
      ASSERT_TRUE(CpuRangeSearch(head, VectorQueryMetrics(set, queries.data(), head_rows.data()), with_tail, threads,
                                 &tail_rows).ok());
      ExpectSame(BruteForce(n, nq, r, excluded, {}, to_query), tail_rows, "list and tail");
      // the plan another engine reads (every member of its items a candidate), finished here
      RangePlan plan;
      ASSERT_TRUE(PlanRangeSearch(head, VectorQueryMetrics(set, queries.data()), with_tail, threads, &plan).ok());
      const std::vector<RangeCandidate> candidates = PlanCandidates(plan, head);
      RangeResult finished;
      ASSERT_TRUE(FinishRangeSearch(VectorQueryMetrics(set, queries.data()), with_tail, candidates, threads,
                                    &finished).ok());
      ExpectSame(tail_rows, finished, "plan and finish");
      // the plan of each cluster's ring alone: a part of those items, the same rows
      std::vector<double> head_ring;
      ASSERT_TRUE(MemberDistances(*object_metric, head, threads, &head_ring).ok());
      RangeRequest ringed_tail = with_tail;
      ringed_tail.member_distances = head_ring;
      RangePlan ring_plan;
      ASSERT_TRUE(PlanRangeSearch(head, VectorQueryMetrics(set, queries.data()), ringed_tail, threads, &ring_plan).ok());
      const std::vector<RangeCandidate> in_rings = PlanCandidates(ring_plan, head);
      EXPECT_LE(in_rings.size(), candidates.size());
      RangeResult ring_finished;
      ASSERT_TRUE(FinishRangeSearch(VectorQueryMetrics(set, queries.data()), with_tail, in_rings, threads,
                                    &ring_finished).ok());
      ExpectSame(tail_rows, ring_finished, "ring plan and finish");
      // in any order, with duplicates, some with their distance given: the same rows
      std::vector<RangeCandidate> shuffled = candidates;
      for (std::size_t i = 0; i < candidates.size(); i += 3) {
        RangeCandidate c = candidates[i];
        if (i % 2 == 0) {
          const int32_t q = c.query;
          c.distance = L2Distance(queries.data() + static_cast<std::size_t>(q) * dim, set.row(c.object), dim);
        }
        shuffled.push_back(c);
      }
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      RangeResult unordered;
      ASSERT_TRUE(FinishRangeSearch(VectorQueryMetrics(set, queries.data()), with_tail, shuffled, threads,
                                    &unordered).ok());
      ExpectSame(tail_rows, unordered, "shuffled candidates");
      // a distance is computed for each (query, object) none of whose copies had one
      std::map<std::pair<int32_t, int32_t>, bool> given;
      for (const RangeCandidate& c : shuffled) given[{c.query, c.object}] |= !std::isnan(c.distance);
      int64_t to_compute = 0;
      for (const auto& g : given) to_compute += g.second ? 0 : 1;
      EXPECT_EQ(unordered.distances_computed, to_compute);
      if (r == radii[0]) {
        EXPECT_LT(candidates.size(), static_cast<std::size_t>(n) * nq / 2);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ClusterListVectors,
    ::testing::Values(VectorCase{VectorShape::kGaussian, 0}, VectorCase{VectorShape::kGaussian, 4},
                      VectorCase{VectorShape::kSmallIntegers, 4},
                      VectorCase{VectorShape::kDuplicates, 3}, VectorCase{VectorShape::kTiny, 4},
                      VectorCase{VectorShape::kHuge, 2},
                      VectorCase{VectorShape::kGaussian, 0, ClusterCentres::kFarthest},
                      VectorCase{VectorShape::kGaussian, 4, ClusterCentres::kFarthest},
                      VectorCase{VectorShape::kSmallIntegers, 4, ClusterCentres::kFarthest},
                      VectorCase{VectorShape::kDuplicates, 3, ClusterCentres::kFarthest},
                      VectorCase{VectorShape::kHuge, 2, ClusterCentres::kFarthest}),
    [](const ::testing::TestParamInfo<VectorCase>& i) {
      std::string name = testing::ShapeName(i.param.shape);
      std::replace(name.begin(), name.end(), '-', '_');  // gtest names: letters, digits, _
      return name + "_n" + std::to_string(i.param.supercluster_clusters) +
             (i.param.centres == ClusterCentres::kFarthest ? "_farthest" : "");
    });

TEST(ClusterList, StringRangeAnswersEqualReferenceLevenshtein) {
  std::mt19937 rng(77);
  const int32_t n = 1200, nq = 30;
  CodePointStrings strings = RandomWords(&rng, n, 14);
  CodePointStrings queries;
  for (int32_t q = 0; q < nq; ++q) {
    Span<CodePoint> w = strings.Get(static_cast<int32_t>(rng() % n));
    queries.Add(MutateWord(&rng, std::vector<CodePoint>(w.begin(), w.end()), q % 3));
  }
  std::vector<uint8_t> excluded(static_cast<std::size_t>(n), 0);
  for (int32_t i = 5; i < n; i += 9) excluded[static_cast<std::size_t>(i)] = 1;
  auto between = [&](int32_t a, int32_t b) {
    return static_cast<double>(LevenshteinReference(strings.Get(a), strings.Get(b)));
  };
  auto to_query = [&](int32_t q, int32_t o) {
    return static_cast<double>(LevenshteinReference(queries.Get(q), strings.Get(o)));
  };
  for (const auto& [nsuper, centres] : {std::make_pair(0, ClusterCentres::kSum), std::make_pair(3, ClusterCentres::kSum),
                                        std::make_pair(3, ClusterCentres::kFarthest)}) {
    auto metric = StringObjectMetric(strings);
    ClusterList list;
    ASSERT_TRUE(BuildClusterList(*metric, n, {}, 12, nsuper, centres, 2, &list).ok());
    ExpectWellBuilt(list, {}, between);
    for (double r : {0.0, 1.0, 2.0, 3.0, 2.5}) {
      RangeRequest request;
      request.n_queries = nq;
      request.radius = r;
      request.excluded = excluded;
      RangeResult got;
      ASSERT_TRUE(CpuRangeSearch(list, StringQueryMetrics(strings, queries, CancelCheck()), request, 2, &got).ok());
      ExpectSame(BruteForce(n, nq, r, excluded, {}, to_query), got, "strings");
      // edit distances are whole numbers: the ring's bounds are exact
      std::vector<double> ring;
      ASSERT_TRUE(MemberDistances(*metric, list, 2, &ring).ok());
      ASSERT_EQ(ring.size(), list.members.size());
      request.member_distances = ring;
      RangeResult in_ring;
      ASSERT_TRUE(
          CpuRangeSearch(list, StringQueryMetrics(strings, queries, CancelCheck()), request, 2, &in_ring).ok());
      ExpectSame(got, in_ring, "strings in the ring");
      EXPECT_LE(in_ring.distances_computed, got.distances_computed);
    }
  }
}

TEST(ClusterList, PruningReadsLessThanEveryObject) {
  std::mt19937 rng(5);
  const int32_t n = 20000, dim = 8, nq = 50;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  const std::vector<float> queries = NearbyQueries(&rng, set.values, n, dim, nq, 0.01f);
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 64, 8, ClusterCentres::kSum, 0, &list).ok());
  RangeRequest request;
  request.n_queries = nq;
  request.radius = 0.5;
  RangeResult got;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), request, 0, &got).ok());
  EXPECT_GT(got.superclusters_discarded, 0);
  EXPECT_GT(got.clusters_discarded, 0);
  // the Gaussian clusters are far apart: each query reads a small part
  EXPECT_LT(got.distances_computed, static_cast<int64_t>(n) * nq / 4) << got.distances_computed;
  EXPECT_GE(got.offsets[nq], nq / 5);  // the copies of data vectors at least

  // Each cluster read only in the query's ring: the same rows, far fewer
  // distances (a query near one of a cluster's members rules out most of
  // the others by their distance to the centre).  Two threads, one query
  // each: no query split in stripes, whose shared early stop could read
  // a little more or less from run to run.
  std::vector<double> ring;
  ASSERT_TRUE(MemberDistances(*metric, list, 0, &ring).ok());
  for (const Cluster& c : list.clusters) {
    EXPECT_EQ(ring[static_cast<std::size_t>(c.begin)], 0.0);
    for (int64_t at = c.begin; at < c.begin + c.count; ++at)
      EXPECT_EQ(ring[static_cast<std::size_t>(at)],
                L2Distance(set.row(c.centre), set.row(list.members[static_cast<std::size_t>(at)]), dim));
  }
  RangeResult whole;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), request, 2, &whole).ok());
  request.member_distances = ring;
  RangeResult in_ring;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), request, 2, &in_ring).ok());
  ExpectSame(whole, in_ring, "ring");
  EXPECT_LT(in_ring.distances_computed * 3, whole.distances_computed * 2)  // (about half here, centres included)
      << in_ring.distances_computed << " of " << whole.distances_computed;
  EXPECT_GE(in_ring.clusters_discarded, whole.clusters_discarded);
  // an infinite radius: every object, whatever the rings
  RangeRequest every = request;
  every.radius = std::numeric_limits<double>::infinity();
  RangeResult all;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), every, 2, &all).ok());
  EXPECT_EQ(all.offsets[nq], static_cast<int64_t>(n) * nq);
  // the list read back from its stored form: the same distances
  ClusterList stored;
  const std::vector<uint8_t> bytes = SerializeClusterList(list);
  ASSERT_TRUE(DeserializeClusterList(bytes.data(), bytes.size(), &stored).ok());
  std::vector<double> stored_ring;
  ASSERT_TRUE(MemberDistances(*metric, stored, 2, &stored_ring).ok());
  EXPECT_EQ(stored_ring, ring);

  // a cluster whose members do not ascend by their distance to the centre
  // (a list not built here) gets NaN and is read whole; the others keep
  // their rings; the same rows
  ClusterList shuffled = list;
  const Cluster& c = shuffled.clusters[1];
  std::reverse(shuffled.members.begin() + c.begin + 1, shuffled.members.begin() + c.begin + c.count);
  std::vector<double> partly;
  ASSERT_TRUE(MemberDistances(*metric, shuffled, 0, &partly).ok());
  ASSERT_EQ(partly.size(), ring.size());
  for (int64_t at = 0; at < static_cast<int64_t>(ring.size()); ++at) {
    if (at >= c.begin && at < c.begin + c.count) {
      EXPECT_TRUE(std::isnan(partly[static_cast<std::size_t>(at)])) << at;
    } else {
      EXPECT_EQ(partly[static_cast<std::size_t>(at)], ring[static_cast<std::size_t>(at)]) << at;
    }
  }
  request.member_distances = partly;
  RangeResult from_shuffled;
  ASSERT_TRUE(CpuRangeSearch(shuffled, VectorQueryMetrics(set, queries.data()), request, 2, &from_shuffled).ok());
  ExpectSame(whole, from_shuffled, "a cluster out of order");
  // distances of another size than the members: refused
  request.member_distances = Span<double>(ring.data(), ring.size() - 1);
  EXPECT_EQ(CpuRangeSearch(list, VectorQueryMetrics(set, queries.data()), request, 0, &in_ring).code(),
            GENIE_INVALID_ARGUMENT);
}

// Each list's centres against the rule's definition, recomputed from the
// distances alone: a cluster's centre is, among the objects no earlier
// cluster of its list took, the one with the largest score (the sum of its
// distances to the earlier centres, or the nearest of them), the lowest id
// of equal scores; the first is the list's lowest id (the top list) or the
// supercluster's centre (its inner list).  A plain list, the superclusters'
// list and every inner list.
TEST(ClusterList, CentresFollowTheirRule) {
  std::mt19937 rng(11);
  const int32_t n = 600, dim = 6;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kSmallIntegers, n, dim));
  auto between = [&](int32_t a, int32_t b) { return L2Distance(set.row(a), set.row(b), dim); };
  auto metric = VectorObjectMetric(set);
  // one list's clusters (level) over the objects `among` (ascending), its
  // first centre `first`
  auto expect_rule = [&](ClusterCentres centres, const std::vector<Cluster>& level, const ClusterList& list,
                         std::vector<int32_t> among, int32_t first, const std::string& what) {
    std::vector<uint8_t> taken(static_cast<std::size_t>(n), 0);
    std::vector<int32_t> earlier;
    for (const Cluster& c : level) {
      int32_t want = earlier.empty() ? first : -1;
      double best = 0;
      for (int32_t o : earlier.empty() ? std::vector<int32_t>{} : among) {
        if (taken[static_cast<std::size_t>(o)]) continue;
        double score = centres == ClusterCentres::kSum ? 0.0 : std::numeric_limits<double>::infinity();
        for (int32_t e : earlier)
          score = centres == ClusterCentres::kSum ? score + between(e, o) : std::min(score, between(e, o));
        if (want < 0 || score > best) {
          want = o;
          best = score;
        }
      }
      ASSERT_EQ(c.centre, want) << what << ", cluster " << earlier.size();
      earlier.push_back(c.centre);
      for (int64_t at = c.begin; at < c.begin + c.count; ++at)
        taken[static_cast<std::size_t>(list.members[static_cast<std::size_t>(at)])] = 1;
    }
  };
  std::vector<int32_t> all(static_cast<std::size_t>(n));
  for (int32_t o = 0; o < n; ++o) all[static_cast<std::size_t>(o)] = o;
  for (ClusterCentres centres : {ClusterCentres::kSum, ClusterCentres::kFarthest}) {
    const std::string rule = centres == ClusterCentres::kSum ? "sum" : "farthest";
    for (int32_t nsuper : {0, 5}) {
      ClusterList list;
      ASSERT_TRUE(BuildClusterList(*metric, n, {}, 8, nsuper, centres, 2, &list).ok());
      ExpectWellBuilt(list, {}, between);
      if (nsuper == 0) {
        expect_rule(centres, list.clusters, list, all, 0, rule + ", plain list");
        continue;
      }
      std::vector<Cluster> balls;
      for (const Supercluster& sc : list.superclusters) balls.push_back(sc.ball);
      expect_rule(centres, balls, list, all, 0, rule + ", superclusters");
      for (std::size_t b = 0; b < list.superclusters.size(); ++b) {
        const Supercluster& sc = list.superclusters[b];
        std::vector<int32_t> own(list.members.begin() + sc.ball.begin,
                                 list.members.begin() + sc.ball.begin + sc.ball.count);
        std::sort(own.begin(), own.end());
        std::vector<Cluster> inner(list.clusters.begin() + sc.first_cluster,
                                   list.clusters.begin() + sc.first_cluster + sc.n_clusters);
        expect_rule(centres, inner, list, own, sc.ball.centre, rule + ", supercluster " + std::to_string(b));
      }
    }
  }
}

// Well separated groups a little larger than a supercluster: the farthest
// rule gives each group a supercluster of its own before any leftovers are
// listed, so a query within a group discards every other group's.
TEST(ClusterList, FarthestCentresListEachNaturalClusterWhole) {
  std::mt19937 rng(12);
  const int32_t groups = 12, per_group = 70, dim = 16, n = groups * per_group;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centre(static_cast<std::size_t>(groups) * dim);
  for (float& x : centre) x = 100.0f * normal(rng);
  std::vector<float> values(static_cast<std::size_t>(n) * dim);
  std::vector<int32_t> group_of(static_cast<std::size_t>(n));
  for (int32_t o = 0; o < n; ++o) {
    const int32_t g = o % groups;  // groups interleaved by id, 70 objects each
    group_of[static_cast<std::size_t>(o)] = g;
    for (int32_t j = 0; j < dim; ++j)
      values[static_cast<std::size_t>(o) * dim + j] = centre[static_cast<std::size_t>(g) * dim + j] + normal(rng);
  }
  VectorSet set = MakeSet(dim, n, values);
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 16, 3, ClusterCentres::kFarthest, 2, &list).ok());
  // each group (70 objects) gets a supercluster (48) of its own before any
  // leftovers are listed: the first `groups` superclusters, each within its group
  const int32_t whole = groups;
  std::vector<uint8_t> seen(groups, 0);
  for (int32_t i = 0; i < whole; ++i) {
    const Cluster& ball = list.superclusters[static_cast<std::size_t>(i)].ball;
    const int32_t g = group_of[static_cast<std::size_t>(ball.centre)];
    EXPECT_EQ(seen[static_cast<std::size_t>(g)], 0) << "supercluster " << i;
    seen[static_cast<std::size_t>(g)] = 1;
    for (int64_t at = ball.begin; at < ball.begin + ball.count; ++at)
      EXPECT_EQ(group_of[static_cast<std::size_t>(list.members[static_cast<std::size_t>(at)])], g) << "supercluster " << i;
  }
  // a query at the centre of the sixth supercluster, radius within its
  // group: the five before it are discarded (the walk stops after its own
  // group), and it computes little more than its group's distances
  const float* q = set.row(list.superclusters[5].ball.centre);
  RangeRequest request;
  request.n_queries = 1;
  request.radius = 4.0;
  RangeResult got;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, q), request, 1, &got).ok());
  EXPECT_GE(got.superclusters_discarded, 5);
  EXPECT_LE(got.distances_computed,
            2 * per_group + static_cast<int64_t>(list.superclusters.size() + list.clusters.size()));
  auto to_query = [&](int32_t, int32_t o) { return L2Distance(q, set.row(o), dim); };
  ExpectSame(BruteForce(n, 1, 4.0, {}, {}, to_query), got, "natural clusters");
}

TEST(ClusterList, StoredFormRoundTripsAndRejectsCorruption) {
  std::mt19937 rng(9);
  const int32_t n = 700, dim = 4;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 8, 4, ClusterCentres::kSum, 2, &list).ok());
  const std::vector<uint8_t> bytes = SerializeClusterList(list);
  ClusterList back;
  ASSERT_TRUE(DeserializeClusterList(bytes.data(), bytes.size(), &back).ok());
  EXPECT_EQ(back.members, list.members);
  ASSERT_EQ(back.clusters.size(), list.clusters.size());
  EXPECT_EQ(back.superclusters.size(), list.superclusters.size());
  EXPECT_EQ(SerializeClusterList(back), bytes);

  // truncated, a duplicated member, a member out of range, a NaN radius
  EXPECT_EQ(DeserializeClusterList(bytes.data(), bytes.size() - 4, &back).code(), GENIE_INVALID_ARGUMENT);
  std::vector<uint8_t> bad = bytes;
  std::copy_n(bytes.end() - 8, 4, bad.end() - 4);
  EXPECT_EQ(DeserializeClusterList(bad.data(), bad.size(), &back).code(), GENIE_INVALID_ARGUMENT);
  bad = bytes;
  const int32_t huge = n + 5;
  std::copy_n(reinterpret_cast<const uint8_t*>(&huge), 4, bad.end() - 4);
  EXPECT_EQ(DeserializeClusterList(bad.data(), bad.size(), &back).code(), GENIE_INVALID_ARGUMENT);
  ClusterList nan_radius = list;
  nan_radius.clusters[1].radius = std::nan("");
  EXPECT_EQ(CheckClusterList(nan_radius).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(DeserializeClusterList(bytes.data(), 3, &back).code(), GENIE_INVALID_ARGUMENT);
}

TEST(ClusterList, EdgeCasesAndBadArguments) {
  std::mt19937 rng(3);
  VectorSet set = MakeSet(3, 50, RandomVectors(&rng, VectorShape::kGaussian, 50, 3));
  auto metric = VectorObjectMetric(set);
  ClusterList list;
  EXPECT_EQ(BuildClusterList(*metric, 50, {}, 1, 0, ClusterCentres::kSum, 1, &list).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(BuildClusterList(*metric, 50, {}, 8, -1, ClusterCentres::kSum, 1, &list).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(BuildClusterList(*metric, 50, {}, 8, 2, static_cast<ClusterCentres>(7), 1, &list).code(),
            GENIE_INVALID_ARGUMENT);
  // every object excluded: an empty list, which answers nothing
  std::vector<uint8_t> none(50, 1);
  ASSERT_TRUE(BuildClusterList(*metric, 50, none, 8, 2, ClusterCentres::kSum, 1, &list).ok());
  EXPECT_TRUE(list.members.empty());
  RangeRequest request;
  request.n_queries = 1;
  request.radius = 1e30;
  RangeResult got;
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, set.row(0)), request, 1, &got).ok());
  EXPECT_EQ(got.offsets, (std::vector<int64_t>{0, 0}));
  // clusters larger than the set: one cluster, one supercluster; an infinite radius finds all
  ASSERT_TRUE(BuildClusterList(*metric, 50, {}, 64, 4, ClusterCentres::kSum, 1, &list).ok());
  EXPECT_EQ(list.clusters.size(), 1u);
  request.radius = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(CpuRangeSearch(list, VectorQueryMetrics(set, set.row(0)), request, 1, &got).ok());
  EXPECT_EQ(got.offsets[1], 50);
  request.radius = -1;
  EXPECT_EQ(CpuRangeSearch(list, VectorQueryMetrics(set, set.row(0)), request, 1, &got).code(), GENIE_INVALID_ARGUMENT);
  request.radius = 1;
  request.n_objects = 40;  // fewer objects than the list names
  EXPECT_EQ(CpuRangeSearch(list, VectorQueryMetrics(set, set.row(0)), request, 1, &got).code(), GENIE_INVALID_ARGUMENT);
  request.n_objects = -1;
  request.radius = std::nan("");
  EXPECT_EQ(CpuRangeSearch(list, VectorQueryMetrics(set, set.row(0)), request, 1, &got).code(), GENIE_INVALID_ARGUMENT);
}

TEST(ClusterList, CancelStopsBuildAndSearch) {
  std::mt19937 rng(4);
  const int32_t n = 5000, dim = 16;
  VectorSet set = MakeSet(dim, n, RandomVectors(&rng, VectorShape::kGaussian, n, dim));
  auto metric = VectorObjectMetric(set);
  CancelCheck cancel;
  cancel.fn = [](void*) { return 1; };
  ClusterList list;
  EXPECT_EQ(BuildClusterList(*metric, n, {}, 16, 4, ClusterCentres::kSum, 2, &list, cancel).code(), GENIE_CANCELLED);
  ASSERT_TRUE(BuildClusterList(*metric, n, {}, 16, 4, ClusterCentres::kSum, 2, &list).ok());
  RangeRequest request;
  request.n_queries = 8;
  request.radius = 100;
  RangeResult got;
  EXPECT_EQ(CpuRangeSearch(list, VectorQueryMetrics(set, set.values.data()), request, 2, &got, cancel).code(),
            GENIE_CANCELLED);
}

}  // namespace
}  // namespace genie

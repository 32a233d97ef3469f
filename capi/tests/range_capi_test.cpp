// The C API of range search and the List of Clusters: strings and vectors
// within a radius with and without a list (the same rows, and the list
// reads fewer objects, fewer still in each query's ring), the stored form through bytes and back, hand-checked
// edit distances at the boundary, the exact k nearest through a list, and
// the errors a caller can cause, as statuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "genie/genie.h"

namespace {

struct Rows {
  std::vector<int64_t> offsets;
  std::vector<int32_t> objects;
  std::vector<double> distances;
  int64_t distances_computed = 0;
};

Rows Take(genie_range_results* r, genie_engine_kind device = GENIE_ENGINE_CPU) {
  Rows out;
  out.offsets.assign(r->query_offsets, r->query_offsets + r->n_queries + 1);
  out.objects.assign(r->objects, r->objects + out.offsets.back());
  out.distances.assign(r->distances, r->distances + out.offsets.back());
  out.distances_computed = r->distances_computed;
  EXPECT_EQ(r->device, device);
  genie_range_results_free(r);
  return out;
}

TEST(CApiRange, StringsWithinARadius) {
  std::string text;
  std::vector<int64_t> offsets{0};
  for (const char* w : {"kitten", "sitting", "mitten", "bitten", "kitchen", "written", "smitten", "sit",
                        "kit", "knitting", "fitting", "sitter", "kitty", ""}) {
    text += w;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  const int32_t n = static_cast<int32_t>(offsets.size()) - 1;
  genie_error err{};
  genie_strings* set = nullptr;
  ASSERT_EQ(genie_strings_create(text.data(), offsets.data(), n, &set, &err), GENIE_OK);
  genie_cluster_list* list = nullptr;
  ASSERT_EQ(genie_strings_cluster_list(set, nullptr, 3, 2, GENIE_CLUSTER_CENTRES_SUM, nullptr, &list, &err), GENIE_OK) << err.message;
  EXPECT_EQ(genie_cluster_list_objects(list), n);
  EXPECT_GE(genie_cluster_list_clusters(list), 5);

  // through the stored form
  std::vector<uint8_t> bytes(genie_cluster_list_stored_size(list));
  genie_cluster_list_store(list, bytes.data());
  genie_cluster_list* loaded = nullptr;
  ASSERT_EQ(genie_cluster_list_load(bytes.data(), bytes.size(), &loaded, &err), GENIE_OK) << err.message;

  const std::string q = "kitten";
  const int64_t qoff[2] = {0, static_cast<int64_t>(q.size())};
  genie_range_scan scan{};
  scan.n_queries = 1;
  scan.query_text = q.data();
  scan.query_text_offsets = qoff;
  scan.radius = 1;
  scan.list = loaded;
  genie_range_results* r = nullptr;
  // the GPU's answer where there is one (it reads length windows, not the
  // list), else DEVICE_UNAVAILABLE; AUTO answers on the GPU or the CPU then
  const genie_status on_gpu = genie_strings_within(set, GENIE_ENGINE_GPU, nullptr, &scan, &r, &err);
  ASSERT_TRUE(on_gpu == GENIE_OK || on_gpu == GENIE_DEVICE_UNAVAILABLE) << err.message;
  const genie_engine_kind auto_device = on_gpu == GENIE_OK ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU;
  if (on_gpu == GENIE_OK) {
    Rows gpu = Take(r, GENIE_ENGINE_GPU);
    EXPECT_EQ(gpu.objects, (std::vector<int32_t>{0, 2, 3}));
    EXPECT_EQ(gpu.distances, (std::vector<double>{0, 1, 1}));
  }
  ASSERT_EQ(genie_strings_within(set, GENIE_ENGINE_AUTO, nullptr, &scan, &r, &err), GENIE_OK) << err.message;
  Rows got = Take(r, auto_device);
  // kitten 0; mitten, bitten 1 (by id); kitchen is 2 away, sitting 3
  EXPECT_EQ(got.objects, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(got.distances, (std::vector<double>{0, 1, 1}));
  scan.radius = 2;
  scan.list = nullptr;
  ASSERT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK);
  Rows whole = Take(r);
  scan.list = loaded;
  ASSERT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK);
  EXPECT_EQ(Take(r).objects, whole.objects);
  // + kitchen, written, smitten, sitter, kitty at 2
  EXPECT_EQ(whole.objects, (std::vector<int32_t>{0, 2, 3, 4, 5, 6, 11, 12}));
  // only the candidates named are read: the odd ones of those
  const int64_t coff[2] = {0, 6};
  const int32_t cands[6] = {1, 3, 5, 7, 11, 3};
  scan.candidate_offsets = coff;
  scan.candidates = cands;
  ASSERT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK) << err.message;
  Rows some = Take(r);
  EXPECT_EQ(some.objects, (std::vector<int32_t>{3, 5, 11}));
  EXPECT_EQ(some.distances, (std::vector<double>{1, 2, 2}));
  EXPECT_EQ(some.distances_computed, 5);
  scan.candidate_offsets = nullptr;
  scan.candidates = nullptr;

  // errors: a negative radius, a list of another set, corrupt bytes
  scan.radius = -1;
  EXPECT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  scan.radius = NAN;
  EXPECT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  genie_strings* fewer = nullptr;
  ASSERT_EQ(genie_strings_create(text.data(), offsets.data(), n - 1, &fewer, &err), GENIE_OK);
  scan.radius = 1;
  EXPECT_EQ(genie_strings_within(fewer, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  // a list of the first 8 words (an index's main rows): the other 6 are read one by one
  genie_strings* first8 = nullptr;
  ASSERT_EQ(genie_strings_create(text.data(), offsets.data(), 8, &first8, &err), GENIE_OK);
  genie_cluster_list* head = nullptr;
  ASSERT_EQ(genie_strings_cluster_list(first8, nullptr, 3, 0, GENIE_CLUSTER_CENTRES_SUM, nullptr, &head, &err), GENIE_OK);
  scan.radius = 2;
  scan.list = head;
  ASSERT_EQ(genie_strings_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK) << err.message;
  EXPECT_EQ(Take(r).objects, whole.objects);
  genie_cluster_list_free(head);
  genie_strings_free(first8);
  scan.list = loaded;
  bytes[bytes.size() - 1] ^= 0x7f;
  genie_cluster_list* bad = nullptr;
  EXPECT_EQ(genie_cluster_list_load(bytes.data(), bytes.size(), &bad, &err), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(genie_strings_cluster_list(set, nullptr, 1, 0, GENIE_CLUSTER_CENTRES_SUM, nullptr, &bad, &err), GENIE_INVALID_ARGUMENT);
  genie_cluster_list_free(list);
  genie_cluster_list_free(loaded);
  genie_strings_free(set);
  genie_strings_free(fewer);
}

TEST(CApiRange, VectorsWithinARadius) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int32_t n = 3000, dim = 6, nq = 10;
  std::vector<float> values(static_cast<size_t>(n) * dim);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < dim; ++j) values[static_cast<size_t>(i) * dim + j] = 10.0f * (i % 7) + normal(rng);
  genie_error err{};
  genie_vectors* set = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
  std::vector<uint8_t> excluded(static_cast<size_t>(n), 0);
  excluded[0] = 1;
  genie_cluster_list* list = nullptr;
  ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 32, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &list, &err), GENIE_OK) << err.message;
  std::vector<float> queries(values.begin(), values.begin() + nq * dim);
  genie_range_scan scan{};
  scan.n_queries = nq;
  scan.queries = queries.data();
  scan.radius = genie_l2_distance(values.data(), values.data() + 7 * dim, dim);  // a tie at the boundary
  scan.excluded = excluded.data();
  genie_range_results* r = nullptr;
  ASSERT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK) << err.message;
  Rows whole = Take(r);
  // a search through `with` (the scan's list after) and its rows against the whole search's
  auto through = [&](genie_cluster_list* with, Rows* rows) {
    scan.list = with;
    ASSERT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_OK);
    *rows = Take(r);
    EXPECT_EQ(rows->offsets, whole.offsets);
    EXPECT_EQ(rows->objects, whole.objects);
    EXPECT_EQ(rows->distances, whole.distances);
  };
  Rows pruned;
  through(list, &pruned);
  EXPECT_LT(pruned.distances_computed, whole.distances_computed / 2);
  // each cluster read whole, not only the query's ring: the same rows,
  // more distances (on one thread, both: no query split in stripes, whose
  // shared early stop could read a little more or less from run to run)
  genie_engine_options one{};
  one.threads = 1;
  Rows in_rings, unringed;
  for (int32_t whole_clusters : {0, 1}) {
    scan.list = list;
    scan.whole_clusters = whole_clusters;
    ASSERT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, &one, &scan, &r, &err), GENIE_OK);
    Rows& rows = whole_clusters ? unringed : in_rings;
    rows = Take(r);
    EXPECT_EQ(rows.objects, whole.objects);
    EXPECT_EQ(rows.distances, whole.distances);
  }
  EXPECT_GT(unringed.distances_computed, in_rings.distances_computed);
  scan.whole_clusters = 0;
  // the farthest rule's list: the same rows; an unknown rule refused
  genie_cluster_list* farthest = nullptr;
  ASSERT_EQ(genie_vectors_cluster_list(set, nullptr, 32, 4, GENIE_CLUSTER_CENTRES_FARTHEST, nullptr, &farthest, &err),
            GENIE_OK) << err.message;
  Rows by_farthest;
  through(farthest, &by_farthest);
  scan.list = list;
  genie_cluster_list_free(farthest);
  genie_cluster_list* bad = nullptr;
  EXPECT_EQ(genie_vectors_cluster_list(set, nullptr, 32, 4, static_cast<genie_cluster_centres>(5), nullptr, &bad, &err),
            GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  // object 7 is within the radius of query 0 exactly; object 0 is excluded
  bool seven = false;
  for (int64_t i = whole.offsets[0]; i < whole.offsets[1]; ++i) {
    seven = seven || whole.objects[static_cast<size_t>(i)] == 7;
    EXPECT_NE(whole.objects[static_cast<size_t>(i)], 0);
  }
  EXPECT_TRUE(seven);
  // given candidates (the permutation index's): the whole search's rows
  // among them, with duplicates and the excluded object named; on AUTO too
  std::vector<int64_t> coffsets{0};
  std::vector<int32_t> cands;
  for (int32_t q = 0; q < nq; ++q) {
    for (int32_t o = q % 3; o < n; o += 3) cands.push_back(o);
    cands.push_back(0);
    cands.push_back(q % 3);
    coffsets.push_back(static_cast<int64_t>(cands.size()));
  }
  scan.candidate_offsets = coffsets.data();
  scan.candidates = cands.data();
  for (genie_engine_kind device : {GENIE_ENGINE_CPU, GENIE_ENGINE_AUTO}) {
    ASSERT_EQ(genie_vectors_within(set, device, nullptr, &scan, &r, &err), GENIE_OK) << err.message;
    const Rows some = Take(r);
    ASSERT_EQ(some.offsets.size(), whole.offsets.size());
    int64_t kept = 0;
    for (int32_t q = 0; q < nq; ++q) {
      std::vector<int32_t> want;
      std::vector<double> want_d;
      for (int64_t i = whole.offsets[q]; i < whole.offsets[q + 1]; ++i)
        if (whole.objects[static_cast<size_t>(i)] % 3 == q % 3) {
          want.push_back(whole.objects[static_cast<size_t>(i)]);
          want_d.push_back(whole.distances[static_cast<size_t>(i)]);
        }
      EXPECT_EQ(std::vector<int32_t>(some.objects.begin() + some.offsets[q], some.objects.begin() + some.offsets[q + 1]),
                want) << q;
      EXPECT_EQ(std::vector<double>(some.distances.begin() + some.offsets[q], some.distances.begin() + some.offsets[q + 1]),
                want_d) << q;
      kept += static_cast<int64_t>(want.size());
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(some.distances_computed, whole.distances_computed / 2);
  }
  // a candidate that is no object, offsets that descend, no candidates where the offsets name some
  cands[5] = n;
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  cands[5] = -1;
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  cands[5] = 5;
  const int64_t second = coffsets[2];
  coffsets[2] = coffsets[1] - 1;
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  coffsets[2] = second;
  scan.candidates = nullptr;
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  // offsets past the last one's start: {0, 5, 0} names no candidate at its end but reads none
  const std::vector<int64_t> zig{0, 5, 0};
  scan.n_queries = 2;
  scan.candidate_offsets = zig.data();
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  scan.n_queries = nq;
  scan.candidate_offsets = nullptr;
  scan.candidates = nullptr;
  queries[3] = NAN;
  EXPECT_EQ(genie_vectors_within(set, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  genie_cluster_list_free(list);
  genie_vectors_free(set);
}

// The exact k nearest with a list (genie_vector_scan.list): every list_use
// gives the rows of the scan without one; ALWAYS reads the list on the CPU
// whatever the device and reads less than every vector; AUTO on the CPU
// answers a single query and a batch's first queries through it, the rest
// by what those read; NEVER and
// AUTO on the GPU read every vector; a bad list_use is an error.
TEST(CApiRange, VectorsNearestThroughTheList) {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // 17 tight groups far apart (i % 40 and (j + 1) taken modulo 17): a
  // query's neighbours are in its own group
  const int32_t n = 4000, dim = 8, nq = 40;
  std::vector<float> values(static_cast<size_t>(n) * dim);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < dim; ++j)
      values[static_cast<size_t>(i) * dim + j] = 100.0f * static_cast<float>((i % 40) * (j + 1) % 17) + normal(rng);
  genie_error err{};
  genie_vectors* set = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), n, dim, &set, &err), GENIE_OK);
  genie_cluster_list* list = nullptr;
  // the list of the first 3,800 vectors: the last 200 are read one by one (pending rows)
  genie_vectors* head = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), 3800, dim, &head, &err), GENIE_OK);
  ASSERT_EQ(genie_vectors_cluster_list(head, nullptr, 25, 4, GENIE_CLUSTER_CENTRES_SUM, nullptr, &list, &err), GENIE_OK) << err.message;
  std::vector<uint8_t> excluded(static_cast<size_t>(n), 0);
  for (int32_t i = 0; i < n; i += 9) excluded[static_cast<size_t>(i)] = 1;
  std::vector<float> queries(static_cast<size_t>(nq) * dim);
  for (size_t i = 0; i < queries.size(); ++i) queries[i] = values[i + 3 * dim] + 0.1f * normal(rng);
  auto scan_with = [&](int32_t count, genie_engine_kind device, const genie_cluster_list* l, genie_list_use use,
                       genie_vector_results** r) {
    genie_vector_scan scan{};
    scan.n_queries = count;
    scan.queries = queries.data();
    scan.k = 7;
    scan.excluded = excluded.data();
    scan.list = l;
    scan.list_use = use;
    return genie_vectors_scan(set, device, nullptr, &scan, r, &err);
  };
  auto rows = [](genie_vector_results* r) {
    std::vector<int64_t> offsets(r->query_offsets, r->query_offsets + r->n_queries + 1);
    std::vector<double> out(r->distances, r->distances + offsets.back());
    std::vector<int32_t> objects(r->objects, r->objects + offsets.back());
    for (int32_t o : objects) out.push_back(o);
    for (int64_t o : offsets) out.push_back(static_cast<double>(o));
    return out;
  };
  for (int32_t count : {1, nq}) {
    genie_vector_results* r = nullptr;
    ASSERT_EQ(scan_with(count, GENIE_ENGINE_CPU, nullptr, GENIE_LIST_AUTO, &r), GENIE_OK) << err.message;
    const std::vector<double> want = rows(r);
    EXPECT_EQ(r->listed, 0);
    genie_vector_results_free(r);
    ASSERT_EQ(scan_with(count, GENIE_ENGINE_AUTO, list, GENIE_LIST_ALWAYS, &r), GENIE_OK) << err.message;
    EXPECT_EQ(rows(r), want) << count;
    EXPECT_EQ(r->device, GENIE_ENGINE_CPU);
    EXPECT_EQ(r->listed, count);
    EXPECT_GT(r->list_distances, 0);
    EXPECT_LT(r->list_distances, static_cast<int64_t>(n) * count / 2);
    genie_vector_results_free(r);
    // AUTO with a list that has timed nothing yet (a copy through its
    // stored form): a single query through it; a batch of 40 its first two
    // (one in 16), the rest by the exact scan, until each way is timed three
    // times; then the faster way (its first queries through the list when
    // that is the list, the rest as the times now say)
    std::vector<uint8_t> bytes(genie_cluster_list_stored_size(list));
    genie_cluster_list_store(list, bytes.data());
    genie_cluster_list* fresh = nullptr;
    ASSERT_EQ(genie_cluster_list_load(bytes.data(), bytes.size(), &fresh, &err), GENIE_OK) << err.message;
    ASSERT_EQ(scan_with(count, GENIE_ENGINE_CPU, fresh, GENIE_LIST_AUTO, &r), GENIE_OK) << err.message;
    EXPECT_EQ(rows(r), want) << count;
    EXPECT_EQ(r->listed, count == 1 ? 1 : 2);
    genie_vector_results_free(r);
    for (int call = 2; count > 1 && call <= 4; ++call) {
      ASSERT_EQ(scan_with(count, GENIE_ENGINE_CPU, fresh, GENIE_LIST_AUTO, &r), GENIE_OK) << err.message;
      EXPECT_EQ(rows(r), want) << count;
      if (call < 4) EXPECT_EQ(r->listed, 2) << call;
      else EXPECT_TRUE(r->listed == 0 || r->listed == 2 || r->listed == count) << r->listed;
      genie_vector_results_free(r);
    }
    genie_cluster_list_free(fresh);
    ASSERT_EQ(scan_with(count, GENIE_ENGINE_CPU, list, GENIE_LIST_NEVER, &r), GENIE_OK) << err.message;
    EXPECT_EQ(rows(r), want) << count;
    EXPECT_EQ(r->listed, 0);
    genie_vector_results_free(r);
    // AUTO on the GPU (where there is one) reads every vector there; the
    // AUTO device without one is the CPU engine, which reads the list (a
    // fresh one: it has timed nothing yet)
    const bool gpu = scan_with(count, GENIE_ENGINE_GPU, list, GENIE_LIST_AUTO, &r) == GENIE_OK;
    if (gpu) {
      EXPECT_EQ(rows(r), want) << count;
      EXPECT_EQ(r->listed, 0);
      genie_vector_results_free(r);
    }
    ASSERT_EQ(genie_cluster_list_load(bytes.data(), bytes.size(), &fresh, &err), GENIE_OK) << err.message;
    ASSERT_EQ(scan_with(count, GENIE_ENGINE_AUTO, fresh, GENIE_LIST_AUTO, &r), GENIE_OK) << err.message;
    EXPECT_EQ(rows(r), want) << count;
    EXPECT_EQ(r->listed, gpu ? 0 : count == 1 ? 1 : 2);
    genie_vector_results_free(r);
    genie_cluster_list_free(fresh);
  }
  genie_vector_results* r = nullptr;
  EXPECT_EQ(scan_with(1, GENIE_ENGINE_CPU, list, static_cast<genie_list_use>(7), &r), GENIE_INVALID_ARGUMENT);
  // a list of more vectors than the set holds
  genie_vectors* fewer = nullptr;
  ASSERT_EQ(genie_vectors_create(values.data(), 100, dim, &fewer, &err), GENIE_OK);
  genie_vector_scan scan{};
  scan.n_queries = 1;
  scan.queries = queries.data();
  scan.k = 3;
  scan.list = list;
  scan.list_use = GENIE_LIST_ALWAYS;
  EXPECT_EQ(genie_vectors_scan(fewer, GENIE_ENGINE_CPU, nullptr, &scan, &r, &err), GENIE_INVALID_ARGUMENT);
  genie_vectors_free(fewer);
  genie_cluster_list_free(list);
  genie_vectors_free(head);
  genie_vectors_free(set);
}

}  // namespace

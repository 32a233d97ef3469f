// Range search (issue 30, seed 004) at engine level, through the C API, in
// one process: every object within a radius of each query, read whole
// (brute force) or through the List of Superclusters, on the CPU engine and
// on the GPU (the set resident: "all-fit"), side by side, every method's rows
// checked against the CPU's brute force.  RANGE_STREAM=F (F > 1) adds the
// GPU methods over the set streamed under a device budget of 1/F of its
// bytes (the paper's multi-pipeline: gpu-brute-streamed, gpu-lsc-streamed);
// RANGE_BATCHES=1,154,1000 replaces the batch sizes; RANGE_GPUS=1 adds the
// GPU methods on every GPU of the host (gpu-brute-all, gpu-lsc-all: each
// GPU a whole copy, reading a share of each batch), "vs_one_gpu" against
// GPU 0 alone, and with RANGE_STREAM the streamed methods on every GPU
// (gpu-brute-streamed-all, gpu-lsc-streamed-all: the set sharded, each GPU
// streaming its own objects); RANGE_PLACEMENT=shard makes every "-all"
// method's set sharded (each GPU its own objects, resident when they fit);
// RANGE_METHODS=a,b keeps those methods (and cpu-brute, the
// reference); RANGE_KNN=k measures the exact k nearest through the list
// instead (Knn below); RANGE_CENTRES=farthest builds the list with each
// centre the farthest from the centres before it (cluster_centres =
// farthest) and names its methods *-lsc-farthest*, RANGE_CENTRES=both
// builds both lists and runs every list method with each, side by side;
// RANGE_SHARES=0.0001,0.001 replaces the radii's shares; RANGE_RING=both
// runs every vector list method also reading each cluster met whole
// (*-lsc-whole*, genie_range_scan.whole_clusters) before the same method
// as it reads by default, "vs_whole" the ratio; RANGE_RING=all also reads
// each query's ring of each cluster wherever (*-lsc-rings*, also where the
// default reads clusters whole).
//   fmnist  Fashion-MNIST 60,000 x 784 (PATH: the folder of the idx files),
//           queries: the test images;
//   gauss   PATH data.f32,queries.f32 of bench/gen_lsh_workload.py --vectors
//           (128 dimensions), N objects;
//   words   a word list (PATH), queries: words of 6+ letters with 20% of
//           their letters replaced, by edit distance (on the GPU by length
//           window, without the list: gpu-brute only).
// Radii as the paper's: those that return on average 0.01%, 0.1% and 1% of
// the objects per query (the mean of each quantile over the first 64
// queries' distances), or edit distances 1, 2, 3.  Batches of Q = 28, 98,
// 154 queries (the paper's) and single queries (Q = 1); figures are medians
// of `runs` runs; each row gives ms per batch, queries/s, distances
// computed per query, superclusters discarded per query and answers per
// query, and the list's build time.
//   range_bench fmnist|gauss|words PATH [N] [runs] [cluster_size] [supercluster_clusters]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "genie/genie.h"

namespace {

using genie_bench::Check;
using genie_bench::Median;
using genie_bench::Now;
using genie_bench::ReadIdx;

// The numbers of a comma-separated environment variable, or `fallback`
// when it is unset (RANGE_BATCHES, RANGE_SHARES).
std::vector<double> NumbersFrom(const char* variable, std::vector<double> fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return fallback;
  std::vector<double> out;
  for (const char* p = text; *p != '\0';) {
    out.push_back(std::atof(p));
    while (*p != '\0' && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

std::vector<float> ReadF32(const std::string& path, std::size_t floats) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<float> v(floats);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(floats * sizeof(float)));
  v.resize(static_cast<std::size_t>(f.gcount()) / sizeof(float));
  return v;
}

struct Data {
  bool strings = false;
  int32_t n = 0, dim = 0, nq = 0;
  std::vector<float> vectors, queries;
  std::string text, qtext;
  std::vector<int64_t> offsets{0}, qoffsets{0};
  genie_vectors* vset = nullptr;
  genie_strings* sset = nullptr;
};

struct Run {
  std::vector<int64_t> offsets;
  std::vector<int32_t> objects;
  double ms = 0;
  int64_t distances = 0, discarded = 0;
  genie_engine_kind device = GENIE_ENGINE_CPU;
};

// A list method's name when it reads clusters whole (RANGE_RING=both) or
// in rings wherever (RANGE_RING=all): "-whole" or "-rings" after "-lsc"
// and its rule ("gpu-lsc-farthest-whole-streamed"), so that the suffixes
// the ratios look for stay last.
std::string RingName(std::string name, const char* how) {
  const std::size_t at = name.find("-lsc") + 4;
  name.insert(name.compare(at, 9, "-farthest") == 0 ? at + 9 : at, how);
  return name;
}
std::string WholeName(const std::string& name) { return RingName(name, "-whole"); }

Run Within(const Data& d, genie_engine_kind device, int32_t first, int32_t count, double radius,
           const genie_cluster_list* list, uint64_t budget = 0, uint64_t mask = 0, int32_t whole = 0) {
  genie_engine_options options{};
  options.memory_budget_bytes = budget;
  options.device_mask = mask;  // 0: GPU 0 alone
  // RANGE_PLACEMENT=shard: every GPU holds a part of the set, not a whole copy
  const char* placement = std::getenv("RANGE_PLACEMENT");
  if (mask != 0 && placement != nullptr && std::string(placement) == "shard") options.placement = GENIE_PLACEMENT_SHARD;
  genie_range_scan scan{};
  scan.n_queries = count;
  scan.radius = radius;
  scan.list = list;
  scan.whole_clusters = whole;
  std::vector<int64_t> qoff;
  if (d.strings) {
    for (int32_t q = first; q <= first + count; ++q) qoff.push_back(d.qoffsets[q] - d.qoffsets[first]);
    scan.query_text = d.qtext.data() + d.qoffsets[first];
    scan.query_text_offsets = qoff.data();
  } else {
    scan.queries = d.queries.data() + static_cast<std::size_t>(first) * d.dim;
  }
  genie_range_results* r = nullptr;
  genie_error err{};
  const double t0 = Now();
  Check(d.strings ? genie_strings_within(d.sset, device, &options, &scan, &r, &err)
                  : genie_vectors_within(d.vset, device, &options, &scan, &r, &err),
        err, "within");
  Run out;
  out.ms = Now() - t0;
  out.offsets.assign(r->query_offsets, r->query_offsets + count + 1);
  out.objects.assign(r->objects, r->objects + out.offsets.back());
  out.distances = r->distances_computed;
  out.discarded = r->superclusters_discarded;
  out.device = r->device;
  genie_range_results_free(r);
  return out;
}

void Load(const std::string& kind, const std::string& path, int32_t n_limit, Data* d) {
  genie_error err{};
  if (kind == "fmnist") {
    int32_t qn = 0, qdim = 0;
    d->vectors = ReadIdx(path + "/train-images-idx3-ubyte", &d->n, &d->dim);
    d->queries = ReadIdx(path + "/t10k-images-idx3-ubyte", &qn, &qdim);
    d->nq = qn;
  } else if (kind == "gauss") {
    const std::size_t comma = path.find(',');
    d->dim = 128;
    d->n = n_limit > 0 ? n_limit : 1000000;
    d->vectors = ReadF32(path.substr(0, comma), static_cast<std::size_t>(d->n) * d->dim);
    d->n = static_cast<int32_t>(d->vectors.size() / d->dim);
    d->queries = ReadF32(path.substr(comma + 1), static_cast<std::size_t>(2000) * d->dim);
    d->nq = static_cast<int32_t>(d->queries.size() / d->dim);
  } else {
    d->strings = true;
    std::ifstream in(path);
    std::vector<std::string> long_words;
    for (std::string w; std::getline(in, w);) {
      d->text += w;
      d->offsets.push_back(static_cast<int64_t>(d->text.size()));
      bool ascii = true;
      for (unsigned char c : w) ascii = ascii && c < 128;
      if (w.size() >= 6 && ascii) long_words.push_back(w);
    }
    d->n = static_cast<int32_t>(d->offsets.size()) - 1;
    std::mt19937 rng(2024);
    for (d->nq = 0; d->nq < 2000; ++d->nq) {
      std::string w = long_words[std::uniform_int_distribution<std::size_t>(0, long_words.size() - 1)(rng)];
      for (int32_t e = 0; e < std::max<int32_t>(1, static_cast<int32_t>(w.size()) / 5); ++e)
        w[std::uniform_int_distribution<std::size_t>(0, w.size() - 1)(rng)] =
            static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
      d->qtext += w;
      d->qoffsets.push_back(static_cast<int64_t>(d->qtext.size()));
    }
    Check(genie_strings_create(d->text.data(), d->offsets.data(), d->n, &d->sset, &err), err, "strings");
    return;
  }
  if (kind == "fmnist" && n_limit > 0 && n_limit < d->n) {
    d->n = n_limit;
    d->vectors.resize(static_cast<std::size_t>(d->n) * d->dim);
  }
  Check(genie_vectors_create(d->vectors.data(), d->n, d->dim, &d->vset, &err), err, "vectors");
}

// The radii that return each share of the objects, averaged over the first
// 64 queries: one pass of each probe's distances for every share, the
// probes on every core (4.5M objects take 64 x 4.5M distances).
std::vector<double> RadiiFor(const Data& d, const std::vector<double>& shares) {
  const int32_t probes = std::min(64, d.nq);
  std::vector<std::vector<double>> at_probe(static_cast<std::size_t>(probes));
  std::atomic<int32_t> next{0};
  auto work = [&]() {
    std::vector<double> dist(static_cast<std::size_t>(d.n));
    for (int32_t q = next++; q < probes; q = next++) {
      for (int32_t o = 0; o < d.n; ++o)
        dist[static_cast<std::size_t>(o)] = genie_l2_distance(d.queries.data() + static_cast<std::size_t>(q) * d.dim,
                                                              d.vectors.data() + static_cast<std::size_t>(o) * d.dim, d.dim);
      for (double share : shares) {
        const std::size_t at = std::min<std::size_t>(dist.size() - 1, static_cast<std::size_t>(share * d.n));
        std::nth_element(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(at), dist.end());
        at_probe[static_cast<std::size_t>(q)].push_back(dist[at]);
      }
    }
  };
  std::vector<std::thread> threads;
  const int32_t n_threads = std::max(1, std::min<int32_t>(probes, static_cast<int32_t>(std::thread::hardware_concurrency())));
  for (int32_t t = 0; t < n_threads; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  std::vector<double> radii;
  for (std::size_t s = 0; s < shares.size(); ++s) {
    double sum = 0;  // in probe order, as one thread summed them
    for (int32_t q = 0; q < probes; ++q) sum += at_probe[static_cast<std::size_t>(q)][s];
    radii.push_back(sum / probes);
  }
  return radii;
}

// RANGE_KNN=k: the exact k nearest instead of the radii, every vector read
// (exact) or the list read nearest cluster first (list: GENIE_LIST_ALWAYS;
// auto: GENIE_LIST_AUTO's rule), on the CPU engine, and the GPU's exact
// scan; rows checked against cpu-exact.
void Knn(const std::string& kind, const Data& d, const genie_cluster_list* lsc, int32_t k, int32_t runs,
         const std::vector<int32_t>& batches, bool gpu) {
  struct Method {
    const char* name;
    genie_engine_kind device;
    genie_list_use use;
  };
  std::vector<Method> methods{{"cpu-exact", GENIE_ENGINE_CPU, GENIE_LIST_NEVER},
                              {"cpu-list", GENIE_ENGINE_CPU, GENIE_LIST_ALWAYS},
                              {"cpu-auto", GENIE_ENGINE_CPU, GENIE_LIST_AUTO}};
  if (gpu) methods.push_back({"gpu-exact", GENIE_ENGINE_GPU, GENIE_LIST_NEVER});
  auto call = [&](const Method& m, int32_t first, int32_t count, Run* out) {
    genie_vector_scan scan{};
    scan.n_queries = count;
    scan.queries = d.queries.data() + static_cast<std::size_t>(first) * d.dim;
    scan.k = k;
    scan.list = lsc;
    scan.list_use = m.use;
    genie_vector_results* r = nullptr;
    genie_error err{};
    const double t0 = Now();
    Check(genie_vectors_scan(d.vset, m.device, nullptr, &scan, &r, &err), err, "knn");
    out->ms = Now() - t0;
    out->offsets.assign(r->query_offsets, r->query_offsets + count + 1);
    out->objects.assign(r->objects, r->objects + out->offsets.back());
    // the listed queries' distances, and every vector for each of the others
    out->distances = r->list_distances + static_cast<int64_t>(d.n) * (count - r->listed);
    out->discarded = r->listed;
    genie_vector_results_free(r);
  };
  for (int32_t q_batch : batches) {
    // Q = 1: 20 single queries a run; else one batch a run
    const int32_t calls = q_batch == 1 ? 20 : 1;
    double exact_ms = 0;
    std::vector<Run> truth;
    for (const Method& m : methods) {
      Run warm;
      call(m, 0, q_batch, &warm);
      std::vector<double> ms;
      bool same = true;
      int64_t distances = 0, listed = 0;
      for (int32_t run = 0; run < runs; ++run) {
        double total = 0;
        distances = listed = 0;
        for (int32_t c = 0; c < calls; ++c) {
          const int32_t first = (c * q_batch) % std::max(1, d.nq - q_batch);
          Run r;
          call(m, first, q_batch, &r);
          total += r.ms;
          distances += r.distances;
          listed += r.discarded;
          if (run == 0) {
            if (truth.size() <= static_cast<std::size_t>(c)) truth.push_back(r);
            same = same && r.offsets == truth[static_cast<std::size_t>(c)].offsets &&
                   r.objects == truth[static_cast<std::size_t>(c)].objects;
          }
        }
        ms.push_back(total / calls);
      }
      const double per = Median(ms);
      if (std::string(m.name) == "cpu-exact") exact_ms = per;
      const double queries = static_cast<double>(q_batch) * calls;
      std::printf("RESULT {\"data\": \"%s\", \"k\": %d, \"Q\": %d, \"method\": \"%s\", \"ms\": %.3f, "
                  "\"qps\": %.0f, \"distances_per_query\": %.0f, \"listed_share\": %.2f, \"vs_cpu_exact\": %.2f}\n",
                  kind.c_str(), k, q_batch, m.name, per, per > 0 ? 1000.0 * q_batch / per : 0.0,
                  distances / queries, listed / queries, per > 0 ? exact_ms / per : 0.0);
      if (!same) std::printf("MISMATCH %s k %d Q %d: rows differ from cpu-exact\n", m.name, k, q_batch);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: range_bench fmnist|gauss|words PATH [N] [runs] [cluster_size] [supercluster_clusters]\n");
    return 2;
  }
  const std::string kind = argv[1];
  const int32_t n_limit = argc > 3 ? std::atoi(argv[3]) : 0;
  const int32_t runs = argc > 4 ? std::atoi(argv[4]) : 3;
  const int32_t cluster_size = argc > 5 ? std::atoi(argv[5]) : 256;
  const int32_t super_clusters = argc > 6 ? std::atoi(argv[6]) : 16;
  Data d;
  Load(kind, argv[2], n_limit, &d);
  std::printf("DATA %s n=%d dim=%d queries=%d\n", kind.c_str(), d.n, d.dim, d.nq);
  genie_error err{};
  // the lists: by the paper's rule for the centres, or the farthest, or both
  const std::string centres = std::getenv("RANGE_CENTRES") != nullptr ? std::getenv("RANGE_CENTRES") : "sum";
  if (centres != "sum" && centres != "farthest" && centres != "both") {
    std::fprintf(stderr, "RANGE_CENTRES: sum, farthest or both\n");
    return 2;
  }
  auto build = [&](genie_cluster_centres rule, const char* rule_name) {
    genie_cluster_list* list = nullptr;
    const double b0 = Now();
    Check(d.strings ? genie_strings_cluster_list(d.sset, nullptr, cluster_size, super_clusters, rule, nullptr, &list, &err)
                    : genie_vectors_cluster_list(d.vset, nullptr, cluster_size, super_clusters, rule, nullptr, &list, &err),
          err, "list");
    std::printf("BUILD list of superclusters K=%d N=%d centres=%s: %.1f ms, %d clusters, %d superclusters\n",
                cluster_size, super_clusters, rule_name, Now() - b0, genie_cluster_list_clusters(list),
                genie_cluster_list_superclusters(list));
    std::fflush(stdout);
    return list;
  };
  genie_cluster_list* lsc = centres == "farthest" ? nullptr : build(GENIE_CLUSTER_CENTRES_SUM, "sum");
  genie_cluster_list* lsc_farthest = centres == "sum" ? nullptr : build(GENIE_CLUSTER_CENTRES_FARTHEST, "farthest");
  // does this process have a GPU?
  bool gpu = false;
  {
    genie_range_scan probe{};
    probe.n_queries = 1;
    const int64_t probe_offsets[2] = {0, d.strings ? d.qoffsets[1] : 0};
    probe.queries = d.queries.data();
    probe.query_text = d.qtext.data();
    probe.query_text_offsets = probe_offsets;
    genie_range_results* r = nullptr;
    gpu = (d.strings ? genie_strings_within(d.sset, GENIE_ENGINE_GPU, nullptr, &probe, &r, &err)
                     : genie_vectors_within(d.vset, GENIE_ENGINE_GPU, nullptr, &probe, &r, &err)) == GENIE_OK;
    genie_range_results_free(r);
  }
  std::vector<std::pair<std::string, double>> radii;
  if (d.strings) {
    radii = {{"ed1", 1}, {"ed2", 2}, {"ed3", 3}};
  } else {
    // RANGE_SHARES=0.0001,0.001: only these shares (default: the paper's three)
    const std::vector<double> shares = NumbersFrom("RANGE_SHARES", {0.0001, 0.001, 0.01});
    const std::vector<double> r = RadiiFor(d, shares);
    for (std::size_t i = 0; i < shares.size(); ++i)
      radii.push_back({std::to_string(shares[i] * 100).substr(0, 4) + "%", r[i]});
  }
  struct Method {
    std::string name;
    genie_engine_kind device;
    bool list;
    uint64_t budget;  // the device's (0: the default, the set resident)
    uint64_t mask;    // the GPUs (0: GPU 0 alone)
    const genie_cluster_list* lsc = nullptr;  // the list a list method reads
    // genie_range_scan.whole_clusters: 1 every member of each cluster met,
    // -1 each query's ring of it wherever, 0 the default
    int32_t whole = 0;
    std::string whole_name = {};  // RANGE_RING: the same method reading clusters whole, for "vs_whole"
  };
  std::vector<Method> methods{{"cpu-brute", GENIE_ENGINE_CPU, false, 0, 0}, {"cpu-lsc", GENIE_ENGINE_CPU, true, 0, 0}};
  if (gpu) {
    methods.push_back({"gpu-brute", GENIE_ENGINE_GPU, false, 0, 0});
    if (!d.strings) methods.push_back({"gpu-lsc", GENIE_ENGINE_GPU, true, 0, 0});
    // RANGE_GPUS=1: the same on every GPU of the host, each a whole copy
    // reading a share of each batch (capi/src/range_group.hpp)
    if (std::getenv("RANGE_GPUS") != nullptr && std::atoi(std::getenv("RANGE_GPUS")) > 0) {
      methods.push_back({"gpu-brute-all", GENIE_ENGINE_GPU, false, 0, ~uint64_t{0}});
      if (!d.strings) methods.push_back({"gpu-lsc-all", GENIE_ENGINE_GPU, true, 0, ~uint64_t{0}});
    }
    const double fraction = std::getenv("RANGE_STREAM") != nullptr ? std::atof(std::getenv("RANGE_STREAM")) : 0;
    if (fraction > 1 && !d.strings) {
      const uint64_t budget = static_cast<uint64_t>(static_cast<double>(d.n) * ((d.dim + 3) / 4 * 4) * 4 / fraction);
      std::printf("STREAM device budget %.1f MB (the set's padded rows / %.1f)\n", budget / 1048576.0, fraction);
      methods.push_back({"gpu-brute-streamed", GENIE_ENGINE_GPU, false, budget, 0});
      methods.push_back({"gpu-lsc-streamed", GENIE_ENGINE_GPU, true, budget, 0});
      // and with RANGE_GPUS, on every GPU: a set beyond one GPU's budget is
      // sharded, each GPU streaming (or holding) its own objects
      if (std::getenv("RANGE_GPUS") != nullptr && std::atoi(std::getenv("RANGE_GPUS")) > 0) {
        methods.push_back({"gpu-brute-streamed-all", GENIE_ENGINE_GPU, false, budget, ~uint64_t{0}});
        methods.push_back({"gpu-lsc-streamed-all", GENIE_ENGINE_GPU, true, budget, ~uint64_t{0}});
      }
    }
  }
  // each list method with the list of each rule asked for: *-lsc-farthest*
  // for the farthest rule's ("gpu-lsc-farthest-streamed": the suffixes the
  // ratios below look for stay last)
  {
    std::vector<Method> with_lists;
    for (const Method& m : methods) {
      if (!m.list) {
        with_lists.push_back(m);
        continue;
      }
      if (lsc != nullptr) {
        with_lists.push_back(m);
        with_lists.back().lsc = lsc;
      }
      if (lsc_farthest != nullptr) {
        Method f = m;
        f.lsc = lsc_farthest;
        f.name.insert(f.name.find("-lsc") + 4, "-farthest");
        with_lists.push_back(f);
      }
    }
    methods = with_lists;
  }
  // RANGE_RING=both: each vector list method first reading clusters whole;
  // RANGE_RING=all: and then reading rings wherever (*-lsc-rings*)
  const std::string ring = std::getenv("RANGE_RING") != nullptr ? std::getenv("RANGE_RING") : "";
  if ((ring == "both" || ring == "all") && !d.strings) {
    std::vector<Method> with_whole;
    for (const Method& m : methods) {
      if (m.list) {
        Method w = m;
        w.whole = 1;
        w.name = WholeName(m.name);
        with_whole.push_back(w);
      }
      with_whole.push_back(m);
      if (m.list) with_whole.back().whole_name = WholeName(m.name);
      if (m.list && ring == "all") {
        Method r = with_whole.back();
        r.whole = -1;
        r.name = RingName(m.name, "-rings");
        with_whole.push_back(r);
      }
    }
    methods = with_whole;
  }
  // RANGE_METHODS=a,b,...: only these (cpu-brute, the rows' reference, always)
  if (const char* only = std::getenv("RANGE_METHODS")) {
    const std::string wanted = std::string(",") + only + ",";
    methods.erase(std::remove_if(methods.begin(), methods.end(),
                                 [&](const Method& m) {
                                   return m.name != "cpu-brute" &&
                                          wanted.find("," + m.name + ",") == std::string::npos;
                                 }),
                  methods.end());
  }
  std::vector<int32_t> batches;
  for (double b : NumbersFrom("RANGE_BATCHES", {1, 28, 98, 154})) batches.push_back(static_cast<int32_t>(b));
  if (const char* knn = std::getenv("RANGE_KNN")) {
    if (d.strings) {
      std::fprintf(stderr, "RANGE_KNN: vectors only\n");
      return 2;
    }
    Knn(kind, d, lsc != nullptr ? lsc : lsc_farthest, std::atoi(knn), runs, batches, gpu);
    radii.clear();
  }
  for (const auto& radius : radii) {
    for (int32_t q_batch : batches) {
      // Q = 1: 20 single queries a run; else one batch a run, from the next queries
      const int32_t calls = q_batch == 1 ? 20 : 1;
      Run truth;
      double brute_ms = 0;
      std::map<std::string, double> method_ms;
      for (const Method& m : methods) {
        // warm: the device copies and the list's rows in its order are made by a first call
        (void)Within(d, m.device, 0, q_batch, radius.second, m.lsc, m.budget, m.mask, m.whole);
        std::vector<double> ms;
        Run last;
        bool same = true;
        int64_t answers = 0, distances = 0, discarded = 0;
        for (int32_t run = 0; run < runs; ++run) {
          double total = 0;
          answers = distances = discarded = 0;
          for (int32_t c = 0; c < calls; ++c) {
            const int32_t first = (c * q_batch) % std::max(1, d.nq - q_batch);
            Run r = Within(d, m.device, first, q_batch, radius.second, m.lsc, m.budget, m.mask, m.whole);
            total += r.ms;
            answers += r.offsets.back();
            distances += r.distances;
            discarded += r.discarded;
            if (run == 0 && c == 0) {
              if (truth.offsets.empty()) truth = r;
              same = same && r.offsets == truth.offsets && r.objects == truth.objects;
            }
          }
          ms.push_back(total / calls);
        }
        const double per = Median(ms);
        if (m.name == "cpu-brute") brute_ms = per;
        method_ms[m.name] = per;
        // a streamed method against the same search with the set resident
        // (all-fit), and the streamed list against streamed brute force
        std::string extra;
        const std::string name = m.name;
        const bool all = m.mask != 0;
        const std::string one = all ? name.substr(0, name.size() - std::string("-all").size()) : name;
        if (all && method_ms.count(one) > 0) {
          // every GPU against GPU 0 alone, the same method
          extra = ", \"vs_one_gpu\": " + std::to_string(per > 0 ? method_ms[one] / per : 0.0);
        }
        if (m.budget > 0 && !all) {
          const std::string fit = name.substr(0, name.size() - std::string("-streamed").size());
          extra = ", \"vs_all_fit\": " + std::to_string(method_ms[fit] > 0 ? per / method_ms[fit] : 0.0);
        }
        const std::string brute = all ? "gpu-brute-streamed-all" : "gpu-brute-streamed";
        if (m.budget > 0 && m.list && method_ms[brute] > 0)
          extra += ", \"vs_streamed_brute\": " + std::to_string(per > 0 ? method_ms[brute] / per : 0.0);
        // the default (or rings) against the same method reading clusters whole (RANGE_RING=both, all)
        if (!m.whole_name.empty() && method_ms.count(m.whole_name) > 0 && per > 0)
          extra += ", \"vs_whole\": " + std::to_string(method_ms[m.whole_name] / per);
        const double per_query = static_cast<double>(q_batch) * calls;
        std::printf("RESULT {\"data\": \"%s\", \"radius\": \"%s\", \"r\": %.6g, \"Q\": %d, \"method\": \"%s\", "
                    "\"ms\": %.3f, \"qps\": %.0f, \"distances_per_query\": %.0f, \"discarded_per_query\": %.1f, "
                    "\"answers_per_query\": %.1f, \"vs_cpu_brute\": %.2f%s}\n",
                    kind.c_str(), radius.first.c_str(), radius.second, q_batch, m.name.c_str(), per,
                    per > 0 ? 1000.0 * q_batch / per : 0.0, distances / per_query, discarded / per_query,
                    answers / per_query, per > 0 ? brute_ms / per : 0.0, extra.c_str());
        if (!same) std::printf("MISMATCH %s radius %s Q %d: rows differ from cpu-brute\n", m.name.c_str(),
                               radius.first.c_str(), q_batch);
        std::fflush(stdout);
      }
    }
  }
  genie_cluster_list_free(lsc);
  genie_cluster_list_free(lsc_farthest);
  genie_vectors_free(d.vset);
  genie_strings_free(d.sset);
  return 0;
}

// Nearest vectors by Euclidean distance, every method in one process on the
// same data (issue 16): genie's exact scan on the GPU and the CPU engine,
// genie's LSH (keywords through the match-count engine, the top candidates
// re-ranked) for several candidate counts, and where they were found at
// build time FAISS IndexFlatL2 (BLAS) and IndexHNSWFlat, and hnswlib.
// Reports build time, bytes per vector, a batch's time and queries/s, one
// query's median time, and recall@k against the exact answer; checks that
// the GPU's exact rows equal the CPU engine's (same ids, same distances to
// the bit) on every query.  One JSON line per measurement (prefix RESULT).
//
//   vector_bench --fmnist DIR             (train/t10k-images-idx3-ubyte, ungzipped)
//   vector_bench --data F.f32 --queries Q.f32 --dim D   (row-major float32)
//       [--n N] [--nq NQ] [--k 10] [--threads 0] [--single 200]
//       [--methods genie-gpu,genie-cpu,genie-lsh,genie-lsh-cpu,faiss-flat,faiss-hnsw,hnswlib]
//       (genie-lsh counts on the GPU, genie-lsh-cpu on the CPU engine too)
//       [--candidates 100,300,1000,3000] [--ef 16,32,64,128] [--m 238]
//       [--gpus 1,2,4] [--placements replicate,shard]  (genie-gpu's batch over N GPUs)
//       [--small-batches 8,32]  (genie's exact scans: also the median of --single calls of B queries)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "genie/genie.h"

#ifdef GENIE_BENCH_FAISS
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <omp.h>
using FaissIdx = faiss::Index::idx_t;  // faiss::idx_t from 1.7.4 on
#endif
#ifdef GENIE_BENCH_HNSWLIB
#include <hnswlib/hnswlib.h>
#endif

namespace {

double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
  std::string fmnist, data, queries;
  int32_t dim = 0, n = -1, nq = -1, k = 10, threads = 0, single = 200, m = 238;
  std::string methods = "genie-gpu,genie-cpu,genie-lsh,genie-lsh-cpu,faiss-flat,faiss-hnsw,hnswlib";
  std::vector<int32_t> gpus;  // --gpus 2,4: genie-gpu's batch also over the first N GPUs
  std::vector<int32_t> small_batches;  // --small-batches 8,32: calls of a few queries, timed one by one
  std::string placements = "replicate,shard";
  std::vector<int32_t> candidates{100, 300, 1000, 3000};
  std::vector<int32_t> ef{16, 32, 64, 128};
};

std::vector<int32_t> ParseList(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

bool Wants(const Args& a, const std::string& method) {
  return ("," + a.methods + ",").find("," + method + ",") != std::string::npos;
}

// An idx3-ubyte file (MNIST's format): big-endian header, then bytes.
using genie_bench::ReadIdx;

std::vector<float> ReadF32(const std::string& path, int32_t dim, int32_t* count) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(2);
  }
  const std::streamsize bytes = f.tellg();
  f.seekg(0);
  *count = static_cast<int32_t>(bytes / (static_cast<std::streamsize>(dim) * 4));
  std::vector<float> v(static_cast<size_t>(*count) * dim);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

struct Answer {
  std::vector<std::vector<int32_t>> ids;  // per query
};

double Recall(const Answer& got, const Answer& truth, int32_t k) {
  double sum = 0;
  for (size_t q = 0; q < truth.ids.size(); ++q) {
    std::set<int32_t> t(truth.ids[q].begin(), truth.ids[q].begin() + std::min<size_t>(k, truth.ids[q].size()));
    int32_t hit = 0;
    for (size_t i = 0; i < got.ids[q].size() && i < static_cast<size_t>(k); ++i) hit += t.count(got.ids[q][i]);
    sum += static_cast<double>(hit) / std::max<size_t>(1, t.size());
  }
  return sum / std::max<size_t>(1, truth.ids.size());
}

void Report(const std::string& method, const std::string& params, double build_s, double bytes_per_vector,
            int32_t nq, double batch_ms, double single_ms, double recall, const std::string& extra = "") {
  std::printf("RESULT {\"method\": \"%s\", \"params\": \"%s\", \"build_s\": %.3f, \"bytes_per_vector\": %.0f, "
              "\"queries\": %d, \"batch_ms\": %.3f, \"batch_qps\": %.0f, \"single_ms\": %.4f, \"recall\": %.4f%s}\n",
              method.c_str(), params.c_str(), build_s, bytes_per_vector, nq, batch_ms,
              batch_ms > 0 ? nq / (batch_ms / 1000.0) : 0.0, single_ms, recall, extra.c_str());
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

genie_vector_results* Scan(genie_vectors* set, genie_engine_kind device, const Args& a, const float* queries,
                           int32_t nq, int32_t k, const int64_t* cand_offsets = nullptr,
                           const int32_t* cands = nullptr, uint64_t device_mask = 0, int32_t placement = 0) {
  genie_engine_options options{};
  options.threads = a.threads;
  options.device_mask = device_mask;
  options.placement = placement;
  genie_vector_scan scan{};
  scan.n_queries = nq;
  scan.queries = queries;
  scan.k = k;
  scan.candidate_offsets = cand_offsets;
  scan.candidates = cands;
  genie_vector_results* out = nullptr;
  genie_error err{};
  if (genie_vectors_scan(set, device, &options, &scan, &out, &err) != GENIE_OK) {
    std::fprintf(stderr, "vector scan failed: %s\n", err.message);
    if (device != GENIE_ENGINE_GPU || err.status != GENIE_DEVICE_UNAVAILABLE) std::exit(1);
  }
  return out;
}

Answer ToAnswer(const genie_vector_results* r) {
  Answer a;
  for (int32_t q = 0; q < r->n_queries; ++q)
    a.ids.emplace_back(r->objects + r->query_offsets[q], r->objects + r->query_offsets[q + 1]);
  return a;
}

// genie's exact scan on one device: the batch, then single queries.
Answer GenieExact(genie_vectors* set, genie_engine_kind device, const Args& a, const std::vector<float>& queries,
                  int32_t nq, int32_t dim, const Answer* truth, genie_vector_results** keep) {
  const char* name = device == GENIE_ENGINE_GPU ? "genie-exact-gpu" : "genie-exact-cpu";
  genie_vector_results* warm = Scan(set, device, a, queries.data(), std::min(nq, 64), a.k);  // device copy, threads
  if (warm == nullptr) return Answer();  // no GPU here
  genie_vector_results_free(warm);
  double best = 1e300;
  genie_vector_results* r = nullptr;
  for (int rep = 0; rep < 3; ++rep) {
    genie_vector_results_free(r);
    const double t0 = Now();
    r = Scan(set, device, a, queries.data(), nq, a.k);
    best = std::min(best, Now() - t0);
  }
  std::vector<double> singles;
  for (int32_t q = 0; q < std::min(nq, a.single); ++q) {
    const double t0 = Now();
    genie_vector_results_free(Scan(set, device, a, queries.data() + static_cast<size_t>(q) * dim, 1, a.k));
    singles.push_back(Now() - t0);
  }
  Answer ans = ToAnswer(r);
  std::ostringstream extra;
  extra << ", \"parts\": " << r->parts;
  Report(name, "k=" + std::to_string(a.k), 0, dim * 4.0, nq, best, Median(singles),
         truth != nullptr ? Recall(ans, *truth, a.k) : 1.0, extra.str());
  // calls of b queries each (the next b queries each time), every call's
  // rows checked against the batch's
  for (int32_t b : a.small_batches) {
    if (b < 1 || b > nq) continue;
    std::vector<double> times;
    int64_t differ = 0;
    for (int32_t c = 0; c < std::min(nq / b, a.single); ++c) {
      const int32_t q0 = c * b;
      const double t0 = Now();
      genie_vector_results* s = Scan(set, device, a, queries.data() + static_cast<size_t>(q0) * dim, b, a.k);
      times.push_back(Now() - t0);
      for (int32_t q = 0; s != nullptr && q < b; ++q) {
        const int64_t sb = s->query_offsets[q], se = s->query_offsets[q + 1], rb = r->query_offsets[q0 + q];
        if (se - sb != r->query_offsets[q0 + q + 1] - rb || !std::equal(s->objects + sb, s->objects + se, r->objects + rb))
          differ++;
      }
      if (s == nullptr) differ++;
      genie_vector_results_free(s);
    }
    Report(name, "k=" + std::to_string(a.k) + ",batch=" + std::to_string(b), 0, dim * 4.0, b,
           Median(times), 0, differ == 0 ? 1.0 : 0.0, ", \"equals_batch\": " + std::string(differ == 0 ? "true" : "false"));
  }
  *keep = r;
  return ans;
}

// The exact scan over the first g GPUs (replicated or sharded): the batch,
// median of 3 after a warm-up, its rows checked against one GPU's.
void GenieGroup(genie_vectors* set, const Args& a, const std::vector<float>& queries, int32_t nq, int32_t dim,
                int32_t g, int32_t placement, const genie_vector_results* one) {
  const uint64_t mask = g >= 64 ? ~uint64_t{0} : (uint64_t{1} << g) - 1;
  genie_vector_results_free(Scan(set, GENIE_ENGINE_GPU, a, queries.data(), std::min(nq, 64), a.k, nullptr, nullptr,
                                 mask, placement));
  std::vector<double> times;
  genie_vector_results* r = nullptr;
  for (int rep = 0; rep < 3; ++rep) {
    genie_vector_results_free(r);
    const double t0 = Now();
    r = Scan(set, GENIE_ENGINE_GPU, a, queries.data(), nq, a.k, nullptr, nullptr, mask, placement);
    times.push_back(Now() - t0);
  }
  int64_t differ = 0;
  for (int32_t q = 0; one != nullptr && q < nq; ++q) {
    const int64_t b = one->query_offsets[q], e = one->query_offsets[q + 1];
    if (e - b != r->query_offsets[q + 1] - r->query_offsets[q] ||
        !std::equal(one->objects + b, one->objects + e, r->objects + r->query_offsets[q]) ||
        !std::equal(one->distances + b, one->distances + e, r->distances + r->query_offsets[q]))
      differ++;
  }
  std::ostringstream extra;
  extra << ", \"gpus\": " << g << ", \"placement\": \"" << (placement == GENIE_PLACEMENT_SHARD ? "shard" : "replicate")
        << "\", \"equals_one_gpu\": " << (one != nullptr && differ == 0 ? "true" : "false") << ", \"runs_ms\": ["
        << times[0] << ", " << times[1] << ", " << times[2] << "]";
  Report("genie-exact-gpus", "k=" + std::to_string(a.k) + ",gpus=" + std::to_string(g), 0, dim * 4.0, nq,
         Median(times), 0, differ == 0 ? 1.0 : 0.0, extra.str());
  genie_vector_results_free(r);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], val = argv[i + 1];
    if (key == "--fmnist") a.fmnist = val;
    else if (key == "--data") a.data = val;
    else if (key == "--queries") a.queries = val;
    else if (key == "--dim") a.dim = std::atoi(val.c_str());
    else if (key == "--n") a.n = std::atoi(val.c_str());
    else if (key == "--nq") a.nq = std::atoi(val.c_str());
    else if (key == "--k") a.k = std::atoi(val.c_str());
    else if (key == "--threads") a.threads = std::atoi(val.c_str());
    else if (key == "--single") a.single = std::atoi(val.c_str());
    else if (key == "--methods") a.methods = val;
    else if (key == "--candidates") a.candidates = ParseList(val);
    else if (key == "--ef") a.ef = ParseList(val);
    else if (key == "--m") a.m = std::atoi(val.c_str());
    else if (key == "--gpus") a.gpus = ParseList(val);
    else if (key == "--small-batches") a.small_batches = ParseList(val);
    else if (key == "--placements") a.placements = val;
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  int32_t n = 0, nq = 0, dim = a.dim, qdim = 0;
  std::vector<float> data, queries;
  if (!a.fmnist.empty()) {
    data = ReadIdx(a.fmnist + "/train-images-idx3-ubyte", &n, &dim);
    queries = ReadIdx(a.fmnist + "/t10k-images-idx3-ubyte", &nq, &qdim);
  } else {
    data = ReadF32(a.data, dim, &n);
    queries = ReadF32(a.queries, dim, &nq);
  }
  if (a.n > 0 && a.n < n) n = a.n, data.resize(static_cast<size_t>(n) * dim);
  if (a.nq > 0 && a.nq < nq) nq = a.nq, queries.resize(static_cast<size_t>(nq) * dim);
  const int32_t threads = a.threads > 0 ? a.threads : static_cast<int32_t>(std::thread::hardware_concurrency());
  std::printf("DATA {\"n\": %d, \"dim\": %d, \"queries\": %d, \"k\": %d, \"threads\": %d}\n", n, dim, nq, a.k, threads);

  genie_vectors* set = nullptr;
  genie_error err{};
  double t0 = Now();
  if (genie_vectors_create(data.data(), n, dim, &set, &err) != GENIE_OK) {
    std::fprintf(stderr, "genie_vectors_create: %s\n", err.message);
    return 1;
  }
  std::printf("NOTE genie vector set made in %.1f ms\n", Now() - t0);

  // the exact answer: genie's CPU engine (checked against the GPU's below)
  Answer truth;
  genie_vector_results* cpu = nullptr;
  genie_vector_results* gpu = nullptr;
  if (Wants(a, "genie-cpu")) truth = GenieExact(set, GENIE_ENGINE_CPU, a, queries, nq, dim, nullptr, &cpu);
  if (Wants(a, "genie-gpu")) {
    Answer g = GenieExact(set, GENIE_ENGINE_GPU, a, queries, nq, dim, cpu != nullptr ? &truth : nullptr, &gpu);
    if (gpu == nullptr) {
      std::printf("NOTE no usable GPU: the GPU methods are skipped\n");
    } else if (cpu != nullptr) {
      int64_t differ = 0;
      for (int32_t q = 0; q < nq; ++q) {
        const int64_t b = cpu->query_offsets[q], e = cpu->query_offsets[q + 1];
        if (e - b != gpu->query_offsets[q + 1] - gpu->query_offsets[q] ||
            !std::equal(cpu->objects + b, cpu->objects + e, gpu->objects + gpu->query_offsets[q]) ||
            !std::equal(cpu->distances + b, cpu->distances + e, gpu->distances + gpu->query_offsets[q]))
          differ++;
      }
      std::printf("CHECK {\"gpu_equals_cpu\": %s, \"queries_differing\": %lld, \"queries\": %d}\n",
                  differ == 0 ? "true" : "false", static_cast<long long>(differ), nq);
    } else {
      truth = g;
    }
  }
  if (gpu != nullptr)
    for (int32_t g : a.gpus)
      for (int32_t placement : {GENIE_PLACEMENT_REPLICATE, GENIE_PLACEMENT_SHARD})
        if (a.placements.find(placement == GENIE_PLACEMENT_SHARD ? "shard" : "replicate") != std::string::npos)
          GenieGroup(set, a, queries, nq, dim, g, placement, gpu);
  if (truth.ids.empty()) {
    genie_vector_results* r = Scan(set, GENIE_ENGINE_AUTO, a, queries.data(), nq, a.k);
    truth = ToAnswer(r);
    genie_vector_results_free(r);
  }

  if (Wants(a, "genie-lsh") && a.m > 0) {
    // LSH keywords of every vector: one item per function, as genie_vector_ops does
    genie_lsh_params p{};
    p.family = GENIE_LSH_E2LSH;
    p.dim = dim;
    p.functions = a.m;
    p.buckets = 1024;
    const int32_t sample = std::min(n, 1000);
    if (genie_lsh_estimate_width(GENIE_LSH_E2LSH, data.data(), sample, dim, nullptr, nullptr, &p.width, &err) !=
        GENIE_OK) {
      std::fprintf(stderr, "genie_lsh_estimate_width: %s\n", err.message);
      return 1;
    }
    genie_lsh* lsh = nullptr;
    if (genie_lsh_create(&p, nullptr, nullptr, &lsh, &err) != GENIE_OK) {
      std::fprintf(stderr, "genie_lsh_create: %s\n", err.message);
      return 1;
    }
    t0 = Now();
    std::vector<int32_t> keywords(static_cast<size_t>(n) * a.m);
    std::vector<std::thread> pool;
    for (int32_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        genie_error e{};
        for (int32_t i = t; i < n; i += threads)
          genie_lsh_keywords(lsh, data.data() + static_cast<size_t>(i) * dim, keywords.data() + static_cast<size_t>(i) * a.m, &e);
      });
    for (auto& th : pool) th.join();
    std::vector<int64_t> offsets(static_cast<size_t>(n) + 1);
    for (int32_t i = 0; i <= n; ++i) offsets[i] = static_cast<int64_t>(i) * a.m;
    genie_index* index = nullptr;
    if (genie_index_create(offsets.data(), n, keywords.data(), nullptr, &index, &err) != GENIE_OK) {
      std::fprintf(stderr, "genie_index_create: %s\n", err.message);
      return 1;
    }
    const double build_s = (Now() - t0) / 1000.0;
    std::vector<int32_t> qkw(static_cast<size_t>(nq) * a.m), lo, hi;
    std::vector<int64_t> qoff(static_cast<size_t>(nq) + 1), ioff;
    for (int32_t q = 0; q < nq; ++q) {
      genie_lsh_keywords(lsh, queries.data() + static_cast<size_t>(q) * dim, qkw.data() + static_cast<size_t>(q) * a.m, &err);
      qoff[q + 1] = static_cast<int64_t>(q + 1) * a.m;
    }
    for (int64_t i = 0; i <= static_cast<int64_t>(nq) * a.m; ++i) ioff.push_back(i);
    genie_query_batch batch{nq, qoff.data(), ioff.data(), nullptr, qkw.data(), qkw.data()};
    for (genie_engine_kind kind : {GENIE_ENGINE_GPU, GENIE_ENGINE_CPU}) {
      if (kind == GENIE_ENGINE_CPU && !Wants(a, "genie-lsh-cpu")) continue;
      genie_engine* engine = nullptr;
      genie_engine_options eo{};
      eo.threads = a.threads;
      if (genie_engine_create(kind, &eo, &engine, &err) != GENIE_OK) continue;
      if (genie_engine_upload(engine, index, &err) != GENIE_OK) {
        genie_engine_free(engine);
        continue;
      }
      for (int32_t c : a.candidates) {
        if (c > n) continue;
        genie_results* counted = nullptr;
        genie_vector_results* r = nullptr;
        double best = 1e300;
        for (int rep = 0; rep < 2; ++rep) {
          genie_results_free(counted);
          genie_vector_results_free(r);
          const double t1 = Now();
          genie_engine_search(engine, &batch, c, &counted, &err);
          r = Scan(set, GENIE_ENGINE_CPU, a, queries.data(), nq, a.k, counted->query_offsets, counted->objects);
          best = std::min(best, Now() - t1);
        }
        const double bytes = dim * 4.0 + a.m * 4.0;
        Report(kind == GENIE_ENGINE_GPU ? "genie-lsh-gpu" : "genie-lsh-cpu",
               "m=" + std::to_string(a.m) + " candidates=" + std::to_string(c), build_s, bytes, nq, best, 0,
               Recall(ToAnswer(r), truth, a.k));
        genie_results_free(counted);
        genie_vector_results_free(r);
      }
      genie_engine_free(engine);
    }
    genie_index_free(index);
    genie_lsh_free(lsh);
  }

#ifdef GENIE_BENCH_FAISS
  omp_set_num_threads(threads);
  if (Wants(a, "faiss-flat")) {
    faiss::IndexFlatL2 flat(dim);
    t0 = Now();
    flat.add(n, data.data());
    const double build_s = (Now() - t0) / 1000.0;
    std::vector<float> D(static_cast<size_t>(nq) * a.k);
    std::vector<FaissIdx> I(D.size());
    double best = 1e300;
    for (int rep = 0; rep < 2; ++rep) {
      const double t1 = Now();
      flat.search(nq, queries.data(), a.k, D.data(), I.data());
      best = std::min(best, Now() - t1);
    }
    std::vector<double> singles;
    for (int32_t q = 0; q < std::min(nq, a.single); ++q) {
      const double t1 = Now();
      flat.search(1, queries.data() + static_cast<size_t>(q) * dim, a.k, D.data(), I.data());
      singles.push_back(Now() - t1);
    }
    flat.search(nq, queries.data(), a.k, D.data(), I.data());
    Answer ans;
    for (int32_t q = 0; q < nq; ++q) ans.ids.emplace_back(I.begin() + static_cast<size_t>(q) * a.k, I.begin() + static_cast<size_t>(q + 1) * a.k);
    Report("faiss-flat", "IndexFlatL2", build_s, dim * 4.0, nq, best, Median(singles), Recall(ans, truth, a.k));
  }
  if (Wants(a, "faiss-hnsw")) {
    faiss::IndexHNSWFlat hnsw(dim, 16);
    hnsw.hnsw.efConstruction = 64;
    t0 = Now();
    hnsw.add(n, data.data());
    const double build_s = (Now() - t0) / 1000.0;
    // links: 2M on level 0 and M above, 4 bytes each, beside the vector
    const double bytes = dim * 4.0 + 2 * 16 * 4.0 * 1.06 + 8;
    std::vector<float> D(static_cast<size_t>(nq) * a.k);
    std::vector<FaissIdx> I(D.size());
    for (int32_t ef : a.ef) {
      hnsw.hnsw.efSearch = std::max(ef, a.k);
      const double t1 = Now();
      hnsw.search(nq, queries.data(), a.k, D.data(), I.data());
      const double ms = Now() - t1;
      std::vector<double> singles;
      std::vector<float> d1(a.k);
      std::vector<FaissIdx> i1(a.k);
      for (int32_t q = 0; q < std::min(nq, a.single); ++q) {
        const double t2 = Now();
        hnsw.search(1, queries.data() + static_cast<size_t>(q) * dim, a.k, d1.data(), i1.data());
        singles.push_back(Now() - t2);
      }
      Answer ans;
      for (int32_t q = 0; q < nq; ++q) ans.ids.emplace_back(I.begin() + static_cast<size_t>(q) * a.k, I.begin() + static_cast<size_t>(q + 1) * a.k);
      Report("faiss-hnsw", "M=16 efConstruction=64 efSearch=" + std::to_string(hnsw.hnsw.efSearch), build_s, bytes, nq,
             ms, Median(singles), Recall(ans, truth, a.k));
    }
  }
#endif
#ifdef GENIE_BENCH_HNSWLIB
  if (Wants(a, "hnswlib")) {
    hnswlib::L2Space space(static_cast<size_t>(dim));
    hnswlib::HierarchicalNSW<float> hnsw(&space, static_cast<size_t>(n), 16, 200);
    t0 = Now();
    {
      std::vector<std::thread> pool;
      for (int32_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (int32_t i = t; i < n; i += threads) hnsw.addPoint(data.data() + static_cast<size_t>(i) * dim, static_cast<size_t>(i));
        });
      for (auto& th : pool) th.join();
    }
    const double build_s = (Now() - t0) / 1000.0;
    const double bytes = static_cast<double>(hnsw.size_data_per_element_) + 8;
    for (int32_t ef : a.ef) {
      hnsw.setEf(static_cast<size_t>(std::max(ef, a.k)));
      Answer ans;
      ans.ids.resize(static_cast<size_t>(nq));
      const double t1 = Now();
      std::vector<std::thread> pool;
      for (int32_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (int32_t q = t; q < nq; q += threads) {
            auto top = hnsw.searchKnn(queries.data() + static_cast<size_t>(q) * dim, static_cast<size_t>(a.k));
            std::vector<int32_t> ids;
            while (!top.empty()) ids.push_back(static_cast<int32_t>(top.top().second)), top.pop();
            std::reverse(ids.begin(), ids.end());
            ans.ids[static_cast<size_t>(q)] = ids;
          }
        });
      for (auto& th : pool) th.join();
      const double ms = Now() - t1;
      std::vector<double> singles;
      for (int32_t q = 0; q < std::min(nq, a.single); ++q) {
        const double t2 = Now();
        (void)hnsw.searchKnn(queries.data() + static_cast<size_t>(q) * dim, static_cast<size_t>(a.k));
        singles.push_back(Now() - t2);
      }
      Report("hnswlib", "M=16 ef_construction=200 ef=" + std::to_string(std::max(ef, a.k)), build_s, bytes, nq, ms,
             Median(singles), Recall(ans, truth, a.k));
    }
  }
#endif
  genie_vector_results_free(cpu);
  genie_vector_results_free(gpu);
  genie_vectors_free(set);
  return 0;
}

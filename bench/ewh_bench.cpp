// Error Weighted Hashing against the exact Hamming scan, at engine level,
// in one process: recall@k and queries per second of each method on the
// same codes and queries.
//
// Data: --data random (the EWH paper's shape: n random codes of `bits`
// bits, and for each query, a random code, k of them replaced by copies of
// it with 1 to 40 random bits flipped: its planted neighbours), or
// --base FILE --queries FILE (packed codes, ceil(bits / 8) bytes a row,
// first bit in the high-order bit: bench/code_copy.py --packed writes
// Fashion-MNIST's).
//
// Methods, each reported as a RESULT line (JSON, bench/plot_vectors.py
// reads them):
//   genie-exact-gpu, genie-exact-cpu: genie_codes_scan of the whole batch
//     (the truth comes from the first of them that runs);
//   genie-ewh-gpu, genie-ewh-cpu: per parameter set m:h:e, the EWH
//     keywords of every code, an index (genie_index_create, timed as the
//     build), the weighted query of each query code (e + 1 items a
//     function, weights e + 1 - r), the match-count engine's top c
//     candidates and their re-rank by Hamming distance on the CPU
//     (genie_codes_scan with candidates): batch_ms is both together,
//     count_ms and rerank_ms each.
// A call is timed from the query batch in host memory to the rows back.
// Recall counts a returned row when its distance is no more than the exact
// k-th distance (ties at the k-th distance may be any rows), over k.
// Every EWH distance is checked against the code's true distance.
//   ewh_bench [--data random --n N --bits B | --bits B --base F --queries F]
//             [--nq Q] [--k K] [--runs R] [--threads T] [--engines cpu,gpu]
//             [--params 16:16:2,32:16:2] [--candidates 20,50,100,200,1000]
//             [--cpu-exact-max Q]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genie/codes.hpp"
#include "genie/ewh.hpp"
#include "genie/genie.h"
#include "genie/query.hpp"

namespace {

double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from <= s.size()) {
    const std::size_t at = s.find(sep, from);
    out.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + 1;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Args {
  std::string data = "random", base, queries, engines = "cpu,gpu", params = "16:16:2,32:16:2,16:20:2";
  int32_t n = 4000000, bits = 512, nq = 1024, k = 10, runs = 3, threads = 0, cpu_exact_max = 1024;
  std::vector<int32_t> candidates{20, 50, 100, 200, 500, 1000};
};

// Packed rows (ceil(bits / 8) bytes) into the C API's words; false when the file is short.
bool ReadPacked(const std::string& path, int32_t bits, std::vector<uint64_t>* out, int32_t* n) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  const int32_t bytes = (bits + 7) / 8, words = genie_code_words(bits);
  *n = static_cast<int32_t>(size / bytes);
  std::vector<uint8_t> raw(static_cast<std::size_t>(size));
  const bool ok = std::fread(raw.data(), 1, raw.size(), f) == raw.size();
  std::fclose(f);
  out->assign(static_cast<std::size_t>(*n) * words, 0);
  for (int32_t i = 0; i < *n; ++i)
    std::memcpy(out->data() + static_cast<std::size_t>(i) * words, raw.data() + static_cast<std::size_t>(i) * bytes, bytes);
  return ok;
}

void Report(const std::string& method, const std::string& params, double build_s, double bytes, int32_t nq,
            double batch_ms, double single_ms, double recall, const std::string& extra = "") {
  std::printf("RESULT {\"method\": \"%s\", \"params\": \"%s\", \"build_s\": %.3f, \"bytes_per_vector\": %.0f, "
              "\"queries\": %d, \"batch_ms\": %.3f, \"batch_qps\": %.0f, \"single_ms\": %.4f, \"recall\": %.4f%s}\n",
              method.c_str(), params.c_str(), build_s, bytes, nq, batch_ms, batch_ms > 0 ? nq / (batch_ms / 1000.0) : 0.0,
              single_ms, recall, extra.c_str());
  std::fflush(stdout);
}

genie_code_results* CodeScan(genie_codes* set, genie_engine_kind device, int32_t threads, const uint64_t* queries,
                             int32_t nq, int32_t k, const int64_t* cand_offsets = nullptr,
                             const int32_t* cands = nullptr) {
  genie_engine_options options{};
  options.threads = threads;
  genie_code_scan scan{};
  scan.n_queries = nq;
  scan.queries = queries;
  scan.k = k;
  scan.candidate_offsets = cand_offsets;
  scan.candidates = cands;
  genie_code_results* out = nullptr;
  genie_error err{};
  if (genie_codes_scan(set, device, &options, &scan, &out, &err) != GENIE_OK) {
    std::fprintf(stderr, "genie_codes_scan: %s\n", err.message);
    return nullptr;
  }
  return out;
}

// Recall as the header says, from each query's exact k-th distance.
double Recall(const genie_code_results* got, const std::vector<int32_t>& kth, int32_t k) {
  int64_t hits = 0;
  for (int32_t q = 0; q < got->n_queries; ++q) {
    int32_t h = 0;
    for (int64_t i = got->query_offsets[q]; i < got->query_offsets[q + 1]; ++i) h += got->distances[i] <= kth[q];
    hits += std::min(h, k);
  }
  return static_cast<double>(hits) / (static_cast<double>(got->n_queries) * k);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string o = argv[i], v = argv[i + 1];
    if (o == "--data") a.data = v;
    else if (o == "--base") a.base = v, a.data = "files";
    else if (o == "--queries") a.queries = v;
    else if (o == "--n") a.n = std::atoi(v.c_str());
    else if (o == "--bits") a.bits = std::atoi(v.c_str());
    else if (o == "--nq") a.nq = std::atoi(v.c_str());
    else if (o == "--k") a.k = std::atoi(v.c_str());
    else if (o == "--runs") a.runs = std::atoi(v.c_str());
    else if (o == "--threads") a.threads = std::atoi(v.c_str());
    else if (o == "--engines") a.engines = v;
    else if (o == "--params") a.params = v;
    else if (o == "--cpu-exact-max") a.cpu_exact_max = std::atoi(v.c_str());
    else if (o == "--candidates") {
      a.candidates.clear();
      for (const std::string& c : Split(v, ',')) a.candidates.push_back(std::atoi(c.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", o.c_str());
      return 2;
    }
  }
  const int32_t bits = a.bits, words = genie_code_words(bits), k = a.k;
  const int32_t threads = a.threads > 0 ? a.threads : static_cast<int32_t>(std::thread::hardware_concurrency());
  std::vector<uint64_t> base, queries;
  int32_t n = a.n, nq = a.nq;
  std::mt19937_64 rng(20261126);
  if (a.data == "random") {
    // random codes, then per query k stored codes replaced by copies of the
    // query with 1 to 40 bits flipped: its exact k nearest (a random code is
    // about bits / 2 away)
    base.resize(static_cast<std::size_t>(n) * words);
    for (uint64_t& w : base) w = rng();
    queries.resize(static_cast<std::size_t>(nq) * words);
    for (uint64_t& w : queries) w = rng();
    for (int32_t i = 0; i < n; ++i) base[static_cast<std::size_t>(i) * words + words - 1] &= genie::LastWordMask(bits);
    for (int32_t q = 0; q < nq; ++q) queries[static_cast<std::size_t>(q) * words + words - 1] &= genie::LastWordMask(bits);
    std::vector<int32_t> slots(static_cast<std::size_t>(n));
    for (int32_t i = 0; i < n; ++i) slots[static_cast<std::size_t>(i)] = i;
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int32_t q = 0; q < nq && static_cast<int64_t>(q + 1) * k <= n; ++q)
      for (int32_t j = 0; j < k; ++j) {
        uint64_t* row = base.data() + static_cast<std::size_t>(slots[static_cast<std::size_t>(q * k + j)]) * words;
        std::copy_n(queries.begin() + static_cast<std::ptrdiff_t>(q) * words, words, row);
        const int flips = 1 + static_cast<int>(rng() % 40);
        for (int e = 0; e < flips; ++e) {
          const int32_t bit = static_cast<int32_t>(rng() % static_cast<uint64_t>(bits));
          row[bit / 64] ^= uint64_t{1} << ((bit / 8 % 8) * 8 + 7 - bit % 8);
        }
      }
  } else {
    int32_t nq_file = 0;
    if (!ReadPacked(a.base, bits, &base, &n) || !ReadPacked(a.queries, bits, &queries, &nq_file)) {
      std::fprintf(stderr, "cannot read %s or %s\n", a.base.c_str(), a.queries.c_str());
      return 1;
    }
    nq = std::min(nq, nq_file);
    queries.resize(static_cast<std::size_t>(nq) * words);
  }
  std::printf("== ewh_bench: %s, %d codes of %d bits, %d queries, k %d, median of %d runs, %d threads\n",
              a.data.c_str(), n, bits, nq, k, a.runs, threads);

  genie_error err{};
  genie_codes* set = nullptr;
  uint64_t* rows = nullptr;
  if (genie_codes_create_unsealed(n, bits, 0, &set, &rows, &err) != GENIE_OK) return 1;
  std::copy(base.begin(), base.end(), rows);
  if (genie_codes_seal(set, &err) != GENIE_OK) {
    std::fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  const bool use_gpu = a.engines.find("gpu") != std::string::npos;
  const bool use_cpu = a.engines.find("cpu") != std::string::npos;
  int failures = 0;

  // the exact scans; the truth from the first
  std::vector<int32_t> kth(static_cast<std::size_t>(nq), bits);
  bool have_truth = false;
  for (genie_engine_kind kind : {GENIE_ENGINE_GPU, GENIE_ENGINE_CPU}) {
    const bool gpu = kind == GENIE_ENGINE_GPU;
    if ((gpu && !use_gpu) || (!gpu && (!use_cpu || (have_truth && nq > a.cpu_exact_max)))) continue;
    genie_code_results* warm = CodeScan(set, kind, threads, queries.data(), 1, k);  // the GPU copy, made once
    if (warm == nullptr) continue;
    genie_code_results_free(warm);
    std::vector<double> times, singles;
    genie_code_results* r = nullptr;
    for (int run = 0; run < a.runs; ++run) {
      genie_code_results_free(r);
      const double t0 = Now();
      r = CodeScan(set, kind, threads, queries.data(), nq, k);
      times.push_back(Now() - t0);
    }
    for (int32_t q = 0; q < std::min(nq, 20); ++q) {
      const double t0 = Now();
      genie_code_results_free(CodeScan(set, kind, threads, queries.data() + static_cast<std::size_t>(q) * words, 1, k));
      singles.push_back(Now() - t0);
    }
    if (!have_truth) {
      for (int32_t q = 0; q < nq; ++q)
        kth[q] = r->query_offsets[q + 1] > r->query_offsets[q] ? r->distances[r->query_offsets[q + 1] - 1] : bits;
      have_truth = true;
    }
    const double recall = Recall(r, kth, k);
    failures += recall != 1.0;
    Report(gpu ? "genie-exact-gpu" : "genie-exact-cpu", "exact", 0, bits / 8.0, nq, Median(times), Median(singles),
           recall);
    genie_code_results_free(r);
  }
  if (!have_truth) {
    std::fprintf(stderr, "no exact scan ran: nothing to measure recall against\n");
    return 1;
  }

  for (const std::string& p : Split(a.params, ',')) {
    const std::vector<std::string> f = Split(p, ':');
    if (f.size() != 3) continue;
    genie_ewh_params params{};
    params.bits = bits;
    params.functions = std::atoi(f[0].c_str());
    params.sample_bits = std::min(std::atoi(f[1].c_str()), bits);
    params.seed = 1;
    const int32_t errors = std::atoi(f[2].c_str()), m = params.functions;
    genie_ewh* ewh = nullptr;
    if (genie_ewh_create(&params, &ewh, &err) != GENIE_OK) {
      std::fprintf(stderr, "genie_ewh_create %s: %s\n", p.c_str(), err.message);
      ++failures;
      continue;
    }
    std::unique_ptr<genie::EwhFunctions> functions;
    genie::EwhFunctions::Create({bits, m, params.sample_bits, params.seed}, &functions);
    // the keywords of every code on every core, then the index (the build)
    double t0 = Now();
    std::vector<int32_t> keywords(static_cast<std::size_t>(n) * m);
    {
      std::vector<std::thread> pool;
      for (int32_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (int32_t i = t; i < n; i += threads)
            genie_ewh_keywords(ewh, rows + static_cast<std::size_t>(i) * words, keywords.data() + static_cast<std::size_t>(i) * m);
        });
      for (std::thread& th : pool) th.join();
    }
    std::vector<int64_t> offsets(static_cast<std::size_t>(n) + 1);
    for (int32_t i = 0; i <= n; ++i) offsets[i] = static_cast<int64_t>(i) * m;
    genie_index* index = nullptr;
    if (genie_index_create(offsets.data(), n, keywords.data(), nullptr, &index, &err) != GENIE_OK) {
      std::fprintf(stderr, "genie_index_create: %s\n", err.message);
      return 1;
    }
    const double build_s = (Now() - t0) / 1000.0;
    keywords = std::vector<int32_t>();
    // the query batch, built once (what the backend does per statement is in the SQL bench)
    genie::QueryBatch batch;
    const std::vector<int32_t> weights = genie::EwhDefaultWeights(errors);
    for (int32_t q = 0; q < nq; ++q)
      functions->AddQuery(queries.data() + static_cast<std::size_t>(q) * words, errors, weights, &batch);
    const genie_query_batch view = batch.View();
    const std::string tag = "m=" + f[0] + " h=" + std::to_string(params.sample_bits) + " e=" + f[2];
    for (genie_engine_kind kind : {GENIE_ENGINE_GPU, GENIE_ENGINE_CPU}) {
      const bool gpu = kind == GENIE_ENGINE_GPU;
      if ((gpu && !use_gpu) || (!gpu && !use_cpu)) continue;
      genie_engine_options eo{};
      eo.threads = a.threads;
      genie_engine* engine = nullptr;
      if (genie_engine_create(kind, &eo, &engine, &err) != GENIE_OK) continue;
      const double u0 = Now();
      if (genie_engine_upload(engine, index, &err) != GENIE_OK) {
        std::fprintf(stderr, "upload: %s\n", err.message);
        genie_engine_free(engine);
        continue;
      }
      const double upload_ms = Now() - u0;
      for (int32_t c : a.candidates) {
        if (c < k || c > n) continue;
        std::vector<double> total, count, rerank;
        genie_code_results* r = nullptr;
        for (int run = 0; run < a.runs; ++run) {
          genie_code_results_free(r);
          genie_results* counted = nullptr;
          const double c0 = Now();
          if (genie_engine_search(engine, &view, c, &counted, &err) != GENIE_OK) {
            std::fprintf(stderr, "search: %s\n", err.message);
            return 1;
          }
          const double c1 = Now();
          r = CodeScan(set, GENIE_ENGINE_CPU, threads, queries.data(), nq, k, counted->query_offsets, counted->objects);
          const double c2 = Now();
          genie_results_free(counted);
          total.push_back(c2 - c0);
          count.push_back(c1 - c0);
          rerank.push_back(c2 - c1);
        }
        // every distance the true one
        for (int32_t q = 0; q < nq; ++q)
          for (int64_t i = r->query_offsets[q]; i < r->query_offsets[q + 1]; ++i)
            failures += r->distances[i] != genie_hamming_distance(rows + static_cast<std::size_t>(r->objects[i]) * words,
                                                                  queries.data() + static_cast<std::size_t>(q) * words, words);
        // one query a call: the latency of a lone statement's engine work
        std::vector<double> singles;
        for (int32_t q = 0; q < std::min(nq, 20); ++q) {
          genie::QueryBatch one;
          functions->AddQuery(queries.data() + static_cast<std::size_t>(q) * words, errors, weights, &one);
          const genie_query_batch v1 = one.View();
          genie_results* counted = nullptr;
          const double s0 = Now();
          genie_engine_search(engine, &v1, c, &counted, &err);
          genie_code_results_free(CodeScan(set, GENIE_ENGINE_CPU, threads, queries.data() + static_cast<std::size_t>(q) * words,
                                           1, k, counted->query_offsets, counted->objects));
          singles.push_back(Now() - s0);
          genie_results_free(counted);
        }
        char extra[160];
        std::snprintf(extra, sizeof(extra), ", \"count_ms\": %.3f, \"rerank_ms\": %.3f, \"upload_ms\": %.1f",
                      Median(count), Median(rerank), upload_ms);
        Report(gpu ? "genie-ewh-gpu" : "genie-ewh-cpu", tag + " candidates=" + std::to_string(c), build_s,
               bits / 8.0 + m * 4.0, nq, Median(total), Median(singles), Recall(r, kth, k), extra);
        genie_code_results_free(r);
      }
      genie_engine_free(engine);
    }
    genie_index_free(index);
    genie_ewh_free(ewh);
  }
  genie_codes_free(set);
  std::printf("%s\n", failures == 0 ? "all checks passed" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}

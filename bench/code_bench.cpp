// The exact Hamming scan (genie_codes_scan) through the C API, on the shape
// of the Error Weighted Hashing paper's data: n random codes of `bits` bits
// and queries that are stored codes with 1 to 40 random bits flipped
// (planted near neighbours).  For each batch size, the CPU engine and the
// GPU side by side in one process: the median of `runs` calls each (one
// call = the whole batch: the queries' upload, the scan, the rows back),
// queries per second and milliseconds per query.  Every GPU call's rows must
// equal the CPU engine's (objects and distances, in order), and the CPU's
// must equal a brute force over every code on a sample of queries.  Built
// where libfaiss-dev is installed (as vector_bench), FAISS's IndexBinaryFlat
// (the exhaustive CPU search, every core) runs beside them on the same codes:
// its distance lists must equal the CPU engine's (its ties may be other rows).
//   code_bench [--n N] [--bits B] [--k K] [--sizes 1,32,1024] [--runs R]
//              [--engines cpu,gpu,faiss] [--threads T] [--cpu-max-batch M]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "genie/codes.hpp"
#include "genie/genie.h"

#ifdef GENIE_BENCH_FAISS
#include <faiss/IndexBinaryFlat.h>
#endif

namespace {

double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int32_t> ParseList(const char* s) {
  std::vector<int32_t> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

genie_code_results* Scan(genie_codes* set, genie_engine_kind device, int32_t threads, const uint64_t* queries,
                         int32_t nq, int32_t k, double* ms) {
  genie_engine_options options{};
  options.threads = threads;
  genie_code_scan scan{};
  scan.n_queries = nq;
  scan.queries = queries;
  scan.k = k;
  genie_code_results* out = nullptr;
  genie_error err{};
  const double t0 = Now();
  if (genie_codes_scan(set, device, &options, &scan, &out, &err) != GENIE_OK) {
    std::fprintf(stderr, "scan failed: %s\n", err.message);
    return nullptr;
  }
  *ms = Now() - t0;
  return out;
}

bool SameRows(const genie_code_results* a, const genie_code_results* b) {
  if (a->n_queries != b->n_queries) return false;
  if (std::memcmp(a->query_offsets, b->query_offsets, sizeof(int64_t) * (a->n_queries + 1)) != 0) return false;
  const int64_t rows = a->query_offsets[a->n_queries];
  return std::memcmp(a->objects, b->objects, sizeof(int32_t) * rows) == 0 &&
         std::memcmp(a->distances, b->distances, sizeof(int32_t) * rows) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int32_t n = 4000000, bits = 512, k = 10, runs = 5, threads = 0, cpu_max_batch = 1024;
  std::vector<int32_t> sizes{1, 32, 1024};
  std::string engines = "cpu,gpu,faiss";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::atoi(argv[i + 1]);
    else if (a == "--bits") bits = std::atoi(argv[i + 1]);
    else if (a == "--k") k = std::atoi(argv[i + 1]);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--sizes") sizes = ParseList(argv[i + 1]);
    else if (a == "--engines") engines = argv[i + 1];
    else if (a == "--cpu-max-batch") cpu_max_batch = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const bool use_cpu = engines.find("cpu") != std::string::npos;
  const bool use_gpu = engines.find("gpu") != std::string::npos;
#ifdef GENIE_BENCH_FAISS
  const bool use_faiss = engines.find("faiss") != std::string::npos && bits % 8 == 0;
#else
  [[maybe_unused]] const bool use_faiss = false;
  if (engines.find("faiss") != std::string::npos)
    std::printf("(faiss: this build has no FAISS; install libfaiss-dev and rebuild)\n");
#endif
  const int32_t words = genie_code_words(bits);
  std::printf("== code_bench: %d codes of %d bits, k %d, median of %d calls, engines %s\n", n, bits, k, runs,
              engines.c_str());

  std::mt19937_64 rng(20261126);
  genie_codes* set = nullptr;
  uint64_t* rows = nullptr;
  genie_error err{};
  if (genie_codes_create_unsealed(n, bits, 0, &set, &rows, &err) != GENIE_OK) {
    std::fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  for (int64_t i = 0; i < static_cast<int64_t>(n) * words; ++i) rows[i] = rng();
  for (int32_t i = 0; i < n; ++i) rows[static_cast<int64_t>(i) * words + words - 1] &= genie::LastWordMask(bits);
  if (genie_codes_seal(set, &err) != GENIE_OK) {
    std::fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  const int32_t max_nq = *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint64_t> queries(static_cast<std::size_t>(max_nq) * words);
  for (int32_t q = 0; q < max_nq; ++q) {
    const int32_t from = static_cast<int32_t>(rng() % static_cast<uint64_t>(n));
    std::memcpy(&queries[static_cast<std::size_t>(q) * words], rows + static_cast<int64_t>(from) * words, 8 * words);
    const int errors = 1 + static_cast<int>(rng() % 40);
    for (int e = 0; e < errors; ++e) {
      const int32_t bit = static_cast<int32_t>(rng() % static_cast<uint64_t>(bits));
      queries[static_cast<std::size_t>(q) * words + bit / 64] ^= uint64_t{1} << ((bit / 8 % 8) * 8 + 7 - bit % 8);
    }
  }

  if (use_gpu) {
    double ms = 0;
    genie_code_results* r = Scan(set, GENIE_ENGINE_GPU, threads, queries.data(), 1, k, &ms);
    if (r == nullptr) return 1;
    std::printf("gpu copy of the codes (first call, one query): %.1f ms, %.0f MB on the device\n", ms,
                genie_codes_device_bytes(set) / 1048576.0);
    genie_code_results_free(r);
  }
#ifdef GENIE_BENCH_FAISS
  // FAISS holds the codes' bytes, which are the first bits / 8 bytes of each row's words
  std::unique_ptr<faiss::IndexBinaryFlat> faiss_index;
  std::vector<uint8_t> faiss_queries;
  if (use_faiss) {
    const int32_t bytes = bits / 8;
    std::vector<uint8_t> flat(static_cast<std::size_t>(n) * bytes);
    for (int32_t i = 0; i < n; ++i)
      std::memcpy(&flat[static_cast<std::size_t>(i) * bytes], rows + static_cast<int64_t>(i) * words, bytes);
    faiss_index = std::make_unique<faiss::IndexBinaryFlat>(bits);
    faiss_index->add(n, flat.data());
    faiss_queries.resize(static_cast<std::size_t>(max_nq) * bytes);
    for (int32_t q = 0; q < max_nq; ++q)
      std::memcpy(&faiss_queries[static_cast<std::size_t>(q) * bytes], &queries[static_cast<std::size_t>(q) * words], bytes);
  }
#endif
  std::printf("%-6s %7s %12s %12s %14s  %s\n", "engine", "batch", "ms/call", "ms/query", "queries/s", "check");
  int failures = 0;
  for (int32_t nq : sizes) {
    genie_code_results* cpu_rows = nullptr;
    for (const char* engine : {"cpu", "gpu"}) {
      const bool is_cpu = std::strcmp(engine, "cpu") == 0;
      if ((is_cpu && (!use_cpu || nq > cpu_max_batch)) || (!is_cpu && !use_gpu)) continue;
      std::vector<double> times;
      genie_code_results* last = nullptr;
      for (int r = 0; r < runs; ++r) {
        double ms = 0;
        genie_code_results* out =
            Scan(set, is_cpu ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU, threads, queries.data(), nq, k, &ms);
        if (out == nullptr) return 1;
        times.push_back(ms);
        genie_code_results_free(last);
        last = out;
      }
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2];
      std::string check = "-";
      if (is_cpu) {
        // the CPU engine against a brute force on a sample of its queries
        int bad = 0;
        for (int32_t q = 0; q < std::min(nq, 3); ++q) {
          std::vector<std::pair<int32_t, int32_t>> all(static_cast<std::size_t>(n));
          for (int32_t id = 0; id < n; ++id)
            all[static_cast<std::size_t>(id)] = {
                genie_hamming_distance(rows + static_cast<int64_t>(id) * words, &queries[static_cast<std::size_t>(q) * words], words), id};
          std::partial_sort(all.begin(), all.begin() + std::min(k, n), all.end());
          for (int32_t i = 0; i < std::min(k, n); ++i) {
            const int64_t at = last->query_offsets[q] + i;
            if (last->objects[at] != all[static_cast<std::size_t>(i)].second ||
                last->distances[at] != all[static_cast<std::size_t>(i)].first)
              ++bad;
          }
        }
        check = bad == 0 ? "= brute force (sample)" : "DIFFERS from brute force";
        failures += bad != 0;
        cpu_rows = last;
        last = nullptr;
      } else if (cpu_rows != nullptr) {
        const bool same = SameRows(cpu_rows, last);
        check = same ? "= CPU engine, rows equal" : "DIFFERS from the CPU engine";
        failures += !same;
      }
      std::printf("%-6s %7d %12.3f %12.5f %14.0f  %s\n", engine, nq, med, med / nq, nq / med * 1000.0, check.c_str());
      std::fflush(stdout);
      genie_code_results_free(last);
    }
#ifdef GENIE_BENCH_FAISS
    if (use_faiss && nq <= cpu_max_batch) {
      std::vector<int32_t> dist(static_cast<std::size_t>(nq) * k);
      std::vector<faiss::Index::idx_t> ids(static_cast<std::size_t>(nq) * k);
      std::vector<double> times;
      for (int r = 0; r < runs; ++r) {
        const double t0 = Now();
        faiss_index->search(nq, faiss_queries.data(), k, dist.data(), ids.data());
        times.push_back(Now() - t0);
      }
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2];
      std::string check = "-";
      if (cpu_rows != nullptr) {
        bool same = true;  // the distance lists (FAISS may take other rows among ties)
        for (int32_t q = 0; q < nq && same; ++q)
          for (int32_t i = 0; i < k && same; ++i)
            same = cpu_rows->distances[cpu_rows->query_offsets[q] + i] == dist[static_cast<std::size_t>(q) * k + i];
        check = same ? "= CPU engine, distances equal" : "DIFFERS from the CPU engine";
        failures += !same;
      }
      std::printf("%-6s %7d %12.3f %12.5f %14.0f  %s\n", "faiss", nq, med, med / nq, nq / med * 1000.0, check.c_str());
      std::fflush(stdout);
    }
#endif
    genie_code_results_free(cpu_rows);
  }
  genie_codes_free(set);
  std::printf("%s\n", failures == 0 ? "all checks passed" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}

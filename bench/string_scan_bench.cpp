// The string scan (genie_strings_scan) on a word list, through the C API:
// 1024 queries made from random words of 6+ letters with 10, 20, 30 and
// 40% of their characters replaced by random letters (the workload of issue
// 14), top 1 and top 5, on the CPU engine and the GPU, side by side in one
// process; then batches of 1, 8 and 64 queries (30% typos).  The GPU's rows must equal the CPU's, and on a sample of queries
// the CPU's distances must equal a brute-force Levenshtein over every word.
//   string_scan_bench [word list] [queries] [cpu threads]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "genie/genie.h"

namespace {

double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Csr {
  std::string text;
  std::vector<int64_t> offsets{0};
  void Add(const std::string& s) {
    text += s;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  int32_t size() const { return static_cast<int32_t>(offsets.size() - 1); }
};

bool Ascii(const std::string& s) {
  for (unsigned char c : s) if (c >= 128) return false;
  return true;
}

genie_string_results* Scan(genie_strings* set, genie_engine_kind device, int32_t threads,
                           const Csr& queries, int32_t k, double* ms) {
  genie_engine_options options{};
  options.threads = threads;
  genie_string_scan scan{};
  scan.n_queries = queries.size();
  scan.query_text = queries.text.data();
  scan.query_text_offsets = queries.offsets.data();
  scan.k = k;
  genie_string_results* out = nullptr;
  genie_error err{};
  const double t0 = Now();
  if (genie_strings_scan(set, device, &options, &scan, &out, &err) != GENIE_OK) {
    std::fprintf(stderr, "scan failed: %s\n", err.message);
    return nullptr;
  }
  *ms = Now() - t0;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/usr/share/dict/american-english-insane";
  const int32_t nq = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int32_t threads = argc > 3 ? std::atoi(argv[3]) : 0;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path);
    return 2;
  }
  Csr words;
  std::vector<std::string> long_words;
  for (std::string w; std::getline(in, w);) {
    words.Add(w);
    if (w.size() >= 6 && Ascii(w)) long_words.push_back(w);
  }
  genie_strings* set = nullptr;
  genie_error err{};
  double t0 = Now();
  if (genie_strings_create(words.text.data(), words.offsets.data(), words.size(), &set, &err) != GENIE_OK) {
    std::fprintf(stderr, "create failed: %s\n", err.message);
    return 2;
  }
  std::printf("words %d, set built in %.1f ms, %.1f MB host\n", words.size(), Now() - t0,
              genie_strings_memory_bytes(set) / 1e6);
  genie_build_info info;
  genie_get_build_info(&info);
  bool failed = false;
  std::printf("%-6s %-3s %12s %12s %12s %12s %8s\n", "typos", "k", "cpu ms/q", "gpu ms/q",
              "cpu q/s", "gpu q/s", "gpu/cpu");
  for (int rate : {10, 20, 30, 40}) {
    std::mt19937 rng(1400 + rate);
    Csr queries;
    for (int32_t q = 0; q < nq; ++q) {
      std::string w = long_words[std::uniform_int_distribution<std::size_t>(0, long_words.size() - 1)(rng)];
      const int32_t edits = std::max<int32_t>(1, static_cast<int32_t>(w.size() * rate / 100));
      for (int32_t e = 0; e < edits; ++e) {
        w[std::uniform_int_distribution<std::size_t>(0, w.size() - 1)(rng)] =
            static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
      }
      queries.Add(w);
    }
    for (int32_t k : {1, 5}) {
      double cpu_ms = 0, gpu_ms = -1;
      genie_string_results* cpu = Scan(set, GENIE_ENGINE_CPU, threads, queries, k, &cpu_ms);
      if (cpu == nullptr) return 2;
      genie_string_results* gpu = nullptr;
      if (info.with_cuda) {
        double warm = 0;
        genie_string_results* first = Scan(set, GENIE_ENGINE_GPU, threads, queries, k, &warm);
        if (first == nullptr) {
          info.with_cuda = 0;  // built with CUDA, but no usable GPU here
        } else {
          genie_string_results_free(first);
          gpu = Scan(set, GENIE_ENGINE_GPU, threads, queries, k, &gpu_ms);
        }
      }
      if (gpu != nullptr) {
        const int64_t rows = cpu->query_offsets[nq];
        bool same = gpu->query_offsets[nq] == rows;
        for (int64_t r = 0; same && r < rows; ++r) {
          same = cpu->objects[r] == gpu->objects[r] && cpu->distances[r] == gpu->distances[r];
        }
        if (!same) {
          std::printf("MISMATCH: GPU rows differ from the CPU's (typos %d%%, k %d)\n", rate, k);
          failed = true;
        }
      }
      // brute force on a sample: the k-th distance must be the true k-th distance
      for (int32_t q = 0; q < nq; q += nq / 16 > 0 ? nq / 16 : 1) {
        std::vector<int32_t> all;
        const char* qt = queries.text.data() + queries.offsets[q];
        const size_t qs = static_cast<size_t>(queries.offsets[q + 1] - queries.offsets[q]);
        for (int32_t w = 0; w < words.size(); ++w) {
          int32_t d = 0;
          genie_edit_distance(qt, qs, words.text.data() + words.offsets[w],
                              static_cast<size_t>(words.offsets[w + 1] - words.offsets[w]), nullptr, &d, &err);
          all.push_back(d);
        }
        std::sort(all.begin(), all.end());
        for (int32_t i = 0; i < k; ++i) {
          if (cpu->distances[cpu->query_offsets[q] + i] != all[static_cast<size_t>(i)]) {
            std::printf("MISMATCH: query %d row %d distance %d, brute force %d\n", q, i,
                        cpu->distances[cpu->query_offsets[q] + i], all[static_cast<size_t>(i)]);
            failed = true;
          }
        }
      }
      std::printf("%-6d %-3d %12.4f %12.4f %12.0f %12.0f %8.1f\n", rate, k, cpu_ms / nq,
                  gpu_ms >= 0 ? gpu_ms / nq : -1.0, nq / (cpu_ms / 1000), gpu_ms > 0 ? nq / (gpu_ms / 1000) : 0.0,
                  gpu_ms > 0 ? cpu_ms / gpu_ms : 0.0);
      genie_string_results_free(cpu);
      genie_string_results_free(gpu);
    }
  }
  // small batches (a single query, as ORDER BY <%> asks, and 8 and 64): 30%
  // typos, 64 queries in batches of that size; the GPU splits each query
  // over several blocks below a full device
  std::printf("%-6s %-3s %12s %12s %12s %8s\n", "batch", "k", "cpu ms/b", "gpu ms/b", "gpu q/s", "gpu/cpu");
  for (int32_t batch : {1, 8, 64}) {
    for (int32_t k : {1, 5}) {
      std::mt19937 rng(99 + batch * 10 + k);
      double cpu_total = 0, gpu_total = 0;
      const int32_t total = 64;
      for (int32_t first = 0; first < total; first += batch) {
        Csr some;
        for (int32_t i = 0; i < batch; ++i) {
          std::string w = long_words[std::uniform_int_distribution<std::size_t>(0, long_words.size() - 1)(rng)];
          for (std::size_t e = 0; e < std::max<std::size_t>(1, w.size() * 3 / 10); ++e) {
            w[std::uniform_int_distribution<std::size_t>(0, w.size() - 1)(rng)] =
                static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
          }
          some.Add(w);
        }
        double ms = 0;
        genie_string_results* cpu = Scan(set, GENIE_ENGINE_CPU, threads, some, k, &ms);
        if (cpu == nullptr) return 2;
        cpu_total += ms;
        if (info.with_cuda) {
          genie_string_results* gpu = Scan(set, GENIE_ENGINE_GPU, threads, some, k, &ms);
          if (gpu == nullptr) return 2;
          gpu_total += ms;
          const int64_t rows = cpu->query_offsets[batch];
          bool same = gpu->query_offsets[batch] == rows;
          for (int64_t r = 0; same && r < rows; ++r) {
            same = cpu->objects[r] == gpu->objects[r] && cpu->distances[r] == gpu->distances[r];
          }
          if (!same) {
            std::printf("MISMATCH: GPU rows differ from the CPU's (batch %d, k %d)\n", batch, k);
            failed = true;
          }
          genie_string_results_free(gpu);
        }
        genie_string_results_free(cpu);
      }
      const double batches = static_cast<double>(total / batch);
      std::printf("%-6d %-3d %12.3f %12.3f %12.0f %8.1f\n", batch, k, cpu_total / batches,
                  info.with_cuda ? gpu_total / batches : -1.0,
                  info.with_cuda && gpu_total > 0 ? total / (gpu_total / 1000) : 0.0,
                  info.with_cuda && gpu_total > 0 ? cpu_total / gpu_total : 0.0);
    }
  }
  std::printf("gpu device bytes %.1f MB\n", genie_strings_device_bytes(set) / 1e6);
  genie_strings_free(set);
  std::printf(failed ? "FAILED\n" : "all results exact\n");
  return failed ? 1 : 0;
}

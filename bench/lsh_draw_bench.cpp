// What drawing an LSH index's functions costs a backend (each backend that
// opens an LSH index draws them from the seed, issue 27), at engine level,
// in one process: genie's block draws (LshFunctions::Create) against the
// draw-by-draw loop of genie 0.8.0 (testing/include/genie/lsh_reference.hpp),
// on the same parameters, checked equal bit for bit before they are timed.
// The block draws run on each of --threads' counts (the draws' logarithms
// spread over them; default 1, 2 and every core).  Each size is run --runs
// times (median reported); a RESULT line (JSON) per method, thread count
// and size: ms, ns per draw, and the ratio to the loop.
//   lsh_draw_bench [--runs R] [--threads 1,2,16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "genie/lsh.hpp"
#include "genie/lsh_reference.hpp"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double TimeMs(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  std::vector<int32_t> thread_counts;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--threads") == 0)
      for (const char* t = argv[i + 1]; *t != '\0'; t = std::strchr(t, ',') ? std::strchr(t, ',') + 1 : "")
        thread_counts.push_back(std::atoi(t));
  }
  // 1, 2 and every core unless --threads says
  if (thread_counts.empty()) {
    thread_counts = {1, 2};
    if (std::thread::hardware_concurrency() > 2) thread_counts.push_back(static_cast<int32_t>(std::thread::hardware_concurrency()));
  }
  struct Size {
    const char* name;
    genie::LshFamily family;
    int32_t dim, functions;
  };
  // Fashion-MNIST at the default m (238 functions: Equation 9 at 0.06);
  // a 4,096-dimensional embedding; and m x dim at the 2^24 bound
  const Size sizes[] = {{"fmnist-e2lsh", genie::LshFamily::kE2Lsh, 784, 238},
                        {"fmnist-rbh", genie::LshFamily::kRbh, 784, 238},
                        {"dim4096-e2lsh", genie::LshFamily::kE2Lsh, 4096, 238},
                        {"bound-e2lsh", genie::LshFamily::kE2Lsh, 70492, 238}};
  for (const Size& s : sizes) {
    genie::LshParams p;
    p.family = s.family;
    p.dim = s.dim;
    p.functions = s.functions;
    p.buckets = 1 << 16;
    p.width = 4.0;
    p.seed = 20261127;
    genie::testing::ReferenceDraws want;
    std::vector<double> loop_ms;
    for (int r = 0; r < runs; ++r)
      loop_ms.push_back(TimeMs([&] { want = genie::testing::ReferenceLshDraws(p); }));
    const double draws = static_cast<double>(s.dim) * s.functions;
    const double loop = Median(loop_ms);
    std::printf("RESULT {\"size\": \"%s\", \"draws\": %.0f, \"method\": \"draw-by-draw (0.8.0)\", \"threads\": 1, "
                "\"ms\": %.2f, \"ns_per_draw\": %.1f, \"runs\": %d}\n",
                s.name, draws, loop, loop * 1e6 / draws, runs);
    for (int32_t threads : thread_counts) {
      std::unique_ptr<genie::LshFunctions> f;
      std::vector<double> block_ms;
      for (int r = 0; r < runs; ++r) {
        block_ms.push_back(TimeMs([&] {
          if (!genie::LshFunctions::Create(p, &f, {}, threads).ok()) std::abort();
        }));
        if (!SameBits(f->projections(), want.projections) || !SameBits(f->offsets(), want.offsets) ||
            !SameBits(f->cells(), want.cells) || !SameBits(f->shifts(), want.shifts)) {
          std::fprintf(stderr, "%s: the block draws on %d threads differ from the loop's\n", s.name, threads);
          return 1;
        }
      }
      const double block = Median(block_ms);
      std::printf("RESULT {\"size\": \"%s\", \"draws\": %.0f, \"method\": \"block draws\", \"threads\": %d, "
                  "\"ms\": %.2f, \"ns_per_draw\": %.1f, \"speedup\": %.2f, \"runs\": %d}\n",
                  s.name, draws, threads, block, block * 1e6 / draws, loop / block, runs);
      std::fflush(stdout);
    }
  }
  return 0;
}

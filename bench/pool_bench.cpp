// The host threads' cost for small jobs (genie/parallel.hpp's ParallelFor):
// the wall time and the process's CPU time of a job of a few tasks, from
// one or several callers at once, as the GPU engine's host stage of a
// service batch runs it (a few tasks of tens of microseconds, with threads
// as many as the host's cores), once the pools have grown to that many
// workers (any larger job grows them).  Built by CMake; bench/pool-ab builds it
// against two revisions of core/src/parallel.cpp.
//
//   pool_bench [threads=16] [tasks=4] [task_us=20] [calls=3000]
// prints, per number of callers (1, 2, 4): us of wall a call (each
// caller's), us of CPU a call (the process's, all threads), and the CPU a
// call beyond its tasks' own work.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "genie/parallel.hpp"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// About us microseconds of one core's work (a dependent chain the compiler keeps).
uint64_t Spin(double us, uint64_t seed) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  uint64_t x = seed | 1;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 64; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 16;
  const int tasks = argc > 2 ? std::atoi(argv[2]) : 4;
  const double task_us = argc > 3 ? std::atof(argv[3]) : 20.0;
  const int calls = argc > 4 ? std::atoi(argv[4]) : 3000;
  std::atomic<uint64_t> sink{0};
  std::printf("threads %d, %d tasks of %.0f us a call, %d calls a caller\n", threads, tasks, task_us, calls);
  std::printf("callers  wall_us_a_call  cpu_us_a_call  cpu_us_beyond_work\n");
  for (int callers : {1, 2, 4}) {
    // Each caller's pool as a process's pools are after any larger job (a
    // long batch, a build): grown to threads - 1 workers.
    {
      std::vector<std::thread> grow;
      for (int c = 0; c < callers; ++c) {
        grow.emplace_back([&] {
          (void)genie::ParallelFor(threads, threads, [&](int64_t t) {
            sink += Spin(2000.0, static_cast<uint64_t>(t));
            return genie::Status::Ok();
          });
        });
      }
      for (std::thread& t : grow) t.join();
    }
    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> run;
    for (int c = 0; c < callers; ++c) {
      run.emplace_back([&, c] {
        for (int i = 0; i < calls; ++i) {
          const genie::Status s = genie::ParallelFor(tasks, threads, [&](int64_t t) {
            sink += Spin(task_us, static_cast<uint64_t>(c * 131 + t));
            return genie::Status::Ok();
          });
          if (!s.ok()) std::abort();
        }
      });
    }
    for (std::thread& t : run) t.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = CpuSeconds() - cpu0;
    const double n = static_cast<double>(calls) * callers;
    std::printf("%7d  %14.1f  %13.1f  %18.1f\n", callers, wall * 1e6 / calls, cpu * 1e6 / n,
                cpu * 1e6 / n - tasks * task_us);
  }
  return sink.load() == 42 ? 1 : 0;
}

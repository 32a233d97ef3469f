// set_match_bench: set predicates (tags @> q, tags && q, tags <@ q) on the
// CPU (core's MatchSet, what a backend runs) and on the GPU engine's device
// path (list intersection with range contraction), side by side on one
// index, every answer compared id for id.
//
//   set_match_bench [--n N] [--queries Q] [--repeat T]
//
// Objects: 5 to 45 distinct tags = 50000 * u^3, as bench/service_bench.sql
// (skewed: the low tags are in most rows).  Query classes by how many
// postings their lists hold: 2 to 4 tags drawn from the popular (< 50),
// middle (50 .. 2,000) and rare (2,000 ..) ranges; contained-by queries
// hold the 200 most popular tags.  Per predicate and class: the mean
// postings of a query's lists, and milliseconds a query on each side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/set_match.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_engine.hpp"
#endif

namespace {

using genie::InvertedIndex;
using genie::SetPredicate;
using genie::Span;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "set_match_bench: %s\n", message.c_str());
  std::exit(1);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
#ifndef GENIE_WITH_CUDA
  Die("built without CUDA: there is no GPU side to compare");
#endif
  int32_t n = 4000000, n_queries = 50, repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--n") n = std::atoi(argv[i + 1]);
    else if (arg == "--queries") n_queries = std::atoi(argv[i + 1]);
    else if (arg == "--repeat") repeat = std::atoi(argv[i + 1]);
    else Die("unknown argument " + arg);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  for (int32_t o = 0; o < n; ++o) {
    std::vector<int32_t> tags;
    for (int d = 5 + static_cast<int>(unit(rng) * 41); d > 0; --d)
      tags.push_back(static_cast<int32_t>(50000 * std::pow(unit(rng), 3)));
    std::sort(tags.begin(), tags.end());
    tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
    keywords.insert(keywords.end(), tags.begin(), tags.end());
    offsets.push_back(static_cast<int64_t>(keywords.size()));
  }
  auto index = std::make_shared<InvertedIndex>();
  genie::IndexOptions options;
  if (!InvertedIndex::Build(offsets, keywords, options, index.get()).ok()) Die("index build failed");
  std::vector<int32_t> sizes;
  if (!genie::ObjectSizes(*index, genie::CancelCheck(), &sizes).ok()) Die("object sizes failed");
  std::printf("index: %d objects, %lld postings\n", n, static_cast<long long>(index->num_postings()));

#ifdef GENIE_WITH_CUDA
  genie::GpuEngineOptions gpu_options;
  gpu_options.set_match_min_postings = 0;  // every query on the device
  genie::Status status;
  auto gpu = genie::MakeGpuEngine(genie::EngineOptions(), gpu_options, &status);
  if (gpu == nullptr) Die("no GPU engine: " + status.message());
  if (!gpu->Upload(index).ok()) Die("upload failed");
#endif

  struct Class {
    const char* name;
    int32_t lo, hi;
  };
  const Class classes[] = {{"popular", 0, 50}, {"middle", 50, 2000}, {"rare", 2000, 50000}};
  std::printf("\n| predicate | query tags | postings of its lists (mean) | CPU ms/query | GPU ms/query | CPU / GPU | equal |\n"
              "|---|---|---|---|---|---|---|\n");
  for (SetPredicate p : {SetPredicate::kContains, SetPredicate::kOverlaps, SetPredicate::kContainedBy}) {
    for (const Class& c : classes) {
      if (p == SetPredicate::kContainedBy && c.lo > 0) continue;
      std::vector<std::vector<int32_t>> queries;
      std::uniform_int_distribution<int32_t> tag(c.lo, c.hi - 1), size(2, 4);
      for (int q = 0; q < n_queries; ++q) {
        std::vector<int32_t> query;
        if (p == SetPredicate::kContainedBy) {
          for (int32_t t = 0; t < 200; ++t) query.push_back(t);
        } else {
          for (int32_t i = size(rng); i > 0; --i) query.push_back(tag(rng));
        }
        queries.push_back(query);
      }
      double postings = 0;
      for (const auto& query : queries) {
        for (int32_t t : query) {
          const auto it = std::lower_bound(index->keywords().begin(), index->keywords().end(), t);
          if (it != index->keywords().end() && *it == t) {
            const auto k = static_cast<std::size_t>(it - index->keywords().begin());
            postings += static_cast<double>(index->keyword_offsets()[k + 1] - index->keyword_offsets()[k]);
          }
        }
      }
      std::vector<std::vector<int32_t>> cpu_out(queries.size()), gpu_out(queries.size());
      double cpu_best = 1e30, gpu_best = 1e30;
      for (int r = 0; r < repeat; ++r) {
        double t0 = Now();
        for (std::size_t q = 0; q < queries.size(); ++q) {
          const Span<int32_t> kw(queries[q].data(), queries[q].size());
          if (!genie::MatchSet(*index, p, kw, sizes, genie::CancelCheck(), &cpu_out[q]).ok()) Die("cpu");
        }
        cpu_best = std::min(cpu_best, Now() - t0);
#ifdef GENIE_WITH_CUDA
        t0 = Now();
        for (std::size_t q = 0; q < queries.size(); ++q) {
          const Span<int32_t> kw(queries[q].data(), queries[q].size());
          if (!gpu->MatchSet(p, kw, sizes, &gpu_out[q]).ok()) Die("gpu");
        }
        gpu_best = std::min(gpu_best, Now() - t0);
#endif
      }
      const bool equal = cpu_out == gpu_out;
      const double cpu_ms = cpu_best * 1e3 / queries.size(), gpu_ms = gpu_best * 1e3 / queries.size();
      const char* name = p == SetPredicate::kContains ? "@>" : p == SetPredicate::kOverlaps ? "&&" : "<@";
      std::printf("| `%s` | %s%s | %.0f | %.3f | %.3f | %.1fx | %s |\n", name, c.name,
                  p == SetPredicate::kContainedBy ? " (the 200 most popular)" : "",
                  postings / queries.size(), cpu_ms, gpu_ms, cpu_ms / gpu_ms, equal ? "yes" : "NO");
    }
  }
  return 0;
}

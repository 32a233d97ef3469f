// batch_bench: what one engine call costs against the number of queries in
// it, on the tag-set workload of bench/service-bench (the genie service
// turns concurrent sessions' queries into such batches, so a call's fixed
// cost bounds the service's rate).
//
//   batch_bench [--n N] [--k K] [--sizes 1,4,16,64,256] [--repeat T] [--engines cpu,gpu]
//               [--tile-words W] [--query-draws D] [--check]
//
// --tile-words sets the GPU engine's tiled matcher option (0: its default);
// --check compares every GPU call's answers with the CPU engine's (hit for
// hit: objects, scores and order) and stops on the first difference.
//
// Objects: 5 to 45 draws of tag = 50000 * u^3 (distinct), as
// bench/service_bench.sql; queries: 8 draws (--query-draws: as many as
// service_bench.sql's query_draws, e.g. 64 for the workload where one GPU
// is the service's limit).  Per engine and batch size:
// median call time, per-query time, and for the GPU engine the phase
// profile of one more call.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/query.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_engine.hpp"
#include "genie/gpu_stats.hpp"
#endif

namespace {

using genie::Engine;
using genie::InvertedIndex;
using genie::QueryBatch;
using genie::Status;
using genie::TopKResults;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "batch_bench: %s\n", message.c_str());
  std::exit(1);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int32_t> Draw(std::mt19937& rng, int count) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int32_t> tags;
  for (int i = 0; i < count; ++i) tags.push_back(static_cast<int32_t>(50000 * std::pow(unit(rng), 3)));
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  return tags;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 1000000;
  int32_t k = 100, repeat = 20;
  std::string sizes_arg = "1,4,16,64,256", engines = "cpu,gpu";
  int32_t tile_words = 0, query_draws = 8;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--check") {
      check = true;
      continue;
    }
    if (i + 1 >= argc) Die("missing value for " + arg);
    const std::string value = argv[++i];
    if (arg == "--n") n = std::atoll(value.c_str());
    else if (arg == "--k") k = std::atoi(value.c_str());
    else if (arg == "--sizes") sizes_arg = value;
    else if (arg == "--repeat") repeat = std::max(1, std::atoi(value.c_str()));
    else if (arg == "--engines") engines = value;
    else if (arg == "--tile-words") tile_words = std::atoi(value.c_str());
    else if (arg == "--query-draws") query_draws = std::max(1, std::atoi(value.c_str()));
    else Die("unknown argument " + arg);
  }
  std::vector<int32_t> sizes;
  std::stringstream ss(sizes_arg);
  for (std::string s; std::getline(ss, s, ',');) sizes.push_back(std::atoi(s.c_str()));
  const int32_t max_size = *std::max_element(sizes.begin(), sizes.end());

  std::mt19937 rng(42);
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> keywords;
  for (int64_t o = 0; o < n; ++o) {
    const auto tags = Draw(rng, 5 + static_cast<int>(o * 7919 % 41));
    keywords.insert(keywords.end(), tags.begin(), tags.end());
    offsets.push_back(static_cast<int64_t>(keywords.size()));
  }
  auto index = std::make_shared<InvertedIndex>();
  Status st = InvertedIndex::Build(offsets, keywords, genie::IndexOptions(), index.get());
  if (!st.ok()) Die("build: " + st.message());
  std::printf("index: %d objects, %lld postings; queries of %d draws, k = %d\n", index->num_objects(),
              static_cast<long long>(index->num_postings()), query_draws, k);
  QueryBatch all;
  for (int32_t q = 0; q < max_size; ++q) all.AddKeywordQuery(Draw(rng, query_draws));

  std::printf("| engine | queries per call | call time (median) | per query | queries/s |\n");
  std::printf("|---|---|---|---|---|\n");
  std::unique_ptr<Engine> reference;  // --check: the CPU engine
  for (const std::string kind : {"cpu", "gpu"}) {
    if (("," + engines + ",").find("," + kind + ",") == std::string::npos) continue;
    std::unique_ptr<Engine> engine;
    genie::EngineOptions options;
    if (kind == "cpu") {
      engine = genie::MakeCpuEngine(options);
    } else {
#ifdef GENIE_WITH_CUDA
      genie::GpuEngineOptions gpu_options;
      if (tile_words > 0) gpu_options.tile_words = tile_words;
      engine = genie::MakeGpuEngine(options, gpu_options, &st);
#endif
      if (!engine) {
        std::printf("| gpu | unavailable | | | |\n");
        continue;
      }
    }
    st = engine->Upload(index);
    if (!st.ok()) Die(kind + " upload: " + st.message());
    for (int32_t size : sizes) {
      QueryBatch batch;
      for (int32_t q = 0; q < size; ++q) {
        const auto view = all.View();
        std::vector<int32_t> tags;
        for (int64_t item = view.query_offsets[q]; item < view.query_offsets[q + 1]; ++item) {
          tags.push_back(view.ranges_lo[view.item_offsets[item]]);
        }
        batch.AddKeywordQuery(tags);
      }
      TopKResults results;
      if (!(st = engine->Search(batch.View(), k, &results)).ok()) Die(kind + ": " + st.message());
      if (check && kind == "gpu") {
        if (!reference) {
          reference = genie::MakeCpuEngine(options);
          if (!(st = reference->Upload(index)).ok()) Die("cpu upload: " + st.message());
        }
        TopKResults expected;
        if (!(st = reference->Search(batch.View(), k, &expected)).ok()) Die("cpu: " + st.message());
        if (expected.query_offsets != results.query_offsets) Die("GPU and CPU differ in hit counts");
        for (std::size_t h = 0; h < expected.hits.size(); ++h) {
          if (expected.hits[h].object != results.hits[h].object || expected.hits[h].score != results.hits[h].score)
            Die("GPU and CPU differ at hit " + std::to_string(h) + " of a batch of " + std::to_string(size));
        }
        std::printf("|   = CPU engine | %d | %zu hits equal | | |\n", size, expected.hits.size());
      }
      std::vector<double> times;
      for (int32_t r = 0; r < repeat; ++r) {
        const double s = Now();
        st = engine->Search(batch.View(), k, &results);
        times.push_back(Now() - s);
        if (!st.ok()) Die(kind + ": " + st.message());
      }
      std::sort(times.begin(), times.end());
      const double t = times[times.size() / 2];
      std::printf("| %s | %d | %.3f ms | %.1f us | %.0f |\n", kind.c_str(), size, t * 1e3,
                  t * 1e6 / size, size / t);
#ifdef GENIE_WITH_CUDA
      if (kind == "gpu") {
        genie::gpu::SetProfile(engine.get(), true);
        genie::gpu::SearchStats stats;
        if (engine->Search(batch.View(), k, &results).ok() &&
            genie::gpu::GetLastSearchStats(engine.get(), &stats)) {
          std::printf("|   profile (ms) | %d | %s | | |\n", size, stats.profile.c_str());
        }
        genie::gpu::SetTimeline(engine.get(), true);
        if (engine->Search(batch.View(), k, &results).ok() &&
            genie::gpu::GetLastSearchStats(engine.get(), &stats)) {
          std::printf("|   timeline (ms, host/device) | %d | %s | | |\n", size, stats.profile.c_str());
        }
        genie::gpu::SetProfile(engine.get(), false);
      }
#endif
    }
  }
  return 0;
}

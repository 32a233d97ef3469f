// engine_bench: the engines side by side on an LSH workload (see README.md).
//
//   engine_bench [--data DIR] [--n N] [--nq Q] [--k K] [--ref-queries R]
//                [--engines ref,cpu,count,faithful,tiled] [--repeat T] [--threads C]
//                [--cpu-tile OBJECTS[,OBJECTS...]] [--gpu-first]
//                [--gpus 1,2,4 [--placements replicate,shard]]  (engine "group":
//                the tiled engine over the first N GPUs, genie/multi_device.hpp)
//                (also cpu-by-query: the CPU engine one query at a time, where
//                cpu is its own choice, tile by tile for such a batch; and
//                cpu-packed: cpu reading packed postings, built in the search)
//
// With --data, reads gen_lsh_workload.py's output (data.u8: n x m bucket ids,
// queries.u8: nq x m, meta.json for m and b); --n takes a prefix of the rows.
// Without it, generates a synthetic LSH-like workload (clustered points,
// m = 237, b = 67) so that it also runs on a machine without the files.
// Object keyword: i * b + h_i(p); each query keyword is its own item.
//
// Reported per engine: batch time (median of --repeat runs after a warm-up
// for the GPU engines), queries/s, postings scanned/s (CompiledBatch
// total_postings / time), device memory per query (peak engine device memory
// during the search minus the resident index, over the batch size), and
// whether the results equal the reference engine's (on the first R queries,
// hit for hit) and the multi-threaded CPU engine's (all queries).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genie/engine.hpp"
#include "genie/index.hpp"
#include "genie/multi_device.hpp"
#include "genie/parallel.hpp"
#include "genie/query.hpp"
#ifdef GENIE_WITH_CUDA
#include "genie/gpu_stats.hpp"
#include "genie/gpu_engine.hpp"
#endif

namespace {

using genie::CompiledBatch;
using genie::Engine;
using genie::Hit;
using genie::InvertedIndex;
using genie::QueryBatch;
using genie::Status;
using genie::TopKResults;

struct Args {
  std::string data;
  int64_t n = 0;  // 0: all rows (files) or 200000 (synthetic)
  int32_t nq = 1024;
  int32_t k = 100;
  int32_t ref_queries = 32;
  int32_t repeat = 3;
  int32_t threads = 0;
  // the CPU engine's EngineOptions::cpu_tile_objects, a row each
  std::vector<int64_t> cpu_tiles{0};
  std::string engines = "ref,cpu,count,faithful,tiled";
  std::string tile_words;   // extra tiled runs: comma-separated GpuEngineOptions::tile_words values
  bool gpu_first = false;   // --gpu-first: the GPU rows before the CPU rows
  int64_t budget_mb = 0;    // extra tiled run with this device-memory budget (multiple loading)
  std::vector<int32_t> gpus;  // --gpus 2,4: the tiled engine over the first N GPUs (genie/multi_device.hpp)
  std::string placements = "replicate,shard";
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "engine_bench: %s\n", message.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value for " + arg);
      return argv[++i];
    };
    if (arg == "--data") a.data = value();
    else if (arg == "--n") a.n = std::atoll(value().c_str());
    else if (arg == "--nq") a.nq = std::atoi(value().c_str());
    else if (arg == "--k") a.k = std::atoi(value().c_str());
    else if (arg == "--ref-queries") a.ref_queries = std::atoi(value().c_str());
    else if (arg == "--repeat") a.repeat = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--threads") a.threads = std::atoi(value().c_str());
    else if (arg == "--cpu-tile") {
      a.cpu_tiles.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) a.cpu_tiles.push_back(std::atoll(item.c_str()));
    }
    else if (arg == "--engines") a.engines = value();
    else if (arg == "--gpu-first") a.gpu_first = true;
    else if (arg == "--tile-words") a.tile_words = value();
    else if (arg == "--budget-mb") a.budget_mb = std::atoll(value().c_str());
    else if (arg == "--gpus") {
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) a.gpus.push_back(std::atoi(item.c_str()));
    }
    else if (arg == "--placements") a.placements = value();
    else Die("unknown argument " + arg);
  }
  return a;
}

struct Workload {
  int64_t n = 0;
  int32_t m = 0, b = 0;
  std::vector<uint8_t> data;     // n x m
  std::vector<uint8_t> queries;  // nq x m
  int32_t nq = 0;
  std::string source;
};

int32_t JsonInt(const std::string& json, const std::string& key) {
  const std::string pattern = "\"" + key + "\":";
  std::size_t pos = json.find(pattern);
  if (pos == std::string::npos) Die("meta.json has no " + key);
  pos += pattern.size();
  while (pos < json.size() && (json[pos] == ' ' || json[pos] == '\n')) ++pos;
  return std::atoi(json.c_str() + pos);
}

Workload LoadFiles(const Args& a) {
  Workload w;
  std::ifstream meta(a.data + "/meta.json");
  if (!meta) Die("cannot read " + a.data + "/meta.json");
  std::stringstream ss;
  ss << meta.rdbuf();
  const std::string json = ss.str();
  w.m = JsonInt(json, "m");
  w.b = JsonInt(json, "b");
  const int64_t total_n = JsonInt(json, "n");
  w.n = a.n > 0 ? std::min<int64_t>(a.n, total_n) : total_n;
  std::ifstream data(a.data + "/data.u8", std::ios::binary);
  if (!data) Die("cannot read data.u8");
  w.data.resize(static_cast<std::size_t>(w.n * w.m));
  data.read(reinterpret_cast<char*>(w.data.data()), static_cast<std::streamsize>(w.data.size()));
  if (data.gcount() != static_cast<std::streamsize>(w.data.size())) Die("data.u8 too short");
  std::ifstream q(a.data + "/queries.u8", std::ios::binary | std::ios::ate);
  if (!q) Die("cannot read queries.u8");
  const int64_t qbytes = q.tellg();
  q.seekg(0);
  w.nq = static_cast<int32_t>(std::min<int64_t>(a.nq, qbytes / w.m));
  w.queries.resize(static_cast<std::size_t>(w.nq) * w.m);
  q.read(reinterpret_cast<char*>(w.queries.data()), static_cast<std::streamsize>(w.queries.size()));
  w.source = a.data + " (first " + std::to_string(w.n) + " rows)";
  return w;
}

// Clustered points hashed by m functions into b buckets: an object keeps its
// cluster's bucket for a function with probability 0.6, else a random one.
// Queries are objects with 20% of their buckets re-drawn.
Workload Synthetic(const Args& a) {
  Workload w;
  w.n = a.n > 0 ? a.n : 200000;
  w.m = 237;
  w.b = 67;
  w.nq = a.nq;
  const int32_t clusters = 1000;
  std::mt19937 rng(20180416);
  std::uniform_int_distribution<int32_t> bucket(0, w.b - 1);
  std::uniform_int_distribution<int32_t> cluster(0, clusters - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<uint8_t> centres(static_cast<std::size_t>(clusters) * w.m);
  for (auto& c : centres) c = static_cast<uint8_t>(bucket(rng));
  w.data.resize(static_cast<std::size_t>(w.n * w.m));
  for (int64_t o = 0; o < w.n; ++o) {
    const uint8_t* c = &centres[static_cast<std::size_t>(cluster(rng)) * w.m];
    for (int32_t i = 0; i < w.m; ++i) {
      w.data[static_cast<std::size_t>(o * w.m + i)] =
          unit(rng) < 0.6 ? c[i] : static_cast<uint8_t>(bucket(rng));
    }
  }
  w.queries.resize(static_cast<std::size_t>(w.nq) * w.m);
  for (int32_t q = 0; q < w.nq; ++q) {
    const int64_t src = static_cast<int64_t>(unit(rng) * static_cast<double>(w.n)) % w.n;
    for (int32_t i = 0; i < w.m; ++i) {
      w.queries[static_cast<std::size_t>(q) * w.m + i] =
          unit(rng) < 0.2 ? static_cast<uint8_t>(bucket(rng))
                          : w.data[static_cast<std::size_t>(src * w.m + i)];
    }
  }
  w.source = "synthetic LSH-like (n=" + std::to_string(w.n) + ", 1000 clusters)";
  return w;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

QueryBatch MakeBatch(const Workload& w, int32_t first, int32_t count) {
  QueryBatch batch;
  std::vector<int32_t> keywords(static_cast<std::size_t>(w.m));
  for (int32_t q = first; q < first + count; ++q) {
    for (int32_t i = 0; i < w.m; ++i) {
      keywords[static_cast<std::size_t>(i)] = i * w.b + w.queries[static_cast<std::size_t>(q) * w.m + i];
    }
    batch.AddKeywordQuery(keywords);
  }
  return batch;
}

bool SameHits(const TopKResults& a, const TopKResults& b, int32_t queries) {
  if (a.num_queries() < queries || b.num_queries() < queries) return false;
  for (int32_t q = 0; q < queries; ++q) {
    auto x = a.Query(q), y = b.Query(q);
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i].object != y[i].object || x[i].score != y[i].score) return false;
    }
  }
  return true;
}

// Same score multiset per query (ties at the k-th score may pick other objects).
bool SameScores(const TopKResults& a, const TopKResults& b, int32_t queries) {
  if (a.num_queries() < queries || b.num_queries() < queries) return false;
  for (int32_t q = 0; q < queries; ++q) {
    auto x = a.Query(q), y = b.Query(q);
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i].score != y[i].score) return false;
    }
  }
  return true;
}

struct Row {
  std::string engine;
  std::string note;
  double seconds = 0;       // for the whole batch (scaled when run on a subset)
  double queries = 0;
  double postings = 0;
  double mem_per_query = -1;
  std::string vs_ref, vs_cpu;
};

void Print(const std::vector<Row>& rows) {
  std::printf("\n| engine | batch time | queries/s | postings/s | device memory per query | = reference | = CPU engine | note |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    char mem[64] = "-";
    if (r.mem_per_query >= 0) std::snprintf(mem, sizeof(mem), "%.2f MB", r.mem_per_query / 1e6);
    std::printf("| %s | %.1f ms | %.0f | %.2f G | %s | %s | %s | %s |\n", r.engine.c_str(),
                r.seconds * 1e3, r.queries / r.seconds, r.postings / r.seconds / 1e9, mem,
                r.vs_ref.c_str(), r.vs_cpu.c_str(), r.note.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  const double t0 = Now();
  Workload w = args.data.empty() ? Synthetic(args) : LoadFiles(args);
  std::printf("workload: %s, m=%d, b=%d, %d queries, k=%d\n", w.source.c_str(), w.m, w.b, w.nq,
              args.k);

  // Index: object p owns keywords i*b + h_i(p).
  auto index = std::make_shared<InvertedIndex>();
  {
    std::vector<int64_t> offsets(static_cast<std::size_t>(w.n) + 1);
    std::vector<int32_t> keywords(static_cast<std::size_t>(w.n * w.m));
    for (int64_t o = 0; o < w.n; ++o) {
      offsets[static_cast<std::size_t>(o)] = o * w.m;
      for (int32_t i = 0; i < w.m; ++i) {
        keywords[static_cast<std::size_t>(o * w.m + i)] =
            i * w.b + w.data[static_cast<std::size_t>(o * w.m + i)];
      }
    }
    offsets[static_cast<std::size_t>(w.n)] = w.n * w.m;
    std::vector<uint8_t>().swap(w.data);
    const double tb = Now();
    Status st = InvertedIndex::Build(offsets, keywords, genie::IndexOptions(), index.get());
    if (!st.ok()) Die("index build failed: " + st.message());
    std::printf("index: %d objects, %lld postings, built in %.1f s (load %.1f s)\n",
                index->num_objects(), static_cast<long long>(index->num_postings()), Now() - tb,
                tb - t0);
  }
  const QueryBatch batch = MakeBatch(w, 0, w.nq);
  const genie_query_batch view = batch.View();
  CompiledBatch compiled;
  const double tc = Now();
  if (!genie::CompileBatch(*index, view, &compiled).ok()) Die("compile failed");
  std::printf("CompileBatch: %.1f ms, %zu slices\n", (Now() - tc) * 1e3, compiled.slices.size());
  const double postings = static_cast<double>(compiled.total_postings);
  std::printf("postings scanned per batch: %.3f G\n", postings / 1e9);
#ifdef GENIE_WITH_CUDA
  for (const auto& d : genie::ListGpuDevices()) {
    std::printf("GPU %d: %s, %.1f GiB, cc %d.%d, %d SMs, usable %d %s\n", d.ordinal, d.name,
                d.memory_bytes / 1073741824.0, d.compute_major, d.compute_minor, d.processors,
                d.usable, d.note);
  }
#endif

  auto wants = [&](const char* name) {
    const std::string list = "," + args.engines + ",";
    return list.find("," + std::string(name) + ",") != std::string::npos;
  };
  const int32_t ref_q = std::min(args.ref_queries, w.nq);
  std::vector<Row> rows;
  TopKResults reference, cpu_results;
  bool have_reference = false, have_cpu = false;

  if (wants("ref") && ref_q > 0) {
    const QueryBatch sub = MakeBatch(w, 0, ref_q);
    auto engine = genie::MakeReferenceEngine();
    engine->Upload(index);
    const double s = Now();
    Status st = engine->Search(sub.View(), args.k, &reference);
    const double t = Now() - s;
    if (!st.ok()) Die("reference: " + st.message());
    have_reference = true;
    Row r;
    r.engine = "CPU reference (1 thread)";
    r.seconds = t * w.nq / ref_q;
    r.queries = w.nq;
    r.postings = postings;
    r.note = "run on the first " + std::to_string(ref_q) + " queries, time scaled x" +
             std::to_string(w.nq / ref_q);
    r.vs_ref = "-";
    r.vs_cpu = "-";
    rows.push_back(r);
    std::printf("reference: %.3f s for %d queries\n", t, ref_q);
  }

  std::vector<std::pair<std::size_t, TopKResults>> pending_cpu;  // rows to compare with the CPU engine
  auto vs_cpu = [&](const TopKResults& res) -> std::string {
    if (SameHits(cpu_results, res, w.nq)) return "yes (all, hit for hit)";
    return SameScores(cpu_results, res, w.nq) ? "scores (all)" : "NO";
  };
  auto compare = [&](Row* r, const TopKResults& res, bool exact_ties) {
    if (have_reference) {
      const bool hits = SameHits(reference, res, ref_q);
      r->vs_ref = hits ? "yes (" + std::to_string(ref_q) + " q, hit for hit)"
                       : (SameScores(reference, res, ref_q) ? "scores only" : "NO");
    }
    if (!have_cpu) pending_cpu.emplace_back(rows.size(), res);  // compared after the CPU rows
    if (have_cpu && &res != &cpu_results) r->vs_cpu = vs_cpu(res);
    (void)exact_ties;
  };

  auto run_cpu_rows = [&]() {
  // The CPU engine in its own choice of order (tile by tile for this batch;
  // --cpu-tile sets the tiles' objects) and one query at a time.
  struct CpuOrder {
    const char* name;
    int64_t tile_objects;
    std::string label;
    bool packed = false;
  };
  const std::string threads_label =
      args.threads > 0 ? std::to_string(args.threads) : std::string("all");
  std::vector<CpuOrder> cpu_orders;
  for (int64_t tile : args.cpu_tiles) {
    cpu_orders.push_back(
        {"cpu", tile,
         "CPU engine (" + threads_label + " threads" +
             (tile > 0 ? ", tiles of " + std::to_string(tile) + " objects" : "") + ")"});
  }
  for (int64_t tile : args.cpu_tiles) {
    cpu_orders.push_back(
        {"cpu-packed", tile,
         "CPU engine, packed postings (" + threads_label + " threads" +
             (tile > 0 ? ", tiles of " + std::to_string(tile) + " objects" : "") + ")",
         true});
  }
  cpu_orders.push_back(
      {"cpu-by-query", -1, "CPU engine, one query at a time (" + threads_label + " threads)"});
  for (const CpuOrder& order : cpu_orders) {
    if (!wants(order.name)) continue;
    genie::EngineOptions options;
    options.threads = args.threads;
    options.cpu_tile_objects = order.tile_objects;
    options.cpu_packed_postings = order.packed;
    auto engine = genie::MakeCpuEngine(options);
    engine->Upload(index);
    TopKResults res;
    // Every order's second search is timed: the first warms the thread
    // pool and the allocator, and builds the packed postings.
    const double s0 = Now();
    Status st0 = engine->Search(view, args.k, &res);
    const double first = Now() - s0;
    if (!st0.ok()) Die(std::string(order.name) + ": " + st0.message());
    const double s = Now();
    Status st = engine->Search(view, args.k, &res);
    const double t = Now() - s;
    if (!st.ok()) Die(std::string(order.name) + ": " + st.message());
    Row r;
    char note[96];
    std::snprintf(note, sizeof(note), "second search; the first%s: %.1f ms",
                  order.packed ? ", packing the index" : "", first * 1e3);
    r.note = note;
    r.engine = order.label;
    r.seconds = t;
    r.queries = w.nq;
    r.postings = postings;
    if (!have_cpu) {
      cpu_results = std::move(res);
      have_cpu = true;
      r.vs_cpu = "-";
      compare(&r, cpu_results, true);
    } else {
      compare(&r, res, false);
    }
    rows.push_back(r);
    std::printf("%s %lld: %.3f s\n", order.name, static_cast<long long>(order.tile_objects), t);
  }

  };

  auto run_gpu_rows = [&]() {
#ifdef GENIE_WITH_CUDA
  struct GpuKind {
    std::string flag;
    std::string label;
    const char* matcher;  // "tiled" or "faithful", or nullptr for the count table
    std::string tile_words;
    uint64_t budget = 0;
    int32_t gpus = 0;  // > 0: a device group of the first gpus GPUs
    genie::Placement placement = genie::Placement::kAuto;
  };
  std::vector<GpuKind> kinds = {
      {"count", "GPU count table (GPU-SPQ baseline)", nullptr, "", 0},
      {"faithful", "GPU c-PQ, faithful (paper III-C)", "faithful", "", 0},
      {"faithful-paper", "GPU c-PQ, faithful, paper tie selection", "faithful", "", 0},
      {"tiled-full", "GPU c-PQ, tiled, 4-byte postings", "tiled", "", 0},
      {"tiled", "GPU c-PQ, tiled, packed postings (16-bit tile-local ids)", "tiled", "", 0},
  };
  if (!args.tile_words.empty()) {
    std::stringstream list(args.tile_words);
    std::string words;
    while (std::getline(list, words, ',')) {
      kinds.push_back({"tiled", "GPU c-PQ, tiled, " + std::to_string(std::atoi(words.c_str()) * 4 / 1024) +
                                    " KiB tiles", "tiled", words, 0});
    }
  }
  if (args.budget_mb > 0) {
    // multiple loading of packed parts, and of 4-byte parts
    kinds.push_back({"tiled", "GPU c-PQ, tiled, packed, device budget " +
                                  std::to_string(args.budget_mb) + " MB (multiple loading)",
                     "tiled", "", static_cast<uint64_t>(args.budget_mb) << 20});
    kinds.push_back({"tiled-full", "GPU c-PQ, tiled, 4-byte postings, device budget " +
                                       std::to_string(args.budget_mb) + " MB (multiple loading)",
                     "tiled", "", static_cast<uint64_t>(args.budget_mb) << 20});
  }
  // Device groups (flag "group"): replicated and sharded over 1, 2, 4 GPUs,
  // with the budget too when one is given (an index beyond one GPU's).
  for (int32_t g : args.gpus) {
    for (const char* p : {"replicate", "shard"}) {
      if (args.placements.find(p) == std::string::npos) continue;
      const bool shard = std::strcmp(p, "shard") == 0;
      const std::string label = "GPU c-PQ, tiled, packed, " + std::to_string(g) + " GPU" + (g > 1 ? "s " : " ") +
                                (shard ? "sharded" : "replicated");
      kinds.push_back({"group", label, "tiled", "", 0, g, shard ? genie::Placement::kShard : genie::Placement::kReplicate});
      if (args.budget_mb > 0)
        kinds.push_back({"group", label + ", device budget " + std::to_string(args.budget_mb) + " MB", "tiled", "",
                         static_cast<uint64_t>(args.budget_mb) << 20, g,
                         shard ? genie::Placement::kShard : genie::Placement::kReplicate});
    }
  }
  for (const GpuKind& kind : kinds) {
    if (!wants(kind.flag.c_str())) continue;
    genie::GpuEngineOptions gpu_options;
    if (kind.matcher != nullptr && std::strcmp(kind.matcher, "faithful") == 0) {
      gpu_options.matcher = genie::GpuMatcher::kFaithful;
    }
    if (kind.flag == "faithful-paper") gpu_options.exact_ties = false;
    if (kind.flag == "tiled-full") gpu_options.postings = genie::GpuPostings::kFull;
    if (kind.flag == "tiled") gpu_options.postings = genie::GpuPostings::kPacked;
    if (!kind.tile_words.empty()) {
      // As the engine's former GENIE_GPU_TILE_WORDS: a value out of range
      // leaves the default.
      const long long v = std::atoll(kind.tile_words.c_str());
      if (v >= 512 && v <= 49152 && v % 512 == 0) gpu_options.tile_words = static_cast<int32_t>(v);
    }
    Status st;
    genie::EngineOptions options;
    options.memory_budget_bytes = kind.budget;
    std::unique_ptr<Engine> engine;
    if (kind.gpus > 0) {
      std::vector<genie::DeviceMember> members;
      for (int32_t d = 0; d < kind.gpus && st.ok(); ++d) {
        genie::EngineOptions one = options;
        one.device_ordinal = d;
        one.threads = std::max(1, genie::ResolveThreads(args.threads) / kind.gpus);  // as the C API's groups
        genie::DeviceMember m;
        m.device = d;
        m.capacity_bytes = kind.budget;
        m.engine = genie::MakeGpuEngine(one, gpu_options, &st);
        members.push_back(std::move(m));
      }
      if (st.ok())
        engine = std::make_unique<genie::MultiDeviceEngine>(
            std::move(members), [] { return genie::MakeCpuEngine(genie::EngineOptions()); }, kind.placement);
    } else {
      engine = kind.matcher ? genie::MakeGpuEngine(options, gpu_options, &st)
                            : genie::MakeGpuCountTableEngine(options, &st);
    }
    if (!engine) {
      std::printf("%s: unavailable: %s\n", kind.label.c_str(), st.message().c_str());
      continue;
    }
    st = engine->Upload(index);
    if (!st.ok()) Die(kind.label + " upload: " + st.message());
    TopKResults res;
    st = engine->Search(view, args.k, &res);  // warm-up
    if (!st.ok()) Die(kind.label + ": " + st.message());
    std::vector<double> times;
    genie::gpu::SearchStats stats;
    for (int32_t i = 0; i < args.repeat; ++i) {
      const double s = Now();
      st = engine->Search(view, args.k, &res);
      times.push_back(Now() - s);
      if (!st.ok()) Die(kind.label + ": " + st.message());
      genie::gpu::GetLastSearchStats(engine.get(), &stats);
    }
    std::sort(times.begin(), times.end());
    genie::gpu::SetProfile(engine.get(), true);
    genie::gpu::SearchStats profiled;
    TopKResults unused;
    if (engine->Search(view, args.k, &unused).ok() &&
        genie::gpu::GetLastSearchStats(engine.get(), &profiled)) {
      std::printf("%s: profile (ms): %s\n", kind.label.c_str(), profiled.profile.c_str());
    }
    // the same search's timeline: the host's marks beside the device's, no waits added
    genie::gpu::SetTimeline(engine.get(), true);
    if (kind.gpus == 0 && engine->Search(view, args.k, &unused).ok() &&
        genie::gpu::GetLastSearchStats(engine.get(), &profiled)) {
      std::printf("%s: timeline (ms, host/device): %s\n", kind.label.c_str(), profiled.profile.c_str());
    }
    genie::gpu::SetProfile(engine.get(), true);
    if (kind.gpus > 0) {
      // each GPU's own phases in a group search, and its share of the time
      auto* group = static_cast<genie::MultiDeviceEngine*>(engine.get());
      for (int32_t d = 0; d < kind.gpus; ++d) genie::gpu::SetProfile(group->member(d), true);
      const double s = Now();
      const bool ok = engine->Search(view, args.k, &unused).ok();
      const double whole = Now() - s;
      for (int32_t d = 0; ok && d < kind.gpus; ++d) {
        if (genie::gpu::GetLastSearchStats(group->member(d), &profiled))
          std::printf("%s: GPU %d of a %.1f ms search: parts %d, profile (ms): %s\n", kind.label.c_str(), d,
                      whole * 1e3, profiled.parts, profiled.profile.c_str());
      }
      for (const auto& r : group->Report())
        std::printf("%s: GPU %d: objects [%d, %d), %llu searches, %.1f ms in them%s\n", kind.label.c_str(), r.device,
                    r.first_object, r.end_object, static_cast<unsigned long long>(r.searches), r.seconds * 1e3,
                    r.dropped ? (", dropped: " + r.failure).c_str() : "");
    }
    Row r;
    r.engine = kind.label;
    r.seconds = times[times.size() / 2];
    r.queries = w.nq;
    r.postings = postings;
    r.mem_per_query = static_cast<double>(stats.peak_device_bytes - stats.index_device_bytes) / w.nq;
    std::printf("%s: index on the device %.1f MB\n", kind.label.c_str(),
                static_cast<double>(stats.index_device_bytes) / 1e6);
    r.note = "median of " + std::to_string(args.repeat) + " (min " +
             std::to_string(times.front() * 1e3).substr(0, 7) + " ms); parts " +
             std::to_string(stats.parts) + (stats.parts_packed ? " (packed)" : "") + ", groups " + std::to_string(stats.query_groups) +
             ", overflow " + std::to_string(stats.overflow_queries) + ", count-table " +
             std::to_string(stats.count_queries);
    compare(&r, res, true);
    rows.push_back(r);
    std::printf("%s: median %.3f s\n", kind.label.c_str(), r.seconds);
    std::fflush(stdout);
  }
#endif
  };

  // --gpu-first measures the GPU engines before the CPU rows load every
  // core for seconds (the host's clocks then stay lower for a while, which
  // slows the GPU engines' host share at 1M); their "= CPU engine" column
  // is filled in once the CPU engine has run.
  if (args.gpu_first) {
    run_gpu_rows();
    run_cpu_rows();
  } else {
    run_cpu_rows();
    run_gpu_rows();
  }
  for (const auto& pending : pending_cpu) {
    if (have_cpu) rows[pending.first].vs_cpu = vs_cpu(pending.second);
  }
  Print(rows);
  return 0;
}

// The permutation index (seed 001) at engine level, through the C API, side
// by side with the exact scans it approximates, in one process:
//   words     wamerican-insane, queries: random words of 6+ letters with 10,
//             20, 30 and 40% of their letters replaced (string_scan_bench's
//             workload), by edit distance;
//   packages  Debian package descriptions (document_corpus.py packages, ~400
//             characters, cut at PACKAGE_BYTES, default 256: the longest
//             pattern the engines prepare for bit-parallel Myers), queries:
//             descriptions with 10% of their characters replaced, by edit
//             distance;
//   fmnist    Fashion-MNIST 60,000 x 784, queries: the test images, by
//             Euclidean distance.
// For each m: the rows' build (every object x m distances) on one CPU
// thread (the seed's sequential CPU), on every thread; per fraction f: a
// batch (query rows + footrule selection + exact re-rank of the candidates)
// on the CPU engine and the GPU (selection) and single queries; recall@10
// against the exact scan of the same engine (a row counts when it is no
// farther than the exact tenth).  Figures are medians of `runs` runs.
//   permutation_bench words|packages|fmnist PATH [queries] [threads] [runs] [m list] [f list]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "genie/genie.h"

namespace {

using genie_bench::Check;
using genie_bench::Median;
using genie_bench::Now;
using genie_bench::ReadIdx;

struct Csr {
  std::string text;
  std::vector<int64_t> offsets{0};
  void Add(const std::string& s) {
    text += s;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  int32_t size() const { return static_cast<int32_t>(offsets.size() - 1); }
  std::string Get(int32_t i) const {
    return text.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(offsets[i + 1] - offsets[i]));
  }
};

// One kind of values behind the C API: a set, queries, scans and rows.
struct Data {
  bool strings = true;
  Csr words, queries;                 // strings
  std::vector<float> vectors, qvecs;  // vectors
  int32_t dim = 0, n = 0, nq = 0;
  genie_strings* sset = nullptr;
  genie_vectors* vset = nullptr;
};

// Rows of the k nearest per query: (objects, distances) of a C API result.
struct Rows {
  std::vector<int64_t> offsets;
  std::vector<int32_t> objects;
  std::vector<double> distances;
};

template <typename R>
Rows Take(R* r, int32_t nq) {
  Rows out;
  out.offsets.assign(r->query_offsets, r->query_offsets + nq + 1);
  out.objects.assign(r->objects, r->objects + r->query_offsets[nq]);
  out.distances.assign(r->distances, r->distances + r->query_offsets[nq]);
  return out;
}

// The exact k nearest (candidates NULL) or the re-rank of candidates, for queries [first, first + count).
Rows Scan(Data& d, genie_engine_kind device, int32_t threads, int32_t first, int32_t count, int32_t k,
          const int64_t* cand_offsets = nullptr, const int32_t* cands = nullptr) {
  genie_engine_options options{};
  options.threads = threads;
  genie_error err{};
  if (d.strings) {
    std::vector<int64_t> offs(static_cast<size_t>(count) + 1);
    for (int32_t i = 0; i <= count; ++i) offs[static_cast<size_t>(i)] = d.queries.offsets[first + i] - d.queries.offsets[first];
    genie_string_scan scan{};
    scan.n_queries = count;
    scan.query_text = d.queries.text.data() + d.queries.offsets[first];
    scan.query_text_offsets = offs.data();
    scan.k = k;
    scan.candidate_offsets = cand_offsets;
    scan.candidates = cands;
    genie_string_results* r = nullptr;
    Check(genie_strings_scan(d.sset, device, &options, &scan, &r, &err), err, "string scan");
    Rows out = Take(r, count);
    genie_string_results_free(r);
    return out;
  }
  genie_vector_scan scan{};
  scan.n_queries = count;
  scan.queries = d.qvecs.data() + static_cast<size_t>(first) * d.dim;
  scan.k = k;
  scan.candidate_offsets = cand_offsets;
  scan.candidates = cands;
  genie_vector_results* r = nullptr;
  Check(genie_vectors_scan(d.vset, device, &options, &scan, &r, &err), err, "vector scan");
  Rows out = Take(r, count);
  genie_vector_results_free(r);
  return out;
}

// recall@k of got against truth, ties at the k-th distance allowed
double Recall(const Rows& got, const Rows& truth, int32_t nq, int32_t k) {
  double hits = 0;
  for (int32_t q = 0; q < nq; ++q) {
    const int64_t t0 = truth.offsets[q], t1 = truth.offsets[q + 1];
    if (t1 == t0) continue;
    const double kth = truth.distances[static_cast<size_t>(std::min<int64_t>(t1, t0 + k) - 1)];
    for (int64_t r = got.offsets[q]; r < got.offsets[q + 1] && r < got.offsets[q] + k; ++r)
      hits += got.distances[static_cast<size_t>(r)] <= kth;
  }
  return hits / (static_cast<double>(nq) * k);
}

// The permutation index of one m: the permutants' set and every object's rows.
struct Index {
  int32_t m = 0;
  genie_permutation_rows* rows = nullptr;
  uint8_t* data = nullptr;
  genie_strings* sperm = nullptr;
  genie_vectors* vperm = nullptr;
  std::vector<uint8_t> query_rows;  // nq x stride
};

void MakePermutants(Data& d, Index* ix, uint64_t seed) {
  genie_error err{};
  std::vector<int32_t> ids(static_cast<size_t>(ix->m));
  Check(genie_permutants_choose(d.n, nullptr, ix->m, seed, ids.data(), &err), err, "choose");
  if (d.strings) {
    Csr p;
    for (int32_t id : ids) p.Add(d.words.Get(id));
    Check(genie_strings_create(p.text.data(), p.offsets.data(), p.size(), &ix->sperm, &err), err, "permutants");
  } else {
    std::vector<float> p;
    for (int32_t id : ids) p.insert(p.end(), d.vectors.begin() + static_cast<int64_t>(id) * d.dim,
                                    d.vectors.begin() + static_cast<int64_t>(id + 1) * d.dim);
    Check(genie_vectors_create(p.data(), ix->m, d.dim, &ix->vperm, &err), err, "permutants");
  }
}

// Rows of the objects (or of the queries) on device (the CPU's `threads` threads): the milliseconds.
double ComputeRows(Data& d, Index* ix, bool queries, genie_engine_kind device, int32_t threads) {
  genie_engine_options options{};
  options.threads = threads;
  genie_error err{};
  const double t0 = Now();
  if (queries) {
    ix->query_rows.assign(static_cast<size_t>(d.nq) * genie_permutation_stride(ix->m), 0);
    if (d.strings) {
      genie_strings* qs = nullptr;
      Check(genie_strings_create(d.queries.text.data(), d.queries.offsets.data(), d.nq, &qs, &err), err, "queries");
      Check(genie_strings_permutations(qs, ix->sperm, GENIE_ENGINE_CPU, &options, ix->query_rows.data(), &err), err, "query rows");
      genie_strings_free(qs);
    } else {
      genie_vectors* qs = nullptr;
      Check(genie_vectors_create(d.qvecs.data(), d.nq, d.dim, &qs, &err), err, "queries");
      Check(genie_vectors_permutations(qs, ix->vperm, GENIE_ENGINE_CPU, &options, ix->query_rows.data(), &err), err, "query rows");
      genie_vectors_free(qs);
    }
  } else if (d.strings) {
    Check(genie_strings_permutations(d.sset, ix->sperm, device, &options, ix->data, &err), err, "rows");
  } else {
    Check(genie_vectors_permutations(d.vset, ix->vperm, device, &options, ix->data, &err), err, "rows");
  }
  return Now() - t0;
}

// A batch [first, first + count): selection on device, re-rank on the CPU; the milliseconds in *ms
// (the queries' rows are timed apart: QueryRowsMs).
Rows Search(Data& d, Index* ix, genie_engine_kind device, int32_t threads, int32_t first, int32_t count,
            int32_t candidates, int32_t k, double* ms, genie_engine_kind* ran_on) {
  genie_engine_options options{};
  options.threads = threads;
  genie_error err{};
  const double t0 = Now();
  genie_permutation_candidates* c = nullptr;
  Check(genie_permutation_select(ix->rows, device, &options, nullptr,
                                 ix->query_rows.data() + static_cast<size_t>(first) * genie_permutation_stride(ix->m),
                                 count, candidates, &c, &err),
        err, "select");
  *ran_on = c->device;
  Rows out = Scan(d, GENIE_ENGINE_CPU, threads, first, count, k, c->query_offsets, c->objects);
  genie_permutation_candidates_free(c);
  *ms = Now() - t0;
  return out;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::string Mutate(std::string w, int32_t percent, std::mt19937* rng) {
  const int32_t edits = std::max<int32_t>(1, static_cast<int32_t>(w.size() * percent / 100));
  for (int32_t e = 0; e < edits; ++e) {
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, w.size() - 1)(*rng);
    if (static_cast<unsigned char>(w[at]) < 128)  // ASCII only: the text stays UTF-8
      w[at] = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(*rng));
  }
  return w;
}

// At most `bytes` bytes of s, cut at a character boundary.
std::string Prefix(const std::string& s, std::size_t bytes) {
  if (s.size() <= bytes) return s;
  while (bytes > 0 && (static_cast<unsigned char>(s[bytes]) & 0xC0) == 0x80) --bytes;
  return s.substr(0, bytes);
}

bool Ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 128) return false;
  return true;
}

void Load(const std::string& kind, const std::string& path, int32_t nq, Data* d) {
  genie_error err{};
  std::mt19937 rng(2024);
  if (kind == "fmnist") {
    d->strings = false;
    int32_t qn = 0, qdim = 0;
    d->vectors = ReadIdx(path + "/train-images-idx3-ubyte", &d->n, &d->dim);
    d->qvecs = ReadIdx(path + "/t10k-images-idx3-ubyte", &qn, &qdim);
    d->nq = std::min(nq, qn);
    d->qvecs.resize(static_cast<size_t>(d->nq) * d->dim);
    Check(genie_vectors_create(d->vectors.data(), d->n, d->dim, &d->vset, &err), err, "vectors");
    return;
  }
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<std::string> lines;
  for (std::string w; std::getline(in, w);) lines.push_back(w);
  if (kind == "words") {
    std::vector<std::string> long_words;
    for (const std::string& w : lines) {
      d->words.Add(w);
      if (w.size() >= 6 && Ascii(w)) long_words.push_back(w);
    }
    for (int32_t q = 0; q < nq; ++q) {
      const int32_t rate = 10 * (1 + q % 4);  // 10, 20, 30, 40%
      d->queries.Add(Mutate(long_words[std::uniform_int_distribution<std::size_t>(0, long_words.size() - 1)(rng)],
                            rate, &rng));
    }
  } else {
    // packages: the descriptions, queries are 10%-mutated copies of some of them
    const char* cut = std::getenv("PACKAGE_BYTES");
    const std::size_t bytes = cut != nullptr ? static_cast<std::size_t>(std::atol(cut)) : 256;
    for (const std::string& w : lines) d->words.Add(Prefix(w, bytes));
    for (int32_t q = 0; q < nq; ++q) {
      const std::string& w = lines[std::uniform_int_distribution<std::size_t>(0, lines.size() - 1)(rng)];
      d->queries.Add(Mutate(Prefix(w, bytes), 10, &rng));
    }
  }
  d->n = d->words.size();
  d->nq = d->queries.size();
  Check(genie_strings_create(d->words.text.data(), d->words.offsets.data(), d->n, &d->sset, &err), err, "strings");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: permutation_bench words|packages|fmnist PATH [queries] [threads] [runs] [m list] [f list]\n");
    return 2;
  }
  const std::string kind = argv[1];
  const int32_t nq = argc > 3 ? std::atoi(argv[3]) : 256;
  const int32_t threads = argc > 4 ? std::atoi(argv[4]) : 0;
  const int32_t runs = argc > 5 ? std::atoi(argv[5]) : 3;
  const std::vector<std::string> ms = Split(argc > 6 ? argv[6] : "16,32,64");
  const std::vector<std::string> fs = Split(argc > 7 ? argv[7] : "0.005,0.01,0.02,0.05,0.1");
  const int32_t k = 10;
  Data d;
  Load(kind, argv[2], nq, &d);
  genie_build_info info;
  genie_get_build_info(&info);
  std::printf("%s: %d objects, %d queries, k %d, threads %d (0: all), median of %d runs\n", kind.c_str(), d.n, d.nq,
              k, threads, runs);

  // the exact scans: truth (CPU) and their times, batch and single
  std::vector<double> t;
  Rows truth;
  for (int r = 0; r < runs; ++r) {
    const double t0 = Now();
    truth = Scan(d, GENIE_ENGINE_CPU, threads, 0, d.nq, k);
    t.push_back(Now() - t0);
  }
  const double exact_cpu = Median(t) / d.nq;
  double exact_gpu = -1, single_gpu = -1;
  bool gpu = info.with_cuda != 0;
  if (gpu) {
    genie_device_info dev[4];
    size_t count = 0;
    genie_error err{};
    gpu = false;
    if (genie_list_devices(dev, 4, &count, &err) == GENIE_OK)
      for (size_t i = 0; i < count && i < 4; ++i) gpu = gpu || (dev[i].kind == GENIE_DEVICE_GPU && dev[i].usable);
  }
  if (gpu) {
    Scan(d, GENIE_ENGINE_GPU, threads, 0, std::min(d.nq, 8), k);  // the copy and warm-up
    t.clear();
    for (int r = 0; r < runs; ++r) {
      const double t0 = Now();
      Rows g = Scan(d, GENIE_ENGINE_GPU, threads, 0, d.nq, k);
      t.push_back(Now() - t0);
      if (r == 0 && Recall(g, truth, d.nq, k) < 1.0) std::printf("MISMATCH: the exact GPU scan differs from the CPU's\n");
    }
    exact_gpu = Median(t) / d.nq;
    t.clear();
    for (int32_t q = 0; q < std::min(d.nq, 32); ++q) {
      const double t0 = Now();
      Scan(d, GENIE_ENGINE_GPU, threads, q, 1, k);
      t.push_back(Now() - t0);
    }
    single_gpu = Median(t);
  }
  t.clear();
  for (int32_t q = 0; q < std::min(d.nq, 16); ++q) {
    const double t0 = Now();
    Scan(d, GENIE_ENGINE_CPU, threads, q, 1, k);
    t.push_back(Now() - t0);
  }
  const double single_cpu = Median(t);
  std::printf("exact scan: CPU %.3f ms/q in a batch (%.0f q/s), single %.3f ms; GPU %.4f ms/q (%.0f q/s), single %.3f ms\n",
              exact_cpu, 1000 / exact_cpu, single_cpu, exact_gpu, exact_gpu > 0 ? 1000 / exact_gpu : 0.0, single_gpu);

  std::printf("%4s %7s %8s %11s %9s %10s %9s %9s %8s %8s %9s %9s %8s\n", "m", "f", "cands", "build 1t ms",
              "build ms", "qrows ms/q", "cpu ms/q", "cpu q/s", "cpu x", "recall", "cpu 1q ms", "gpu ms/q", "gpu x");
  for (const std::string& m_text : ms) {
    Index ix;
    ix.m = std::atoi(m_text.c_str());
    genie_error err{};
    MakePermutants(d, &ix, 7);
    Check(genie_permutation_rows_create(ix.m, d.n, &ix.rows, &ix.data, &err), err, "rows");
    const double build_1t = ComputeRows(d, &ix, false, GENIE_ENGINE_CPU, 1);
    std::vector<uint8_t> cpu_rows(ix.data, ix.data + static_cast<size_t>(d.n) * genie_permutation_stride(ix.m));
    t.clear();
    for (int r = 0; r < runs; ++r) t.push_back(ComputeRows(d, &ix, false, GENIE_ENGINE_CPU, threads));
    const double build = Median(t);
    double build_gpu = -1;
    if (gpu) {
      ComputeRows(d, &ix, false, GENIE_ENGINE_GPU, threads);  // the module's load
      t.clear();
      for (int r = 0; r < runs; ++r) t.push_back(ComputeRows(d, &ix, false, GENIE_ENGINE_GPU, threads));
      build_gpu = Median(t);
      if (!std::equal(cpu_rows.begin(), cpu_rows.end(), ix.data))
        std::printf("MISMATCH: the GPU's rows differ from the CPU's (m %d)\n", ix.m);
    }
    std::printf("m %d: rows of %d objects: CPU 1 thread %.1f ms, CPU %.1f ms, GPU %.1f ms (%.1fx the sequential CPU)\n",
                ix.m, d.n, build_1t, build, build_gpu, build_gpu > 0 ? build_1t / build_gpu : 0.0);
    const double qrows = ComputeRows(d, &ix, true, GENIE_ENGINE_CPU, threads) / d.nq;
    for (const std::string& f_text : fs) {
      const double f = std::atof(f_text.c_str());
      const int32_t cands = std::max<int32_t>(k, static_cast<int32_t>(f * d.n + 0.999));
      genie_engine_kind ran = GENIE_ENGINE_CPU;
      double ms = 0;
      Rows got;
      t.clear();
      for (int r = 0; r < runs; ++r) {
        got = Search(d, &ix, GENIE_ENGINE_CPU, threads, 0, d.nq, cands, k, &ms, &ran);
        t.push_back(ms);
      }
      const double cpu = Median(t) / d.nq + qrows;
      const double recall = Recall(got, truth, d.nq, k);
      t.clear();
      for (int32_t q = 0; q < std::min(d.nq, 16); ++q) {
        Search(d, &ix, GENIE_ENGINE_CPU, threads, q, 1, cands, k, &ms, &ran);
        t.push_back(ms);
      }
      const double single = Median(t) + qrows;
      double gpu_ms = -1;
      if (gpu) {
        Search(d, &ix, GENIE_ENGINE_GPU, threads, 0, std::min(d.nq, 8), cands, k, &ms, &ran);  // the copy
        t.clear();
        Rows g;
        for (int r = 0; r < runs; ++r) {
          g = Search(d, &ix, GENIE_ENGINE_GPU, threads, 0, d.nq, cands, k, &ms, &ran);
          t.push_back(ms);
        }
        if (ran != GENIE_ENGINE_GPU || g.objects != got.objects)
          std::printf("MISMATCH: the GPU's candidates gave other rows than the CPU's\n");
        gpu_ms = Median(t) / d.nq + qrows;
      }
      std::printf("%4d %7.3f %8d %11.1f %9.1f %10.4f %9.4f %9.0f %8.1f %8.3f %9.3f %9.4f %8.1f\n", ix.m, f, cands,
                  build_1t, build, qrows, cpu, 1000 / cpu, exact_cpu / cpu, recall, single, gpu_ms,
                  gpu_ms > 0 ? exact_gpu / gpu_ms : 0.0);
    }
    genie_permutation_rows_free(ix.rows);
    genie_strings_free(ix.sperm);
    genie_vectors_free(ix.vperm);
  }
  return 0;
}

// Cancellation: the CPU engine, ParallelFor, the CPU edit-distance batch and
// batch verification stop with Status::Cancelled() when the callback asks,
// and the C API reports GENIE_CANCELLED.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <random>
#include <cstdint>
#include <string>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/similar_fixture.hpp"
#include "genie/parallel.hpp"
#include "genie/sequence.hpp"
#include "genie/test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::MakeIndex;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;

// Asks to cancel from the `after`-th poll on; counts the polls.
struct Canceller {
  std::atomic<int64_t> polls{0};
  std::atomic<int64_t> after{0};

  static int Poll(void* arg) {
    auto* self = static_cast<Canceller*>(arg);
    return self->polls.fetch_add(1) >= self->after ? 1 : 0;
  }
  CancelCheck check() { return CancelCheck{&Canceller::Poll, this}; }
};

int Never(void*) { return 0; }

struct Data {
  Csr csr;
  std::shared_ptr<const InvertedIndex> index;
  QueryBatch batch;
};

Data MakeData() {
  DataSpec spec;
  spec.objects = 40000;
  spec.max_length = 40;
  spec.universe = 300;
  Data d;
  d.csr = RandomCsr(5, spec);
  d.index = MakeIndex(d.csr, 256);
  QuerySpec qs;
  qs.queries = 200;
  qs.max_items = 8;
  qs.lo_min = -50;
  qs.lo_max = 250;
  d.batch = RandomBatch(6, qs);
  return d;
}

TEST(Cancel, CheckDefaultsToNever) {
  EXPECT_FALSE(CancelCheck().requested());
  EXPECT_TRUE((CancelCheck{[](void*) { return 7; }, nullptr}).requested());
  EXPECT_EQ(Status::Cancelled().code(), GENIE_CANCELLED);
  EXPECT_FALSE(Status::Cancelled().message().empty());
}

TEST(Cancel, ParallelForStops) {
  Canceller c;
  c.after = 10;
  std::atomic<int64_t> done{0};
  Status s = ParallelFor(100000, 4, [&](int64_t) {
    done.fetch_add(1);
    return Status::Ok();
  }, c.check());
  EXPECT_EQ(s.code(), GENIE_CANCELLED);
  EXPECT_LT(done.load(), 100000);
  // Never asked: every index runs.
  done = 0;
  EXPECT_TRUE(ParallelFor(1000, 4, [&](int64_t) {
    done.fetch_add(1);
    return Status::Ok();
  }, CancelCheck{&Never, nullptr}).ok());
  EXPECT_EQ(done.load(), 1000);
}

// threads = 0 is every core, as the engines' options say (the string and
// vector scans pass it through): more than one thread takes part.
TEST(ParallelFor, ZeroThreadsIsEveryCore) {
  if (ResolveThreads(0) < 2) GTEST_SKIP() << "one core";
  std::mutex mutex;
  std::set<std::thread::id> seen;
  ASSERT_TRUE(ParallelFor(64, 0, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
    return Status::Ok();
  }).ok());
  EXPECT_GE(seen.size(), 2u);
}

// The pools wake the groups of workers a job wants: jobs of every size from
// several callers at once, after the pools grew to 23 workers, each index
// run exactly once by as many threads as the job asked for at most, and
// every call returns (a worker left out of one job takes part in a later
// one that wants it).
TEST(ParallelFor, JobsOfEverySizeFromSeveralCallers) {
  // grow a pool (or several) to 23 workers
  std::atomic<int64_t> grown{0};
  ASSERT_TRUE(ParallelFor(24, 24, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++grown;
    return Status::Ok();
  }).ok());
  ASSERT_EQ(grown.load(), 24);
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(77 + c));
      for (int i = 0; i < 300; ++i) {
        const int64_t n = std::uniform_int_distribution<int64_t>(1, 40)(rng);
        const int32_t threads = std::uniform_int_distribution<int32_t>(1, 24)(rng);
        std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
        std::mutex mutex;
        std::set<std::thread::id> ran_on;
        const Status s = ParallelFor(n, threads, [&](int64_t j) {
          ++runs[static_cast<std::size_t>(j)];
          std::lock_guard<std::mutex> lock(mutex);
          ran_on.insert(std::this_thread::get_id());
          return Status::Ok();
        });
        bool ok = s.ok() && static_cast<int64_t>(ran_on.size()) <= std::min<int64_t>(n, threads);
        for (const auto& r : runs) ok = ok && r.load() == 1;
        if (!ok) ++wrong;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Cancel, CpuEngineStopsAtOnceAndMidway) {
  const Data d = MakeData();
  const genie_query_batch view = d.batch.View();
  TopKResults expected;
  {
    auto engine = MakeCpuEngine(EngineOptions());
    ASSERT_TRUE(engine->Upload(d.index).ok());
    ASSERT_TRUE(engine->Search(view, 10, &expected).ok());
  }
  // one query at a time (the engine's choice here), and tile by tile
  for (int64_t tile : {int64_t{0}, int64_t{1024}})
  for (int threads : {1, 4}) {
    for (uint64_t budget : {uint64_t{0}, uint64_t{200000}}) {  // one part, several parts
      for (int64_t after : {0, 1, 3, 50}) {
        SCOPED_TRACE(::testing::Message() << "threads " << threads << " budget " << budget
                                          << " after " << after << " tile " << tile);
        Canceller c;
        c.after = after;
        EngineOptions options;
        options.threads = threads;
        options.memory_budget_bytes = budget;
        options.cpu_tile_objects = tile;
        options.cancel = c.check();
        auto engine = MakeCpuEngine(options);
        ASSERT_TRUE(engine->Upload(d.index).ok());
        TopKResults out;
        const Status s = engine->Search(view, 10, &out);
        EXPECT_EQ(s.code(), GENIE_CANCELLED) << s.message();
        EXPECT_GT(c.polls.load(), after);
      }
      // A callback that never asks changes nothing.
      EngineOptions options;
      options.threads = threads;
      options.memory_budget_bytes = budget;
      options.cpu_tile_objects = tile;
      options.cancel = CancelCheck{&Never, nullptr};
      auto engine = MakeCpuEngine(options);
      ASSERT_TRUE(engine->Upload(d.index).ok());
      TopKResults out;
      ASSERT_TRUE(engine->Search(view, 10, &out).ok());
      EXPECT_TRUE(SameResults(expected, out));
    }
  }
}

TEST(Cancel, CpuEnginePollsWithinALongQuery) {
  // One query over every list: the worker must poll inside it, not only
  // between queries.
  Csr csr;
  for (int32_t o = 0; o < 200000; ++o) csr.Add({o % 7, 7 + o % 5, 20});
  auto index = MakeIndex(csr, 4096);
  QueryBatch batch;
  std::vector<int32_t> all{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20};
  batch.AddKeywordQuery(all);
  Canceller c;
  c.after = 2;  // the per-query poll and the first in-query poll pass
  EngineOptions options;
  options.threads = 1;
  options.cancel = c.check();
  auto engine = MakeCpuEngine(options);
  ASSERT_TRUE(engine->Upload(index).ok());
  TopKResults out;
  EXPECT_EQ(engine->Search(batch.View(), 5, &out).code(), GENIE_CANCELLED);
  EXPECT_EQ(c.polls.load(), 3);
}

// A lone query's scorer keeps its zeroed counters on its thread for the
// next engine call (cpu_engine.cpp, KeptScratch); one cancelled midway
// leaves them dirty and must not: the next lone query starts from zero.
TEST(Cancel, ALoneQueryAfterACancelledOneStartsFromZero) {
  Csr csr;
  for (int32_t o = 0; o < 200000; ++o) csr.Add({o % 7, 7 + o % 5, 20});
  auto index = MakeIndex(csr, 4096);
  QueryBatch all, some;
  all.AddKeywordQuery(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20});
  some.AddKeywordQuery(std::vector<int32_t>{3, 9});
  auto reference = MakeReferenceEngine();
  ASSERT_TRUE(reference->Upload(index).ok());
  TopKResults expected;
  ASSERT_TRUE(reference->Search(some.View(), 5, &expected).ok());
  EngineOptions one;
  one.threads = 1;
  auto engine = MakeCpuEngine(one);
  ASSERT_TRUE(engine->Upload(index).ok());
  for (int round = 0; round < 3; ++round) {
    Canceller c;
    c.after = 2;  // within the long query: its counters are half counted
    EngineOptions cancelled = one;
    cancelled.cancel = c.check();
    auto stopped = MakeCpuEngine(cancelled);
    ASSERT_TRUE(stopped->Upload(index).ok());
    TopKResults out;
    ASSERT_EQ(stopped->Search(all.View(), 5, &out).code(), GENIE_CANCELLED);
    // twice: after the cancelled query, then after a completed one
    for (int again = 0; again < 2; ++again) {
      ASSERT_TRUE(engine->Search(some.View(), 5, &out).ok());
      EXPECT_TRUE(SameResults(expected, out)) << "round " << round << " again " << again;
    }
  }
}

TEST(Cancel, ReferenceEngineIgnoresIt) {
  const Data d = MakeData();
  auto engine = MakeReferenceEngine();
  ASSERT_TRUE(engine->Upload(d.index).ok());
  TopKResults out;
  EXPECT_TRUE(engine->Search(d.batch.View(), 5, &out).ok());
}

TEST(Cancel, CpuEditDistancesAndVerification) {
  EditDistanceBatch batch;
  for (int q = 0; q < 20; ++q) {
    batch.queries.Add(std::vector<CodePoint>(30, static_cast<CodePoint>('a' + q % 3)));
    for (int c = 0; c < 500; ++c) {
      batch.candidates.Add(std::vector<CodePoint>(20 + c % 17, static_cast<CodePoint>('a' + c % 4)));
    }
    batch.candidate_offsets.push_back(batch.candidates.size());
  }
  std::vector<int32_t> distances;
  Canceller c;
  c.after = 5;
  EXPECT_EQ(CpuEditDistances(batch, 2, &distances, c.check()).code(), GENIE_CANCELLED);
  EXPECT_TRUE(CpuEditDistances(batch, 2, &distances, CancelCheck{&Never, nullptr}).ok());

  SimilarBatch similar;
  similar.n = 3;
  similar.k = 3;
  similar.queries = batch.queries;
  similar.candidates = batch.candidates;
  similar.candidate_offsets = batch.candidate_offsets;
  similar.candidate_counts.assign(static_cast<std::size_t>(batch.candidates.size()), 1);
  similar.unseen_count_bound.assign(static_cast<std::size_t>(batch.queries.size()), 0);
  auto cpu = [](const EditDistanceBatch& pass, std::vector<int32_t>* out) {
    return CpuEditDistances(pass, 2, out);
  };
  SimilarVerdict verdict;
  for (int64_t after : {0, 1, 2}) {
    Canceller v;
    v.after = after;
    EXPECT_EQ(VerifySimilarBatch(similar, cpu, &verdict, v.check()).code(), GENIE_CANCELLED)
        << after;
  }
  EXPECT_TRUE(VerifySimilarBatch(similar, cpu, &verdict, CancelCheck{&Never, nullptr}).ok());
}

// Long pairs poll inside the dynamic program (banded and Myers): a single
// pair stops midway, and without a cancel the result is the reference's.
TEST(Cancel, LongPairsPollInsideTheDistance) {
  std::mt19937 rng(7);
  auto random_string = [&](int len) {
    std::vector<CodePoint> s(static_cast<std::size_t>(len));
    for (auto& c : s) c = static_cast<CodePoint>('a' + rng() % 4);
    return s;
  };
  const std::vector<CodePoint> a = random_string(6000), b = random_string(5000);
  const std::vector<CodePoint> p = random_string(40), t = random_string(20000000);
  for (const auto& [x, y] : {std::make_pair(&a, &b), std::make_pair(&p, &t)}) {
    Canceller c;
    c.after = 2;
    int32_t d = -5;
    EXPECT_EQ(Levenshtein(*x, *y, c.check(), &d).code(), GENIE_CANCELLED);
    EXPECT_EQ(d, -5) << "a cancelled distance leaves the output alone";
    EXPECT_EQ(c.polls.load(), 3) << "it stops at the first poll that asks";
    Canceller never;
    never.after = INT64_MAX;
    ASSERT_TRUE(Levenshtein(*x, *y, never.check(), &d).ok());
    EXPECT_EQ(d, Levenshtein(*x, *y)) << "polling does not change the distance";
    EXPECT_GT(never.polls.load(), 2) << "a long pair is polled inside";
  }
  EXPECT_EQ(Levenshtein(a, b), LevenshteinReference(a, b));

  // the batch: one long pair, polled inside, stops the whole batch
  EditDistanceBatch batch;
  batch.queries.Add(a);
  batch.candidates.Add(b);
  batch.candidate_offsets.push_back(1);
  std::vector<int32_t> distances;
  Canceller c;
  c.after = 2;  // past ParallelFor's poll before the chunk: inside the pair
  EXPECT_EQ(CpuEditDistances(batch, 1, &distances, c.check()).code(), GENIE_CANCELLED);

  // the C API
  genie_engine_options options{};
  Canceller capi;
  capi.after = 1;
  options.cancel = &Canceller::Poll;
  options.cancel_arg = &capi;
  const std::string sa(20000, 'x'), sb(20000, 'y');
  int32_t distance = 0;
  genie_error err;
  EXPECT_EQ(genie_edit_distance(sa.data(), sa.size(), sb.data(), sb.size(), &options, &distance,
                                &err),
            GENIE_CANCELLED);
  ASSERT_EQ(genie_edit_distance(sa.data(), 100, sb.data(), 200, nullptr, &distance, &err), GENIE_OK);
  EXPECT_EQ(distance, 200);
}

TEST(Cancel, CApiSearchAndVerify) {
  EXPECT_STREQ(genie_status_name(GENIE_CANCELLED), "cancelled");
  const Data d = MakeData();
  genie_error err{};
  genie_index* index = nullptr;
  ASSERT_EQ(genie_index_create(d.csr.offsets.data(), d.csr.size(), d.csr.keywords.data(), nullptr,
                               &index, &err),
            GENIE_OK)
      << err.message;
  Canceller c;
  c.after = INT64_MAX;  // the GPU engine (AUTO on a GPU host) polls in Upload too
  genie_engine_options options{};
  options.cancel = &Canceller::Poll;
  options.cancel_arg = &c;
  for (genie_engine_kind kind : {GENIE_ENGINE_CPU, GENIE_ENGINE_AUTO}) {
    genie_engine* engine = nullptr;
    ASSERT_EQ(genie_engine_create(kind, &options, &engine, &err), GENIE_OK) << err.message;
    ASSERT_EQ(genie_engine_upload(engine, index, &err), GENIE_OK) << err.message;
    c.after = 0;
    genie_results* results = nullptr;
    const genie_query_batch view = d.batch.View();
    EXPECT_EQ(genie_engine_search(engine, &view, 10, &results, &err), GENIE_CANCELLED);
    EXPECT_EQ(err.status, GENIE_CANCELLED);
    EXPECT_EQ(results, nullptr);
    genie_engine_free(engine);
    c.after = INT64_MAX;
  }
  genie_index_free(index);

  genie::testing::KittenSimilarBatch kitten;
  genie_similar_batch& batch = kitten.batch;
  genie_similar_verdict& verdict = kitten.verdict;
  const int32_t* distances = kitten.distances;
  c.after = 0;
  EXPECT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_CPU, &options, &verdict, &err),
            GENIE_CANCELLED);
  options.cancel = &Never;
  EXPECT_EQ(genie_similar_verify(&batch, GENIE_ENGINE_CPU, &options, &verdict, &err), GENIE_OK)
      << err.message;
  EXPECT_EQ(distances[1], 1);  // ed(kitten, mitten)
}

}  // namespace
// A JoinedThread runs its function beside the caller and is joined by
// Join() or, however the caller leaves, by its destructor; a second Start
// before the join is refused.
TEST(JoinedThread, RunsBesideTheCallerAndJoins) {
  std::atomic<int> ran{0};
  {
    JoinedThread thread;
    ASSERT_TRUE(thread.Start([&]() noexcept { ran.fetch_add(1); }));
    EXPECT_FALSE(thread.Start([&]() noexcept { ran.fetch_add(100); }));
  }  // joined here
  EXPECT_EQ(ran.load(), 1);
  JoinedThread again;
  ASSERT_TRUE(again.Start([&]() noexcept { ran.fetch_add(1); }));
  again.Join();
  EXPECT_EQ(ran.load(), 2);
  ASSERT_TRUE(again.Start([&]() noexcept { ran.fetch_add(1); }));  // joined: startable again
  again.Join();
  again.Join();  // a second join does nothing
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace genie

// The tiled matcher's list mode on sparse tiles with 4- and 8-bit counters
// (tag-like queries, whose tile finds its k-th level by counting the
// counters >= t four bytes at a time: matcher_tiled.cu): the GPU engine
// equals the CPU engine hit for hit, ties at the k-th score by lowest id,
// for k inside a level of ties and k past a tile's scoring objects, on
// small tiles (many of them a query, some with only count-1 objects).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "genie/engine.hpp"
#include "genie/gpu_engine.hpp"
#include "genie/test_util.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

using testing::Csr;
using testing::DataSpec;
using testing::MakeIndex;
using testing::QuerySpec;
using testing::RandomBatch;
using testing::RandomCsr;
using testing::SameResults;

TEST(GpuTiledList, SparseTilesOfFourAndEightBitCounters) {
  SKIP_WITHOUT_GPU();
  DataSpec data;
  data.objects = 60000;
  data.max_length = 12;  // unit weights: scores up to 12, 4-bit counters
  data.universe = 400;
  data.zipf = 0.8;
  data.keyword_base = 0;
  const Csr csr = RandomCsr(29, data);
  const auto index = MakeIndex(csr);
  auto cpu = MakeCpuEngine(EngineOptions());
  ASSERT_TRUE(cpu->Upload(index).ok());
  GpuEngineOptions gpu_options;
  gpu_options.matcher = GpuMatcher::kTiled;
  gpu_options.tile_words = 512;  // 4,096 objects a 4-bit tile: 15 tiles
  Status status;
  auto gpu = MakeGpuEngine(EngineOptions(), gpu_options, &status);
  ASSERT_NE(gpu, nullptr) << status.message();
  ASSERT_TRUE(gpu->Upload(index).ok());
  // weights 1: 4-bit counters; 3 and 20: 8-bit (scores up to 36 and 240)
  for (int32_t max_weight : {1, 3, 20}) {
    QuerySpec spec;
    spec.queries = 48;
    spec.max_items = 12;
    spec.max_ranges = 1;
    spec.max_width = 2;
    spec.lo_min = 0;
    spec.lo_max = 420;  // some keywords absent: queries with few scoring objects
    spec.max_weight = max_weight;
    const QueryBatch batch = RandomBatch(100 + static_cast<uint32_t>(max_weight), spec);
    for (int32_t k : {1, 7, 10, 37, 100, 250}) {
      SCOPED_TRACE(::testing::Message() << "weights up to " << max_weight << ", k " << k);
      TopKResults expected, actual;
      ASSERT_TRUE(cpu->Search(batch.View(), k, &expected).ok());
      status = gpu->Search(batch.View(), k, &actual);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_TRUE(SameResults(expected, actual));
    }
  }
}

}  // namespace
}  // namespace genie

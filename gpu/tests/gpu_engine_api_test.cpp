// The GPU engine's API where no search runs: device listing, options
// checked before any device is touched, and the errors for a machine
// without a (usable) GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "genie/engine.hpp"
#include "genie/genie.h"
#include "genie/gpu_engine.hpp"
#include "gpu_test_util.hpp"

namespace genie {
namespace {

TEST(GpuEngineApi, ListDevicesNeverFails) {
  const auto devices = ListGpuDevices();  // must not crash without a driver
  for (const auto& d : devices) {
    EXPECT_EQ(d.kind, GENIE_DEVICE_GPU);
    if (!d.usable) {
      EXPECT_NE(d.note[0], '\0');
    }
  }
  EXPECT_GT(CudaRuntimeVersion(), 0);
}

TEST(GpuEngineApi, NoDeviceGivesUnavailable) {
  if (GpuUsable()) {
    GTEST_SKIP() << "a GPU is present";
  }
  Status status;
  EXPECT_EQ(MakeGpuEngine(EngineOptions(), &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(MakeGpuCountTableEngine(EngineOptions(), &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
}

TEST(GpuEngineApi, BadOptionsAreInvalidArgument) {
  // Checked before any device is touched: the same with or without a GPU.
  for (int32_t words : {0, 511, 1000, 49152 + 512}) {
    GpuEngineOptions gpu_options;
    gpu_options.tile_words = words;
    Status status;
    EXPECT_EQ(MakeGpuEngine(EngineOptions(), gpu_options, &status), nullptr) << words;
    EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT) << words;
  }
  GpuEngineOptions gpu_options;
  gpu_options.hash_table_slots = (1u << 30) + 1;
  Status status;
  EXPECT_EQ(MakeGpuEngine(EngineOptions(), gpu_options, &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_INVALID_ARGUMENT);
}

TEST(GpuEngineApi, BadOrdinalUnavailable) {
  SKIP_WITHOUT_GPU();
  Status status;
  EngineOptions options;
  options.device_ordinal = 999;
  EXPECT_EQ(MakeGpuEngine(options, &status), nullptr);
  EXPECT_EQ(status.code(), GENIE_DEVICE_UNAVAILABLE);
}

// The context made on another thread (as genie_gpu_prepare does in a
// backend) serves this one; bad ordinals are ignored and leave no error.
TEST(GpuEngineApi, PrepareDeviceOnAnotherThread) {
  PrepareDevice(-1);
  PrepareDevice(999);
  SKIP_WITHOUT_GPU();
  std::thread preparing([] { PrepareDevice(0); });
  preparing.join();
  Status status;
  auto engine = MakeGpuEngine(EngineOptions(), &status);
  ASSERT_NE(engine, nullptr) << status.message();
  EXPECT_TRUE(status.ok());
}

}  // namespace
}  // namespace genie

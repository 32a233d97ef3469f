// What the GPU tests share: whether this machine has a GPU they can use (or
// two), and a range search's rows with their comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "genie/genie.h"
#include "genie/gpu_engine.hpp"

namespace genie {

inline bool GpuUsable() {
  static const bool usable = [] {
    for (const genie_device_info& d : ListGpuDevices()) {
      if (d.usable) return true;
    }
    return false;
  }();
  return usable;
}

inline int32_t UsableGpuCount() {
  int32_t n = 0;
  for (const genie_device_info& d : ListGpuDevices()) n += d.usable ? 1 : 0;
  return n;
}

// A genie_*_within answer, copied out (and freed); empty for NULL.
struct RangeRows {
  std::vector<int64_t> offsets;
  std::vector<int32_t> objects;
  std::vector<double> distances;
  genie_engine_kind device = GENIE_ENGINE_AUTO;
};

inline RangeRows TakeRangeRows(genie_range_results* r) {
  RangeRows out;
  if (r == nullptr) return out;
  out.offsets.assign(r->query_offsets, r->query_offsets + r->n_queries + 1);
  out.objects.assign(r->objects, r->objects + out.offsets.back());
  out.distances.assign(r->distances, r->distances + out.offsets.back());
  out.device = r->device;
  genie_range_results_free(r);
  return out;
}

// The CPU engine's rows against the GPU's: the same rows, ids and distances.
inline void ExpectSameRangeRows(const RangeRows& cpu, const RangeRows& gpu, const std::string& what) {
  EXPECT_EQ(cpu.device, GENIE_ENGINE_CPU) << what;
  EXPECT_EQ(gpu.device, GENIE_ENGINE_GPU) << what;
  ASSERT_EQ(cpu.offsets, gpu.offsets) << what;
  EXPECT_EQ(cpu.objects, gpu.objects) << what;
  EXPECT_EQ(cpu.distances, gpu.distances) << what;
}

}  // namespace genie

#define SKIP_WITHOUT_GPU()             \
  do {                                 \
    if (!::genie::GpuUsable()) {       \
      GTEST_SKIP() << "no usable GPU"; \
    }                                  \
  } while (0)

#define SKIP_WITHOUT_TWO_GPUS()                                          \
  do {                                                                   \
    if (::genie::UsableGpuCount() < 2) {                                 \
      GTEST_SKIP() << "fewer than two usable GPUs";                      \
    }                                                                    \
  } while (0)

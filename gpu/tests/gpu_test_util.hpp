// What the GPU tests share: whether this machine has a GPU they can use.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace genie

#define SKIP_WITHOUT_GPU()             \
  do {                                 \
    if (!::genie::GpuUsable()) {       \
      GTEST_SKIP() << "no usable GPU"; \
    }                                  \
  } while (0)

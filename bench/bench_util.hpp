// What the engine benchmarks share (header-only, each bench one program):
// a millisecond clock, the median of runs, a C API call that must succeed,
// and Fashion-MNIST's idx files.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "genie/genie.h"

namespace genie_bench {

inline double Now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Exits (status 2) with the C API's message when a call failed.
inline void Check(genie_status s, const genie_error& err, const char* what) {
  if (s != GENIE_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, err.message);
    std::exit(2);
  }
}

// An ungzipped idx3-ubyte file's images as float rows (*count of *dim).
inline std::vector<float> ReadIdx(const std::string& path, int32_t* count, int32_t* dim) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(2);
  }
  unsigned char h[16];
  f.read(reinterpret_cast<char*>(h), 16);
  auto be = [&](int i) { return (h[i] << 24) | (h[i + 1] << 16) | (h[i + 2] << 8) | h[i + 3]; };
  *count = be(4);
  *dim = be(8) * be(12);
  std::vector<unsigned char> bytes(static_cast<size_t>(*count) * *dim);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return std::vector<float>(bytes.begin(), bytes.end());
}

}  // namespace genie_bench

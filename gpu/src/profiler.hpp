// Where a GPU search's time goes (gpu::SetProfile, gpu::SetTimeline).
//
// Phases: each mark waits for the device, then charges the wall time since
// the previous mark to its phase.  Simple to read, but the waits remove the
// overlap of host work with the device's that the engine is built for, so
// it cannot say what a search waits on when nothing waits.
//
// Timeline: a mark never waits.  It notes the host's time and records an
// event on the stream; the report then gives, mark by mark, when the host got
// there and when the device had done everything queued before it.  Where
// the device's time equals the previous mark's, the device sat idle waiting
// for the host; where the host's time jumps while the device's does not, the
// host waited for the device.
#ifndef GENIE_GPU_SRC_PROFILER_HPP_
#define GENIE_GPU_SRC_PROFILER_HPP_

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"

namespace genie {
namespace gpu {

enum class ProfileMode { kOff, kPhases, kTimeline };

class Profiler {
 public:
  // Called with the search's device current (the timeline's events are made
  // on it the first time and kept from search to search).
  void Start(ProfileMode mode, cudaStream_t stream);
  void Mark(const char* phase);
  // Phases: ms of host work done for the search before Start (its host
  // stage, run before the call took the device), as a phase of its own.
  // A timeline starts when the device is taken and leaves it out.
  void Add(const char* phase, double ms);
  // Phases: "phase ms; ...".  Timeline (waits for the stream): "phase
  // host/device ms; ..." from Start.
  std::string Report();

 private:
  using Clock = std::chrono::steady_clock;
  // A search records at most this many marks in a timeline (the rest are
  // dropped): a long batch's pieces repeat the same few.
  static constexpr std::size_t kMaxMarks = 512;
  struct TimelineMark {
    const char* phase;
    double host_ms;
  };
  bool RecordEvent(std::size_t i);

  ProfileMode mode_ = ProfileMode::kOff;
  cudaStream_t stream_ = nullptr;
  Clock::time_point start_;
  Clock::time_point last_;
  std::vector<std::pair<std::string, double>> phases_;
  std::vector<TimelineMark> marks_;
  std::vector<std::unique_ptr<Event>> events_;  // [0]: the start
  bool events_ok_ = true;
};

}  // namespace gpu
}  // namespace genie

#endif  // GENIE_GPU_SRC_PROFILER_HPP_

#include "profiler.hpp"

#include <cstdio>

namespace genie {
namespace gpu {

bool Profiler::RecordEvent(std::size_t i) {
  if (!events_ok_) return false;
  while (events_.size() <= i) {
    auto event = std::make_unique<Event>();
    if (!event->Create(/*timing=*/true).ok()) {
      events_ok_ = false;
      return false;
    }
    events_.push_back(std::move(event));
  }
  if (cudaEventRecord(events_[i]->get(), stream_) != cudaSuccess) {
    (void)cudaGetLastError();
    events_ok_ = false;
    return false;
  }
  return true;
}

void Profiler::Start(ProfileMode mode, cudaStream_t stream) {
  mode_ = mode;
  stream_ = stream;
  phases_.clear();
  marks_.clear();
  events_ok_ = true;
  start_ = last_ = Clock::now();
  if (mode_ == ProfileMode::kTimeline) (void)RecordEvent(0);
}

void Profiler::Mark(const char* phase) {
  switch (mode_) {
    case ProfileMode::kOff:
      return;
    case ProfileMode::kTimeline: {
      if (marks_.size() >= kMaxMarks) return;
      const double host = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
      marks_.push_back({phase, host});
      (void)RecordEvent(marks_.size());
      return;
    }
    case ProfileMode::kPhases:
      break;
  }
  (void)cudaStreamSynchronize(stream_);
  const auto now = Clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
  last_ = now;
  for (auto& p : phases_) {
    if (p.first == phase) {
      p.second += ms;
      return;
    }
  }
  phases_.emplace_back(phase, ms);
}

void Profiler::Add(const char* phase, double ms) {
  if (mode_ == ProfileMode::kPhases) phases_.emplace_back(phase, ms);
}

std::string Profiler::Report() {
  std::string out;
  char buf[128];
  if (mode_ == ProfileMode::kPhases) {
    for (const auto& p : phases_) {
      std::snprintf(buf, sizeof(buf), "%s%s %.2f", out.empty() ? "" : "; ", p.first.c_str(), p.second);
      out += buf;
    }
    return out;
  }
  if (mode_ != ProfileMode::kTimeline) return out;
  if (!events_ok_ || cudaStreamSynchronize(stream_) != cudaSuccess) {
    (void)cudaGetLastError();
    return "timeline unavailable (events failed)";
  }
  // The device's time of mark i: when the stream had done everything queued
  // before it (the start is 0/0; the two clocks agree to the launch
  // latency, a few microseconds).  Where it stops moving while the host's
  // does, the device waited for the host.
  for (std::size_t i = 0; i < marks_.size(); ++i) {
    float device = 0;
    if (cudaEventElapsedTime(&device, events_[0]->get(), events_[i + 1]->get()) != cudaSuccess) {
      (void)cudaGetLastError();
      return "timeline unavailable (event times failed)";
    }
    std::snprintf(buf, sizeof(buf), "%s%s %.3f/%.3f", out.empty() ? "" : "; ", marks_[i].phase,
                  marks_[i].host_ms, static_cast<double>(device));
    out += buf;
  }
  return out;
}

}  // namespace gpu
}  // namespace genie

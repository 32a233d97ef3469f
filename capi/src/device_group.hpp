// A set's copies on the GPUs of a device group (genie/multi_device.hpp), and
// the scan over them, shared by the C API's vector and string sets
// (capi/src only): replicated, a batch's queries are split among the GPUs;
// sharded, each GPU holds a contiguous range of the objects, answers every
// query for it, and the rows are merged as one scan orders them.  A GPU that
// fails (DeviceError, DeviceUnavailable) is dropped for good and its part
// scanned on the CPU.  Plain C++ (the GPU sets are template parameters), so
// capi/tests exercise it with stand-ins.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "capi_util.hpp"
#include "genie/multi_device.hpp"

namespace genie {
namespace capi {

template <typename Set, typename GpuSet>
struct GroupCopy {
  int32_t device = 0;
  std::pair<int32_t, int32_t> range{0, 0};
  std::unique_ptr<Set> slice;  // a shard's own objects; null when replicated
  std::unique_ptr<GpuSet> gpu;
  std::atomic<bool> dropped{false};
};

template <typename Set, typename GpuSet>
struct DeviceGroup {
  uint64_t mask = 0;
  int32_t placement = 0;
  uint64_t budget = 0;
  bool sharded = false;
  std::vector<std::unique_ptr<GroupCopy<Set, GpuSet>>> copies;
  // which GPU a range search's first share goes to next (range_group.hpp):
  // one-share batches from every session take the GPUs in turn
  std::atomic<uint32_t> range_turn{0};

  bool MadeFor(const EngineOptions& o) const {
    return mask == o.device_mask && placement == o.placement && budget == o.memory_budget_bytes;
  }
  std::size_t device_bytes() const {
    std::size_t bytes = 0;
    for (const auto& c : copies)
      if (c->gpu != nullptr) bytes += c->gpu->device_bytes();
    return bytes;
  }
};

// Whether EnsureDeviceGroup would shard a set of set_bytes and n objects
// over devices (each GPU a contiguous range of them).
inline bool Sharded(const std::vector<GroupDevice>& devices, uint64_t set_bytes, int32_t n, int32_t placement) {
  std::vector<uint64_t> capacities;
  for (const GroupDevice& d : devices) capacities.push_back(d.capacity_bytes);
  return PlanPlacement(static_cast<Placement>(placement), set_bytes, n, capacities).sharded;
}

// Whether such a set would be whole on each of devices (replicated) and
// within every GPU's capacity: a search that needs the whole set resident
// on each GPU (the strings' range search, which cannot stream) asks first.
inline bool Replicated(const std::vector<GroupDevice>& devices, uint64_t set_bytes, int32_t n, int32_t placement) {
  for (const GroupDevice& d : devices)
    if (d.capacity_bytes != 0 && set_bytes > d.capacity_bytes) return false;
  return !Sharded(devices, set_bytes, n, placement);
}

// *out made for options: kept when it was, else (re)made: the copies of set
// (n objects, set_bytes of them) on devices, whole on each when it fits the
// smallest capacity or placement asks, else a contiguous shard each, whose
// objects slice(first, end, &rows) makes.  make_gpu(rows, ordinal, budget,
// &gpu) copies rows to a GPU; one that fails to take its copy is dropped.
// The caller serialises calls for one *out.  Shared: a search holds its own
// reference, so that a call with other options replacing the group frees
// no copy that search still reads (they go when the last one ends).
// options.cancel is polled between copies.
template <typename Set, typename GpuSet, typename Slice, typename MakeGpu>
Status EnsureDeviceGroup(const Set& set, int32_t n, uint64_t set_bytes, const std::vector<GroupDevice>& devices,
                         const EngineOptions& options, const Slice& slice, const MakeGpu& make_gpu,
                         std::shared_ptr<DeviceGroup<Set, GpuSet>>* out) {
  if (*out != nullptr && (*out)->MadeFor(options)) return Status::Ok();
  out->reset();  // the old copies' device memory first (unless a search still holds them)
  auto made = std::make_unique<DeviceGroup<Set, GpuSet>>();
  made->mask = options.device_mask;
  made->placement = options.placement;
  made->budget = options.memory_budget_bytes;
  std::vector<uint64_t> capacities;
  for (const GroupDevice& d : devices) capacities.push_back(d.capacity_bytes);
  const PlacementPlan plan = PlanPlacement(static_cast<Placement>(options.placement), set_bytes, n, capacities);
  made->sharded = plan.sharded;
  for (std::size_t i = 0; i < devices.size() && i < plan.ranges.size(); ++i) {
    if (options.cancel.requested()) return Status::Cancelled();
    auto copy = std::make_unique<GroupCopy<Set, GpuSet>>();
    copy->device = devices[i].ordinal;
    copy->range = plan.ranges[i];
    if (plan.sharded) {
      copy->slice = std::make_unique<Set>();
      GENIE_RETURN_IF_ERROR(slice(copy->range.first, copy->range.second, copy->slice.get()));
    }
    const Status status =
        make_gpu(plan.sharded ? *copy->slice : set, copy->device, options.memory_budget_bytes, &copy->gpu);
    if (!status.ok()) {
      if (!DeviceFailed(status)) return status;
      copy->dropped = true;
    }
    made->copies.push_back(std::move(copy));
  }
  *out = std::move(made);
  return Status::Ok();
}

// A scan of n_queries over a group.  scan(gpu, rows, first_object,
// first_query, end_query, &part) scans queries [first_query, end_query) over
// rows (the whole set, or a shard whose first object is first_object) on
// gpu, or on the CPU when gpu is null.  before orders two (distance, id)
// rows as the scan does (MergeScanShards).  *answered_on_gpu is set when a
// GPU answers a part.
template <typename Set, typename GpuSet, typename Rows, typename Scan, typename Before>
Status ScanGroupParts(const Set& set, DeviceGroup<Set, GpuSet>* g, int32_t n_queries, int32_t k, const Scan& scan,
                      const Before& before, Rows* out, std::atomic<bool>* answered_on_gpu) {
  using Copy = GroupCopy<Set, GpuSet>;
  auto run = [&](Copy* c, const Set& rows, int32_t first_object, int32_t q0, int32_t q1, Rows* part) {
    if (c != nullptr && !c->dropped) {
      Status st = scan(c->gpu.get(), rows, first_object, q0, q1, part);
      if (st.ok()) *answered_on_gpu = true;  // parts run on threads of their own
      if (!DeviceFailed(st)) return st;
      c->dropped = true;  // for good: later scans go to the others or the CPU
    }
    return scan(static_cast<GpuSet*>(nullptr), rows, first_object, q0, q1, part);
  };
  if (g->sharded) {
    std::vector<Rows> parts(g->copies.size());
    std::vector<int32_t> first(g->copies.size());
    const auto statuses = RunEachConcurrently(static_cast<int32_t>(g->copies.size()), [&](int32_t i) {
      Copy* c = g->copies[static_cast<std::size_t>(i)].get();
      first[static_cast<std::size_t>(i)] = c->range.first;
      return run(c, *c->slice, c->range.first, 0, n_queries, &parts[static_cast<std::size_t>(i)]);
    });
    for (const Status& st : statuses) GENIE_RETURN_IF_ERROR(st);
    MergeScanShards(parts, first, k, out, before);
    return Status::Ok();
  }
  std::vector<Copy*> live;
  for (const auto& c : g->copies)
    if (!c->dropped) live.push_back(c.get());
  if (live.empty()) return run(nullptr, set, 0, 0, n_queries, out);
  const auto pieces = SplitQueries(n_queries, static_cast<int32_t>(live.size()));
  if (pieces.size() <= 1) return run(live[0], set, 0, 0, n_queries, out);
  std::vector<Rows> parts(pieces.size());
  const auto statuses = RunEachConcurrently(static_cast<int32_t>(pieces.size()), [&](int32_t i) {
    const auto u = static_cast<std::size_t>(i);
    return run(live[u], set, 0, pieces[u].first, pieces[u].second, &parts[u]);
  });
  for (const Status& st : statuses) GENIE_RETURN_IF_ERROR(st);
  JoinQueryRanges(parts, out);
  return Status::Ok();
}

// ScanGroupParts, and *on_gpu (when not null) whether a GPU answered any
// part: false when every GPU of the group was out or failed and the CPU
// answered alone, so that the rows are labelled with the engine that
// computed them (EXPLAIN's "Genie Engine", the service's statistics).
template <typename Set, typename GpuSet, typename Rows, typename Scan, typename Before>
Status ScanDeviceGroup(const Set& set, DeviceGroup<Set, GpuSet>* g, int32_t n_queries, int32_t k, const Scan& scan,
                       const Before& before, Rows* out, bool* on_gpu = nullptr) {
  std::atomic<bool> answered_on_gpu{false};
  const Status status = ScanGroupParts(set, g, n_queries, k, scan, before, out, &answered_on_gpu);
  if (on_gpu != nullptr) *on_gpu = answered_on_gpu.load();
  return status;
}

}  // namespace capi
}  // namespace genie

// A range search's device pass over the GPUs of a device group (capi/src
// only).  Replicated: the batch's plan is split among the GPUs by the
// members it reads, each GPU's share runs at once on a thread of its own,
// and the candidates are joined.  Sharded (a set larger than one GPU's
// budget, the seed's data beyond device memory): every GPU reads its own
// objects' part of every item, resident or streamed.  A range search's candidates are independent of one another
// (FinishRangeSearch sorts them and drops duplicates), so a share may be
// any run of the plan's items, even part of one query's: a single query
// over every vector splits as well as a batch.  Plain C++ (the passes are
// std::function), so capi/tests exercise it with stand-ins.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cluster_list.hpp"
#include "genie/cancel.hpp"

namespace genie {
namespace capi {

// One GPU's share of a plan: queries [first_query, first_query + n_queries)
// of the plan's, and the items (or parts of items) it reads, their queries
// counted from first_query.
struct RangePlanShare {
  int32_t first_query = 0;
  int32_t n_queries = 0;
  RangePlan plan;
};

// The least work worth a GPU's share: its thread, launches and wait cost
// about 0.15 ms (two H200s: one query over 200,000 vectors of 128 floats
// took 0.32 ms split in two, 0.17 ms on one GPU; bench/range.md), so a
// vector share reads at least 2^28 floats (about 1.5 ms of one GPU's
// pass), and a string share at least 8 queries' windows.
constexpr int64_t kMinRangeShareFloats = int64_t{1} << 28;
constexpr int64_t kMinRangeShareQueries = 8;

// plan split into at most `shares` shares, in order, of about equal
// members (each item's count), none below min_members unless it is the
// only one (without cut_items the last share may be smaller: queries are
// not cut).  With cut_items a share may end inside an item (a vector pass
// reads any run of members); without, every query's items go to one share
// whole (a pass that reads whole queries: the strings' length windows).
// The plan's counters stay with the caller.
std::vector<RangePlanShare> SplitRangePlan(const RangePlan& plan, int32_t shares, bool cut_items,
                                           int64_t min_members);

// A GPU of the group: its pass (the single-GPU pass bound to its copy), and
// its copy's flag that says it failed (DeviceFailed) and is out for good.
struct RangeGroupGpu {
  RangeDevicePass pass;
  std::atomic<bool>* dropped = nullptr;
};

// The group's pass: the plan split among the GPUs not dropped
// (SplitRangePlan), their shares run at once, the candidates joined in
// share order and *computed summed.  A GPU whose share fails with a
// device's failure is dropped and the share run again by another GPU; with
// none left, the failure goes to the caller (as from one GPU; the next
// search finds no GPU left, and AUTO searches on the CPU).  Any other
// failure (a cancel, out of memory) goes to the caller.
// turn (the group's, shared by its searches; it must outlive the pass)
// picks the GPU of the first share, in turn.
RangeDevicePass GroupRangePass(std::vector<RangeGroupGpu> gpus, bool cut_items, int64_t min_members,
                               std::atomic<uint32_t>* turn);

// ---- a sharded group: GPU i holds objects [first_i, end_i) ----

// A list's members that fall in a shard [first, end): their ids counted
// from first, in the list's order, and before[p], how many of the list's
// members before position p are the shard's (so that a listed item's
// members [begin, begin + count) are the shard's [before[begin],
// before[begin + count])).  cancel is polled every 2^20 members.
struct RangeShardMembers {
  std::vector<int32_t> members;
  std::vector<int32_t> before;  // one more than the list's members
};
Status ShardMembers(Span<int32_t> list_members, int32_t first, int32_t end, RangeShardMembers* out,
                    const CancelCheck& cancel = CancelCheck());

// plan as the shard [first, end) reads it: listed items through members
// (NULL: the plan has none), the objects past the list cut to the shard's
// and counted from first; items left empty dropped, queries unchanged.
RangePlan ShardRangePlan(const RangePlan& plan, const RangeShardMembers* members, int32_t first, int32_t end);

// One shard: its objects, its members (NULL without a list), its GPU's
// pass over its own rows (candidates' ids counted from first; *computed
// comes set to its plan's members), and its copy's flag that says the GPU
// failed (a shard whose GPU is out from the start: a pass that returns
// DeviceUnavailable, or none).
struct RangeShard {
  int32_t first = 0;
  int32_t end = 0;
  std::shared_ptr<const RangeShardMembers> members;  // held: the host may read the shard through them
  RangeDevicePass pass;
  std::atomic<bool>* dropped = nullptr;
};

// What reads a shard on the host: the search's metrics (queries numbered
// as RangeSearchHandle's), radius, threads and cancel.
struct RangeShardHost {
  QueryMetricFactory metrics;
  double radius = 0;
  int32_t threads = 0;
  CancelCheck cancel;
};

// The exact answers of a shard's plan (ShardRangePlan's; members as
// there) on the host, with the set's ids: a shard whose GPU failed.
// cancel is polled every 4,096 members.
Status ReadShardOnHost(const RangeShardHost& host, int32_t first_query, const RangePlan& shard_plan,
                       const RangeShardMembers* members, int32_t first, std::vector<RangeCandidate>* out);

// The sharded group's pass: each shard's plan (ShardRangePlan) on its GPU,
// all at once, the candidates joined with the set's ids, *computed the
// shards' sums (each its plan's members, unless its pass says otherwise).
// A GPU that fails (DeviceFailed), or was out before, is dropped and its
// shard read on the host (ReadShardOnHost): no other GPU holds those rows.
// Any other failure goes to the caller.
RangeDevicePass ShardedRangePass(std::vector<RangeShard> shards, RangeShardHost host);

}  // namespace capi
}  // namespace genie

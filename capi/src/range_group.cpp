// A range search's device pass over a device group (range_group.hpp).
#include "range_group.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "genie/multi_device.hpp"
#include "genie/parallel.hpp"

namespace genie {
namespace capi {

std::vector<RangePlanShare> SplitRangePlan(const RangePlan& plan, int32_t shares, bool cut_items,
                                           int64_t min_members) {
  int64_t total = 0;
  for (const RangeItem& item : plan.items) total += item.count;
  int64_t wanted = std::max<int64_t>(shares, 1);
  if (min_members > 0) wanted = std::min(wanted, total / min_members);
  wanted = std::max<int64_t>(wanted, 1);
  // share j ends where the members before it reach total (j + 1) / wanted
  auto end_of = [&](int64_t j) { return total * (j + 1) / wanted; };
  std::vector<RangePlan> plans(static_cast<std::size_t>(wanted));
  int64_t done = 0;
  int64_t j = 0;
  if (cut_items) {
    for (const RangeItem& item : plan.items) {
      RangeItem rest = item;
      while (rest.count > 0) {
        while (j < wanted - 1 && done >= end_of(j)) ++j;
        const int64_t room = j == wanted - 1 ? rest.count : end_of(j) - done;
        RangeItem piece = rest;
        piece.count = static_cast<int32_t>(std::min<int64_t>(rest.count, room));
        plans[static_cast<std::size_t>(j)].items.push_back(piece);
        rest.begin += piece.count;
        rest.count -= piece.count;
        done += piece.count;
      }
    }
  } else {
    // a plan's items come query by query (PlanRangeSearch)
    for (std::size_t i = 0; i < plan.items.size();) {
      std::size_t end = i;
      int64_t members = 0;
      while (end < plan.items.size() && plan.items[end].query == plan.items[i].query)
        members += plan.items[end++].count;
      while (j < wanted - 1 && done >= end_of(j)) ++j;
      auto& items = plans[static_cast<std::size_t>(j)].items;
      items.insert(items.end(), plan.items.begin() + static_cast<std::ptrdiff_t>(i),
                   plan.items.begin() + static_cast<std::ptrdiff_t>(end));
      done += members;
      i = end;
    }
  }
  std::vector<RangePlanShare> out;
  for (RangePlan& p : plans) {
    if (p.items.empty()) continue;
    int32_t first = p.items.front().query;
    int32_t last = first;
    for (const RangeItem& item : p.items) {
      first = std::min(first, item.query);
      last = std::max(last, item.query);
    }
    for (RangeItem& item : p.items) item.query -= first;
    RangePlanShare share;
    share.first_query = first;
    share.n_queries = last - first + 1;
    share.plan = std::move(p);
    out.push_back(std::move(share));
  }
  return out;
}

RangeDevicePass GroupRangePass(std::vector<RangeGroupGpu> gpus, bool cut_items, int64_t min_members,
                               std::atomic<uint32_t>* turn) {
  // a batch too small to split goes to the next GPU in turn, not always the first
  return [gpus = std::move(gpus), cut_items, min_members, turn](
             int32_t first_query, int32_t, const RangePlan& plan, std::vector<RangeCandidate>* out,
             RangePassRead* read) -> Status {
    std::vector<const RangeGroupGpu*> live;
    for (const RangeGroupGpu& m : gpus)
      if (!m.dropped->load()) live.push_back(&m);
    if (live.empty()) return Status::DeviceUnavailable("every GPU of the device group has failed");
    std::rotate(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(turn->fetch_add(1) % live.size()),
                live.end());
    const std::vector<RangePlanShare> shares =
        SplitRangePlan(plan, static_cast<int32_t>(live.size()), cut_items, min_members);
    std::vector<std::vector<RangeCandidate>> found(shares.size());
    std::vector<RangePassRead> reads(shares.size());
    auto run = [&](const RangeGroupGpu& m, std::size_t i) {
      const RangePlanShare& share = shares[i];
      found[i].clear();
      // what a pass that reads every member of its items computes (ListRange's rule)
      reads[i] = RangePassRead();
      for (const RangeItem& item : share.plan.items) reads[i].computed += item.count;
      return m.pass(first_query + share.first_query, share.n_queries, share.plan, &found[i], &reads[i]);
    };
    std::vector<Status> statuses = RunEachConcurrently(static_cast<int32_t>(shares.size()), [&](int32_t i) {
      return run(*live[static_cast<std::size_t>(i)], static_cast<std::size_t>(i));
    });
    for (std::size_t i = 0; i < shares.size(); ++i)
      if (DeviceFailed(statuses[i])) live[i]->dropped->store(true);
    // a lost GPU's share, again on a GPU left (one after another: a rare path)
    for (std::size_t i = 0; i < shares.size(); ++i) {
      while (DeviceFailed(statuses[i])) {
        const RangeGroupGpu* next = nullptr;
        for (const RangeGroupGpu& m : gpus)
          if (!m.dropped->load()) {
            next = &m;
            break;
          }
        if (next == nullptr) return statuses[i];
        statuses[i] = run(*next, i);
        if (DeviceFailed(statuses[i])) next->dropped->store(true);
      }
    }
    for (const Status& s : statuses) GENIE_RETURN_IF_ERROR(s);
    read->computed = 0;
    read->on_gpu = false;
    read->on_host = false;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      for (RangeCandidate c : found[i]) {
        c.query += shares[i].first_query;
        out->push_back(c);
      }
      read->computed += reads[i].computed;
      read->on_gpu = read->on_gpu || reads[i].on_gpu;
      read->on_host = read->on_host || reads[i].on_host;
    }
    return Status::Ok();
  };
}

Status ShardMembers(Span<int32_t> list_members, int32_t first, int32_t end, RangeShardMembers* out,
                    const CancelCheck& cancel) {
  out->members.clear();
  out->before.clear();
  out->before.reserve(list_members.size() + 1);
  for (std::size_t p = 0; p < list_members.size(); ++p) {
    if ((p & ((std::size_t{1} << 20) - 1)) == 0 && cancel.requested()) return Status::Cancelled();
    out->before.push_back(static_cast<int32_t>(out->members.size()));
    const int32_t o = list_members[p];
    if (o >= first && o < end) out->members.push_back(o - first);
  }
  out->before.push_back(static_cast<int32_t>(out->members.size()));
  return Status::Ok();
}

RangePlan ShardRangePlan(const RangePlan& plan, const RangeShardMembers* members, int32_t first, int32_t end) {
  RangePlan out;
  for (const RangeItem& item : plan.items) {
    RangeItem piece = item;
    if (item.listed) {
      const int32_t b = members->before[static_cast<std::size_t>(item.begin)];
      piece.begin = b;
      piece.count = members->before[static_cast<std::size_t>(item.begin + item.count)] - b;
    } else {
      const int64_t lo = std::max<int64_t>(item.begin, first);
      const int64_t hi = std::min<int64_t>(item.begin + item.count, end);
      piece.begin = lo - first;
      piece.count = static_cast<int32_t>(std::max<int64_t>(hi - lo, 0));
    }
    if (piece.count > 0) out.items.push_back(piece);
  }
  return out;
}

Status ReadShardOnHost(const RangeShardHost& host, int32_t first_query, const RangePlan& shard_plan,
                       const RangeShardMembers* members, int32_t first, std::vector<RangeCandidate>* out) {
  std::vector<std::vector<RangeCandidate>> found(shard_plan.items.size());
  GENIE_RETURN_IF_ERROR(ParallelFor(
      static_cast<int64_t>(shard_plan.items.size()), host.threads,
      [&](int64_t i) -> Status {
        const RangeItem& item = shard_plan.items[static_cast<std::size_t>(i)];
        const std::unique_ptr<QueryMetric> metric = host.metrics(first_query + item.query);
        for (int64_t at = item.begin; at < item.begin + item.count; ++at) {
          // (an item may be every object of the shard: the cancel polled inside it)
          if (((at - item.begin) & 4095) == 0 && host.cancel.requested()) return Status::Cancelled();
          const int32_t o =
              first + (item.listed ? members->members[static_cast<std::size_t>(at)] : static_cast<int32_t>(at));
          const double d = metric->Distance(o, host.radius);
          if (d <= host.radius) found[static_cast<std::size_t>(i)].push_back(RangeCandidate{item.query, o, d});
        }
        return Status::Ok();
      },
      host.cancel));
  for (const auto& f : found) out->insert(out->end(), f.begin(), f.end());
  return Status::Ok();
}

RangeDevicePass ShardedRangePass(std::vector<RangeShard> shards, RangeShardHost host) {
  return [shards = std::move(shards), host = std::move(host)](int32_t first_query, int32_t n_queries,
                                                              const RangePlan& plan, std::vector<RangeCandidate>* out,
                                                              RangePassRead* read) -> Status {
    const std::size_t n = shards.size();
    std::vector<RangePlan> mine(n);
    std::vector<RangePassRead> reads(n);  // each shard's own members, unless its pass says otherwise
    for (std::size_t i = 0; i < n; ++i) {
      mine[i] = ShardRangePlan(plan, shards[i].members.get(), shards[i].first, shards[i].end);
      for (const RangeItem& item : mine[i].items) reads[i].computed += item.count;
      // a shard with nothing to read is no engine's
      reads[i].on_gpu = false;
    }
    std::vector<std::vector<RangeCandidate>> found(n);
    std::vector<Status> statuses = RunEachConcurrently(static_cast<int32_t>(n), [&](int32_t s) {
      const std::size_t i = static_cast<std::size_t>(s);
      if (mine[i].items.empty()) return Status::Ok();
      if (shards[i].dropped->load() || shards[i].pass == nullptr)
        return Status::DeviceUnavailable("this shard's GPU has failed");
      reads[i].on_gpu = true;
      GENIE_RETURN_IF_ERROR(shards[i].pass(first_query, n_queries, mine[i], &found[i], &reads[i]));
      for (RangeCandidate& c : found[i]) c.object += shards[i].first;
      return Status::Ok();
    });
    // a lost GPU's shard, on the host
    for (std::size_t i = 0; i < n; ++i) {
      if (!DeviceFailed(statuses[i])) continue;
      shards[i].dropped->store(true);
      found[i].clear();
      reads[i] = RangePassRead();
      reads[i].on_gpu = false;
      reads[i].on_host = true;
      for (const RangeItem& item : mine[i].items) reads[i].computed += item.count;
      statuses[i] =
          ReadShardOnHost(host, first_query, mine[i], shards[i].members.get(), shards[i].first, &found[i]);
    }
    for (const Status& s : statuses) GENIE_RETURN_IF_ERROR(s);
    read->computed = 0;
    read->on_gpu = false;
    read->on_host = false;
    for (std::size_t i = 0; i < n; ++i) {
      out->insert(out->end(), found[i].begin(), found[i].end());
      read->computed += reads[i].computed;
      read->on_gpu = read->on_gpu || reads[i].on_gpu;
      read->on_host = read->on_host || reads[i].on_host;
    }
    return Status::Ok();
  };
}

}  // namespace capi
}  // namespace genie

// The GPU engine's set predicates (Engine::MatchSet): on the device over the
// resident List Array when the query's lists are long (set_match.hpp), else
// core's MatchSet on the host, whose answers the device's equal.
#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_engine_impl.hpp"
#include "set_match.hpp"

namespace genie {
namespace gpu {

Status GpuEngine::MatchSet(SetPredicate predicate, Span<int32_t> keywords,
                           Span<int32_t> object_sizes, std::vector<int32_t>* out) {
  if (out == nullptr) return Status::InvalidArgument("set match output is NULL");
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded to the engine");
  std::unique_lock<std::timed_mutex> device;
  GENIE_RETURN_IF_ERROR(TakeDevice(engine_cancel_, &device));
  cancel_ = engine_cancel_;
  const InvertedIndex& index = *index_;
  const int32_t n = index.num_objects();

  // The query's lists, as the host finds them: each distinct keyword's.
  std::vector<int32_t> distinct(keywords.begin(), keywords.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const Span<int32_t> all = index.keywords();
  const Span<int64_t> offsets = index.keyword_offsets();
  std::vector<SetList> lists;
  bool missing = false;
  int64_t total = 0;
  for (int32_t keyword : distinct) {
    const auto it = std::lower_bound(all.begin(), all.end(), keyword);
    if (it == all.end() || *it != keyword) {
      missing = true;
      continue;
    }
    const auto k = static_cast<std::size_t>(it - all.begin());
    const int64_t length = offsets[k + 1] - offsets[k];
    if (length == 0) {  // a keyword without postings: as one the index lacks
      missing = true;
      continue;
    }
    lists.push_back({offsets[k], length, static_cast<int32_t>(k)});
    total += length;
  }

  // The host answers the trivial queries, the short ones, and an index not
  // resident on the device (multiple loading: its parts live on the host).
  const bool on_device = resident_ && total > 0 && total >= config_.set_match_min_postings &&
                         (resident_postings_.size() > 0 || packed_postings_.size() > 0) &&
                         !(predicate == SetPredicate::kContains && missing) &&
                         (predicate != SetPredicate::kContainedBy ||
                          object_sizes.size() == static_cast<std::size_t>(n));
  if (!on_device) return genie::MatchSet(index, predicate, keywords, object_sizes, cancel_, out);

  try {
    DeviceGuard guard;
    GENIE_RETURN_IF_ERROR(guard.Enter(device_));
    DeviceBlockScope blocks;
    GENIE_RETURN_IF_ERROR(CheckCancel());
    cudaStream_t stream = compute_stream_.get();
    ListArrayView view;
    if (resident_postings_.size() > 0) {  // 4-byte ids where both forms are resident
      view.full = resident_postings_.get();
    } else {
      view.packed = packed_postings_.get();
      view.dir = pack_dir_.get();
      view.pack_tiles = PackTiles(n);
    }
    // contains: the shortest list first, whose ids are the candidates
    if (predicate == SetPredicate::kContains) {
      std::sort(lists.begin(), lists.end(),
                [](const SetList& a, const SetList& b) { return a.length < b.length; });
    }
    DeviceArray<SetList> d_lists;
    GENIE_RETURN_IF_ERROR(gpu::Upload(lists.data(), lists.size(), &d_lists, "the query's lists"));

    // candidates (ids) and their flags: list 0's ids, or every object
    const int64_t candidates = predicate == SetPredicate::kContains ? lists[0].length : n;
    DeviceArray<int32_t> ids, selected, counts, d_count;
    DeviceArray<uint8_t> flags;
    GENIE_RETURN_IF_ERROR(ids.Allocate(static_cast<std::size_t>(std::max<int64_t>(candidates, 1)),
                                       "set match candidates"));
    GENIE_RETURN_IF_ERROR(flags.Allocate(static_cast<std::size_t>(std::max<int64_t>(candidates, 1)),
                                         "set match flags"));
    if (predicate == SetPredicate::kContains) {
      GENIE_RETURN_IF_ERROR(LaunchContains(view, d_lists.get(), static_cast<int32_t>(lists.size()),
                                           candidates, ids.get(), flags.get(), stream));
    } else {
      std::vector<int64_t> starts(lists.size() + 1, 0);
      for (std::size_t j = 0; j < lists.size(); ++j) starts[j + 1] = starts[j] + lists[j].length;
      DeviceArray<int64_t> d_starts;
      GENIE_RETURN_IF_ERROR(gpu::Upload(starts.data(), starts.size(), &d_starts, "the lists' starts"));
      if (predicate == SetPredicate::kOverlaps) {
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flags.get(), 0, flags.bytes(), stream));
        GENIE_RETURN_IF_ERROR(LaunchMarkPostings(view, d_lists.get(), d_starts.get(),
                                                 static_cast<int32_t>(lists.size()), total,
                                                 flags.get(), nullptr, stream));
        GENIE_RETURN_IF_ERROR(LaunchObjectFlags(nullptr, nullptr, n, ids.get(), nullptr, stream));
      } else {  // contained by: every keyword of the object among the query's
        if (set_sizes_.size() != static_cast<std::size_t>(n)) {
          set_sizes_.Reset();
          GENIE_RETURN_IF_ERROR(gpu::Upload(object_sizes.data(), object_sizes.size(), &set_sizes_,
                                            "the objects' keyword counts"));
        }
        GENIE_RETURN_IF_ERROR(counts.Allocate(static_cast<std::size_t>(n), "set match counts"));
        GENIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counts.get(), 0, counts.bytes(), stream));
        GENIE_RETURN_IF_ERROR(LaunchMarkPostings(view, d_lists.get(), d_starts.get(),
                                                 static_cast<int32_t>(lists.size()), total,
                                                 nullptr, counts.get(), stream));
        GENIE_RETURN_IF_ERROR(
            LaunchObjectFlags(counts.get(), set_sizes_.get(), n, ids.get(), flags.get(), stream));
      }
      GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // d_starts goes here
    }

    std::size_t temp_bytes = 0;
    GENIE_RETURN_IF_ERROR(SelectFlagged(nullptr, &temp_bytes, ids.get(), flags.get(), nullptr,
                                        nullptr, candidates, stream));
    DeviceArray<uint8_t> temp;
    GENIE_RETURN_IF_ERROR(temp.Allocate(std::max<std::size_t>(temp_bytes, 1), "select scratch"));
    GENIE_RETURN_IF_ERROR(selected.Allocate(static_cast<std::size_t>(std::max<int64_t>(candidates, 1)),
                                            "set match results"));
    GENIE_RETURN_IF_ERROR(d_count.Allocate(1, "set match count"));
    GENIE_RETURN_IF_ERROR(SelectFlagged(temp.get(), &temp_bytes, ids.get(), flags.get(),
                                        selected.get(), d_count.get(), candidates, stream));
    int32_t count = 0;
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&count, d_count.get(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    GENIE_RETURN_IF_ERROR(CheckCancel());
    out->resize(static_cast<std::size_t>(count));
    if (count > 0) {
      GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->data(), selected.get(),
                                            static_cast<std::size_t>(count) * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost));
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory matching a set on the GPU");
  }
}

}  // namespace gpu
}  // namespace genie

// Batch edit-distance verification on the GPU (see gpu_edit_distance.hpp).
//
// One thread per (query, candidate) pair.  The shorter string of the pair is
// the pattern: when it has at most 64 code points, bit-parallel Myers
// (Hyyrö's global-distance form) with the pattern's match masks in a small
// sorted table in the thread's local memory; otherwise banded DP with
// doubling thresholds (16, 32, ... up to the cap or the longer length) over
// a row of min(|q|, |s|) + 1 ints in a global workspace.  The distance itself
// is genie/levenshtein_kernel.hpp, the very code the CPU runs, so the results
// are identical.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "genie/gpu_edit_distance.hpp"
#include "genie/levenshtein_kernel.hpp"

namespace genie {
namespace gpu {
namespace {

constexpr int kThreadsPerBlock = 128;

__global__ void EditDistanceKernel(const uint32_t* __restrict__ query_cps,
                                   const int64_t* __restrict__ query_offsets,
                                   const uint32_t* __restrict__ cand_cps,
                                   const int64_t* __restrict__ cand_offsets,
                                   const int32_t* __restrict__ query_of,
                                   const int32_t* __restrict__ caps,  // per query, or nullptr
                                   const int64_t* __restrict__ work_offsets,  // per pair
                                   int32_t* __restrict__ workspace, int64_t pairs,
                                   int32_t* __restrict__ out) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < pairs;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t q = query_of[j];
    const int32_t cap = caps != nullptr ? caps[q] : -1;
    // the row is used (and was allocated) only past Myers' 64 code points
    out[j] = kernel::CappedDistance(query_cps + query_offsets[q],
                                    static_cast<int32_t>(query_offsets[q + 1] - query_offsets[q]),
                                    cand_cps + cand_offsets[j],
                                    static_cast<int32_t>(cand_offsets[j + 1] - cand_offsets[j]),
                                    cap, workspace + work_offsets[j]);
  }
}

template <typename T>
Status Upload(const std::vector<T>& host, DeviceArray<T>* dev, const char* what) {
  GENIE_RETURN_IF_ERROR(dev->Allocate(std::max<std::size_t>(host.size(), 1), what));
  if (!host.empty()) {
    GENIE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dev->get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

Status Run(const EditDistanceBatch& batch, int32_t device_ordinal, std::vector<int32_t>* distances,
           const CancelCheck& cancel) {
  GENIE_RETURN_IF_ERROR(ValidateEditDistanceBatch(batch));
  const int64_t pairs = batch.candidates.size();
  distances->assign(static_cast<std::size_t>(pairs), 0);
  if (pairs == 0) return Status::Ok();
  if (cancel.requested()) return Status::Cancelled();

  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::DeviceUnavailable(std::string("no usable GPU: cudaGetDeviceCount failed: ") +
                                     cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
                                     ")");
  }
  if (count == 0) return Status::DeviceUnavailable("no usable GPU: the CUDA runtime sees no device");
  if (device_ordinal < 0 || device_ordinal >= count) {
    return Status::DeviceUnavailable("no usable GPU: device_ordinal " +
                                     std::to_string(device_ordinal) + " does not exist (" +
                                     std::to_string(count) + " CUDA device(s))");
  }
  DeviceGuard guard;
  GENIE_RETURN_IF_ERROR(guard.Enter(device_ordinal));

  // Per pair: its query, and where its banded-DP row lives (if it needs one).
  std::vector<int32_t> query_of(static_cast<std::size_t>(pairs));
  std::vector<int64_t> work_offsets(static_cast<std::size_t>(pairs), 0);
  int64_t workspace_ints = 0;
  for (int32_t q = 0; q < batch.queries.size(); ++q) {
    const int64_t len_q = batch.queries.offsets[static_cast<std::size_t>(q) + 1] -
                          batch.queries.offsets[static_cast<std::size_t>(q)];
    for (int64_t j = batch.candidate_offsets[static_cast<std::size_t>(q)];
         j < batch.candidate_offsets[static_cast<std::size_t>(q) + 1]; ++j) {
      query_of[static_cast<std::size_t>(j)] = q;
      const int64_t len_s = batch.candidates.offsets[static_cast<std::size_t>(j) + 1] -
                            batch.candidates.offsets[static_cast<std::size_t>(j)];
      const int64_t shorter = std::min(len_q, len_s);
      if (shorter > kMyersMaxLength) {
        work_offsets[static_cast<std::size_t>(j)] = workspace_ints;
        workspace_ints += shorter + 1;
      }
    }
  }

  DeviceArray<uint32_t> d_query_cps, d_cand_cps;
  DeviceArray<int64_t> d_query_offsets, d_cand_offsets, d_work_offsets;
  DeviceArray<int32_t> d_query_of, d_caps, d_workspace, d_out;
  GENIE_RETURN_IF_ERROR(Upload(batch.queries.code_points, &d_query_cps, "query code points"));
  GENIE_RETURN_IF_ERROR(Upload(batch.queries.offsets, &d_query_offsets, "query offsets"));
  GENIE_RETURN_IF_ERROR(Upload(batch.candidates.code_points, &d_cand_cps, "candidate code points"));
  GENIE_RETURN_IF_ERROR(Upload(batch.candidates.offsets, &d_cand_offsets, "candidate offsets"));
  GENIE_RETURN_IF_ERROR(Upload(query_of, &d_query_of, "pair queries"));
  GENIE_RETURN_IF_ERROR(Upload(work_offsets, &d_work_offsets, "workspace offsets"));
  const bool has_caps = !batch.max_distance.empty();
  if (has_caps) GENIE_RETURN_IF_ERROR(Upload(batch.max_distance, &d_caps, "distance caps"));
  GENIE_RETURN_IF_ERROR(d_workspace.Allocate(
      static_cast<std::size_t>(std::max<int64_t>(workspace_ints, 1)), "banded-DP workspace"));
  GENIE_RETURN_IF_ERROR(d_out.Allocate(static_cast<std::size_t>(pairs), "distances"));

  if (cancel.requested()) return Status::Cancelled();
  const int64_t blocks64 = (pairs + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks64, 1 << 20));
  EditDistanceKernel<<<blocks, kThreadsPerBlock>>>(
      d_query_cps.get(), d_query_offsets.get(), d_cand_cps.get(), d_cand_offsets.get(),
      d_query_of.get(), has_caps ? d_caps.get() : nullptr, d_work_offsets.get(),
      d_workspace.get(), pairs, d_out.get());
  GENIE_CUDA_CHECK_LAUNCH("EditDistanceKernel");
  GENIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  GENIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(distances->data(), d_out.get(),
                                        static_cast<std::size_t>(pairs) * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost));
  return Status::Ok();
}

}  // namespace
}  // namespace gpu

Status GpuEditDistances(const EditDistanceBatch& batch, int32_t device_ordinal,
                        std::vector<int32_t>* distances, const CancelCheck& cancel) {
  if (distances == nullptr) return Status::InvalidArgument("GpuEditDistances: NULL output");
  try {
    return gpu::Run(batch, device_ordinal, distances, cancel);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory in GPU edit-distance verification");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("GPU edit-distance verification failed: ") + e.what());
  } catch (...) {
    return Status::Internal("GPU edit-distance verification failed");
  }
}

}  // namespace genie

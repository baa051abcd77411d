// The communicator on real GPUs (communicator.h): ncclAllReduce (sum, in place) on each rank's
// CudaDeviceRuntime stream, so it is ordered with the rank's kernels and captured into its CUDA
// graphs (NCCL supports stream capture). NCCL is opened at run time (dlopen of libnccl.so.2, found
// by the loader's search: LD_LIBRARY_PATH, the system's paths), not linked: a single-GPU worker, the GPU bundle and machines without
// NCCL never need it; --tensor-parallel > 1 on `cuda` without it is a one-line error.
//
// NCCL's ring all-reduce leaves the same bits on every rank (each chunk is reduced on one rank
// and then copied), so every rank samples the same tokens from the same logits.
//
// Ownership: the communicators share the opened library and one clique made by ncclCommInitAll
// (one process drives every rank's device). Threading: as communicator.h.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/device/cuda_device_runtime.h"
#include "worker/parallel/communicator.h"

namespace tessera::worker {

// One communicator per runtime, rank i on runtimes[i] (which must outlive them). UNAVAILABLE
// when NCCL cannot be opened; NCCL's own error otherwise.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeNcclCommunicators(
    const std::vector<device::CudaDeviceRuntime*>& runtimes);

}  // namespace tessera::worker

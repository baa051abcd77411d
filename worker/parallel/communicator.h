// The collective a tensor-parallel worker needs (DESIGN.md §12): an in-place sum over the ranks
// of one worker, enqueued on the rank's device stream, so it is ordered with the kernels around
// it and recorded into a graph while the runtime captures. Two implementations:
//   in-process (in_process_communicator.h) — the emulated device: ranks are threads of one
//       process, the sum is taken in rank order 0, 1, ..., N-1 in f32 and rounded once, so every
//       rank holds the same bits and CI can compare TP = N with TP = 1;
//   NCCL (nccl_communicator.h) — real GPUs, ncclAllReduce on the runtime's stream.
//
// Ownership: one communicator per rank, owned by the tensor-parallel runner and lent to that
// rank's ops. Threading: each rank's communicator is called by that rank's thread only; Abort
// may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "kernels/device/device_runtime.h"

namespace tessera::worker {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[count] of `type` (device memory of this rank) becomes the elementwise sum of every
  // rank's data[count], the same bits on every rank. Every rank makes the same calls in the same
  // order with the same count and type (a mismatch is a broken invariant: it aborts).
  virtual absl::Status AllReduceSum(void* data, int64_t count, device::DataType type) = 0;
  // A rank failed: collectives waiting now, and every later one, fail instead of waiting for it.
  virtual void Abort() = 0;
  // "nccl 2.27.3" / "in-process, fixed order".
  virtual std::string Describe() const = 0;
};

}  // namespace tessera::worker

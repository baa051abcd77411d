// The CUDA-graph cache of a device runner (DESIGN.md §5): decode-only steps are padded up to a
// bucket (1, 2, 4, 8, then every 8 up to 256, then every 16 up to max_num_seqs) and replay the
// graph captured for that bucket; mixed and prefill steps run eagerly. Capture is lazy (on a
// bucket's first use), eager (every bucket at start-up) or off.
//
// The runner supplies `EnqueueStep(rows)`: it enqueues one step's device work for `rows` rows
// reading only the runner's persistent input buffers (so a replay computes whatever those
// buffers hold at that moment), with padding rows marked inert by the runner (slot −1). It must
// be idempotent: a capture runs it once eagerly (warm-up) before recording it, and the replay
// that follows runs the same step again. (A runner whose step advances state in place, like
// recurrent layers, asks WillCapture first and runs its warm-up without that state.)
//
// Owned by its runner; called from the runner's (step) thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "kernels/device/device_runtime.h"
#include "worker/graph_miss_reason.h"

namespace tessera::worker {

enum class CudaGraphMode { kLazy, kEager, kOff };
// "lazy" | "eager" | "off"; INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(std::string_view name);
std::string_view CudaGraphModeName(CudaGraphMode mode);

// The bucket sizes for max_num_seqs >= 1, ascending; the last one is max_num_seqs.
std::vector<int> GraphBatchBuckets(int max_num_seqs);

struct GraphStepOutcome {
  int rows = 0;           // rows the step ran with: the bucket when replayed, else the batch
  bool replayed = false;
  bool captured = false;  // this step captured the graph it replayed
  std::optional<GraphMissReason> miss = std::nullopt;  // a decode-only step run eagerly, and why
};

class GraphCache {
 public:
  using EnqueueStep = absl::FunctionRef<absl::Status(int rows)>;

  // Precondition: runtime outlives the cache; max_num_seqs >= 1.
  GraphCache(device::DeviceRuntime* runtime, CudaGraphMode mode, int max_num_seqs);

  // A decode-only step of `rows` (>= 1) sequences: replays its bucket's graph (capturing it
  // first in lazy mode), or runs eagerly with the miss reason.
  absl::StatusOr<GraphStepOutcome> RunDecode(int rows, EnqueueStep enqueue);
  // A step with prefill rows: always eager, never a miss.
  absl::StatusOr<GraphStepOutcome> RunEager(int rows, EnqueueStep enqueue);
  // Eager mode: captures every bucket (call once, at start-up). No-op in the other modes.
  absl::Status CaptureAll(EnqueueStep enqueue);

  CudaGraphMode mode() const { return mode_; }
  const std::vector<int>& buckets() const { return buckets_; }
  // The bucket a decode step of `rows` pads to; nullopt when rows exceed every bucket.
  std::optional<int> BucketFor(int rows) const;
  // The rows RunDecode(rows) will run with: the bucket when it replays (capturing first in lazy
  // mode), else `rows` (graphs off, oversize, or eager mode before the bucket is captured). The
  // runner lays out that many input rows (padding inert) before calling RunDecode.
  int RowsToRun(int rows) const;
  // Whether RunDecode(rows) will capture a graph (and so call EnqueueStep twice, warm-up first).
  bool WillCapture(int rows) const { return PlanDecode(rows).capture; }
  // Whether RunDecode(rows) will run a graph (replay, after capturing it in lazy mode).
  bool WillReplay(int rows) const { return !PlanDecode(rows).miss.has_value(); }
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }
  int64_t misses(GraphMissReason reason) const { return misses_[static_cast<size_t>(reason)]; }

 private:
  // What RunDecode(rows) will do; RowsToRun reads the same decision.
  struct DecodePlan {
    int rows = 0;                         // the bucket, or `rows` on a miss
    std::optional<GraphMissReason> miss = std::nullopt;  // set: run eagerly, under this reason
    bool capture = false;                 // lazy mode, bucket not captured yet
  };
  DecodePlan PlanDecode(int rows) const;
  absl::Status Capture(int bucket, EnqueueStep enqueue);
  absl::StatusOr<GraphStepOutcome> Miss(int rows, GraphMissReason reason, EnqueueStep enqueue);

  device::DeviceRuntime* runtime_;
  CudaGraphMode mode_;
  std::vector<int> buckets_;
  std::map<int, device::GraphHandle> graphs_;  // bucket -> captured graph
  int64_t replays_ = 0;
  int64_t captures_ = 0;
  std::array<int64_t, kNumGraphMissReasons> misses_{};
};

}  // namespace tessera::worker

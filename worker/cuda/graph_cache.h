// The CUDA-graph cache of a device runner (DESIGN.md §5): decode-only steps are padded up to a
// bucket (1, 2, 4, 8, then every 8 up to 256, then every 16 up to max_num_seqs) and replay the
// graph captured whole for that bucket. Steps with prefill rows (given a StepPieces) are padded
// up to a token bucket (GraphTokenBuckets) and replay piecewise graphs: one per stretch of
// token-shaped work, the attention and the head between them eager (step_pieces.h,
// docs/design/piecewise-graphs.md). Capture is lazy (on a bucket's first use), eager (every
// bucket at start-up) or off.
//
// The runner supplies `EnqueueStep(rows)`: it enqueues one step's device work for `rows` rows
// reading only the runner's persistent input buffers (so a replay computes whatever those
// buffers hold at that moment), with padding rows marked inert by the runner (slot −1). It must
// be idempotent: a capture runs it once eagerly (warm-up) before recording it, and the replay
// that follows runs the same step again. (A runner whose step advances state in place, like
// recurrent layers, asks WillCapture first and runs its warm-up without that state.)
//
// A step with prefill rows runs as passes over the model (RunMixed's EnqueuePass, in the modes of
// StepPieces): a capture makes a warm-up pass and a capture pass, and every replay one pass.
//
// Graph memory is bounded by the bucket lists: at most one graph per decode bucket and one per
// stretch (sequence-shaped ops + 1) per token bucket; graphs_held() counts them.
//
// Owned by its runner; called from the runner's (step) thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "kernels/device/device_runtime.h"
#include "worker/cuda/step_pieces.h"
#include "worker/graph_miss_reason.h"

namespace tessera::worker {

enum class CudaGraphMode { kLazy, kEager, kOff };
// "lazy" | "eager" | "off"; INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(std::string_view name);
std::string_view CudaGraphModeName(CudaGraphMode mode);

// The bucket sizes for max_num_seqs >= 1, ascending; the last one is max_num_seqs.
std::vector<int> GraphBatchBuckets(int max_num_seqs);
// The token buckets of steps with prefill rows, for max_tokens >= 1, ascending, the last one
// max_tokens: 1, 2, 4, 8, every 8 up to 256, then every 1/16 of the power of two below
// (16 from 256, 32 from 512, ...): above 256 tokens a step pads by less than 6.25%. (Every 1/32
// held 4,762 graphs, 684 MB, at 4,096 tokens on the 1.5B shape: docs/perf/gpu-h200-2026-11-27.md.)
std::vector<int> GraphTokenBuckets(int max_tokens);

struct GraphStepOutcome {
  int rows = 0;           // rows (RunMixed: tokens) the step ran with: the bucket when replayed
  bool replayed = false;
  bool captured = false;  // this step captured the graph it replayed
  std::optional<GraphMissReason> miss = std::nullopt;  // run eagerly, and why
};

class GraphCache {
 public:
  using EnqueueStep = absl::FunctionRef<absl::Status(int rows)>;
  // One pass over a step with prefill rows, in `mode` (the runner skips its block-table copy when
  // capturing and samples only in kWhole and kReplay).
  using EnqueuePass = absl::FunctionRef<absl::Status(StepPieces::Mode mode)>;
  // The same for the all-padding step of `tokens` tokens the runner lays out (CaptureAllMixed).
  using EnqueueBucketPass = absl::FunctionRef<absl::Status(int tokens, StepPieces::Mode mode)>;

  // Precondition: runtime (and pieces) outlive the cache; max_num_seqs >= 1; max_tokens >= 1
  // with pieces. Without pieces, RunMixed always runs eagerly (reason kDisabled).
  GraphCache(device::DeviceRuntime* runtime, CudaGraphMode mode, int max_num_seqs,
             StepPieces* pieces = nullptr, int max_tokens = 0);

  // A decode-only step of `rows` (>= 1) sequences: replays its bucket's graph (capturing it
  // first in lazy mode), or runs eagerly with the miss reason.
  absl::StatusOr<GraphStepOutcome> RunDecode(int rows, EnqueueStep enqueue);
  // A step with prefill rows of `tokens` (>= 1) tokens: replays its token bucket's piecewise
  // graphs (capturing them first in lazy mode), or runs one kWhole pass with the miss reason.
  absl::StatusOr<GraphStepOutcome> RunMixed(int tokens, EnqueuePass enqueue);
  // Eager mode: captures every bucket (call once, at start-up). No-op in the other modes.
  absl::Status CaptureAll(EnqueueStep enqueue);
  // Eager mode with pieces: captures every token bucket (once, at start-up).
  absl::Status CaptureAllMixed(EnqueueBucketPass enqueue);

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
  // The tokens RunMixed(tokens) will run with: its token bucket when it replays, else `tokens`.
  int TokensToRun(int tokens) const { return PlanMixed(tokens).rows; }
  const std::vector<int>& token_buckets() const { return token_buckets_; }
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }              // decode buckets captured
  int64_t mixed_captures() const { return mixed_captures_; }  // token buckets captured
  int64_t all_captures() const { return captures_ + mixed_captures_; }
  int64_t graphs_held() const { return graphs_held_; }  // instantiated graphs, stretches included
  // Device memory the captures took: free memory before each capture minus after it, summed (a
  // GPU's instantiated graphs; 0 on the emulated device, whose captures allocate nothing).
  int64_t graph_memory_bytes() const { return graph_memory_bytes_; }
  int64_t misses(GraphMissReason reason) const { return misses_[static_cast<size_t>(reason)]; }

 private:
  // What RunDecode(rows) / RunMixed(tokens) will do; RowsToRun and TokensToRun read the same
  // decision.
  struct Plan {
    int rows = 0;                         // the bucket, or the step's rows (tokens) on a miss
    std::optional<GraphMissReason> miss = std::nullopt;  // set: run eagerly, under this reason
    bool capture = false;                 // lazy mode, bucket not captured yet
  };
  Plan PlanDecode(int rows) const;
  Plan PlanMixed(int tokens) const;
  // The plan for `n` over `buckets`, `captured` telling whether a bucket has its graphs.
  template <class Captured>
  Plan PlanFor(const std::vector<int>& buckets, int n, const Captured& captured) const;
  absl::Status Capture(int bucket, EnqueueStep enqueue);
  // Adds what the device's free memory dropped by since `free_before` (a failed query adds 0).
  void CountGraphMemory(absl::StatusOr<uint64_t> free_before);
  absl::Status CaptureMixed(int bucket, EnqueuePass enqueue);
  // One pass in `mode` between StepPieces::Begin and Finish; kCapture returns the stretches.
  absl::StatusOr<std::vector<device::GraphHandle>> RunPass(
      StepPieces::Mode mode, std::span<const device::GraphHandle> graphs, EnqueuePass enqueue);
  absl::StatusOr<GraphStepOutcome> Miss(int rows, GraphMissReason reason, EnqueueStep enqueue);

  device::DeviceRuntime* runtime_;
  CudaGraphMode mode_;
  std::vector<int> buckets_;
  std::map<int, device::GraphHandle> graphs_;  // bucket -> captured graph
  StepPieces* pieces_;
  std::vector<int> token_buckets_;  // empty without pieces
  std::map<int, std::vector<device::GraphHandle>> mixed_graphs_;  // token bucket -> stretches
  int64_t replays_ = 0;
  int64_t captures_ = 0;
  int64_t mixed_captures_ = 0;
  int64_t graphs_held_ = 0;
  int64_t graph_memory_bytes_ = 0;
  std::array<int64_t, kNumGraphMissReasons> misses_{};
};

}  // namespace tessera::worker

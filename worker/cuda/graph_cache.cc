#include "worker/cuda/graph_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::worker {

absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(std::string_view name) {
  if (name == "lazy") return CudaGraphMode::kLazy;
  if (name == "eager") return CudaGraphMode::kEager;
  if (name == "off") return CudaGraphMode::kOff;
  return absl::InvalidArgumentError(absl::StrCat("--cuda-graphs must be lazy, eager or off, not '",
                                                 absl::string_view(name.data(), name.size()),
                                                 "'"));
}

std::string_view CudaGraphModeName(CudaGraphMode mode) {
  switch (mode) {
    case CudaGraphMode::kLazy: return "lazy";
    case CudaGraphMode::kEager: return "eager";
    case CudaGraphMode::kOff: return "off";
  }
  return "off";
}

std::vector<int> GraphBatchBuckets(int max_num_seqs) {
  TESSERA_CHECK(max_num_seqs >= 1, "GraphBatchBuckets: max_num_seqs < 1");
  std::vector<int> buckets;
  for (int size = 1; size < max_num_seqs; ) {
    buckets.push_back(size);
    size = size < 8 ? size * 2 : (size < 256 ? size + 8 : size + 16);
  }
  buckets.push_back(max_num_seqs);
  return buckets;
}

GraphCache::GraphCache(device::DeviceRuntime* runtime, CudaGraphMode mode, int max_num_seqs)
    : runtime_(runtime), mode_(mode), buckets_(GraphBatchBuckets(max_num_seqs)) {
  TESSERA_CHECK(runtime_ != nullptr, "GraphCache needs a device runtime");
}

std::optional<int> GraphCache::BucketFor(int rows) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), rows);
  if (it == buckets_.end()) return std::nullopt;
  return *it;
}

GraphCache::DecodePlan GraphCache::PlanDecode(int rows) const {
  if (mode_ == CudaGraphMode::kOff) return {.rows = rows, .miss = GraphMissReason::kDisabled};
  const std::optional<int> bucket = BucketFor(rows);
  if (!bucket) return {.rows = rows, .miss = GraphMissReason::kOversize};
  if (graphs_.contains(*bucket)) return {.rows = *bucket};
  if (mode_ == CudaGraphMode::kEager) return {.rows = rows, .miss = GraphMissReason::kEager};
  return {.rows = *bucket, .capture = true};
}

int GraphCache::RowsToRun(int rows) const { return PlanDecode(rows).rows; }

absl::Status GraphCache::Capture(int bucket, EnqueueStep enqueue) {
  // Warm-up: the step runs once eagerly first, so libraries and lazily loaded kernels initialise
  // (and may allocate) outside the capture, where that is allowed; vLLM warms up the same way.
  if (absl::Status warm = enqueue(bucket); !warm.ok()) return warm;
  if (absl::Status begin = runtime_->BeginCapture(); !begin.ok()) return begin;
  const absl::Status recorded = enqueue(bucket);
  absl::StatusOr<device::GraphHandle> graph = runtime_->EndCapture();
  if (!recorded.ok()) return recorded;
  if (!graph.ok()) return graph.status();
  graphs_[bucket] = *graph;
  ++captures_;
  return absl::OkStatus();
}

absl::StatusOr<GraphStepOutcome> GraphCache::Miss(int rows, GraphMissReason reason,
                                                  EnqueueStep enqueue) {
  ++misses_[static_cast<size_t>(reason)];
  if (absl::Status status = enqueue(rows); !status.ok()) return status;
  return GraphStepOutcome{.rows = rows, .miss = reason};
}

absl::StatusOr<GraphStepOutcome> GraphCache::RunDecode(int rows, EnqueueStep enqueue) {
  TESSERA_CHECK(rows >= 1, "GraphCache::RunDecode: rows < 1");
  const DecodePlan plan = PlanDecode(rows);
  if (plan.miss) return Miss(rows, *plan.miss, enqueue);
  GraphStepOutcome outcome{.rows = plan.rows, .replayed = true, .captured = plan.capture};
  if (plan.capture) {
    if (absl::Status captured = Capture(plan.rows, enqueue); !captured.ok()) return captured;
  }
  if (absl::Status replayed = runtime_->Replay(graphs_.at(plan.rows)); !replayed.ok()) {
    return replayed;
  }
  ++replays_;
  return outcome;
}

absl::StatusOr<GraphStepOutcome> GraphCache::RunEager(int rows, EnqueueStep enqueue) {
  if (absl::Status status = enqueue(rows); !status.ok()) return status;
  return GraphStepOutcome{.rows = rows};
}

absl::Status GraphCache::CaptureAll(EnqueueStep enqueue) {
  if (mode_ != CudaGraphMode::kEager) return absl::OkStatus();
  for (int bucket : buckets_) {
    if (graphs_.contains(bucket)) continue;
    if (absl::Status captured = Capture(bucket, enqueue); !captured.ok()) return captured;
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker

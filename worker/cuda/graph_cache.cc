#include "worker/cuda/graph_cache.h"

#include <algorithm>
#include <bit>

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

std::vector<int> GraphTokenBuckets(int max_tokens) {
  TESSERA_CHECK(max_tokens >= 1, "GraphTokenBuckets: max_tokens < 1");
  std::vector<int> buckets;
  for (int size = 1; size < max_tokens;) {
    buckets.push_back(size);
    size = size < 8 ? size * 2 : size + std::max(8, static_cast<int>(std::bit_floor(
                                                        static_cast<unsigned>(size))) / 16);
  }
  buckets.push_back(max_tokens);
  return buckets;
}

GraphCache::GraphCache(device::DeviceRuntime* runtime, CudaGraphMode mode, int max_num_seqs,
                       StepPieces* pieces, int max_tokens)
    : runtime_(runtime),
      mode_(mode),
      buckets_(GraphBatchBuckets(max_num_seqs)),
      pieces_(pieces),
      token_buckets_(pieces != nullptr ? GraphTokenBuckets(max_tokens) : std::vector<int>{}) {
  TESSERA_CHECK(runtime_ != nullptr, "GraphCache needs a device runtime");
}

namespace {

// The smallest of the ascending `buckets` that holds n; nullopt past the last.
std::optional<int> BucketIn(const std::vector<int>& buckets, int n) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  if (it == buckets.end()) return std::nullopt;
  return *it;
}

}  // namespace

std::optional<int> GraphCache::BucketFor(int rows) const { return BucketIn(buckets_, rows); }

template <class Captured>
GraphCache::Plan GraphCache::PlanFor(const std::vector<int>& buckets, int n,
                                     const Captured& captured) const {
  if (mode_ == CudaGraphMode::kOff || buckets.empty()) {
    return {.rows = n, .miss = GraphMissReason::kDisabled};
  }
  const std::optional<int> bucket = BucketIn(buckets, n);
  if (!bucket) return {.rows = n, .miss = GraphMissReason::kOversize};
  if (captured(*bucket)) return {.rows = *bucket};
  if (mode_ == CudaGraphMode::kEager) return {.rows = n, .miss = GraphMissReason::kEager};
  return {.rows = *bucket, .capture = true};
}

GraphCache::Plan GraphCache::PlanDecode(int rows) const {
  return PlanFor(buckets_, rows, [this](int bucket) { return graphs_.contains(bucket); });
}

GraphCache::Plan GraphCache::PlanMixed(int tokens) const {
  return PlanFor(token_buckets_, tokens,
                 [this](int bucket) { return mixed_graphs_.contains(bucket); });
}

int GraphCache::RowsToRun(int rows) const { return PlanDecode(rows).rows; }

absl::Status GraphCache::Capture(int bucket, EnqueueStep enqueue) {
  // Warm-up: the step runs once eagerly first, so libraries and lazily loaded kernels initialise
  // (and may allocate) outside the capture, where that is allowed; vLLM warms up the same way.
  if (absl::Status warm = enqueue(bucket); !warm.ok()) return warm;
  const absl::StatusOr<uint64_t> free_before = runtime_->FreeMemoryBytes();
  if (absl::Status begin = runtime_->BeginCapture(); !begin.ok()) return begin;
  const absl::Status recorded = enqueue(bucket);
  absl::StatusOr<device::GraphHandle> graph = runtime_->EndCapture();
  if (!recorded.ok()) return recorded;
  if (!graph.ok()) return graph.status();
  graphs_[bucket] = *graph;
  ++captures_;
  ++graphs_held_;
  CountGraphMemory(free_before);
  return absl::OkStatus();
}

void GraphCache::CountGraphMemory(absl::StatusOr<uint64_t> free_before) {
  const absl::StatusOr<uint64_t> free_after = runtime_->FreeMemoryBytes();
  if (!free_before.ok() || !free_after.ok() || *free_after >= *free_before) return;
  graph_memory_bytes_ += static_cast<int64_t>(*free_before - *free_after);
}

absl::StatusOr<std::vector<device::GraphHandle>> GraphCache::RunPass(
    StepPieces::Mode mode, std::span<const device::GraphHandle> graphs, EnqueuePass enqueue) {
  if (absl::Status begin = pieces_->Begin(mode, graphs); !begin.ok()) return begin;
  const absl::Status status = enqueue(mode);
  absl::StatusOr<std::vector<device::GraphHandle>> stretches = pieces_->Finish();
  if (!status.ok()) return status;
  return stretches;
}

// As Capture, in two passes: the warm-up runs the token-shaped work eagerly, the capture records
// it, one graph per stretch.
absl::Status GraphCache::CaptureMixed(int bucket, EnqueuePass enqueue) {
  if (auto warm = RunPass(StepPieces::Mode::kWarmUp, {}, enqueue); !warm.ok()) {
    return warm.status();
  }
  const absl::StatusOr<uint64_t> free_before = runtime_->FreeMemoryBytes();
  absl::StatusOr<std::vector<device::GraphHandle>> stretches =
      RunPass(StepPieces::Mode::kCapture, {}, enqueue);
  if (!stretches.ok()) return stretches.status();
  CountGraphMemory(free_before);
  graphs_held_ += static_cast<int64_t>(stretches->size());
  mixed_graphs_[bucket] = *std::move(stretches);
  ++mixed_captures_;
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
  const Plan plan = PlanDecode(rows);
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

absl::StatusOr<GraphStepOutcome> GraphCache::RunMixed(int tokens, EnqueuePass enqueue) {
  TESSERA_CHECK(tokens >= 1, "GraphCache::RunMixed: tokens < 1");
  const Plan plan = PlanMixed(tokens);
  if (plan.miss) {
    ++misses_[static_cast<size_t>(*plan.miss)];
    if (absl::Status status = enqueue(StepPieces::Mode::kWhole); !status.ok()) return status;
    return GraphStepOutcome{.rows = tokens, .miss = plan.miss};
  }
  if (plan.capture) {
    if (absl::Status captured = CaptureMixed(plan.rows, enqueue); !captured.ok()) return captured;
  }
  auto replayed = RunPass(StepPieces::Mode::kReplay, mixed_graphs_.at(plan.rows), enqueue);
  if (!replayed.ok()) return replayed.status();
  ++replays_;
  return GraphStepOutcome{.rows = plan.rows, .replayed = true, .captured = plan.capture};
}

absl::Status GraphCache::CaptureAll(EnqueueStep enqueue) {
  if (mode_ != CudaGraphMode::kEager) return absl::OkStatus();
  for (int bucket : buckets_) {
    if (graphs_.contains(bucket)) continue;
    if (absl::Status captured = Capture(bucket, enqueue); !captured.ok()) return captured;
  }
  return absl::OkStatus();
}

absl::Status GraphCache::CaptureAllMixed(EnqueueBucketPass enqueue) {
  if (mode_ != CudaGraphMode::kEager || pieces_ == nullptr) return absl::OkStatus();
  for (int bucket : token_buckets_) {
    if (mixed_graphs_.contains(bucket)) continue;
    auto pass = [&](StepPieces::Mode mode) { return enqueue(bucket, mode); };
    if (absl::Status captured = CaptureMixed(bucket, pass); !captured.ok()) return captured;
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker

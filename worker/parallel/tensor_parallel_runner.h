// A worker that spans N devices (DESIGN.md §12, docs/design/tensor-parallel.md): N cuda runners,
// one per rank, each on its own device with its shard of the model (weight_sharding.h) and its
// own KV pool of 1/N of the KV heads, joined by communicators (communicator.h) that sum the
// row-parallel projections' outputs inside each rank's forward pass (and inside its graphs).
//
// Every call goes to every rank: Step and Forward run on all ranks at once (rank 0 on the
// caller's thread, rank r > 0 on its own thread, so the ranks' collectives can meet), the other
// calls on each rank in turn. The batch is validated once, before any rank starts, so a bad batch
// changes nothing. Each rank samples from the same logits (the all-reduce leaves the same bits on
// every rank) with the same per-slot state, so all draw the same tokens; rank 0's are returned,
// and a rank that drew another token is a broken invariant (abort). A rank that fails during a
// step aborts the communicators (the others' collectives return instead of waiting) and the
// runner fails every later step: the worker must be restarted.
//
// Ownership: owns the ranks, their communicators and threads. Threading: as ModelRunner (one
// caller thread); the rank threads only run what a call hands them and wait otherwise.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda/cuda_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/parallel/communicator.h"

namespace tessera::worker {

class RankThread;  // tensor_parallel_runner.cc

struct TensorParallelOptions {
  int size = 1;  // ranks
  // The device of rank r: `device` with cuda_device_index + r on cuda; its own emulated device
  // of the same size on `emulated`.
  device::DeviceOptions device;
  CudaRunnerOptions runner;  // every rank's (the communicator is set per rank)
};

class TensorParallelRunner final : public ModelRunner {
 public:
  // Errors, one line: a model that does not shard (ShardModelConfig), more ranks than devices,
  // no NCCL on cuda, and each rank's CudaModelRunner::Create error (naming the rank).
  static absl::StatusOr<std::unique_ptr<TensorParallelRunner>> Create(
      const TensorParallelOptions& options, const LoadedModel& model);
  ~TensorParallelRunner() override;

  const model::ModelConfig& config() const override { return config_; }
  // Rank 0's pool (every rank has the same blocks, each of its own KV heads); bytes: all ranks'.
  KvPoolInfo kv_pool() const override;
  std::string backend_name() const override { return "cuda"; }
  int max_num_seqs() const override { return ranks_[0]->max_num_seqs(); }
  ModelLayerInfo layer_info() const override { return ranks_[0]->layer_info(); }
  void BeginSequence(int slot, const sampling::SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated) override;
  void EndSequence(int slot) override;
  // Hybrids: every rank holds the whole recurrent state (the mixers are replicated), so every
  // rank saves and restores its own copy.
  int state_snapshot_slots() const override { return ranks_[0]->state_snapshot_slots(); }
  void SaveStateSnapshot(int slot, int snapshot) override;
  void RestoreStateSnapshot(int snapshot, int slot) override;
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                    const FillPendingMasks& fill_pending_masks = {}) override;
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override;

  int size() const { return static_cast<int>(ranks_.size()); }
  const CudaModelRunner& rank(int r) const { return *ranks_[static_cast<size_t>(r)]; }
  // "2 ranks (nccl 2.28.9): NVIDIA H100 ..., bf16, graphs eager"
  std::string Describe() const;

 private:
  TensorParallelRunner(const model::ModelConfig& config,
                       std::vector<std::unique_ptr<Communicator>> communicators,
                       std::vector<std::unique_ptr<CudaModelRunner>> ranks);
  // Runs work(r) for every rank at once; the first failure (in rank order) breaks the runner.
  absl::Status OnEveryRank(const std::function<absl::Status(int rank)>& work);
  void AbortCollectives();
  // Rank r's samples agree with rank 0's (aborts otherwise).
  static void CheckSameTokens(const StepSamples& rank0, const StepSamples& other, int rank);

  model::ModelConfig config_;  // the whole model's (the ranks hold their shares)
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<std::unique_ptr<CudaModelRunner>> ranks_;
  std::vector<std::unique_ptr<RankThread>> threads_;  // ranks 1..N-1
  std::vector<StepSamples> rank_samples_;             // ranks 1..N-1's, per step
  std::vector<StepLogits> rank_logits_;
  absl::Status broken_;
};

}  // namespace tessera::worker

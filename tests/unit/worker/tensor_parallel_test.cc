// Tensor parallelism on the emulated device (worker/parallel/): the in-process all-reduce's
// fixed order and abort, the shard rules and their one-line refusals, and TP = 2 and 4 against
// TP = 1 — logits at every position of a prompt (f32 within the f32 tolerance, bf16 within the
// bf16 one) and greedy tokens of 4 concurrent sequences, equal — on a llama model whose FFN cut
// at TP = 4 splits Q4_1 blocks (so the dequantized fallback runs), a Qwen2 one (sliced biases)
// and the hybrids (FFN and experts sharded, mixers replicated).
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <thread>
#include <vector>

#include "common/util/half.h"
#include "kernels/device/emulated_device_runtime.h"
#include "tests/testing/fused_experts_gguf.h"
#include "tests/testing/greedy_comparison.h"
#include "tests/unit/worker/position_logits.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/parallel/in_process_communicator.h"
#include "worker/parallel/tensor_parallel_runner.h"
#include "worker/parallel/weight_sharding.h"

namespace tessera::worker::testing {
namespace {

using convert::TinyDenseArch;
using device::DataType;
using testing_util::GreedyTolerance;
using testing_util::kCudaBf16Tolerance;
using testing_util::kCudaF32Tolerance;

constexpr int kBlockSize = 16;
constexpr int kBlocks = 24;

std::unique_ptr<LoadedModel> TinyModel(TinyDenseArch arch, int ffn, const char* name) {
  LoadedModel* raw = nullptr;
  const std::string error = WriteAndLoadTinyModel(
      {.arch = arch, .num_layers = 2, .hidden = 256, .num_heads = 4, .num_kv_heads = 4,
       .ffn = ffn, .context_length = 128, .seed = 23},
      name, &raw);
  EXPECT_EQ(error, "");
  return std::unique_ptr<LoadedModel>(raw);
}

CudaRunnerOptions RunnerOptions(DataType dtype) {
  return {.dtype = dtype, .block_size = kBlockSize, .num_kv_blocks = kBlocks, .max_num_seqs = 4,
          .graphs = CudaGraphMode::kLazy};
}

std::unique_ptr<ModelRunner> MakeRunner(const LoadedModel& model, DataType dtype, int tp) {
  const device::DeviceOptions device{.kind = device::DeviceKind::kEmulated,
                                     .emulated_memory_bytes = uint64_t{128} << 20};
  if (tp == 1) {
    auto runtime = device::OpenDevice(device);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    auto runner = CudaModelRunner::Create(*std::move(runtime), model.config, model.plan,
                                          *model.weights, RunnerOptions(dtype));
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }
  auto runner = TensorParallelRunner::Create(
      {.size = tp, .device = device, .runner = RunnerOptions(dtype)}, model);
  EXPECT_TRUE(runner.ok()) << runner.status();
  return runner.ok() ? *std::move(runner) : nullptr;
}

// Greedy continuations of `prompts` served together: one step prefills them all, then each
// step decodes every sequence once.
// *graph_replays (optional) counts the steps that replayed a CUDA graph.
std::vector<std::vector<int32_t>> GreedyTogether(ModelRunner& runner,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 int new_tokens, int* graph_replays = nullptr) {
  const int n = static_cast<int>(prompts.size());
  const int per_sequence = (kBlocks - 1) / n;
  std::vector<std::vector<int32_t>> tables(n), out(n), inputs = prompts;
  for (int s = 0; s < n; ++s) {
    tables[s].resize(per_sequence);
    std::iota(tables[s].begin(), tables[s].end(), 1 + s * per_sequence);
    runner.BeginSequence(s, {.temperature = 0.0f}, prompts[s], {});
  }
  std::vector<int32_t> positions(n, 0);
  for (int step = 0; step < new_tokens; ++step) {
    std::vector<SequenceWork> batch;
    for (int s = 0; s < n; ++s) {
      batch.push_back({.tokens = inputs[s], .start_pos = positions[s], .block_table = tables[s],
                       .needs_logits = true, .slot = s});
    }
    StepSamples samples;
    const absl::Status status = runner.Step(batch, &samples);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) break;
    if (graph_replays != nullptr) *graph_replays += samples.info.graph_replayed ? 1 : 0;
    for (size_t r = 0; r < samples.rows.size(); ++r) {
      const int s = samples.sequence_index[r];
      positions[s] += static_cast<int>(inputs[s].size());
      out[s].push_back(samples.rows[r].token);
      inputs[s] = {samples.rows[r].token};
    }
  }
  for (int s = 0; s < n; ++s) runner.EndSequence(s);
  return out;
}

std::vector<int32_t> Prompt(const LoadedModel& model, int length, int seed) {
  std::vector<int32_t> ids(length);
  for (int i = 0; i < length; ++i) {
    ids[i] = 3 + (seed * 7919 + i * 104729) % (model.config.vocab_size - 3);
  }
  return ids;
}

// The hybrids' bf16 bound (cuda_hybrid_runner_test's): their recurrent state carries each step's
// rounding forward, so two bf16 runs drift further apart than a dense model's.
constexpr GreedyTolerance kHybridBf16Tolerance{.logprob = 0.1f, .margin = 0.2f};

// TP = tp against TP = 1: logits over a prompt's positions in each dtype of `dtypes` (within
// `bf16` for bf16), and greedy tokens in f32.
void CheckMatchesOneDevice(const LoadedModel& model, int tp,
                           std::initializer_list<DataType> dtypes = {DataType::kF32,
                                                                     DataType::kBf16},
                           const GreedyTolerance& bf16 = kCudaBf16Tolerance) {
  const std::vector<int32_t> prompt = Prompt(model, 14, 1);
  for (const DataType dtype : dtypes) {
    SCOPED_TRACE(absl::StrCat("TP ", tp, ", ", device::DataTypeName(dtype)));
    auto one = MakeRunner(model, dtype, 1);
    auto many = MakeRunner(model, dtype, tp);
    ASSERT_NE(one, nullptr);
    ASSERT_NE(many, nullptr);
    const auto reference = PositionLogits(*one, prompt, kBlocks);
    const LogitDiffs diffs = MaxDiffs(reference, PositionLogits(*many, prompt, kBlocks));
    const GreedyTolerance& tolerance = dtype == DataType::kF32 ? kCudaF32Tolerance : bf16;
    EXPECT_LE(diffs.logprob, tolerance.logprob);
    std::printf("TP %d vs 1, %s: max |logit diff| %.3g, max |logprob diff| %.3g\n", tp,
                device::DataTypeName(dtype), diffs.logit, diffs.logprob);
    if (dtype == DataType::kF32) {
      std::vector<std::vector<int32_t>> prompts;
      for (int s = 0; s < 4; ++s) prompts.push_back(Prompt(model, 5 + 3 * s, s + 2));
      int replays = 0;  // decode steps replay graphs with the all-reduces captured inside
      EXPECT_EQ(GreedyTogether(*many, prompts, 6, &replays), GreedyTogether(*one, prompts, 6));
      EXPECT_GE(replays, 3);
    }
  }
}

TEST(TensorParallelTest, LlamaMatchesOneDeviceAtTwoAndFourRanks) {
  const auto model = TinyModel(TinyDenseArch::kLlama, 192, "tp_llama.gguf");
  ASSERT_NE(model, nullptr);
  CheckMatchesOneDevice(*model, 2);
  CheckMatchesOneDevice(*model, 4);
}

TEST(TensorParallelTest, Qwen2BiasesAreSlicedWithTheirHeads) {
  const auto model = TinyModel(TinyDenseArch::kQwen2, 256, "tp_qwen2.gguf");
  ASSERT_NE(model, nullptr);
  CheckMatchesOneDevice(*model, 2);
}

// The hybrids (tests/data/hybrid): the dense FFN's columns (qwen35), or every expert's and the
// shared expert's (qwen35moe, qwen3next; and llama.cpp's fused [gate | up] expert stack) split
// over 2 ranks, the Gated DeltaNet and gated-attention mixers replicated.
TEST(TensorParallelTest, HybridsShardTheirFfnAndExperts) {
  const std::string fused = ::testing::TempDir() + "/tp-fused-tiny-qwen35moe.gguf";
  ASSERT_TRUE(
      testing_util::WriteFusedGateUpCopy("tests/data/hybrid/tiny-qwen35moe.gguf", fused).ok());
  for (const std::string& path :
       {std::string("tests/data/hybrid/tiny-qwen35.gguf"),
        std::string("tests/data/hybrid/tiny-qwen35moe.gguf"),
        std::string("tests/data/hybrid/tiny-qwen3next.gguf"), fused}) {
    SCOPED_TRACE(path);
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    // bf16 once (the MoE model): the emulated device is slow, and f32 is the strict check.
    const bool bf16 = path == "tests/data/hybrid/tiny-qwen35moe.gguf";
    CheckMatchesOneDevice(**model, 2,
                          bf16 ? std::initializer_list<DataType>{DataType::kF32, DataType::kBf16}
                               : std::initializer_list<DataType>{DataType::kF32},
                          kHybridBf16Tolerance);
  }
}

TEST(TensorParallelTest, EachRankHoldsItsShareOfTheKvPoolAndWeights) {
  const auto model = TinyModel(TinyDenseArch::kLlama, 256, "tp_share.gguf");
  ASSERT_NE(model, nullptr);
  auto one = MakeRunner(*model, DataType::kBf16, 1);
  auto two = MakeRunner(*model, DataType::kBf16, 2);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const auto& tp = static_cast<const TensorParallelRunner&>(*two);
  EXPECT_EQ(tp.kv_pool().num_blocks, kBlocks);
  EXPECT_EQ(tp.rank(0).kv_pool().bytes * 2, one->kv_pool().bytes);
  EXPECT_EQ(tp.rank(1).kv_pool().bytes * 2, one->kv_pool().bytes);
  // Replicated embedding/head and norms: each rank holds more than half, less than all.
  const int64_t whole = static_cast<const CudaModelRunner&>(*one).device_weights().bytes;
  EXPECT_LT(tp.rank(0).device_weights().bytes, whole);
  EXPECT_GT(tp.rank(0).device_weights().bytes * 2, whole);
  // Row-parallel projections are partial sums; column-parallel ones are not.
  const WeightDeclaration& w = model->plan.weights;  // the ranks' plans number weights alike
  EXPECT_TRUE(tp.rank(0).device_weights()[w.Find("blk.0.attn_output.weight")].partial_sum);
  EXPECT_TRUE(tp.rank(1).device_weights()[w.Find("blk.1.ffn_down.weight")].partial_sum);
  EXPECT_FALSE(tp.rank(1).device_weights()[w.Find("blk.1.ffn_down.weight") - 1].partial_sum);
}

TEST(TensorParallelTest, ModelsThatDoNotShardAreOneLineErrors) {
  const auto model = TinyModel(TinyDenseArch::kLlama, 256, "tp_refuse.gguf");
  ASSERT_NE(model, nullptr);
  const auto three = ShardModelConfig(model->config, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().message(),
            "--tensor-parallel 3: the model's 4 attention heads do not divide into 3 equal shares");
  model::ModelConfig gqa = model->config;
  gqa.num_kv_heads = 2;
  const auto four = ShardModelConfig(gqa, 4);
  ASSERT_FALSE(four.ok());
  EXPECT_EQ(four.status().message(),
            "--tensor-parallel 4: the model's 2 KV heads do not divide into 4 equal shares");
  model::ModelConfig moe = model->config;
  moe.hybrid.emplace();
  moe.hybrid->moe = model::MoeDims{.num_experts = 8, .num_experts_used = 2,
                                   .expert_ffn_size = 24, .shared_expert_ffn_size = 64};
  const auto experts = ShardModelConfig(moe, 16);
  ASSERT_FALSE(experts.ok());
  EXPECT_EQ(experts.status().message(),
            "--tensor-parallel 16: the model's 24 expert FFN columns do not divide into 16 equal "
            "shares");
}

// Sums of 3 ranks' bf16 buffers: every rank ends with the same bits, the f32 chain
// ((r0 + r1) + r2) rounded once; later sums on the same group work (f32 values whose sum
// depends on the order); Abort wakes a waiter.
TEST(InProcessCommunicatorTest, SumsInRankOrderAndEveryRankHoldsTheSameBits) {
  constexpr int kRanks = 3, kCount = 37;
  std::vector<std::unique_ptr<device::EmulatedDeviceRuntime>> runtimes;
  std::vector<device::EmulatedDeviceRuntime*> raw;
  for (int r = 0; r < kRanks; ++r) {
    runtimes.push_back(std::make_unique<device::EmulatedDeviceRuntime>(uint64_t{1} << 20,
                                                                       simt::Schedule{}));
    raw.push_back(runtimes.back().get());
  }
  auto comms = MakeInProcessCommunicators(raw);
  std::vector<std::vector<uint16_t>> data(kRanks, std::vector<uint16_t>(kCount));
  std::vector<float> expected(kCount);
  for (int i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int r = 0; r < kRanks; ++r) {
      data[r][i] = util::FloatToBf16(1.0f / (1 + i + 7 * r) * (r % 2 ? -1.0f : 3.0f) + 100.0f * r);
      sum = r == 0 ? util::Bf16ToFloat(data[r][i]) : sum + util::Bf16ToFloat(data[r][i]);
    }
    expected[i] = util::Bf16ToFloat(util::FloatToBf16(sum));
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        results[r] = comms[r]->AllReduceSum(data[r].data(), kCount, DataType::kBf16);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
    for (int r = 1; r < kRanks; ++r) EXPECT_EQ(data[r], data[0]) << "rank " << r;
    if (round == 0) {
      for (int i = 0; i < kCount; ++i) EXPECT_EQ(util::Bf16ToFloat(data[0][i]), expected[i]) << i;
    }
  }
  // f32, where the order shows: ((1e8 + 1) - 1e8) is 0, the other orders give 1.
  std::vector<std::vector<float>> wide(kRanks, std::vector<float>(kCount));
  for (int i = 0; i < kCount; ++i) {
    wide[0][i] = 1e8f * static_cast<float>(i + 1);
    wide[1][i] = 1.0f + static_cast<float>(i % 3);
    wide[2][i] = -wide[0][i];
    expected[i] = (wide[0][i] + wide[1][i]) + wide[2][i];
  }
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        EXPECT_TRUE(comms[r]->AllReduceSum(wide[r].data(), kCount, DataType::kF32).ok());
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(wide[0], expected);
  EXPECT_EQ(wide[2], expected);
  absl::Status waiting;
  std::thread waiter([&] { waiting = comms[0]->AllReduceSum(data[0].data(), kCount,
                                                            DataType::kBf16); });
  comms[2]->Abort();
  waiter.join();
  EXPECT_EQ(waiting.code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace tessera::worker::testing

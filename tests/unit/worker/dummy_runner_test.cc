// `--load-format dummy` through the runner factory on the emulated device (worker/runner_factory.h,
// worker/cuda/dummy_model_weights.h): the `tiny` shape's runner takes a prefill and decode steps
// with finite logits, every tensor is on the device, the weights are a function of the seed
// (two builds with one seed give the same logits bit for bit, another seed others), and the
// flag errors are one line naming the problem.
#include <cmath>
#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/runner_factory.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

RunnerFlags DummyFlags(uint64_t seed) {
  RunnerFlags flags;
  flags.device = "emulated";
  flags.load_format = "dummy";
  flags.dummy_shape = "tiny";
  flags.dummy_seed = seed;
  flags.block_size = 16;
  flags.num_kv_blocks = 8;
  flags.max_num_seqs = 2;
  flags.max_num_batched_tokens = 32;
  flags.emulated_memory_mb = 128;
  return flags;
}

BuiltRunner Build(const RunnerFlags& flags) {
  absl::StatusOr<BuiltRunner> built = BuildDummyRunner(flags);
  EXPECT_TRUE(built.ok()) << built.status();
  return built.ok() ? *std::move(built) : BuiltRunner{};
}

// The last-token logits of a 7-token prompt on slot 0.
std::vector<float> PromptLogits(ModelRunner& runner) {
  const std::vector<int32_t> prompt = {1, 17, 300, 5, 511, 42, 9};
  const std::vector<int32_t> table = {1};
  const SequenceWork work{.tokens = prompt, .start_pos = 0, .block_table = table,
                          .needs_logits = true, .slot = 0};
  StepLogits logits;
  const absl::Status status = runner.Forward({&work, 1}, &logits);
  EXPECT_TRUE(status.ok()) << status;
  return logits.values;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DummyRunner, TinyShapeRunsWithFiniteLogitsAndEveryTensorOnTheDevice) {
  BuiltRunner built = Build(DummyFlags(7));
  ASSERT_NE(built.runner, nullptr);
  EXPECT_THAT(built.description, StartsWith("cuda: emulated"));
  ASSERT_TRUE(built.synthetic.has_value());
  EXPECT_EQ(built.synthetic->eos_token_id, 2);
  const model::ModelConfig& c = built.runner->config();
  EXPECT_EQ(c.vocab_size, 512);
  // bf16 tensors: embedding + separate head, final norm, and per layer two norms, q/k/v biases
  // and the seven matrices; then the f32 RoPE table [context, rope_dim / 2, 2].
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t layer = 2 * c.hidden_size + q + 2 * kv + 2 * q * c.hidden_size +
                        2 * kv * c.hidden_size + 3 * int64_t{c.ffn_size} * c.hidden_size;
  const int64_t elements = 2 * int64_t{c.vocab_size} * c.hidden_size + c.hidden_size +
                           c.num_layers * layer;
  EXPECT_EQ(built.weights_bytes, 2 * elements + int64_t{c.context_length} * c.rope_dim * 4);

  const std::vector<float> logits = PromptLogits(*built.runner);
  ASSERT_EQ(logits.size(), 512u);
  float spread = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(v - logits[0]));
  }
  EXPECT_GT(spread, 0.0f);  // not a constant row

  // Then sampled decode steps continue the sequence.
  ModelRunner& runner = *built.runner;
  std::vector<int32_t> tokens = {1, 17, 300, 5};
  const std::vector<int32_t> table = {1};
  runner.BeginSequence(1, {.temperature = 0.0f}, tokens, {});
  StepSamples samples;
  for (int step = 0; step < 4; ++step) {
    const int start = step == 0 ? 0 : static_cast<int>(tokens.size()) - 1;
    const SequenceWork work{.tokens = std::span<const int32_t>(tokens).subspan(start),
                            .start_pos = start, .block_table = table, .needs_logits = true,
                            .slot = 1};
    const absl::Status status = runner.Step({&work, 1}, &samples);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(samples.rows.size(), 1u);
    ASSERT_GE(samples.rows[0].token, 0);
    ASSERT_LT(samples.rows[0].token, 512);
    tokens.push_back(samples.rows[0].token);
  }
  runner.EndSequence(1);
}

TEST(DummyRunner, WeightsAreAFunctionOfTheSeed) {
  const std::vector<float> first = PromptLogits(*Build(DummyFlags(7)).runner);
  const std::vector<float> again = PromptLogits(*Build(DummyFlags(7)).runner);
  const std::vector<float> other = PromptLogits(*Build(DummyFlags(8)).runner);
  ASSERT_EQ(first.size(), 512u);
  EXPECT_TRUE(SameBits(first, again));
  ASSERT_EQ(other.size(), 512u);
  int equal = 0;
  for (size_t i = 0; i < first.size(); ++i) equal += first[i] == other[i];
  EXPECT_LT(equal, 8);
}

// A hybrid shape (Gated DeltaNet + gated attention + experts): its constants made on the device
// too (ssm_a, dt bias, conv kernels, with their f32 copies); a prefill then decode steps give
// finite logits, and the runner reports its recurrent state.
TEST(DummyRunner, TinyHybridShapeRunsWithFiniteLogits) {
  RunnerFlags flags = DummyFlags(3);
  flags.dummy_shape = "tiny-hybrid";
  BuiltRunner built = Build(flags);
  ASSERT_NE(built.runner, nullptr);
  EXPECT_EQ(built.runner->layer_info().linear_layers, 3);
  EXPECT_GT(built.runner->layer_info().state_bytes_per_sequence, 0);
  ModelRunner& runner = *built.runner;
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<int32_t> tokens = {1, 17, 300, 5, 511, 42, 9};
  runner.BeginSequence(0, greedy, tokens, {});
  const std::vector<int32_t> table = {1};
  for (int step = 0; step < 3; ++step) {
    const size_t start = step == 0 ? 0 : tokens.size() - 1;
    const SequenceWork work{.tokens = std::span<const int32_t>(tokens).subspan(start),
                            .start_pos = static_cast<int32_t>(start), .block_table = table,
                            .needs_logits = true, .slot = 0};
    StepLogits logits;
    ASSERT_TRUE(runner.Forward({&work, 1}, &logits).ok());
    for (float v : logits.values) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
    StepSamples samples;
    ASSERT_TRUE(runner.Step({&work, 1}, &samples).ok());
    tokens.push_back(samples.rows.at(0).token);
  }
}

TEST(DummyRunner, FlagErrorsNameTheProblem) {
  RunnerFlags flags = DummyFlags(0);
  flags.dummy_shape = "llama-9";
  absl::StatusOr<BuiltRunner> built = BuildDummyRunner(flags);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(),
              HasSubstr("--load-format dummy: unknown synthetic model shape 'llama-9' (known: "
                        "llama-3.1-8b, qwen2.5-1.5b, tiny, qwen3-next-80b-a3b-l12, tiny-hybrid)"));

  flags = DummyFlags(0);
  flags.device = "cpu";
  built = BuildDummyRunner(flags);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(),
              HasSubstr("--load-format dummy needs a device backend (--device cuda or "
                        "emulated)"));

  EXPECT_EQ(IsDummyLoadFormat("safetensors").status().message(),
            "unknown --load-format 'safetensors' (expected auto or dummy)");
  EXPECT_FALSE(*IsDummyLoadFormat("auto"));
  EXPECT_TRUE(*IsDummyLoadFormat("dummy"));
}

}  // namespace
}  // namespace tessera::worker

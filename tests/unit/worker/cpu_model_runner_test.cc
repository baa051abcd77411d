// The CPU llama runner on the real default model: batch invariance, chunked prefill, paged
// layouts, determinism, and plan validation (DESIGN.md §6), exact (f32 activations and KV) and
// with the lossy options (int8 activations, f16 KV), which keep every one of these contracts bit
// for bit.
#include "worker/cpu/cpu_model_runner.h"

#include <cstring>
#include <filesystem>
#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/loaded_model.h"
#include "worker/offline_generation.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Numerics {
  MatmulActivations activations;
  kernels::cpu::KvDtype kv_dtype;
};

class CpuModelRunnerTest : public ::testing::TestWithParam<Numerics> {
 protected:
  // Setup errors are recorded, not asserted: every test fails on them in SetUp (tests/README.md).
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kDefaultModel)) {
      setup_error_ = std::string(kDefaultModel) + " is missing: run scripts/fetch_model.sh";
      return;
    }
    auto loaded = LoadModel(kDefaultModel);
    if (!loaded.ok()) {
      setup_error_ = loaded.status().ToString();
      return;
    }
    model_ = loaded->release();
    pool_ = new kernels::cpu::ThreadPool(2);
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }
  static void TearDownTestSuite() {
    delete pool_;
    delete model_;
  }

  std::unique_ptr<CpuModelRunner> MakeRunner(int block_size, int64_t num_blocks) {
    return std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), pool_,
        CpuRunnerOptions{
            .block_size = block_size,
            .num_kv_blocks = num_blocks,
            .activations = GetParam().activations,
            .kv_dtype = GetParam().kv_dtype});
  }

  static inline std::string setup_error_;
  static LoadedModel* model_;
  static kernels::cpu::ThreadPool* pool_;
};

LoadedModel* CpuModelRunnerTest::model_ = nullptr;
kernels::cpu::ThreadPool* CpuModelRunnerTest::pool_ = nullptr;

// Deterministic pseudo-random prompt of `length` ordinary tokens.
std::vector<int32_t> Prompt(int length, int seed) {
  std::vector<int32_t> ids(length);
  for (int i = 0; i < length; ++i) ids[i] = 100 + (seed * 7919 + i * 104729) % 40000;
  return ids;
}

// Runs sequences through `runner` in steps; plan[s] lists sequence s's chunk sizes per step
// (0 = idle that step). Returns each sequence's final logits. Sequence s uses blocks
// [1 + s * blocks_per_seq, ...), optionally in shuffled order.
struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> block_table;
};

std::vector<std::vector<float>> RunPlan(ModelRunner& runner, std::vector<Sequence>& seqs,
                                        const std::vector<std::vector<int>>& chunk_plan) {
  std::vector<int32_t> done(seqs.size(), 0);
  std::vector<std::vector<float>> final_logits(seqs.size());
  const size_t num_steps = chunk_plan[0].size();
  for (size_t step = 0; step < num_steps; ++step) {
    std::vector<SequenceWork> batch;
    std::vector<size_t> owners;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int n = chunk_plan[s][step];
      if (n == 0) continue;
      batch.push_back({.tokens = std::span(seqs[s].tokens).subspan(done[s], n),
                       .start_pos = done[s],
                       .block_table = seqs[s].block_table,
                       .needs_logits = done[s] + n == static_cast<int>(seqs[s].tokens.size())});
      owners.push_back(s);
      done[s] += n;
    }
    StepLogits logits;
    absl::Status status = runner.Forward(batch, &logits);
    EXPECT_TRUE(status.ok()) << status;
    for (size_t r = 0; r < logits.sequence_index.size(); ++r) {
      const size_t s = owners[logits.sequence_index[r]];
      final_logits[s].assign(logits.Row(r).begin(), logits.Row(r).end());
    }
  }
  return final_logits;
}

std::vector<Sequence> MakeSequences(const std::vector<int>& lengths, int block_size,
                                    bool shuffle_blocks) {
  std::vector<Sequence> seqs;
  int32_t next_block = 1;
  for (size_t s = 0; s < lengths.size(); ++s) {
    Sequence seq{.tokens = Prompt(lengths[s], static_cast<int>(s) + 1)};
    const int blocks = (lengths[s] + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) seq.block_table.push_back(next_block++);
    if (shuffle_blocks) std::reverse(seq.block_table.begin(), seq.block_table.end());
    seqs.push_back(std::move(seq));
  }
  return seqs;
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_P(CpuModelRunnerTest, BatchedSequencesMatchEachAloneBitForBit) {
  const std::vector<int> lengths = {1, 5, 17, 33, 70};
  // Alone: each sequence prefilled in one step on a fresh runner.
  std::vector<std::vector<float>> alone;
  for (size_t s = 0; s < lengths.size(); ++s) {
    auto runner = MakeRunner(16, 64);
    std::vector<Sequence> one = {MakeSequences(lengths, 16, false)[s]};
    alone.push_back(RunPlan(*runner, one, {{lengths[s]}})[0]);
  }
  // Together: staggered starts and different chunkings (plan[s] = sequence s's chunk per step),
  // so steps mix several sequences' prefill chunks with single-token steps of others.
  auto runner = MakeRunner(16, 64);
  std::vector<Sequence> seqs = MakeSequences(lengths, 16, /*shuffle_blocks=*/true);
  const std::vector<std::vector<int>> plan = {
      {1, 0, 0, 0, 0},
      {2, 3, 0, 0, 0},
      {8, 8, 1, 0, 0},
      {16, 16, 1, 0, 0},
      {7, 30, 9, 15, 9}};
  std::vector<std::vector<float>> together = RunPlan(*runner, seqs, plan);
  for (size_t s = 0; s < lengths.size(); ++s) {
    EXPECT_TRUE(BitIdentical(alone[s], together[s])) << "sequence " << s;
  }
}

// Greedy generation of several sequences served together, as a continuous-batching engine would:
// sequences arrive at different steps, prefill in chunks of at most `chunk` tokens while others
// decode one token per step. Returns each sequence's generated tokens and every logits row it got.
struct Generated {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

int32_t Argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

std::vector<Generated> GenerateTogether(ModelRunner& runner, std::vector<Sequence>& seqs,
                                        const std::vector<int>& arrival_step, int chunk,
                                        int max_tokens) {
  std::vector<Generated> out(seqs.size());
  std::vector<int32_t> computed(seqs.size(), 0);
  for (int step = 0; step < 200; ++step) {
    std::vector<SequenceWork> batch;
    std::vector<size_t> owners;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t known = static_cast<int32_t>(seqs[s].tokens.size());
      if (step < arrival_step[s] || static_cast<int>(out[s].tokens.size()) == max_tokens) continue;
      const int32_t n = std::min(chunk, known - computed[s]);
      batch.push_back({.tokens = std::span(seqs[s].tokens).subspan(computed[s], n),
                       .start_pos = computed[s],
                       .block_table = seqs[s].block_table,
                       .needs_logits = computed[s] + n == known});
      owners.push_back(s);
      computed[s] += n;
    }
    if (batch.empty()) break;
    StepLogits logits;
    absl::Status status = runner.Forward(batch, &logits);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) break;
    for (size_t r = 0; r < logits.sequence_index.size(); ++r) {
      const size_t s = owners[logits.sequence_index[r]];
      out[s].logits.emplace_back(logits.Row(r).begin(), logits.Row(r).end());
      out[s].tokens.push_back(Argmax(logits.Row(r)));
      seqs[s].tokens.push_back(out[s].tokens.back());
    }
  }
  return out;
}

TEST_P(CpuModelRunnerTest, ContinuousBatchOfMixedPrefillAndDecodeMatchesAloneBitForBit) {
  const std::vector<int> lengths = {3, 9, 20, 31, 52};
  const int max_tokens = 8;
  const int block_size = 16;
  auto grow_tables = [&](std::vector<Sequence>& seqs) {  // room for the generated tokens
    int32_t next = 1;
    for (Sequence& s : seqs) {
      const int blocks = (static_cast<int>(s.tokens.size()) + max_tokens + block_size - 1) /
                         block_size;
      s.block_table.clear();
      for (int b = 0; b < blocks; ++b) s.block_table.push_back(next++);
    }
  };
  std::vector<Generated> alone;
  for (size_t s = 0; s < lengths.size(); ++s) {
    auto runner = MakeRunner(block_size, 64);
    std::vector<Sequence> one = {MakeSequences(lengths, block_size, false)[s]};
    grow_tables(one);
    alone.push_back(GenerateTogether(*runner, one, {0}, /*chunk=*/1000, max_tokens)[0]);
  }
  auto runner = MakeRunner(block_size, 64);
  std::vector<Sequence> seqs = MakeSequences(lengths, block_size, false);
  grow_tables(seqs);
  std::vector<Generated> together =
      GenerateTogether(*runner, seqs, /*arrival_step=*/{0, 1, 2, 4, 6}, /*chunk=*/8, max_tokens);
  for (size_t s = 0; s < lengths.size(); ++s) {
    EXPECT_EQ(alone[s].tokens, together[s].tokens) << "sequence " << s;
    ASSERT_EQ(alone[s].logits.size(), together[s].logits.size()) << "sequence " << s;
    for (size_t t = 0; t < alone[s].logits.size(); ++t) {
      EXPECT_TRUE(BitIdentical(alone[s].logits[t], together[s].logits[t]))
          << "sequence " << s << " token " << t;
    }
  }
}

TEST_P(CpuModelRunnerTest, ChunkedPrefillEqualsOneShotBitForBit) {
  const int length = 45;
  auto one_shot_runner = MakeRunner(16, 8);
  std::vector<Sequence> seq = MakeSequences({length}, 16, false);
  const std::vector<float> one_shot = RunPlan(*one_shot_runner, seq, {{length}})[0];
  for (int chunk : {1, 7, 16}) {
    std::vector<int> steps;
    for (int done = 0; done < length; done += chunk) steps.push_back(std::min(chunk, length - done));
    auto runner = MakeRunner(16, 8);
    std::vector<Sequence> fresh = MakeSequences({length}, 16, false);
    EXPECT_TRUE(BitIdentical(one_shot, RunPlan(*runner, fresh, {steps})[0])) << "chunk " << chunk;
  }
}

TEST_P(CpuModelRunnerTest, BlockSizeDoesNotChangeLogits) {
  const int length = 23;
  std::vector<std::vector<float>> results;
  for (int block_size : {1, 16, 7}) {
    auto runner = MakeRunner(block_size, 64);
    std::vector<Sequence> seq = MakeSequences({length}, block_size, /*shuffle_blocks=*/true);
    results.push_back(RunPlan(*runner, seq, {{length}})[0]);
  }
  EXPECT_TRUE(BitIdentical(results[0], results[1]));
  EXPECT_TRUE(BitIdentical(results[0], results[2]));
}

TEST_P(CpuModelRunnerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  GenerationRequest request{.prompt = Prompt(12, 3), .max_tokens = 24};
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 42;
  auto generate = [&](uint64_t seed) {
    auto runner = MakeRunner(16, 8);
    GenerationRequest r = request;
    r.sampling.seed = seed;
    auto result = GenerateOffline(*runner, r, nullptr);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  };
  const std::vector<int32_t> first = generate(42);
  EXPECT_EQ(first, generate(42));
  EXPECT_NE(first, generate(43));
}

TEST_P(CpuModelRunnerTest, RejectsBadPlansNamingTheField) {
  auto runner = MakeRunner(16, 4);
  std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<int32_t> blocks = {1};
  StepLogits logits;
  std::vector<int32_t> bad_token = {1, 49152};
  SequenceWork work{.tokens = bad_token, .start_pos = 0, .block_table = blocks};
  EXPECT_THAT(runner->Forward({&work, 1}, &logits).message(), HasSubstr("token id 49152"));
  work = {.tokens = tokens, .start_pos = 15, .block_table = blocks};
  EXPECT_THAT(runner->Forward({&work, 1}, &logits).message(), HasSubstr("block_table has 1"));
  std::vector<int32_t> null_block = {0};
  work = {.tokens = tokens, .start_pos = 0, .block_table = null_block};
  EXPECT_THAT(runner->Forward({&work, 1}, &logits).message(), HasSubstr("null block"));
  std::vector<int32_t> far_block = {4};
  work = {.tokens = tokens, .start_pos = 0, .block_table = far_block};
  EXPECT_THAT(runner->Forward({&work, 1}, &logits).message(), HasSubstr("block id 4"));
  work = {.tokens = tokens, .start_pos = 8190, .block_table = blocks};
  EXPECT_THAT(runner->Forward({&work, 1}, &logits).message(), HasSubstr("exceed the context"));
}

// CpuRunnerOptions::isa really selects the kernel copies: AVX2 and AVX-512 agree bit for bit
// (kernels/cpu/isa.h), the scalar copy (no FMA) differs in the last bits — so a runner ignoring
// the option, always running the best ISA, fails here.
TEST_P(CpuModelRunnerTest, IsaOptionSelectsTheKernelCopies) {
  std::vector<std::vector<float>> logits;
  for (kernels::cpu::Isa isa : kernels::cpu::SupportedIsas()) {
    CpuModelRunner runner(model_->config, &model_->plan, model_->weights.get(), pool_,
                          CpuRunnerOptions{.block_size = 16,
                                           .num_kv_blocks = 8,
                                           .activations = GetParam().activations,
                                           .kv_dtype = GetParam().kv_dtype,
                                           .isa = isa});
    ASSERT_EQ(runner.isa(), isa);
    std::vector<Sequence> seqs = MakeSequences({40}, 16, false);
    logits.push_back(RunPlan(runner, seqs, {{40}})[0]);
  }
  const std::vector<kernels::cpu::Isa> isas = kernels::cpu::SupportedIsas();
  ASSERT_EQ(isas.front(), kernels::cpu::Isa::kScalar);
  for (size_t i = 1; i < isas.size(); ++i) {
    SCOPED_TRACE(std::string(kernels::cpu::IsaName(isas[i])));
    EXPECT_FALSE(BitIdentical(logits[0], logits[i])) << "scalar and SIMD logits are identical";
    EXPECT_TRUE(BitIdentical(logits[1], logits[i])) << "AVX2 and AVX-512 logits differ";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Numerics, CpuModelRunnerTest,
    ::testing::Values(Numerics{MatmulActivations::kF32, kernels::cpu::KvDtype::kF32},
                      Numerics{MatmulActivations::kInt8, kernels::cpu::KvDtype::kF32},
                      Numerics{MatmulActivations::kF32, kernels::cpu::KvDtype::kF16}),
    [](const ::testing::TestParamInfo<Numerics>& info) {
      return std::string(MatmulActivationsName(info.param.activations)) + "_kv_" +
             std::string(KvDtypeName(info.param.kv_dtype));
    });

}  // namespace
}  // namespace tessera::worker

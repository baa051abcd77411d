// The cuda runner (the same runner code on the emulated device and on a GPU) against the cpu
// backend on a tiny model: greedy tokens follow the cpu backend's (exactly in f32 on the emulated
// device; under the margin rule of tests/testing/greedy_comparison.h on a GPU, and in bf16),
// bf16 stays within a measured KL bound (quantized projections packed and dequantized), quantized
// projections stay packed at their formats' sizes, graph replay equals eager for every bucket, padding rows
// change nothing, batch-invariant mode is bit-exact, device sampling is deterministic across
// preemption, and bad configurations fail with one clear error. The device is the fixture's
// (cuda_runner_fixture.h): cuda_model_runner_test emulated, gpu_cuda_model_runner_test the GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "tests/testing/greedy_comparison.h"
#include "tests/unit/worker/cuda_runner_fixture.h"
#include "tests/unit/worker/position_logits.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda/device_model_weights.h"
#include "worker/models/rope_params.h"

namespace tessera::worker::testing {
namespace {

using device::DataType;
using testing_util::GreedyTolerance;

std::vector<SimRequest> MixedRequests() {
  return {
      {.prompt = CudaRunnerTest::Prompt(1, 1), .max_tokens = 9},
      {.prompt = CudaRunnerTest::Prompt(17, 2), .max_tokens = 7, .arrival_step = 2, .chunk = 6},
      {.prompt = CudaRunnerTest::Prompt(40, 3), .max_tokens = 5, .arrival_step = 3, .chunk = 16},
  };
}

// The same requests asking for the top-2 logprobs the margin rule reads.
std::vector<SimRequest> WithTop2(std::vector<SimRequest> requests) {
  for (SimRequest& r : requests) r.sampling.set_top_logprobs(2);
  return requests;
}

// A served request as the margin rule sees it: each token, its logprob and its top logprobs.
std::vector<testing_util::GreedyToken> GreedyTokens(const SimRequest& request) {
  std::vector<testing_util::GreedyToken> out;
  for (size_t t = 0; t < request.tokens.size(); ++t) {
    testing_util::GreedyToken token{.token_id = request.tokens[t], .logprob = request.logprobs[t]};
    for (const v1::TopLogprob& top : request.sampled[t].top_logprobs()) {
      token.top.emplace_back(top.token_id(), top.logprob());
    }
    out.push_back(std::move(token));
  }
  return out;
}

// `got`'s greedy tokens against the cpu backend's `expected` under the margin rule, printing what
// each request measured (tests/README.md, "cuda against cpu", records these lines).
void ExpectGreedyAgreement(const std::vector<SimRequest>& expected,
                           const std::vector<SimRequest>& got, const GreedyTolerance& tolerance,
                           const char* what) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const testing_util::GreedyComparison result = testing_util::CompareGreedyRuns(
        GreedyTokens(expected[i]), GreedyTokens(got[i]), tolerance);
    std::printf("%s, request %zu: %d positions compared, max |dlogprob| %.3g, min top-2 margin "
                "%.3g, diverged at %d\n",
                what, i, result.compared, result.max_logprob_diff, result.min_margin,
                result.diverged_at);
    EXPECT_EQ(result.mismatch, "") << what << ", request " << i;
  }
}

TEST_F(CudaRunnerTest, F32ServesTheCpuBackendsGreedyTokens) {
  auto cpu = MakeCpuRunner();
  auto cuda = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(cuda, nullptr);
  const std::vector<SimRequest> expected = Serve(*cpu, WithTop2(MixedRequests()), 4);
  const std::vector<SimRequest> got = Serve(*cuda, WithTop2(MixedRequests()), 4);
  if (!kOnGpu) {  // the emulated device sums as the cpu backend does: the very same tokens
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
      ASSERT_EQ(got[i].logprobs.size(), expected[i].logprobs.size());
      for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
        EXPECT_NEAR(got[i].logprobs[t], expected[i].logprobs[t], 1e-4) << i << "/" << t;
      }
    }
  }
  ExpectGreedyAgreement(expected, got, testing_util::kCudaF32Tolerance, "f32");
  EXPECT_GT(cuda->graphs().replays(), 0);  // steady decode replays graphs
}

// bf16 rounds weights, activations and KV: the cpu backend's tokens hold under the margin rule
// with the bf16 bounds, on longer generations than the f32 case.
TEST_F(CudaRunnerTest, Bf16FollowsTheCpuBackendsGreedyTokensUnderTheMarginRule) {
  std::vector<SimRequest> requests = MixedRequests();
  requests.push_back({.prompt = Prompt(6, 12), .max_tokens = 24});
  requests.push_back({.prompt = Prompt(23, 13), .max_tokens = 24, .arrival_step = 2});
  auto cpu = MakeCpuRunner();
  auto cuda = MakeCudaRunner({.dtype = DataType::kBf16});
  ASSERT_NE(cuda, nullptr);
  const std::vector<SimRequest> expected = Serve(*cpu, WithTop2(requests), 8);
  const std::vector<SimRequest> got = Serve(*cuda, WithTop2(requests), 8);
  ExpectGreedyAgreement(expected, got, testing_util::kCudaBf16Tolerance, "bf16");
}

// Mean KL(cpu f32 || cuda bf16) per position, in nats, at most (and at most 1/50 of what a 28%
// corruption of the final hidden state gives on the model's logits).
constexpr double kMaxBf16Kl = 2e-3;

TEST_F(CudaRunnerTest, LogitsAgainstCpuF32ExactishBf16WithinKlBound) {
  const std::vector<int32_t> prompt = Prompt(48, 9);
  auto cpu = MakeCpuRunner();
  const auto reference = PositionLogits(*cpu, prompt, kNumBlocks);
  // The KL bound is scaled to the logits' spread (a tiny random model's are nearly flat, so a
  // fixed bound would pass gross errors): a final hidden state off by 28% (logits x 1.28) gives
  // `corrupted_kl`, and bf16 must stay 50x below that (and below the absolute 2e-3).
  const double corrupted_kl = MeanKl(reference, ScaledLogits(reference, 1.28f));
  const double kl_bound = std::min(kMaxBf16Kl, corrupted_kl / 50);
  std::printf("mean KL of a 28%% hidden-state corruption: %.3g nats; bf16 bound %.3g\n",
              corrupted_kl, kl_bound);
  auto f32 = MakeCudaRunner({.dtype = DataType::kF32, .graphs = CudaGraphMode::kOff});
  ASSERT_NE(f32, nullptr);
  const LogitDiffs f32_diffs = MaxDiffs(reference, PositionLogits(*f32, prompt, kNumBlocks));
  std::printf("over %zu positions: f32 max |dlogit| %.3g, max |dlogprob| %.3g; cpu min top-2 "
              "margin %.3g\n",
              reference.size(), f32_diffs.logit, f32_diffs.logprob, f32_diffs.min_margin);
  // Within the margin rule's bounds on both devices (greedy_comparison.h, measured here).
  EXPECT_LT(f32_diffs.logit, testing_util::kCudaF32Tolerance.logprob);
  EXPECT_LT(f32_diffs.logprob, testing_util::kCudaF32Tolerance.logprob);
  // bf16 with the quantized projections packed (the default) and dequantized to bf16.
  for (const bool packed : {true, false}) {
    auto bf16 = MakeCudaRunner({.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff,
                                .keep_weights_packed = packed});
    ASSERT_NE(bf16, nullptr);
    const auto bf16_logits = PositionLogits(*bf16, prompt, kNumBlocks);
    const LogitDiffs bf16_diffs = MaxDiffs(reference, bf16_logits);
    const double kl = MeanKl(reference, bf16_logits);
    std::printf("bf16 %s: max |dlogit| %.3g, max |dlogprob| %.3g, mean KL(cpu f32 || cuda bf16) "
                "%.3g nats\n",
                packed ? "packed" : "dequantized", bf16_diffs.logit, bf16_diffs.logprob, kl);
    EXPECT_LT(bf16_diffs.logprob, testing_util::kCudaBf16Tolerance.logprob);
    EXPECT_LT(kl, kl_bound);
  }
}

// Dense weights decoded on the device at load (the GGUF rows uploaded, kernels/cuda/dequantize.cuh)
// hold the bits the host's decode and bf16 rounding give: every matrix of the tiny model (Q8_0,
// Q4_1, F16) uploaded both ways and read back.
TEST_F(CudaRunnerTest, DenseWeightsDecodedOnTheDeviceAreTheHostsBits) {
  auto runtime = device::OpenDevice(TestDeviceOptions());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto kernels = MakeDeviceKernels(**runtime);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  const LoadedModel& m = *model_;
  const kernels::cpu::RopeTable rope(
      RopeParamsForModel(m.config, (*m.weights)[m.plan.head.rope_freqs].values),
      m.config.context_length);
  auto upload = [&](DeviceKernels* on_device) {
    auto w = UploadModelWeights(**runtime, m.plan.weights, *m.weights, rope, DataType::kBf16,
                                {.keep_packed = false, .file = m.file.get(), .kernels = on_device});
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  };
  const auto device = upload(kernels->get());
  const auto host = upload(nullptr);
  ASSERT_NE(device, nullptr);
  ASSERT_NE(host, nullptr);
  // The host upload (no kernels: no decode on the device) makes no concatenation; the device
  // one concatenates q/k/v and gate/up, whose bits are the host's parts back to back.
  const auto host_bits = [&](WeightId id) {
    const WeightSpec& spec = m.plan.weights.spec(id);
    std::vector<uint16_t> bits;
    for (const WeightId part : spec.parts.empty() ? std::vector<WeightId>{id} : spec.parts) {
      std::vector<uint16_t> rows(m.plan.weights.spec(part).elements());
      EXPECT_TRUE(
          (*runtime)->CopyToHost(rows.data(), (*host)[part].data, rows.size() * 2).ok());
      bits.insert(bits.end(), rows.begin(), rows.end());
    }
    return bits;
  };
  int compared = 0, concatenations = 0;
  for (WeightId id = 0; id < m.plan.weights.size(); ++id) {
    const WeightSpec& spec = m.plan.weights.spec(id);
    if (spec.role == WeightRole::kDense || !(*device)[id].present()) continue;
    std::vector<uint16_t> a(spec.elements());
    ASSERT_TRUE((*runtime)->CopyToHost(a.data(), (*device)[id].data, a.size() * 2).ok());
    EXPECT_EQ(a, host_bits(id)) << spec.name;
    ++compared;
    concatenations += spec.parts.empty() ? 0 : 1;
  }
  EXPECT_EQ(compared, 9);  // the embedding (the tied head); [q|k|v], o, [gate|up], down x 2
  EXPECT_EQ(concatenations, 4);
}

// An untied model's Q8_0 embedding table (tiny_model.h) stays in its GGUF rows on the device,
// decoded by the lookup (bit for bit the cpu decoder's values, rounded once to bf16 as the dense
// upload rounds them): the packed runner's logits are the cpu runner's within the bf16 bounds,
// and the table takes the file's bytes, not 2 per weight.
TEST(CudaRunnerUntiedTest, AQuantizedEmbeddingTableStaysInItsRows) {
  if (kOnGpu && device::OpenDevice(TestDeviceOptions()).status().code() ==
                    absl::StatusCode::kUnavailable) {
    testing_util::SkipOrFailWithoutGpu("no GPU");
    return;
  }
  LoadedModel* raw = nullptr;
  const std::string error = WriteAndLoadTinyModel(
      {.num_layers = 2, .hidden = 128, .num_heads = 2, .num_kv_heads = 1, .ffn = 256,
       .context_length = 128, .seed = 12, .tied_embeddings = false},
      "cuda_runner_untied.gguf", &raw);
  ASSERT_TRUE(error.empty()) << error;
  const std::unique_ptr<LoadedModel> model(raw);
  const WeightId table = model->plan.weights.Find("token_embd.weight");
  ASSERT_EQ(model->plan.weights.spec(table).role, WeightRole::kEmbedding);
  kernels::cpu::ThreadPool pool(2);
  CpuModelRunner cpu(model->config, &model->plan, model->weights.get(), &pool,
                     {.block_size = kBlockSize, .num_kv_blocks = kNumBlocks, .max_num_seqs = 1});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(3 + (i * 7919) % (model->config.vocab_size - 3));
  const auto reference = PositionLogits(cpu, prompt, kNumBlocks);
  for (const bool packed : {true, false}) {
    auto runtime = device::OpenDevice(TestDeviceOptions());
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    auto runner = CudaModelRunner::Create(
        *std::move(runtime), model->config, model->plan, *model->weights,
        {.dtype = DataType::kBf16, .block_size = kBlockSize, .num_kv_blocks = kNumBlocks,
         .max_num_seqs = 1, .graphs = CudaGraphMode::kOff, .keep_weights_packed = packed});
    ASSERT_TRUE(runner.ok()) << runner.status();
    const DeviceWeight& embedding = (*runner)->device_weights()[table];
    const gguf::GgufTensorInfo* info = model->file->FindTensor("token_embd.weight");
    ASSERT_EQ(info->type, gguf::GgmlType::kQ8_0);
    if (packed) {
      EXPECT_EQ(embedding.table_format, cuda::GgufFormat::kQ8_0);
      EXPECT_EQ(embedding.bytes, static_cast<int64_t>(info->num_bytes));
    } else {
      EXPECT_FALSE(embedding.table_format.has_value());
      EXPECT_EQ(embedding.bytes, static_cast<int64_t>(info->num_elements) * 2);
    }
    const auto logits = PositionLogits(**runner, prompt, kNumBlocks);
    const LogitDiffs diffs = MaxDiffs(reference, logits);
    std::printf("untied, bf16 %s: max |dlogprob| %.3g, mean KL %.3g\n",
                packed ? "packed" : "dequantized", diffs.logprob, MeanKl(reference, logits));
    EXPECT_LT(diffs.logprob, testing_util::kCudaBf16Tolerance.logprob);
    EXPECT_LT(MeanKl(reference, logits),
              std::min(kMaxBf16Kl, MeanKl(reference, ScaledLogits(reference, 1.28f)) / 50));
  }
}

// The tiny model's Q4_1 and Q8_0 projections (tiny_model.h: attention Q4_1 in layer 0 and Q8_0
// in layer 1, the FFN F16 in layer 0 and Q4_1 in layer 1) stay packed at their formats' sizes,
// 20 and 34 bytes per 32 weights, q/k/v and gate/up each concatenated into one matrix; the tied
// embedding / output head (f32 logits) and the F16 matrices are bf16. Not in f32, the
// batch-invariant mode or when asked to dequantize.
TEST_F(CudaRunnerTest, QuantizedProjectionsStayPackedAtTheirFormatsSizes) {
  auto storage_of = [](const CudaModelRunner& runner, const std::string& format, bool packed) {
    for (const WeightStorage& s : runner.device_weights().formats) {
      if (s.format == format && s.packed == packed) return s;
    }
    return WeightStorage{};
  };
  auto packed = MakeCudaRunner({.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff});
  ASSERT_NE(packed, nullptr);
  const WeightStorage q4_1 = storage_of(*packed, "q4_1", true);
  const WeightStorage q8_0 = storage_of(*packed, "q8_0", true);
  const WeightStorage bf16 = storage_of(*packed, "bf16", false);
  EXPECT_EQ(q4_1.tensors, 4);  // layer 0: [q|k|v], o; layer 1: [gate|up], down
  EXPECT_EQ(q8_0.tensors, 2);  // layer 1: [q|k|v], o
  EXPECT_EQ(bf16.tensors, 4);
  EXPECT_EQ(q4_1.bytes * 32, q4_1.parameters * 20);  // 0.625 bytes per weight
  EXPECT_EQ(q8_0.bytes * 32, q8_0.parameters * 34);
  EXPECT_EQ(bf16.bytes, bf16.parameters * 2);
  EXPECT_EQ(packed->device_weights().formats.size(), 3u);
  std::printf("packed: q4_1 %.4f B/weight over %lld weights, q8_0 %.4f, bf16 %.4f\n",
              q4_1.bytes_per_parameter(), static_cast<long long>(q4_1.parameters),
              q8_0.bytes_per_parameter(), bf16.bytes_per_parameter());

  for (const CudaRunnerOptions& options :
       {CudaRunnerOptions{.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff,
                          .keep_weights_packed = false},
        CudaRunnerOptions{.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff,
                          .batch_invariant = true},
        CudaRunnerOptions{.dtype = DataType::kF32, .graphs = CudaGraphMode::kOff}}) {
    auto dense = MakeCudaRunner(options);
    ASSERT_NE(dense, nullptr);
    ASSERT_EQ(dense->device_weights().formats.size(), 1u);
    const WeightStorage& all = dense->device_weights().formats[0];
    EXPECT_FALSE(all.packed);
    EXPECT_EQ(all.parameters, q4_1.parameters + q8_0.parameters + bf16.parameters);
    EXPECT_GT(dense->device_weights().bytes, packed->device_weights().bytes);
  }
}

// --cuda-packed-stream-grid reaches the runner, and its description says which split the batch-1
// packed GEMM takes when it is not the default (a bench row's header names what it measured).
TEST_F(CudaRunnerTest, DescriptionNamesANonDefaultStreamGrid) {
  auto every = MakeCudaRunner({.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff,
                               .packed_stream_grid = cuda::PackedStreamGrid::kEveryResidentBlock});
  auto tile = MakeCudaRunner({.dtype = DataType::kBf16, .graphs = CudaGraphMode::kOff});
  ASSERT_NE(every, nullptr);
  ASSERT_NE(tile, nullptr);
  EXPECT_NE(every->DeviceDescription().find("packed GEMM over every resident block"),
            std::string::npos)
      << every->DeviceDescription();
  EXPECT_EQ(tile->DeviceDescription().find("every resident block"), std::string::npos);
}

// Every layer's K and V pool, copied back and concatenated.
std::vector<float> KvPoolsOnHost(CudaModelRunner& runner) {
  std::vector<float> out;
  for (const device::DeviceMemory& pool : runner.kv_memory()) {
    const size_t at = out.size();
    out.resize(at + pool.bytes() / sizeof(float));
    EXPECT_TRUE(runner.runtime().CopyToHost(out.data() + at, pool.data(), pool.bytes()).ok());
  }
  EXPECT_TRUE(runner.runtime().Synchronize().ok());
  return out;
}

TEST_F(CudaRunnerTest, GraphReplayEqualsEagerForEveryBucketAndPaddingIsInert) {
  constexpr int kMaxSeqs = 12;  // buckets 1, 2, 4, 8, 12
  auto lazy = MakeCudaRunner({.dtype = DataType::kF32, .max_num_seqs = kMaxSeqs});
  auto eager = MakeCudaRunner(
      {.dtype = DataType::kF32, .max_num_seqs = kMaxSeqs, .graphs = CudaGraphMode::kOff});
  ASSERT_NE(lazy, nullptr);
  ASSERT_NE(eager, nullptr);
  for (int rows : {1, 2, 3, 5, 8, 11, 12}) {
    std::vector<SimRequest> reqs;
    for (int i = 0; i < rows; ++i) {
      reqs.push_back({.prompt = Prompt(1 + (i * 5) % 9, 20 + i), .max_tokens = 3});
    }
    const auto replayed = Serve(*lazy, WithTop2(reqs), kMaxSeqs);
    const auto eagerly = Serve(*eager, WithTop2(reqs), kMaxSeqs);
    const std::vector<float> a = KvPoolsOnHost(*lazy), b = KvPoolsOnHost(*eager);
    const size_t bytes = a.size() * sizeof(float);
    if (kOnGpu) {
      // A replay runs the padded row count, eager the batch's: cuBLAS may choose other kernels
      // for the two, so the results are close, not the same bits. Padding rows that wrote K/V
      // would leave whole vectors where the eager pool has zeros, far outside the tolerance.
      ExpectGreedyAgreement(eagerly, replayed, testing_util::kCudaF32Tolerance, "replay");
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::abs(b[i])))
            << rows << " rows: KV pool float " << i;
      }
      continue;
    }
    for (int i = 0; i < rows; ++i) {
      EXPECT_EQ(replayed[i].tokens, eagerly[i].tokens) << rows << " rows, request " << i;
      EXPECT_EQ(replayed[i].logprobs, eagerly[i].logprobs) << rows << " rows, request " << i;
    }
    // Padding rows (3 -> 4, 5 -> 8, 11 -> 12) wrote no K/V: both pools hold the same bytes.
    EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << rows << " rows: the KV pools differ";
  }
  EXPECT_EQ(lazy->graphs().captures(), 5);
  EXPECT_GT(lazy->graphs().replays(), 10);
  EXPECT_EQ(eager->graphs().replays(), 0);
  EXPECT_GT(eager->graphs().misses(GraphMissReason::kDisabled), 0);
}

TEST_F(CudaRunnerTest, EagerModeCapturesEveryBucketAtStartupAndServesFromThem) {
  auto runner = MakeCudaRunner({.dtype = DataType::kBf16, .max_num_seqs = 20,
                                .max_num_batched_tokens = 64, .graphs = CudaGraphMode::kEager});
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->graphs().captures(), 6);  // 1, 2, 4, 8, 16, 20
  // Token buckets 1, 2, 4, 8, 16, 24, ..., 64.
  EXPECT_EQ(runner->graphs().mixed_captures(), 11);
  auto lazy = MakeCudaRunner({.dtype = DataType::kBf16, .max_num_seqs = 20,
                              .max_num_batched_tokens = 64});
  const auto a = Serve(*runner, MixedRequests(), 20);
  const auto b = Serve(*lazy, MixedRequests(), 20);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].logprobs, b[i].logprobs) << i;
  EXPECT_EQ(runner->graphs().captures(), 6);  // nothing captured while serving
  EXPECT_EQ(runner->graphs().mixed_captures(), 11);
  EXPECT_GT(runner->graphs().replays(), 0);
}

// Logits of three prompts alone, together, and the first one chunked 10 + 12 + 1 (the last
// chunk a single token, which default mode sends to the split-K decode kernel).
struct InvarianceLogits {
  std::vector<std::vector<float>> alone, together;
  std::vector<float> chunked;
};

InvarianceLogits RunInvarianceCase(CudaModelRunner& runner) {
  const std::vector<std::vector<int32_t>> prompts = {CudaRunnerTest::Prompt(23, 4),
                                                     CudaRunnerTest::Prompt(1, 5),
                                                     CudaRunnerTest::Prompt(9, 6)};
  std::vector<std::vector<int32_t>> tables(prompts.size());  // disjoint, 8 blocks each
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (int b = 0; b < 8; ++b) tables[s].push_back(1 + static_cast<int>(s) * 8 + b);
  }
  auto logits_of = [&](std::span<const SequenceWork> batch) {
    StepLogits logits;
    const absl::Status status = runner.Forward(batch, &logits);
    EXPECT_TRUE(status.ok()) << status;
    return logits;
  };
  InvarianceLogits out;
  std::vector<SequenceWork> together;
  for (size_t s = 0; s < prompts.size(); ++s) {
    const SequenceWork w = Work(prompts[s], 0, tables[s], true, static_cast<int>(s));
    out.alone.push_back(logits_of({&w, 1}).values);
    together.push_back(w);
  }
  const StepLogits joint = logits_of(together);
  const size_t vocab = joint.vocab_size;
  for (size_t s = 0; s < prompts.size(); ++s) {
    out.together.emplace_back(joint.values.begin() + s * vocab,
                              joint.values.begin() + (s + 1) * vocab);
  }
  int start = 0;
  for (int len : {10, 12, 1}) {
    const std::vector<int32_t> chunk(prompts[0].begin() + start,
                                     prompts[0].begin() + start + len);
    const SequenceWork w = Work(chunk, start, tables[0], start + len == 23, 0);
    out.chunked = logits_of({&w, 1}).values;
    start += len;
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Batch-invariant mode: each sequence's logits are bit-identical whether it runs alone or with
// others, and however its prompt is chunked; in f32 (the CUDA-core GEMM chain) and in bf16 (the
// tensor-core GEMM, whose narrow and wide tiles both serve: steps of 1 to 33 tokens). The control: default mode with a small forced decode split gives different bits for
// the single-token last chunk, so the check can fail.
TEST_F(CudaRunnerTest, BatchInvariantModeIsBitExactAloneTogetherAndChunked) {
  for (DataType dtype : {DataType::kF32, DataType::kBf16}) {
    SCOPED_TRACE(device::DataTypeName(dtype));
    auto invariant = MakeCudaRunner({.dtype = dtype, .batch_invariant = true,
                                     .decode_partition = 8});
    ASSERT_NE(invariant, nullptr);
    const InvarianceLogits got = RunInvarianceCase(*invariant);
    for (size_t s = 0; s < got.alone.size(); ++s) {
      EXPECT_TRUE(SameBits(got.alone[s], got.together[s])) << "sequence " << s;
    }
    EXPECT_TRUE(SameBits(got.chunked, got.alone[0]));
  }

  auto split = MakeCudaRunner({.dtype = DataType::kF32, .decode_partition = 8});
  ASSERT_NE(split, nullptr);
  const InvarianceLogits control = RunInvarianceCase(*split);
  EXPECT_FALSE(SameBits(control.chunked, control.alone[0]))
      << "default mode's decode kernel gave the prefill kernel's bits: the invariance check "
         "above would not catch a non-invariant path";
}

// Seeded stochastic sampling with penalties on the device: the same tokens run after run, and
// a request preempted and re-admitted continues exactly as one never interrupted (Philox draws
// are keyed by (seed, position); penalty counts are rebuilt from the generated tokens).
TEST_F(CudaRunnerTest, DeviceSamplingIsDeterministicAcrossPreemption) {
  v1::SamplingParams sampling = DefaultSampling();
  sampling.set_temperature(0.9f);
  sampling.set_top_k(40);
  sampling.set_top_p(0.95f);
  sampling.set_repetition_penalty(1.3f);
  sampling.set_frequency_penalty(0.5f);
  sampling.set_seed(1234);
  sampling.set_top_logprobs(3);
  const SimRequest request{.prompt = Prompt(13, 7), .sampling = sampling, .max_tokens = 12};
  auto runner = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(runner, nullptr);
  const auto first = Serve(*runner, {request}, 4);
  const auto again = Serve(*runner, {request}, 4);
  EXPECT_EQ(first[0].tokens, again[0].tokens);
  ASSERT_EQ(first[0].sampled.size(), 12u);
  EXPECT_EQ(first[0].sampled[0].top_logprobs_size(), 3);

  StepExecutor executor(runner.get(), {.max_num_seqs = 4});
  SimRouter router(kBlockSize, kNumBlocks, 4);
  const int id = router.Add(request);
  v1::StepResult result;
  bool preempted = false;
  for (int step = 0; step < 200 && !router.Done(); ++step) {
    ASSERT_TRUE(executor.Execute(router.NextPlan(), StepExecutor::Clock::now(), &result).ok());
    ASSERT_TRUE(router.OnResult(result));
    if (!preempted && router.request(id).tokens.size() == 5) {
      router.Preempt(id, /*keep_cached_blocks=*/2);
      preempted = true;
    }
  }
  EXPECT_TRUE(preempted);
  EXPECT_EQ(router.request(id).tokens, first[0].tokens);
}

// A hybrid plan (Gated DeltaNet + MoE layers) runs on the device: it reports its linear layers
// and their state (cuda_hybrid_runner_test checks its numbers), and every sequence needs its own
// state slot.
TEST_F(CudaRunnerTest, AHybridModelRunsWithItsRecurrentStatePerSlot) {
  auto model = LoadModel("tests/data/hybrid/tiny-qwen3next.gguf");
  ASSERT_TRUE(model.ok()) << model.status();
  auto runtime = device::OpenDevice(TestDeviceOptions());
  ASSERT_TRUE(runtime.ok());
  auto runner = CudaModelRunner::Create(*std::move(runtime), (*model)->config, (*model)->plan,
                                        *(*model)->weights,
                                        {.dtype = DataType::kF32, .block_size = kBlockSize,
                                         .num_kv_blocks = kNumBlocks, .max_num_seqs = 2,
                                         .max_num_batched_tokens = 16});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const ModelLayerInfo info = (*runner)->layer_info();
  EXPECT_EQ(info.attention_layers, 1);
  EXPECT_EQ(info.linear_layers, 3);
  EXPECT_EQ(info.state_bytes_per_sequence,
            model::PerSequenceStateBytes((*model)->config.hybrid.value()).total);
  const std::vector<int32_t> tokens = {5, 6}, table = {1};
  const SequenceWork work = Work(tokens, 0, table, true, /*slot=*/2);  // beyond max_num_seqs
  StepLogits logits;
  const absl::Status status = (*runner)->Forward({&work, 1}, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST_F(CudaRunnerTest, UnsupportedHeadDimIsOneClearError) {
  const std::string path = testing_util::UniqueTempPath("cuda_runner_head16.gguf");
  ASSERT_TRUE(convert::WriteTinyLlamaGguf({.num_layers = 1, .hidden = 64, .num_heads = 4,
                                           .num_kv_heads = 2},
                                          path).ok());
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto runtime = device::OpenDevice(TestDeviceOptions());
  ASSERT_TRUE(runtime.ok());
  auto runner = CudaModelRunner::Create(*std::move(runtime), (*model)->config, (*model)->plan,
                                        *(*model)->weights, {});
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(runner.status().message().find("head_dim 16"), std::string::npos)
      << runner.status();
}

// A utilization share of a millionth (256 bytes of the emulated device, 80 KiB of an 80 GiB GPU)
// is below what the weights and buffers already take on either device: no pool can fit.
TEST_F(CudaRunnerTest, TooLittleDeviceMemoryNamesWhatWasNeeded) {
  auto runtime = device::OpenDevice(TestDeviceOptions());
  ASSERT_TRUE(runtime.ok());
  auto runner = CudaModelRunner::Create(*std::move(runtime), config(), model_->plan,
                                        *model_->weights,
                                        {.block_size = kBlockSize,
                                         .gpu_memory_utilization = 1e-6});
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(runner.status().message().find("too little device memory"), std::string::npos)
      << runner.status();
}

// Block tables live on the device per slot: two sequences of one step cannot share a slot.
TEST_F(CudaRunnerTest, ABatchNamingASlotTwiceIsInvalid) {
  auto runner = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(runner, nullptr);
  const std::vector<int32_t> tokens = Prompt(3, 1), a = {1}, b = {2};
  const SequenceWork batch[] = {Work(tokens, 0, a, true, 1), Work(tokens, 0, b, true, 1)};
  StepLogits logits;
  const absl::Status status = runner->Forward(batch, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("batch[1]: slot 1 is used twice"), std::string::npos) << status;
}

TEST_F(CudaRunnerTest, StepRejectsASamplingRowWithoutSamplingState) {
  auto runner = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(runner, nullptr);
  const std::vector<int32_t> tokens = Prompt(3, 1), table = {1};
  const SequenceWork w = Work(tokens, 0, table, true, /*slot=*/2);
  StepSamples samples;
  const absl::Status status = runner->Step({&w, 1}, &samples);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("slot 2"), std::string::npos) << status;
}

}  // namespace
}  // namespace tessera::worker::testing

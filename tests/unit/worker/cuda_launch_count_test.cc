// Kernel launches per decode step of the llama model on the emulated device, where the runtime
// counts every kernel and GEMM it runs (a graph replay counts each launch it holds): the same
// launches a GPU gets, less any split-K reduce cuBLAS adds to a GEMM. Two tiny models that
// differ only in depth (2 and 4 layers) give the count of a pair of layers and the per-step
// constant (embedding, final norm, head, sampling), eager and replayed. The tiny model's layers
// alternate formats (tiny_model.h): the odd layers' packed [gate | up] takes its SwiGlu in the
// GEMM's epilogue, the even layers' dense one a launch of its own. The counts are printed
// (docs/perf/cuda-kernels.md records them) and held to the counts reached, so a fusion undone or
// a launch added shows here (docs/design/kernel-fusions.md lists the fusions).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device/emulated_device_runtime.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/cuda/cuda_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker::testing {
namespace {

// 9 in a layer whose MLP is dense (its SwiGlu a launch), 8 where it is packed (the SwiGlu in the
// gate/up GEMM's epilogue).
constexpr int kLaunchesPerLayerPair = 17;
// The sampler is 4 of them (three split-row passes and the finish, sampling.cuh).
constexpr int kLaunchesPerStep = 12;

struct DecodeLaunches {
  int64_t eager = 0;     // one decode step run eagerly (graphs off)
  int64_t replayed = 0;  // one decode step replaying its graph
};

// Launches of one decode step (batch 1, context 6) on a fresh runner over `model`.
int64_t OneDecodeStep(const LoadedModel& model, CudaGraphMode graphs) {
  auto runtime = device::OpenDevice({.kind = device::DeviceKind::kEmulated,
                                     .emulated_memory_bytes = uint64_t{128} << 20});
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  auto* emulated = dynamic_cast<device::EmulatedDeviceRuntime*>(runtime->get());
  auto runner = CudaModelRunner::Create(*std::move(runtime), model.config, model.plan,
                                        *model.weights,
                                        {.dtype = device::DataType::kBf16, .block_size = 16,
                                         .num_kv_blocks = 8, .max_num_seqs = 4,
                                         .graphs = graphs},
                                        model.file.get());
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok() || emulated == nullptr) return -1;
  CudaModelRunner& r = **runner;
  const std::vector<int32_t> prompt = {5, 9, 12, 3, 7}, table = {1};
  r.BeginSequence(0, {.temperature = 0.0f}, prompt, {});
  StepSamples samples;
  const SequenceWork prefill{.tokens = prompt, .start_pos = 0, .block_table = table,
                             .needs_logits = true, .slot = 0};
  EXPECT_TRUE(r.Step({&prefill, 1}, &samples).ok());
  int64_t launches = -1;
  // Lazy mode captures on the first decode step (a warm-up, then the replay): count the second.
  for (int step = 0; step < 2; ++step) {
    const std::vector<int32_t> token = {samples.rows.at(0).token};
    const SequenceWork decode{.tokens = token, .start_pos = 5 + step, .block_table = table,
                              .needs_logits = true, .slot = 0};
    const int64_t before = emulated->launches();
    EXPECT_TRUE(r.Step({&decode, 1}, &samples).ok());
    launches = emulated->launches() - before;
  }
  // Lazy: the prefill step replays its token bucket piecewise, then the two decode steps.
  EXPECT_EQ(r.graphs().replays(), graphs == CudaGraphMode::kLazy ? 3 : 0);
  return launches;
}

DecodeLaunches CountFor(int num_layers) {
  LoadedModel* model = nullptr;
  const std::string error = WriteAndLoadTinyModel(
      {.num_layers = num_layers, .hidden = 128, .num_heads = 2, .num_kv_heads = 1, .ffn = 256,
       .context_length = 128, .seed = 11},
      "launch_count_" + std::to_string(num_layers) + ".gguf", &model);
  EXPECT_EQ(error, "");
  if (model == nullptr) return {};
  const std::unique_ptr<LoadedModel> owned(model);
  return {OneDecodeStep(*model, CudaGraphMode::kOff), OneDecodeStep(*model, CudaGraphMode::kLazy)};
}

TEST(CudaLaunchCountTest, ADecodeStepStaysWithinItsLaunchBudget) {
  const DecodeLaunches two = CountFor(2), four = CountFor(4);
  for (const auto& [what, shallow, deep] :
       {std::tuple{"eager", two.eager, four.eager},
        std::tuple{"replayed", two.replayed, four.replayed}}) {
    ASSERT_GT(shallow, 0) << what;
    const int64_t per_pair = deep - shallow;  // an even layer and an odd one
    const int64_t per_step = shallow - per_pair;
    std::printf("decode step, %s: %lld launches per pair of layers (dense and packed MLP) + "
                "%lld per step\n",
                what, static_cast<long long>(per_pair), static_cast<long long>(per_step));
    EXPECT_LE(per_pair, kLaunchesPerLayerPair) << what;
    EXPECT_LE(per_step, kLaunchesPerStep) << what;
  }
}

}  // namespace
}  // namespace tessera::worker::testing

// tessera-runner-bench: one model runner driven directly (no router, no gRPC), any backend:
// decode steps at each batch size after a prefill of every sequence, timed per step.
// For each batch size it reports medians of the step wall time, `hostproc` (step entry -> last
// launch), `input` (step entry -> inputs laid out and their one copy issued), the device time
// from events (device backends), and how many steps replayed a CUDA graph.
//
//   tessera-runner-bench --model M.gguf --device cuda --batch 1,8,32,128 --context 512
//
// On the emulated device a launch runs the kernel, so step, hostproc and device times are the
// SIMT emulator's and mean nothing for a GPU; `input` (the host's per-step work before any
// launch) and the graph replays are real there.
// One thread (the caller's); prints a table to stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "worker/loaded_model.h"
#include "worker/runner_factory.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  worker::RunnerFlags runner;
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string batches = "1,8,32,128";
  int context = 512;  // prompt tokens per sequence before the timed decode steps
  int steps = 32;     // timed decode steps per batch size
};

struct BatchResult {
  int batch = 0;
  double step_ms = 0, hostproc_ms = 0, input_ms = 0, device_ms = -1;
  int replays = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Admits `batch` greedy sequences, prefills `context` tokens each, then times decode steps.
BatchResult RunBatch(worker::ModelRunner& runner, int batch, const Options& o) {
  const int bs = runner.kv_pool().block_size;
  const int blocks_per_seq = (o.context + o.steps + bs) / bs;
  std::vector<std::vector<int32_t>> tables(batch), tokens(batch);
  int32_t next_block = 1;
  for (int s = 0; s < batch; ++s) {
    for (int b = 0; b < blocks_per_seq; ++b) tables[s].push_back(next_block++);
    for (int t = 0; t < o.context; ++t) {
      tokens[s].push_back(3 + (s * 7919 + t * 104729) % (runner.config().vocab_size - 3));
    }
    runner.BeginSequence(s, {.temperature = 0.0f}, tokens[s], {});
  }
  worker::StepSamples samples;
  for (int s = 0; s < batch; ++s) {  // prefill, one sequence per step, chunks of 256
    for (int start = 0; start < o.context; start += 256) {
      const int len = std::min(256, o.context - start);
      const worker::SequenceWork w{.tokens = std::span<const int32_t>(tokens[s]).subspan(start, len),
                                   .start_pos = start, .block_table = tables[s],
                                   .needs_logits = start + len == o.context, .slot = s};
      if (!runner.Step({&w, 1}, &samples).ok()) std::abort();
      if (w.needs_logits) tokens[s].push_back(samples.rows[0].token);
    }
  }
  BatchResult r{.batch = batch};
  std::vector<double> wall, host, input, device;
  std::vector<worker::SequenceWork> work(batch);
  for (int step = 0; step < o.steps; ++step) {
    for (int s = 0; s < batch; ++s) {
      const int pos = static_cast<int>(tokens[s].size()) - 1;
      work[s] = {.tokens = std::span<const int32_t>(tokens[s]).subspan(pos, 1), .start_pos = pos,
                 .block_table = tables[s], .needs_logits = true, .slot = s};
    }
    const Clock::time_point start = Clock::now();
    if (!runner.Step(work, &samples).ok()) std::abort();
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    host.push_back(samples.info.launch_seconds * 1e3);
    input.push_back(samples.info.input_seconds * 1e3);
    device.push_back(samples.info.device_seconds * 1e3);
    r.replays += samples.info.graph_replayed ? 1 : 0;
    for (size_t i = 0; i < samples.rows.size(); ++i) {
      tokens[samples.sequence_index[i]].push_back(samples.rows[i].token);
    }
  }
  for (int s = 0; s < batch; ++s) runner.EndSequence(s);
  r.step_ms = Median(wall);
  r.hostproc_ms = Median(host);
  r.input_ms = Median(input);
  r.device_ms = Median(device);
  return r;
}

int Run(const Options& o) {
  auto model = worker::LoadModel(o.model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::vector<int> batches;
  for (absl::string_view piece : absl::StrSplit(o.batches, ',')) {
    int b = 0;
    if (!absl::SimpleAtoi(piece, &b) || b < 1) {
      std::fprintf(stderr, "error: bad --batch '%s'\n", o.batches.c_str());
      return 1;
    }
    batches.push_back(b);
  }
  worker::RunnerFlags flags = o.runner;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int bs = flags.block_size;
  flags.max_num_seqs = std::max(flags.max_num_seqs, max_batch);
  flags.num_kv_blocks = int64_t{max_batch} * ((o.context + o.steps + bs) / bs) + 1;
  auto built = worker::BuildRunner(flags, **model);
  if (!built.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(built.status().message()).c_str());
    return 1;
  }
  std::printf("# %s; context %d, %d decode steps per batch\n", built->description.c_str(),
              o.context, o.steps);
  std::printf("%6s %10s %12s %10s %11s %8s\n", "batch", "step_ms", "hostproc_ms", "input_ms",
              "device_ms", "replays");
  for (int b : batches) {
    const BatchResult r = RunBatch(*built->runner, b, o);
    std::printf("%6d %10.3f %12.3f %10.3f %11.3f %8d\n", r.batch, r.step_ms, r.hostproc_ms,
                r.input_ms, r.device_ms, r.replays);
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::bench::Options o;
  CLI::App app{"tessera-runner-bench: decode step times of one runner, any backend"};
  app.add_option("--model", o.model_path)->capture_default_str();
  app.add_option("--device", o.runner.device)->capture_default_str();
  app.add_option("--dtype", o.runner.dtype);
  app.add_option("--threads", o.runner.threads);
  app.add_option("--cuda-graphs", o.runner.cuda_graphs)->capture_default_str();
  app.add_flag("--batch-invariant", o.runner.batch_invariant);
  app.add_option("--emulated-memory-mb", o.runner.emulated_memory_mb)->capture_default_str();
  app.add_option("--batch", o.batches, "comma-separated batch sizes")->capture_default_str();
  app.add_option("--context", o.context, "prompt tokens per sequence")->capture_default_str();
  app.add_option("--steps", o.steps, "timed decode steps per batch size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(o);
}

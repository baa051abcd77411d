// tessera-runner-bench: one model runner driven directly (no router, no gRPC), any backend.
//
// Decode rows, one per batch x context: `batch` greedy sequences each prefilled with `context`
// prompt tokens (or, --uncomputed-context, started at that position with the pool's K/V as it
// is: the same bytes read per step, none of the prefill), then `--steps` timed decode steps;
// medians of the step wall time, the device time from events (device backends), `hostproc`
// (step entry -> last launch) and `input` (step entry -> inputs laid out and their one copy
// issued), how many steps replayed a CUDA graph,
// and the bytes a step must move with the GB/s that achieves (runner_bench_report.h).
// Prefill rows (`--prefill 512,4096`): one sequence's prompt of that many tokens in chunks of
// the runner's max_num_batched_tokens (as the scheduler would cut it), one untimed run and then
// the median of `--prefill-runs`; ms and tokens/s.
//
//   tessera-runner-bench --model M.gguf --device cuda --batch 1,8,32,128 --context 512
//   tessera-runner-bench --load-format dummy --dummy-shape llama-3.1-8b --device cuda
//       --gpu-memory-utilization 0.9 --batch 1,32,256 --context 512,4096 --prefill 512,4096
//       --copy-bandwidth-gbs 3000 --json rows.json
//
// KV pool: --num-kv-blocks, --kv-cache-mb or --gpu-memory-utilization when given (the runner
// sizes it as a worker would); otherwise exactly what the largest row needs. A row whose K/V
// does not fit the pool, or whose tokens exceed the model's context, is skipped with the reason.
// On the emulated device a launch runs the kernel, so step, hostproc and device times are the
// SIMT emulator's and mean nothing for a GPU; `input` and the graph replays are real there.
// One thread (the caller's); prints tables to stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/bench/runner_bench_report.h"
#include "worker/loaded_model.h"
#include "worker/runner_factory.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  worker::RunnerFlags runner;
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string batches = "1,8,32,128";
  std::string contexts = "512";  // prompt tokens per sequence before the timed decode steps
  std::string prefills;          // prompt lengths of the prefill rows ("" = none)
  int steps = 32;                // timed decode steps per row
  int prefill_runs = 3;          // timed runs per prefill row
  bool uncomputed_context = false;  // decode rows start past a context that was never computed
  bool size_pool_to_rows = true;  // no KV pool flag given: the largest row's need
  double copy_bandwidth_gbs = 0;
  std::string json_path;
};

// What the rows run against.
struct Bench {
  worker::ModelRunner* runner = nullptr;
  int chunk = 0;                 // prompt tokens per step
  int64_t weight_bytes = 0;      // matrices read per decode step
  int kv_element_bytes = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int BlocksFor(int tokens, int block_size) { return tokens / block_size + 1; }

// Deterministic ordinary token ids for sequence `s`.
std::vector<int32_t> Prompt(int s, int length, int vocab) {
  std::vector<int32_t> ids(length);
  for (int t = 0; t < length; ++t) ids[t] = 3 + (s * 7919 + t * 104729) % (vocab - 3);
  return ids;
}

// Runs sequence `s`'s prompt in chunks (one sequence per step); appends the sampled token.
// Returns the device seconds of its steps (< 0 without a device).
double Prefill(const Bench& b, int s, std::vector<int32_t>& tokens,
               const std::vector<int32_t>& table, int* chunks) {
  worker::StepSamples samples;
  double device_seconds = 0;
  const int length = static_cast<int>(tokens.size());
  for (int start = 0; start < length; start += b.chunk) {
    const int len = std::min(b.chunk, length - start);
    const worker::SequenceWork w{.tokens = std::span<const int32_t>(tokens).subspan(start, len),
                                 .start_pos = start, .block_table = table,
                                 .needs_logits = start + len == length, .slot = s};
    if (absl::Status st = b.runner->Step({&w, 1}, &samples); !st.ok()) {
      std::fprintf(stderr, "error: prefill step: %s\n", std::string(st.message()).c_str());
      std::exit(1);
    }
    // A backend without a device (cpu) reports < 0 for every step.
    device_seconds = samples.info.device_seconds < 0 ? -1 : device_seconds +
                                                                samples.info.device_seconds;
    ++*chunks;
  }
  tokens.push_back(samples.rows[0].token);
  return device_seconds;
}

// Timed decode steps over sequences already prefilled.
void TimeDecode(const Bench& b, int steps, std::vector<std::vector<int32_t>>& tokens,
                const std::vector<std::vector<int32_t>>& tables, DecodeRow* r) {
  const int batch = static_cast<int>(tokens.size());
  worker::StepSamples samples;
  std::vector<double> wall, host, input, device;
  std::vector<worker::SequenceWork> work(batch);
  for (int step = 0; step < steps; ++step) {
    for (int s = 0; s < batch; ++s) {
      const int pos = static_cast<int>(tokens[s].size()) - 1;
      work[s] = {.tokens = std::span<const int32_t>(tokens[s]).subspan(pos, 1), .start_pos = pos,
                 .block_table = tables[s], .needs_logits = true, .slot = s};
    }
    const Clock::time_point start = Clock::now();
    if (absl::Status st = b.runner->Step(work, &samples); !st.ok()) {
      std::fprintf(stderr, "error: decode step: %s\n", std::string(st.message()).c_str());
      std::exit(1);
    }
    wall.push_back(Ms(Clock::now() - start));
    host.push_back(samples.info.launch_seconds * 1e3);
    input.push_back(samples.info.input_seconds * 1e3);
    device.push_back(samples.info.device_seconds * 1e3);
    r->replays += samples.info.graph_replayed ? 1 : 0;
    for (size_t i = 0; i < samples.rows.size(); ++i) {
      tokens[samples.sequence_index[i]].push_back(samples.rows[i].token);
    }
  }
  r->step_ms = Median(wall);
  r->hostproc_ms = Median(host);
  r->input_ms = Median(input);
  r->device_ms = Median(device);
}

// Why a row of `sequences` x `tokens` cannot run; "" when it can.
std::string WhyNot(const worker::ModelRunner& runner, int sequences, int tokens) {
  const worker::KvPoolInfo pool = runner.kv_pool();
  const int64_t needed = int64_t{sequences} * BlocksFor(tokens, pool.block_size);
  if (tokens > runner.config().context_length) {
    return absl::StrCat(tokens, " tokens exceed the model's context of ",
                        runner.config().context_length);
  }
  if (needed > pool.num_blocks - 1) {
    return absl::StrCat("its K/V needs ", needed, " blocks, the pool holds ",
                        pool.num_blocks - 1);
  }
  return "";
}

DecodeRow RunDecode(const Bench& b, const Options& o, int batch, int context) {
  DecodeRow r;
  r.batch = batch;
  r.context = context;
  r.skipped = WhyNot(*b.runner, batch, context + o.steps);
  if (!r.skipped.empty()) return r;
  const int bs = b.runner->kv_pool().block_size;
  const int blocks_per_seq = BlocksFor(context + o.steps, bs);
  std::vector<std::vector<int32_t>> tables(batch), tokens(batch);
  int32_t next_block = 1;
  for (int s = 0; s < batch; ++s) {
    for (int k = 0; k < blocks_per_seq; ++k) tables[s].push_back(next_block++);
    tokens[s] = Prompt(s, context, b.runner->config().vocab_size);
    b.runner->BeginSequence(s, {.temperature = 0.0f}, tokens[s], {});
  }
  int chunks = 0;
  for (int s = 0; s < batch; ++s) {
    if (o.uncomputed_context) {
      tokens[s].push_back(tokens[s].back());  // decode from position `context` directly
    } else {
      Prefill(b, s, tokens[s], tables[s], &chunks);
    }
  }
  TimeDecode(b, o.steps, tokens, tables, &r);
  for (int s = 0; s < batch; ++s) b.runner->EndSequence(s);
  r.weight_bytes = b.weight_bytes;
  r.kv_bytes = ContextKvBytes(b.runner->config(), b.runner->layer_info(), batch, context,
                              b.kv_element_bytes);
  return r;
}

PrefillRow RunPrefill(const Bench& b, const Options& o, int length) {
  PrefillRow r;
  r.tokens = length;
  r.skipped = WhyNot(*b.runner, 1, length + 1);
  if (!r.skipped.empty()) return r;
  std::vector<int32_t> table;
  for (int k = 0; k < BlocksFor(length + 1, b.runner->kv_pool().block_size); ++k) {
    table.push_back(k + 1);
  }
  std::vector<double> wall, device;
  for (int run = 0; run <= o.prefill_runs; ++run) {  // run 0 warms up
    std::vector<int32_t> tokens = Prompt(run, length, b.runner->config().vocab_size);
    b.runner->BeginSequence(0, {.temperature = 0.0f}, tokens, {});
    r.chunks = 0;
    const Clock::time_point start = Clock::now();
    const double device_seconds = Prefill(b, 0, tokens, table, &r.chunks);
    if (run > 0) {
      wall.push_back(Ms(Clock::now() - start));
      device.push_back(device_seconds * 1e3);
    }
    b.runner->EndSequence(0);
  }
  r.ms = Median(wall);
  r.device_ms = Median(device);
  return r;
}

bool ParseList(const std::string& text, const char* flag, std::vector<int>* out) {
  if (text.empty()) return true;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(piece, &value) || value < 1) {
      std::fprintf(stderr, "error: bad %s '%s' (comma-separated integers >= 1)\n", flag,
                   text.c_str());
      return false;
    }
    out->push_back(value);
  }
  return true;
}

struct Rows {
  std::vector<int> batches, contexts, prefills;
};

// The pool the largest row needs, including the null block.
int64_t PoolForRows(const Rows& rows, int steps, int block_size) {
  const int batch = *std::max_element(rows.batches.begin(), rows.batches.end());
  const int context = *std::max_element(rows.contexts.begin(), rows.contexts.end());
  int64_t blocks = int64_t{batch} * BlocksFor(context + steps, block_size);
  for (int p : rows.prefills) blocks = std::max<int64_t>(blocks, BlocksFor(p + 1, block_size));
  return blocks + 1;
}

// The runner, over the model file or (--load-format dummy) the synthetic shape. `model` keeps
// the file loaded for as long as the runner borrows it.
absl::StatusOr<worker::BuiltRunner> Build(const Options& o, const worker::RunnerFlags& flags,
                                          std::unique_ptr<worker::LoadedModel>* model) {
  absl::StatusOr<bool> dummy = worker::IsDummyLoadFormat(flags.load_format);
  if (!dummy.ok()) return dummy.status();
  if (*dummy) return worker::BuildDummyRunner(flags);
  absl::StatusOr<std::unique_ptr<worker::LoadedModel>> loaded = worker::LoadModel(o.model_path);
  if (!loaded.ok()) return loaded.status();
  *model = *std::move(loaded);
  return worker::BuildRunner(flags, **model);
}

// Bytes per element of the device compute type (--dtype, bf16 by default).
int DeviceElementBytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

Bench MakeBench(const worker::BuiltRunner& built, const worker::LoadedModel* model,
                const worker::RunnerFlags& flags) {
  Bench b{.runner = built.runner.get(),
          .chunk = built.max_num_batched_tokens > 0 ? built.max_num_batched_tokens
                                                    : flags.max_num_batched_tokens};
  if (built.has_device) {
    b.kv_element_bytes = DeviceElementBytes(flags.dtype);
    b.weight_bytes = built.decode_weight_bytes;
  } else {
    b.kv_element_bytes = flags.kv_cache_dtype == "f16" ? 2 : 4;
    b.weight_bytes = DecodeWeightBytes(model->plan.weights, *model->weights);
  }
  return b;
}

int Run(const Options& o) {
  Rows rows;
  if (!ParseList(o.batches, "--batch", &rows.batches) ||
      !ParseList(o.contexts, "--context", &rows.contexts) ||
      !ParseList(o.prefills, "--prefill", &rows.prefills)) {
    return 1;
  }
  if (rows.batches.empty() || rows.contexts.empty()) {
    std::fprintf(stderr, "error: --batch and --context need at least one value\n");
    return 1;
  }
  worker::RunnerFlags flags = o.runner;
  flags.max_num_seqs =
      std::max(flags.max_num_seqs, *std::max_element(rows.batches.begin(), rows.batches.end()));
  if (o.size_pool_to_rows) flags.num_kv_blocks = PoolForRows(rows, o.steps, flags.block_size);
  std::unique_ptr<worker::LoadedModel> model;
  absl::StatusOr<worker::BuiltRunner> built = Build(o, flags, &model);
  if (!built.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(built.status().message()).c_str());
    return 1;
  }
  const Bench b = MakeBench(*built, model.get(), flags);
  const BenchSetup setup{
      .description = built->description,
      .model = built->synthetic.has_value() ? "dummy:" + flags.dummy_shape : o.model_path,
      .weights_bytes = built->weights_bytes,
      .kv_blocks = b.runner->kv_pool().num_blocks,
      .block_size = b.runner->kv_pool().block_size,
      .decode_steps = o.steps,
      .prefill_chunk = b.chunk,
      .copy_bandwidth_gbs = o.copy_bandwidth_gbs};
  PrintSetup(setup);
  PrintDecodeHeader();
  std::vector<DecodeRow> decode;
  for (int context : rows.contexts) {
    for (int batch : rows.batches) {
      decode.push_back(RunDecode(b, o, batch, context));
      PrintDecodeRow(setup, decode.back());
    }
  }
  std::vector<PrefillRow> prefill;
  if (!rows.prefills.empty()) PrintPrefillHeader();
  for (int length : rows.prefills) {
    prefill.push_back(RunPrefill(b, o, length));
    PrintPrefillRow(prefill.back());
  }
  if (!o.json_path.empty() && !WriteJson(o.json_path, setup, decode, prefill)) return 1;
  return 0;
}

void AddOptions(CLI::App& app, Options* o) {
  worker::RunnerFlags* r = &o->runner;
  app.add_option("--model", o->model_path)->capture_default_str();
  app.add_option("--load-format", r->load_format,
                 "auto (--model) or dummy (random weights of --dummy-shape made on the device)")
      ->capture_default_str();
  app.add_option("--dummy-shape", r->dummy_shape,
                 absl::StrCat("dummy: ", model::SyntheticShapeNames()));
  app.add_option("--dummy-vocab", r->dummy_vocab, "dummy: vocabulary override (0 = the shape's)");
  app.add_option("--dummy-seed", r->dummy_seed, "dummy: the weights' seed");
  app.add_option("--dummy-weight-format", r->dummy_weight_format,
                 "dummy: projections packed as q8_0, q4_0, q4_1, q4_k, nvfp4 or mxfp4");
  app.add_option("--device", r->device)->capture_default_str();
  app.add_option("--dtype", r->dtype);
  app.add_option("--threads", r->threads);
  app.add_option("--kv-cache-dtype", r->kv_cache_dtype)->capture_default_str();
  // Lazy by default here (the worker's GPU default is eager): a bench row measures steps, and
  // capturing every token bucket at start-up would only lengthen each run.
  r->cuda_graphs = "lazy";
  app.add_option("--cuda-graphs", r->cuda_graphs, "lazy | eager | off")->capture_default_str();
  app.add_flag("--batch-invariant", r->batch_invariant);
  app.add_option("--cuda-dependent-launch", r->cuda_dependent_launch,
                 "programmatic dependent launches of the decode kernels (true / false)")
      ->capture_default_str();
  app.add_option("--cuda-packed-stream-grid", r->cuda_packed_stream_grid,
                 "the batch-1 packed GEMM's split where the row tiles fit: tile | every")
      ->capture_default_str()
      ->check(CLI::IsMember({"tile", "every"}));
  app.add_option("--emulated-memory-mb", r->emulated_memory_mb)->capture_default_str();
  app.add_option("--max-num-seqs", r->max_num_seqs,
                 "sequence slots (raised to the largest batch)")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", r->max_num_batched_tokens,
                 "tokens per step; the runner holds at least --max-num-seqs, and that is the "
                 "prefill chunk")
      ->capture_default_str();
  app.add_option("--num-kv-blocks", r->num_kv_blocks, "KV pool blocks (default: the largest "
                                                      "row's need)");
  app.add_option("--kv-cache-mb", r->kv_cache_mb, "KV pool MiB");
  app.add_option("--gpu-memory-utilization", r->gpu_memory_utilization,
                 "device backends: size the KV pool as a worker would");
  app.add_option("--batch", o->batches, "comma-separated batch sizes")->capture_default_str();
  app.add_option("--context", o->contexts, "comma-separated prompt tokens per sequence")
      ->capture_default_str();
  app.add_option("--steps", o->steps, "timed decode steps per row")->capture_default_str();
  app.add_option("--prefill", o->prefills, "comma-separated prompt lengths of prefill rows");
  app.add_flag("--uncomputed-context", o->uncomputed_context,
               "decode rows start at position CONTEXT without computing the prompt: attention "
               "reads the same K/V bytes (whatever the pool holds), so the step time is that of "
               "a computed context, without minutes of prefill at batch 256 x 4096 on 8B");
  app.add_option("--prefill-runs", o->prefill_runs, "timed runs per prefill row")
      ->capture_default_str();
  app.add_option("--copy-bandwidth-gbs", o->copy_bandwidth_gbs,
                 "measured device copy bandwidth: GB/s is also given as its fraction");
  app.add_option("--json", o->json_path, "also write every row as JSON to this file");
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::bench::Options o;
  CLI::App app{"tessera-runner-bench: decode and prefill times of one runner, any backend"};
  tessera::bench::AddOptions(app, &o);
  CLI11_PARSE(app, argc, argv);
  o.size_pool_to_rows = app.get_option("--num-kv-blocks")->count() == 0 &&
                        app.get_option("--kv-cache-mb")->count() == 0 &&
                        app.get_option("--gpu-memory-utilization")->count() == 0;
  if (o.steps < 1 || o.prefill_runs < 1) {
    std::fprintf(stderr, "error: --steps and --prefill-runs must be >= 1\n");
    return 1;
  }
  return tessera::bench::Run(o);
}

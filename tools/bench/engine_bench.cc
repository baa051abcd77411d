// tessera-engine-bench: end-to-end CPU engine throughput on a real model, the numbers of
// docs/perf/cpu.md. Measures (median of --repeats runs):
//   prefill  — one prompt of --prompt-tokens tokens in one step, tokens/s;
//   decode   — one sequence, --decode-tokens greedy steps after a 16-token prompt, tokens/s;
//   batch N  — N sequences decoding together (one step = N tokens), aggregate tokens/s.
// Prompt ids are synthetic (id_i = 100 + (seed * 7919 + i * 104729) % 40000), the same formula
// tools/bench/llama_cpp_bench.py uses, so both engines process identical tokens.
// It times the forward pass: ModelRunner::Forward with a host argmax (the serving path's Step
// adds the sampler on top).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 2;
  int prompt_tokens = 512;
  int decode_tokens = 128;
  int batch = 8;
  int repeats = 3;
  bool mmap_weights = false;
  std::string activations = "f32";
  std::string kv_cache_dtype = "f32";
};

std::vector<int32_t> SyntheticPrompt(int length, int seed) {
  std::vector<int32_t> ids(length);
  for (int i = 0; i < length; ++i) ids[i] = 100 + (seed * 7919 + i * 104729) % 40000;
  return ids;
}

int32_t Argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// N sequences with prompts of `prompt_len`: one prefill step for all, then `steps` decode steps
// of N tokens each. Returns the decode seconds (prefill seconds into *prefill_seconds).
double RunSequences(worker::ModelRunner& runner, int num_seqs, int prompt_len, int steps,
                    double* prefill_seconds) {
  const int block_size = runner.kv_pool().block_size;
  const int blocks_per_seq = (prompt_len + steps + block_size - 1) / block_size;
  std::vector<std::vector<int32_t>> tokens(num_seqs), tables(num_seqs);
  std::vector<worker::SequenceWork> batch(num_seqs);
  for (int s = 0; s < num_seqs; ++s) {
    tokens[s] = SyntheticPrompt(prompt_len, s + 1);
    tables[s].resize(blocks_per_seq);
    std::iota(tables[s].begin(), tables[s].end(), 1 + s * blocks_per_seq);
    batch[s] = {.tokens = tokens[s], .start_pos = 0, .block_table = tables[s],
                .needs_logits = true};
  }
  worker::StepLogits logits;
  auto start = Clock::now();
  if (!runner.Forward(batch, &logits).ok()) std::abort();
  *prefill_seconds = Seconds(start);
  start = Clock::now();
  for (int step = 0; step < steps; ++step) {
    for (int s = 0; s < num_seqs; ++s) {
      tokens[s].push_back(Argmax(logits.Row(s)));
      batch[s].tokens = std::span(tokens[s]).last(1);
      batch[s].start_pos = prompt_len + step;
    }
    if (!runner.Forward(batch, &logits).ok()) std::abort();
  }
  return Seconds(start);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  bench::Options o;
  CLI::App app{"tessera CPU engine benchmark"};
  app.add_option("--model", o.model)->capture_default_str();
  app.add_option("--threads", o.threads)->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens)->capture_default_str();
  app.add_option("--decode-tokens", o.decode_tokens)->capture_default_str();
  app.add_option("--batch", o.batch)->capture_default_str();
  app.add_option("--repeats", o.repeats)->capture_default_str();
  app.add_flag("--mmap-weights", o.mmap_weights, "map the model instead of a huge-page copy");
  app.add_option("--activations", o.activations,
                 "matmul activations: f32 (exact) or int8 (lossy, int8 dot products)")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "KV pool elements: f32 (exact) or f16")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto kv_dtype = worker::ParseKvDtype(o.kv_cache_dtype);
  if (!kv_dtype.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(kv_dtype.status().message()).c_str());
    return 1;
  }
  const auto activations = worker::ParseMatmulActivations(o.activations);
  if (!activations.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(activations.status().message()).c_str());
    return 1;
  }

  auto model = worker::LoadModel(
      o.model, o.mmap_weights ? util::FileLoad::kMap : util::FileLoad::kHugePageCopy);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  kernels::cpu::ThreadPool pool(o.threads);
  const int64_t blocks = 1 + (o.prompt_tokens + o.decode_tokens + 16) / 16 * (o.batch + 1);
  std::vector<double> prefill, decode, batched;
  for (int r = 0; r < o.repeats; ++r) {
    worker::CpuModelRunner runner((*model)->config, &(*model)->plan, (*model)->weights.get(), &pool,
                                  {.block_size = 16,
                                   .num_kv_blocks = blocks,
                                   .activations = *activations,
                                   .kv_dtype = *kv_dtype});
    double seconds = 0;
    bench::RunSequences(runner, 1, o.prompt_tokens, 0, &seconds);
    prefill.push_back(o.prompt_tokens / seconds);
    decode.push_back(o.decode_tokens / bench::RunSequences(runner, 1, 16, o.decode_tokens, &seconds));
    batched.push_back(o.batch * o.decode_tokens /
                      bench::RunSequences(runner, o.batch, 16, o.decode_tokens, &seconds));
  }
  std::printf("engine tessera-cpu threads %d activations %s kv %s\n", o.threads,
              o.activations.c_str(), o.kv_cache_dtype.c_str());
  std::printf("prefill %d tokens: %.1f tok/s\n", o.prompt_tokens, bench::Median(prefill));
  std::printf("decode 1 sequence: %.1f tok/s\n", bench::Median(decode));
  std::printf("decode %d sequences: %.1f tok/s aggregate\n", o.batch, bench::Median(batched));
  std::printf("{\"engine\": \"tessera-cpu\", \"threads\": %d, \"activations\": \"%s\", "
              "\"kv_cache_dtype\": \"%s\", "
              "\"prefill_tok_s\": %.1f, "
              "\"decode_tok_s\": %.1f, \"batch\": %d, \"batch_decode_tok_s\": %.1f}\n",
              o.threads, o.activations.c_str(), o.kv_cache_dtype.c_str(), bench::Median(prefill),
              bench::Median(decode), o.batch, bench::Median(batched));
  return 0;
}

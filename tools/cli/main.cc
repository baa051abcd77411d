// `tessera`: the command-line entry point. Subcommands: inspect, tokenize, generate (offline, or a
// client with --addr), bench, serve, devices.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "tools/cli/commands.h"
#include "tools/cli/default_model.h"
#include "worker/runner_factory.h"

namespace {

using tessera::cli::BenchOptions;
using tessera::cli::GenerateOptions;
using tessera::cli::InspectOptions;
using tessera::cli::QuantizeCommandOptions;
using tessera::cli::ServeOptions;
using tessera::cli::TokenizeOptions;

int ReportAndExit(const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "tessera: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

constexpr char kActivationsHelp[] =
    "matmul activations: f32 (exact) or int8 (lossy, faster batches; docs/perf/cpu.md)";
constexpr char kKvCacheDtypeHelp[] =
    "KV pool elements: f32 (exact) or f16 (half the memory; lossy, docs/perf/cpu.md)";
constexpr char kDeviceHelp[] =
    "backend: auto (cuda when a CUDA GPU is usable, else cpu), cpu, cuda, or emulated (the cuda "
    "backend on the CPU through the SIMT emulator; slow, for tests)";
constexpr char kDtypeHelp[] = "cuda compute type: bf16 (default), f16 or f32";

// --api-key and --tls-ca of the client commands (the key also from $TESSERA_API_KEY).
void AddClientAuthOptions(CLI::App* cmd, tessera::bench::ClientAuth* auth) {
  cmd->add_option("--api-key", auth->api_key,
                  "the router's API key, sent as 'authorization: Bearer KEY' (default: "
                  "$TESSERA_API_KEY)");
  cmd->add_option("--tls-ca", auth->tls_ca,
                  "PEM CA certificate to trust: talk TLS to a router started with --tls-cert")
      ->check(CLI::ExistingFile);
}


CLI::App* AddQuantize(CLI::App& app, QuantizeCommandOptions& q) {
  CLI::App* cmd = app.add_subcommand(
      "quantize", "convert a model's linear layers to NVFP4 or Q8_0 (embeddings, output head "
                  "and norms keep their type unless asked)");
  cmd->add_option("--to", q.target, "target type: nvfp4 or q8_0")->required();
  cmd->add_option("input", q.input_path, "GGUF file or Hugging Face safetensors directory")
      ->required();
  cmd->add_option("output", q.output_path, "GGUF file to write")->required();
  cmd->add_flag("--quantize-embeddings", q.quantize_embeddings,
                "quantize token_embd.weight too");
  cmd->add_flag("--quantize-output", q.quantize_output, "quantize output.weight too");
  return cmd;
}

CLI::App* AddInspect(CLI::App& app, InspectOptions& inspect) {
  CLI::App* cmd = app.add_subcommand("inspect", "print a model's architecture, "
                                     "hyper-parameters, tensors and tokenizer facts");
  cmd->add_option("model,--model", inspect.model_path,
                  "GGUF model file or HF safetensors directory")
      ->capture_default_str();
  cmd->add_flag("--tensors", inspect.list_tensors, "list every tensor");
  return cmd;
}

// `tessera tokenize [MODEL] TEXT`: the model as inspect takes it (positional or --model,
// defaulting to the default model), then the text.
CLI::App* AddTokenize(CLI::App& app, TokenizeOptions& tokenize,
                      std::vector<std::string>* positionals) {
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  cmd->add_option("[model] text", *positionals,
                  "the text to tokenize, after an optional GGUF model file or HF safetensors "
                  "directory (default: --model's)")
      ->required()->expected(1, 2);
  cmd->add_option("--model", tokenize.model_path, "GGUF model file or HF safetensors directory")
      ->capture_default_str();
  cmd->add_flag("--add-special", tokenize.add_special, "add BOS/EOS as the model's tokenizer asks");
  cmd->add_flag("!--no-parse-special", tokenize.parse_special,
                "treat special-token text like <|im_start|> as plain text");
  cmd->add_flag("--pieces", tokenize.show_pieces, "print one 'id<TAB>piece' per line");
  return cmd;
}

CLI::App* AddGenerate(CLI::App& app, GenerateOptions& generate, CLI::Option** seed) {
  CLI::App* cmd = app.add_subcommand(
      "generate", "generate text: offline on the CPU, or from a server with --addr");
  cmd->add_option("--addr", generate.addr, "HOST:PORT of a tessera server (client mode)");
  AddClientAuthOptions(cmd, &generate.auth);
  cmd->add_option("--model", generate.model_path,
                  "GGUF model file or HF safetensors directory (offline)")
      ->capture_default_str();
  cmd->add_option("--prompt", generate.prompt, "raw prompt text");
  cmd->add_option("--chat", generate.chat, "a user message (chat template applied)");
  cmd->add_option("--token-ids", generate.token_ids, "an already tokenized prompt: 1,2,3");
  cmd->add_option("--max-tokens", generate.max_tokens)->capture_default_str();
  cmd->add_option("--threads", generate.threads, "0 = all hardware threads (offline)");
  cmd->add_option("--activations", generate.activations, kActivationsHelp)->capture_default_str();
  cmd->add_option("--device", generate.device, kDeviceHelp)->capture_default_str();
  cmd->add_option("--dtype", generate.dtype, kDtypeHelp);
  cmd->add_option("--kv-cache-dtype", generate.kv_cache_dtype, kKvCacheDtypeHelp)
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", generate.ignore_eos);
  cmd->add_option("--temperature", generate.sampling.temperature, "0 = greedy (the default)");
  cmd->add_option("--top-k", generate.sampling.top_k);
  cmd->add_option("--top-p", generate.sampling.top_p);
  cmd->add_option("--min-p", generate.sampling.min_p);
  cmd->add_option("--repetition-penalty", generate.sampling.repetition_penalty);
  cmd->add_option("--presence-penalty", generate.sampling.presence_penalty);
  cmd->add_option("--frequency-penalty", generate.sampling.frequency_penalty);
  *seed = cmd->add_option("--seed", generate.sampling.seed);
  cmd->add_option("--stop", generate.stop, "a stop string (repeatable; with --addr)")
      ->allow_extra_args(false);  // one string per --stop
  cmd->add_option("--logprobs", generate.logprobs,
                  "N >= 0: print each token's logprob and the top N (with --addr)");
  cmd->add_option("--request-id", generate.request_id, "(with --addr)");
  return cmd;
}

CLI::App* AddBench(CLI::App& app, BenchOptions& bench) {
  CLI::App* cmd = app.add_subcommand("bench", "load-test a tessera server (concurrency sweep)");
  cmd->add_option("--addr", bench.addr, "HOST:PORT of a tessera server")->required();
  AddClientAuthOptions(cmd, &bench.auth);
  cmd->add_option("--concurrency", bench.concurrency, "levels, comma-separated")
      ->capture_default_str();
  cmd->add_option("--num-requests", bench.num_requests,
                  "requests per level (0: 4 x concurrency, at least 8)");
  cmd->add_option("--duration-s", bench.duration_s, "run each level this long instead");
  cmd->add_option("--prompt-tokens", bench.prompt_tokens, "random prompt length")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens-range", bench.prompt_tokens_range, "MIN:MAX random lengths");
  cmd->add_option("--prompt-text", bench.prompt_text, "a fixed text prompt instead");
  cmd->add_option("--output-tokens", bench.output_tokens, "tokens per request (ignore_eos)")
      ->capture_default_str();
  cmd->add_option("--output-tokens-range", bench.output_tokens_range, "MIN:MAX");
  cmd->add_option("--shared-prefix-tokens", bench.shared_prefix_tokens,
                  "a prefix common to every prompt");
  cmd->add_option("--shared-prefixes", bench.shared_prefixes,
                  "that many different shared prefixes (e.g. system prompts), one drawn per "
                  "request")
      ->capture_default_str();
  cmd->add_option("--seed", bench.seed, "seeds the request shapes")->capture_default_str();
  cmd->add_option("--temperature", bench.temperature, "0 = greedy (the default)");
  cmd->add_option("--json", bench.json_path, "also write all numbers to this file");
  cmd->add_option("--json-schema", bench.json_schema,
                  "guide every request's output by this JSON schema (structured outputs; --api "
                  "grpc)");
  cmd->add_option("--api", bench.api,
                  "grpc (Generate) or openai (streaming POST /v1/completions on --http-addr)")
      ->capture_default_str()->check(CLI::IsMember({"grpc", "openai"}));
  cmd->add_option("--http-addr", bench.http_addr,
                  "with --api openai: HOST:PORT of the router's HTTP API ('tessera serve: http "
                  "on ...')");
  return cmd;
}

CLI::App* AddServe(CLI::App& app, ServeOptions& serve) {
  CLI::App* cmd = app.add_subcommand("serve", "run tessera-worker and tessera-router together");
  cmd->add_option("--model", serve.model_path, "GGUF model file or HF safetensors directory")
      ->capture_default_str();
  cmd->add_option("--host", serve.host)->capture_default_str();
  cmd->add_option("--port", serve.port, "0 = any free port")->capture_default_str();
  cmd->add_option("--workers", serve.workers,
                  "tessera-worker processes behind the router (data parallel); on cuda worker i "
                  "gets CUDA devices i*T..i*T+T-1 (T = --tensor-parallel)")
      ->capture_default_str();
  cmd->add_option("--tensor-parallel", serve.tensor_parallel,
                  "devices each worker shards the model over (--device cuda or emulated; "
                  "docs/design/tensor-parallel.md)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--threads", serve.threads, "CPU threads of each worker (0: its default)");
  cmd->add_option("--max-num-seqs", serve.max_num_seqs, "sequences per step (both processes)");
  cmd->add_option("--max-num-batched-tokens", serve.max_num_batched_tokens,
                  "router: token budget per step");
  cmd->add_option("--max-waiting", serve.max_waiting, "router: waiting-queue capacity");
  cmd->add_option("--kv-cache-mb", serve.kv_cache_mb, "worker: KV pool size in MiB");
  cmd->add_option("--state-snapshot-mb", serve.state_snapshot_mb,
                  "worker: hybrid models' recurrent-state snapshots for prefix caching, MiB");
  cmd->add_option("--num-kv-blocks", serve.num_kv_blocks,
                  "worker: KV pool blocks including the null block (instead of --kv-cache-mb)");
  cmd->add_option("--block-size", serve.block_size, "worker: tokens per KV block");
  cmd->add_flag("--mmap-weights", serve.mmap_weights,
                "worker: map the model file instead of copying it into huge pages");
  cmd->add_option("--activations", serve.activations, kActivationsHelp);
  cmd->add_option("--kv-cache-dtype", serve.kv_cache_dtype, kKvCacheDtypeHelp);
  cmd->add_option("--device", serve.device, kDeviceHelp);
  cmd->add_option("--dtype", serve.dtype, kDtypeHelp);
  cmd->add_option("--gpu-memory-utilization", serve.gpu_memory_utilization,
                  "cuda: fraction of GPU memory for weights, buffers and KV (default 0.90)");
  cmd->add_option("--cuda-graphs", serve.cuda_graphs,
                  "cuda: graphs (decode steps whole, prefill steps piecewise) captured eagerly at "
                  "start-up (default on a GPU), lazily on first use (default emulated), or off");
  cmd->add_flag("--batch-invariant", serve.batch_invariant,
                "cuda: batch-invariant kernels (a request's tokens never depend on its batch)");
  cmd->add_flag("--dequantize-weights", serve.dequantize_weights,
                "cuda: dequantize quantized projections at load instead of keeping them packed");
  cmd->add_flag("--no-prefix-cache", serve.no_prefix_cache,
                "router: do not share KV blocks between requests with a common prefix");
  cmd->add_option("--trace-steps", serve.trace_steps_path,
                  "router: write one JSON line per step to this file");
  cmd->add_flag("--no-web-console", serve.no_web_console,
                "router: do not serve the web console (GET / on the HTTP port: a chat "
                "playground and the live batch view)");
  cmd->add_option("--metrics-port", serve.metrics_port,
                  "router Prometheus /metrics, /healthz, /readyz (0 = any free port; printed); "
                  "its /metrics, like the HTTP port's, carries the workers' series too, labelled "
                  "worker=\"i\": one scrape target");
  cmd->add_option("--worker-metrics-port", serve.worker_metrics_port,
                  "also serve each worker's own /metrics, /healthz, /readyz (0 = any free port; "
                  "printed; worker i of --workers gets P + i); not needed for its series, which "
                  "the router's /metrics carries");
  cmd->add_option("--http-port", serve.http_port,
                  "router: OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
                  "...) on --host (0 = off, -1 = any free port; printed)")
      ->capture_default_str()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--api-key", serve.api_key,
                  "require `authorization: Bearer KEY` on the gRPC and HTTP APIs (default: "
                  "$TESSERA_API_KEY)");
  cmd->add_option("--tls-cert", serve.tls_cert, "PEM certificate: gRPC and HTTP over TLS")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", serve.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd->add_option("--served-model-name", serve.served_model_names,
                  "router: the model's name in the API (repeatable; default: the file's name "
                  "without .gguf, general.name accepted too)");
  cmd->add_option("--chat-template", serve.chat_template,
                  "router: a Jinja chat template file to use instead of the model's own")
      ->check(CLI::ExistingFile);
  cmd->add_option("--metrics-host", serve.metrics_host, "address of both metrics servers")
      ->capture_default_str();
  cmd->add_option("--worker-arg", serve.worker_args,
                  "one more argument for tessera-worker, verbatim (repeatable: "
                  "--worker-arg=--flag --worker-arg=value)")
      ->allow_extra_args(false);
  cmd->add_option("--router-arg", serve.router_args,
                  "one more argument for tessera-router, verbatim (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--drain-timeout-s", serve.drain_timeout_s);
  cmd->add_option("--max-queue-time", serve.max_queue_time_s,
                  "router: seconds a request may wait for admission (default: the router's)");
  cmd->add_option("--stream-stall-timeout", serve.stream_stall_timeout_s,
                  "router: cancel a stream whose client reads nothing this long (seconds)");
  cmd->add_option("--kv-reserve-horizon", serve.kv_reserve_horizon,
                  "router: tokens of growth admission reserves for each running request "
                  "(0: no reservation)");
  cmd->add_option("--preemption-storm-threshold", serve.preemption_storm_threshold,
                  "router: preemptions within the window that log a preemption_storm event");
  cmd->add_option("--preemption-storm-window-s", serve.preemption_storm_window_s,
                  "router: the preemption-storm window in seconds");
  cmd->add_option("--log-level", serve.log_level, "router log level: debug, info, warn, error, off");
  cmd->add_flag("--no-restart", serve.no_restart,
                "exit when a worker dies (default: restart it on the same port with backoff; "
                "the router answers UNAVAILABLE for it meanwhile)");
  cmd->add_option("--startup-timeout-s", serve.startup_timeout_s,
                  "per process, until it is listening")
      ->capture_default_str();
  cmd->add_option("--bin-dir", serve.bin_dir,
                  "where tessera-worker and tessera-router are (default: next to tessera)");
  return cmd;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera: an LLM inference server"};
  app.require_subcommand(1);

  InspectOptions inspect;
  TokenizeOptions tokenize;
  GenerateOptions generate;
  BenchOptions bench;
  ServeOptions serve;
  // The default --model, found relative to the install when not in the current directory.
  const std::string default_model = tessera::cli::FindDefaultModel();
  inspect.model_path = tokenize.model_path = generate.model_path = serve.model_path =
      default_model;
  CLI::Option* seed = nullptr;
  CLI::App* inspect_cmd = AddInspect(app, inspect);
  std::vector<std::string> tokenize_positionals;
  CLI::App* tokenize_cmd = AddTokenize(app, tokenize, &tokenize_positionals);
  CLI::App* generate_cmd = AddGenerate(app, generate, &seed);
  CLI::App* bench_cmd = AddBench(app, bench);
  CLI::App* serve_cmd = AddServe(app, serve);
  CLI::App* devices_cmd = app.add_subcommand("devices", "list the CUDA devices this build can use");
  QuantizeCommandOptions quantize;
  CLI::App* quantize_cmd = AddQuantize(app, quantize);

  CLI11_PARSE(app, argc, argv);
  if (inspect_cmd->parsed()) return ReportAndExit(tessera::cli::RunInspect(inspect));
  if (tokenize_cmd->parsed()) {
    if (tokenize_positionals.size() == 2) {
      if (tokenize_cmd->get_option("--model")->count() > 0) {
        return ReportAndExit(absl::InvalidArgumentError(
            "tokenize: give the model once (positional or --model), then the text"));
      }
      tokenize.model_path = tokenize_positionals.front();
    }
    tokenize.text = tokenize_positionals.back();
    return ReportAndExit(tessera::cli::RunTokenize(tokenize));
  }
  if (generate_cmd->parsed()) {
    generate.seed_given = seed->count() > 0;
    if (const char* device = std::getenv(tessera::worker::kDeviceEnvironment);
        generate_cmd->get_option("--device")->count() == 0 && device != nullptr && *device) {
      generate.device = device;
    }
    generate.auth.api_key = tessera::bench::ApiKeyFromFlagOrEnvironment(generate.auth.api_key);
    return ReportAndExit(tessera::cli::RunGenerate(generate));
  }
  if (bench_cmd->parsed()) {
    bench.auth.api_key = tessera::bench::ApiKeyFromFlagOrEnvironment(bench.auth.api_key);
    return ReportAndExit(tessera::cli::RunBench(bench));
  }
  if (serve_cmd->parsed()) {
    if (const char* device = std::getenv(tessera::worker::kDeviceEnvironment);
        serve_cmd->get_option("--device")->count() == 0 && device != nullptr && *device) {
      serve.device = device;  // the workers would read it; --workers needs to know it too
    }
    if (const char* key = std::getenv("TESSERA_API_KEY"); serve.api_key.empty() && key) {
      serve.api_key = key;
    }
    return ReportAndExit(tessera::cli::RunServe(serve));
  }
  if (devices_cmd->parsed()) return ReportAndExit(tessera::cli::RunDevices());
  if (quantize_cmd->parsed()) return ReportAndExit(tessera::cli::RunQuantize(quantize));
  return 1;
}

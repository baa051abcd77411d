// Subcommands of the `tessera` CLI. Each returns the process exit code; errors are printed as one
// line on stderr by main.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sampling/sampling_params.h"
#include "tools/bench/client_auth.h"

namespace tessera::cli {

inline constexpr char kDefaultModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct InspectOptions {
  std::string model_path = kDefaultModelPath;
  bool list_tensors = false;
};
absl::Status RunInspect(const InspectOptions& options);

struct TokenizeOptions {
  std::string model_path = kDefaultModelPath;
  std::string text;
  bool add_special = false;    // prepend BOS/append EOS if the model asks for it
  bool parse_special = true;   // match special tokens like <|im_start|> in the text
  bool show_pieces = false;    // print "id<TAB>piece" lines instead of one line of ids
};
absl::Status RunTokenize(const TokenizeOptions& options);

absl::Status RunDevices();

struct QuantizeCommandOptions {
  std::string target;  // nvfp4 or q8_0
  std::string input_path;
  std::string output_path;
  bool quantize_embeddings = false;
  bool quantize_output = false;
};
// tools/quantize: the block linear layers of input_path to `target`, streamed to output_path.
absl::Status RunQuantize(const QuantizeCommandOptions& options);

struct GenerateOptions {
  std::string model_path = kDefaultModelPath;
  std::string prompt;          // raw prompt text (no template)
  std::string chat;            // one user message, rendered with the model's chat template
  std::string token_ids;       // an already tokenized prompt: "1,2,3"
  int max_tokens = 128;
  int threads = 0;             // 0 = one per hardware thread
  std::string activations = "f32";  // matmul activations (offline): f32 or int8
  std::string kv_cache_dtype = "f32";  // KV pool elements (offline): f32 or f16
  std::string device = "auto";       // offline backend: auto, cpu, cuda or emulated
  std::string dtype;                 // offline cuda compute type; "": bf16
  bool ignore_eos = false;
  sampling::SamplingParams sampling{.temperature = 0.0f};  // greedy unless asked otherwise
  bool seed_given = false;     // --seed was given (the client sends no seed otherwise)

  // Client mode: with `addr` set, stream from a running tessera-router instead of running
  // offline. The fields below need it.
  std::string addr;                  // HOST:PORT
  bench::ClientAuth auth;            // --api-key (or $TESSERA_API_KEY), --tls-ca
  std::vector<std::string> stop;     // stop strings
  int logprobs = -1;                 // >= 0: each token's logprob and the top-N alternatives
  std::string request_id;
};
// Offline on the chosen backend (--device), or (options.addr set) as a client of tessera-router.
absl::Status RunGenerate(const GenerateOptions& options);
absl::Status RunGenerateClient(const GenerateOptions& options);
// "1,2,3" -> {1, 2, 3}; INVALID_ARGUMENT naming the first piece that is not an integer.
absl::StatusOr<std::vector<int32_t>> ParseTokenIds(std::string_view text);

// `tessera bench --addr HOST:PORT`: a load generator; see tools/bench/load_generator.h.
struct BenchOptions {
  std::string addr;
  std::string concurrency = "1,4,16,64";  // comma-separated levels
  int num_requests = 0;                   // per level; 0: 4 x concurrency (at least 8)
  double duration_s = 0;                  // > 0: run each level this long instead
  int prompt_tokens = 128;
  std::string prompt_tokens_range;        // "MIN:MAX": random lengths instead
  std::string prompt_text;                // a fixed text prompt instead of random ids
  int output_tokens = 128;
  std::string output_tokens_range;        // "MIN:MAX"
  int shared_prefix_tokens = 0;           // a common prefix of every prompt
  int shared_prefixes = 1;                // that many different prefixes, one drawn per request
  uint64_t seed = 1;
  float temperature = 0.0f;               // greedy by default
  std::string json_schema;                // --json-schema: guided output (grpc api)
  std::string json_path;                  // write every number here too
  std::string api = "grpc";               // grpc (Generate) or openai (HTTP /v1/completions)
  std::string http_addr;                  // with --api openai: the router's HTTP HOST:PORT
  bench::ClientAuth auth;                 // --api-key (or $TESSERA_API_KEY), --tls-ca
};
absl::Status RunBench(const BenchOptions& options);

// `tessera serve`: starts tessera-worker and tessera-router (found next to this executable) and
// supervises them; see serve_command.cc.
struct ServeOptions {
  std::string model_path = kDefaultModelPath;
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port (printed when ready)
  int workers = 1;                    // tessera-worker processes (data parallel; serve_workers.h)
  int tensor_parallel = 1;            // devices per worker (cuda/emulated; worker/parallel/)
  int threads = 0;                    // worker CPU threads; 0: the worker's default
  int max_num_seqs = 0;               // 0: the component's default (not passed)
  int max_num_batched_tokens = 0;
  int max_waiting = 0;                // router waiting-queue capacity; 0: its default
  int kv_cache_mb = 0;
  int64_t state_snapshot_mb = -1;  // worker: -1 = its default
  int64_t num_kv_blocks = 0;          // worker KV blocks (incl. the null block); 0: from MiB
  int block_size = 0;                 // tokens per KV block; 0: the worker's default
  bool mmap_weights = false;          // worker maps the GGUF instead of copying it
  std::string activations;            // worker matmul activations; "": its default (f32)
  std::string kv_cache_dtype;         // worker KV pool elements; "": its default (f32)
  std::string device;                 // worker backend (auto|cpu|cuda|emulated); "": auto
  std::string dtype;                  // worker cuda compute type; "": its default (bf16)
  double gpu_memory_utilization = 0;  // worker (cuda); 0: its default (0.90)
  std::string cuda_graphs;            // worker (cuda): lazy|eager|off; "": eager (GPU), lazy
  bool batch_invariant = false;       // worker (cuda): batch-invariant kernels
  bool dequantize_weights = false;    // worker (cuda): quantized projections not kept packed
  bool no_prefix_cache = false;       // router: no KV sharing between requests
  std::string trace_steps_path;       // router: one JSON line per step; "": none
  bool no_web_console = false;        // router: no web console on the HTTP port
  std::string metrics_host = "127.0.0.1";  // where both metrics servers listen
  int metrics_port = -1;              // router /metrics; -1: none, 0: any free port (printed)
  int worker_metrics_port = -1;       // worker /metrics; -1: none, 0: any free port (printed)
  int http_port = 8080;               // router OpenAI HTTP API; 0: off, -1: any free port
  std::string api_key;                // router: required on gRPC and HTTP ($TESSERA_API_KEY)
  std::string tls_cert;               // router: PEM certificate and key = TLS on gRPC and HTTP
  std::string tls_key;
  std::string chat_template;  // router: a Jinja file replacing the model's template
  std::vector<std::string> served_model_names;  // router: --served-model-name, repeatable
  std::vector<std::string> worker_args;  // passed verbatim to tessera-worker (--worker-arg)
  std::vector<std::string> router_args;  // passed verbatim to tessera-router (--router-arg)
  double drain_timeout_s = -1;        // < 0: the router's default
  // Router policies; unset (< 0 / ""): the router's defaults.
  double max_queue_time_s = -1;
  double stream_stall_timeout_s = -1;
  int kv_reserve_horizon = -1;
  int preemption_storm_threshold = -1;
  double preemption_storm_window_s = -1;
  std::string log_level;
  bool no_restart = false;            // exit when a worker dies instead of restarting it
  double startup_timeout_s = 120;     // per child, until it prints its listening line
  std::string bin_dir;                // where the two binaries are; "": next to this executable
};
absl::Status RunServe(const ServeOptions& options);

}  // namespace tessera::cli

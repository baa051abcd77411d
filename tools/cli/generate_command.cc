// `tessera generate --model PATH (--prompt TEXT | --chat TEXT | --token-ids 1,2,3)`: offline
// generation on the runner --device picks (worker/runner_factory.h), streaming text to stdout as tokens arrive; counts and speeds go
// to stderr. With --addr it is a client of tessera-router instead (generate_client.cc).
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chat/chat_template.h"
#include "common/tokenizer/streaming_decoder.h"
#include "common/tokenizer/tokenizer.h"
#include "common/util/load_progress.h"
#include "tools/cli/commands.h"
#include "worker/runner_factory.h"
#include "worker/loaded_model.h"
#include "worker/offline_generation.h"

namespace tessera::cli {
namespace {

absl::StatusOr<std::string> BuildPrompt(const GenerateOptions& options,
                                        const gguf::GgufFile& file) {
  if (options.chat.empty()) return options.prompt;
  absl::StatusOr<chat::ChatTemplate> chat_template = chat::ChatTemplate::FromGguf(file);
  if (!chat_template.ok()) return chat_template.status();
  const chat::ChatMessage message{.role = "user", .content = options.chat};
  return chat_template->Apply({&message, 1}, /*add_generation_prompt=*/true);
}

int64_t KvBlocksFor(int64_t num_tokens, int block_size) {
  return (num_tokens + block_size - 1) / block_size + 1;  // + the null block
}

void PrintStats(const worker::GenerationResult& result, size_t prompt_tokens) {
  const size_t decoded = result.tokens.size();
  std::fprintf(stderr,
               "\n%s\n",
               absl::StrFormat("prompt: %d tokens in %.3f s (%.1f tok/s); decode: %d tokens in "
                               "%.3f s (%.1f tok/s); finish: %s",
                               prompt_tokens, result.prefill_seconds,
                               prompt_tokens / result.prefill_seconds, decoded,
                               result.decode_seconds,
                               decoded > 1 ? (decoded - 1) / result.decode_seconds : 0.0,
                               result.finish_reason == worker::FinishReason::kStop ? "stop"
                                                                                   : "length")
                   .c_str());
}

// Flags only a server can honour.
absl::Status CheckOfflineFlags(const GenerateOptions& options) {
  const char* flag = !options.stop.empty()         ? "--stop"
                     : options.logprobs >= 0       ? "--logprobs"
                     : !options.request_id.empty() ? "--request-id"
                                                   : nullptr;
  if (flag == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, " needs --addr (a running server)"));
}

absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerateOptions& options,
                                               const gguf::GgufFile& file,
                                               const tokenizer::Tokenizer& tok) {
  if (!options.token_ids.empty()) return ParseTokenIds(options.token_ids);
  absl::StatusOr<std::string> prompt = BuildPrompt(options, file);
  if (!prompt.ok()) return prompt.status();
  return tok.Encode(*prompt, {.add_special = true, .parse_special = true});
}

}  // namespace

absl::Status RunGenerate(const GenerateOptions& options) {
  if (!options.addr.empty()) return RunGenerateClient(options);
  if (!options.prompt.empty() + !options.chat.empty() + !options.token_ids.empty() != 1) {
    return absl::InvalidArgumentError("give exactly one of --prompt, --chat or --token-ids");
  }
  absl::Status offline = CheckOfflineFlags(options);
  if (!offline.ok()) return offline;
  absl::StatusOr<std::unique_ptr<worker::LoadedModel>> model = worker::LoadModel(options.model_path);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::FromGguf(*(*model)->file);
  if (!tok.ok()) return tok.status();
  absl::StatusOr<std::vector<int32_t>> prompt_ids = PromptIds(options, *(*model)->file, **tok);
  if (!prompt_ids.ok()) return prompt_ids.status();

  worker::GenerationRequest request;
  request.prompt = *std::move(prompt_ids);
  request.max_tokens = options.max_tokens;
  request.sampling = options.sampling;
  if (!options.ignore_eos && (*tok)->info().eos_id >= 0) {
    request.stop_token_ids.push_back((*tok)->info().eos_id);
  }
  const int block_size = 16;
  const int64_t chunk = request.prefill_chunk;
  // A device backend's start-up (weights upload, graph capture) shows its progress on stderr.
  util::LoadProgress progress({.prefix = "tessera generate",
                               .out = stderr,
                               .terminal = isatty(STDERR_FILENO) == 1});
  absl::StatusOr<worker::BuiltRunner> built = worker::BuildRunner(
      {.device = options.device,
       .dtype = options.dtype,
       .threads = options.threads,
       .block_size = block_size,
       .num_kv_blocks = KvBlocksFor(request.prompt.size() + request.max_tokens, block_size),
       .max_num_seqs = 1,
       .max_num_batched_tokens = static_cast<int>(chunk),
       .activations = options.activations,
       .kv_cache_dtype = options.kv_cache_dtype},
      **model, &progress);
  if (!built.ok()) return built.status();
  if (!built->selection.empty()) std::fprintf(stderr, "%s\n", built->selection.c_str());
  worker::ModelRunner& runner = *built->runner;

  tokenizer::StreamingDecoder decoder(**tok);
  auto stream_token = [&](int32_t id) {
    if (id == (*tok)->info().eos_id && !options.ignore_eos) return;
    absl::StatusOr<std::string> text = decoder.Push(id);
    if (text.ok()) std::fwrite(text->data(), 1, text->size(), stdout);
    std::fflush(stdout);
  };
  absl::StatusOr<worker::GenerationResult> result =
      worker::GenerateOffline(runner, request, stream_token);
  if (!result.ok()) return result.status();
  const std::string rest = decoder.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fflush(stdout);
  PrintStats(*result, request.prompt.size());
  return absl::OkStatus();
}

}  // namespace tessera::cli

// Subcommands of the `tessera` CLI. Each returns the process exit code; errors are printed as one
// line on stderr by main.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "worker/sampler/sampling_params.h"

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

struct GenerateOptions {
  std::string model_path = kDefaultModelPath;
  std::string prompt;          // raw prompt text (no template)
  std::string chat;            // one user message, rendered with the model's chat template
  int max_tokens = 128;
  int threads = 0;             // 0 = one per hardware thread
  bool ignore_eos = false;
  worker::SamplingParams sampling{.temperature = 0.0f};  // greedy unless asked otherwise
};
absl::Status RunGenerate(const GenerateOptions& options);

}  // namespace tessera::cli

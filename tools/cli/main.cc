// `tessera`: the command-line entry point. Subcommands: inspect, tokenize, generate, devices.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "tools/cli/commands.h"

namespace {

int ReportAndExit(const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "tessera: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera: an LLM inference server"};
  app.require_subcommand(1);

  tessera::cli::InspectOptions inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "print a model's architecture, "
                                             "hyper-parameters, tensors and tokenizer facts");
  inspect_cmd->add_option("model", inspect.model_path, "GGUF model file")
      ->capture_default_str();
  inspect_cmd->add_flag("--tensors", inspect.list_tensors, "list every tensor");

  tessera::cli::TokenizeOptions tokenize;
  CLI::App* tokenize_cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  tokenize_cmd->add_option("model", tokenize.model_path, "GGUF model file")->required();
  tokenize_cmd->add_option("text", tokenize.text, "text to tokenize")->required();
  tokenize_cmd->add_flag("--add-special", tokenize.add_special,
                         "add BOS/EOS as the model's tokenizer asks");
  tokenize_cmd->add_flag("!--no-parse-special", tokenize.parse_special,
                         "treat special-token text like <|im_start|> as plain text");
  tokenize_cmd->add_flag("--pieces", tokenize.show_pieces, "print one 'id<TAB>piece' per line");

  tessera::cli::GenerateOptions generate;
  CLI::App* generate_cmd = app.add_subcommand("generate", "generate text offline on the CPU");
  generate_cmd->add_option("--model", generate.model_path, "GGUF model file")->capture_default_str();
  generate_cmd->add_option("--prompt", generate.prompt, "raw prompt text");
  generate_cmd->add_option("--chat", generate.chat, "a user message (chat template applied)");
  generate_cmd->add_option("--max-tokens", generate.max_tokens)->capture_default_str();
  generate_cmd->add_option("--threads", generate.threads, "0 = all hardware threads");
  generate_cmd->add_flag("--ignore-eos", generate.ignore_eos);
  generate_cmd->add_option("--temperature", generate.sampling.temperature, "0 = greedy");
  generate_cmd->add_option("--top-k", generate.sampling.top_k);
  generate_cmd->add_option("--top-p", generate.sampling.top_p);
  generate_cmd->add_option("--min-p", generate.sampling.min_p);
  generate_cmd->add_option("--repetition-penalty", generate.sampling.repetition_penalty);
  generate_cmd->add_option("--presence-penalty", generate.sampling.presence_penalty);
  generate_cmd->add_option("--frequency-penalty", generate.sampling.frequency_penalty);
  generate_cmd->add_option("--seed", generate.sampling.seed);

  CLI::App* devices_cmd = app.add_subcommand("devices", "list the CUDA devices this build can use");

  CLI11_PARSE(app, argc, argv);
  if (inspect_cmd->parsed()) return ReportAndExit(tessera::cli::RunInspect(inspect));
  if (tokenize_cmd->parsed()) return ReportAndExit(tessera::cli::RunTokenize(tokenize));
  if (generate_cmd->parsed()) return ReportAndExit(tessera::cli::RunGenerate(generate));
  if (devices_cmd->parsed()) return ReportAndExit(tessera::cli::RunDevices());
  return 1;
}

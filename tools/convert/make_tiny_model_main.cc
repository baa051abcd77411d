// `tessera-make-tiny-model`: writes a small random llama GGUF (see tiny_model.h) for tests and
// local experiments, e.g. `tessera-make-tiny-model --out /tmp/tiny.gguf --layers 4`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "tools/convert/tiny_model.h"

int main(int argc, char** argv) {
  tessera::convert::TinyModelOptions options;
  std::string out_path;
  bool untied = false;

  CLI::App app{"tessera-make-tiny-model: write a small random llama GGUF for tests"};
  app.add_option("--out", out_path, "output .gguf path")->required();
  app.add_option("--layers", options.num_layers, "transformer blocks")->capture_default_str();
  app.add_option("--hidden", options.hidden, "embedding width (multiple of 32)")
      ->capture_default_str();
  app.add_option("--heads", options.num_heads, "attention heads")->capture_default_str();
  app.add_option("--kv-heads", options.num_kv_heads, "key/value heads (divides --heads)")
      ->capture_default_str();
  app.add_option("--ffn", options.ffn, "feed-forward width (multiple of 32)")
      ->capture_default_str();
  app.add_option("--context", options.context_length, "context length")->capture_default_str();
  app.add_option("--merges", options.num_merges, "BPE merges to train")->capture_default_str();
  app.add_option("--seed", options.seed, "random seed for the weights")->capture_default_str();
  app.add_flag("--untied", untied, "write a separate output.weight instead of tying embeddings");
  CLI11_PARSE(app, argc, argv);
  options.tied_embeddings = !untied;

  absl::Status status = tessera::convert::WriteTinyLlamaGguf(options, out_path);
  if (!status.ok()) {
    std::fprintf(stderr, "tessera-make-tiny-model: error: %s\n",
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

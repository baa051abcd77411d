// `tessera-make-tiny-model`: writes a small random GGUF for tests, local experiments and CPU
// benchmarks: a `llama` (tiny_model.h, the default), `qwen2` or `qwen3`, or a hybrid
// Gated-DeltaNet `qwen35`, `qwen35moe` or `qwen3next` (tiny_hybrid_model.h), e.g.
//   tessera-make-tiny-model --out /tmp/tiny.gguf --layers 4
//   tessera-make-tiny-model --arch qwen35moe --out /tmp/moe.gguf --hidden 1024 --layers 16
//       --experts 8 --weight-type q8_0
// The dense ones can be written as a Hugging Face directory instead (hf_export.h): the HF twin of
// the GGUF the same flags write, in safetensors (--format safetensors [--shards N]) or in
// NVIDIA ModelOpt's NVFP4 layout (--format modelopt-nvfp4), e.g.
//   tessera-make-tiny-model --arch qwen3 --format safetensors --shards 2 --out /tmp/tiny-qwen3
// Sizes left out take the chosen architecture's defaults. A flag the architecture does not use
// (--experts for llama or qwen35, --ffn for qwen35moe, ...) is an error naming it.
#include <filesystem>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_file.h"
#include "tools/convert/hf_export.h"
#include "tools/convert/tiny_hybrid_model.h"
#include "tools/convert/tiny_model.h"

namespace {

using tessera::convert::TinyHybridArch;
using tessera::convert::TinyHybridOptions;
using tessera::convert::TinyModelOptions;

// Every size flag; unset ones keep the architecture's default.
struct SizeFlags {
  std::optional<int> layers, hidden, heads, kv_heads, ffn, context, merges;
  std::optional<uint64_t> seed;
  std::optional<int> attention_interval, head_dim, rope_dim;
  std::optional<int> gdn_k_heads, gdn_v_heads, gdn_head_dim, conv_kernel;
  std::optional<int> experts, experts_used, expert_ffn, shared_ffn;
  std::optional<std::string> weight_type;
  std::optional<std::string> chat_style;
};

template <typename T>
void Apply(const std::optional<T>& flag, T* field) {
  if (flag.has_value()) *field = *flag;
}

// A flag that only some architectures read.
struct ArchSpecificFlag {
  const char* name;
  bool given;
  bool llama, qwen35, qwen35moe, qwen3next;  // which architectures use it
};

// OK, or INVALID_ARGUMENT naming the first given flag that `arch` does not use.
absl::Status CheckFlagsApply(const std::string& arch, const SizeFlags& f) {
  const std::vector<ArchSpecificFlag> flags = {
      {"--ffn", f.ffn.has_value(), true, true, false, true},
      {"--attention-interval", f.attention_interval.has_value(), false, true, true, true},
      {"--head-dim", f.head_dim.has_value(), false, true, true, true},
      {"--rope-dim", f.rope_dim.has_value(), false, true, true, true},
      {"--gdn-k-heads", f.gdn_k_heads.has_value(), false, true, true, true},
      {"--gdn-v-heads", f.gdn_v_heads.has_value(), false, true, true, true},
      {"--gdn-head-dim", f.gdn_head_dim.has_value(), false, true, true, true},
      {"--conv-kernel", f.conv_kernel.has_value(), false, true, true, true},
      {"--experts", f.experts.has_value(), false, false, true, true},
      {"--experts-used", f.experts_used.has_value(), false, false, true, true},
      {"--expert-ffn", f.expert_ffn.has_value(), false, false, true, true},
      {"--shared-ffn", f.shared_ffn.has_value(), false, false, true, true},
      {"--weight-type", f.weight_type.has_value(), false, true, true, true},
      {"--chat-style", f.chat_style.has_value(), true, false, false, false},
  };
  for (const ArchSpecificFlag& flag : flags) {
    const bool dense = arch == "llama" || arch == "qwen2" || arch == "qwen3";
    const bool used = dense                 ? flag.llama
                      : arch == "qwen35"    ? flag.qwen35
                      : arch == "qwen35moe" ? flag.qwen35moe
                                            : flag.qwen3next;
    if (flag.given && !used) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag.name, " does not apply to --arch ", arch));
    }
  }
  return absl::OkStatus();
}

// Where and how the model is written: a GGUF file, or a HF directory (dense architectures).
struct OutputFlags {
  std::string path;
  std::string format = "gguf";
  int shards = 1;
};

absl::Status CheckOutputFlags(bool hybrid, const OutputFlags& out) {
  if (hybrid && out.format != "gguf") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format ", out.format, " applies to llama, qwen2 and qwen3 only"));
  }
  if (out.format == "gguf" && out.shards != 1) {
    return absl::InvalidArgumentError("--shards applies to the HF formats only");
  }
  return absl::OkStatus();
}

absl::Status WriteDense(const std::string& arch, const SizeFlags& f, bool untied,
                        const OutputFlags& out) {
  TinyModelOptions o;
  o.arch = *tessera::convert::ParseTinyDenseArch(arch);
  Apply(f.layers, &o.num_layers);
  Apply(f.hidden, &o.hidden);
  Apply(f.heads, &o.num_heads);
  Apply(f.kv_heads, &o.num_kv_heads);
  Apply(f.ffn, &o.ffn);
  Apply(f.context, &o.context_length);
  Apply(f.merges, &o.num_merges);
  Apply(f.seed, &o.seed);
  o.tied_embeddings = !untied;
  if (f.chat_style == "llama3") o.chat_style = tessera::convert::TinyChatStyle::kLlama3;
  if (out.format == "gguf") return tessera::convert::WriteTinyLlamaGguf(o, out.path);
  absl::StatusOr<std::vector<uint8_t>> image = tessera::convert::BuildTinyLlamaGguf(o);
  if (!image.ok()) return image.status();
  absl::StatusOr<std::unique_ptr<tessera::gguf::GgufFile>> file =
      tessera::gguf::GgufFile::FromBuffer(*std::move(image));
  if (!file.ok()) return file.status();
  return tessera::convert::ExportHfDirectory(
      **file, {.num_shards = out.shards, .nvfp4 = out.format == "modelopt-nvfp4"}, out.path);
}

absl::Status WriteHybrid(TinyHybridArch arch, const SizeFlags& f, bool untied,
                         const std::string& out_path) {
  TinyHybridOptions o;
  o.arch = arch;
  Apply(f.layers, &o.num_layers);
  Apply(f.hidden, &o.hidden);
  Apply(f.heads, &o.num_heads);
  Apply(f.kv_heads, &o.num_kv_heads);
  Apply(f.ffn, &o.ffn);
  Apply(f.context, &o.context_length);
  Apply(f.merges, &o.num_merges);
  Apply(f.seed, &o.seed);
  Apply(f.attention_interval, &o.full_attention_interval);
  Apply(f.head_dim, &o.head_dim);
  Apply(f.rope_dim, &o.rope_dim);
  Apply(f.gdn_k_heads, &o.gdn_k_heads);
  Apply(f.gdn_v_heads, &o.gdn_v_heads);
  Apply(f.gdn_head_dim, &o.gdn_head_dim);
  Apply(f.conv_kernel, &o.conv_kernel);
  Apply(f.experts, &o.num_experts);
  Apply(f.experts_used, &o.num_experts_used);
  Apply(f.expert_ffn, &o.expert_ffn);
  Apply(f.shared_ffn, &o.shared_expert_ffn);
  if (f.weight_type) {
    std::optional<tessera::convert::TinyWeightType> type =
        tessera::convert::ParseTinyWeightType(*f.weight_type);
    if (!type) {
      return absl::InvalidArgumentError(absl::StrCat("--weight-type ", *f.weight_type,
                                                     " is not one of f32, f16, q8_0, q4_1, mixed"));
    }
    o.weight_type = *type;
  }
  o.tied_embeddings = !untied;
  return tessera::convert::WriteTinyHybridGguf(o, out_path);
}

void AddSizeFlags(CLI::App& app, SizeFlags& f) {
  app.add_option("--layers", f.layers, "blocks (llama 2, hybrids 4)");
  app.add_option("--hidden", f.hidden, "embedding width, multiple of 32 (64)");
  app.add_option("--heads", f.heads, "attention heads (4)");
  app.add_option("--kv-heads", f.kv_heads, "key/value heads, divides --heads (2)");
  app.add_option("--ffn", f.ffn, "dense feed-forward width (128; llama: multiple of 32)");
  app.add_option("--context", f.context, "context length (llama 256, hybrids 4096)");
  app.add_option("--merges", f.merges, "BPE merges to train (200)");
  app.add_option("--seed", f.seed, "random seed for the weights (1)");
  app.add_option("--attention-interval", f.attention_interval,
                 "hybrids: every Nth layer is full attention (4)");
  app.add_option("--head-dim", f.head_dim, "hybrids: attention head width, even (32)");
  app.add_option("--rope-dim", f.rope_dim, "hybrids: rotated dims per head, even (8)");
  app.add_option("--gdn-k-heads", f.gdn_k_heads, "hybrids: GDN key heads (2)");
  app.add_option("--gdn-v-heads", f.gdn_v_heads,
                 "hybrids: GDN value heads, multiple of --gdn-k-heads (4)");
  app.add_option("--gdn-head-dim", f.gdn_head_dim, "hybrids: GDN key and value head width (16)");
  app.add_option("--conv-kernel", f.conv_kernel, "hybrids: GDN causal conv width (4)");
  app.add_option("--experts", f.experts, "qwen35moe/qwen3next: routed experts (8)");
  app.add_option("--experts-used", f.experts_used, "qwen35moe/qwen3next: experts per token (2)");
  app.add_option("--expert-ffn", f.expert_ffn, "qwen35moe/qwen3next: expert FFN width (32)");
  app.add_option("--shared-ffn", f.shared_ffn, "qwen35moe/qwen3next: shared expert width (64)");
  app.add_option("--weight-type", f.weight_type,
                 "hybrids: matrix storage f32 (default), f16, q8_0, q4_1 or mixed");
}

}  // namespace

int main(int argc, char** argv) {
  OutputFlags out;
  std::string arch = "llama";
  bool untied = false;
  SizeFlags sizes;

  CLI::App app{"tessera-make-tiny-model: write a small random GGUF for tests and benchmarks"};
  app.add_option("--out", out.path, "output .gguf path (a directory for the HF formats)")
      ->required();
  app.add_option("--arch", arch, "architecture")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen35", "qwen35moe", "qwen3next"}))
      ->capture_default_str();
  app.add_option("--format", out.format,
                 "gguf, or a HF directory: safetensors or modelopt-nvfp4 (llama, qwen2, qwen3)")
      ->check(CLI::IsMember({"gguf", "safetensors", "modelopt-nvfp4"}))
      ->capture_default_str();
  app.add_option("--shards", out.shards, "HF formats: number of .safetensors files (1)")
      ->check(CLI::PositiveNumber);
  AddSizeFlags(app, sizes);
  app.add_flag("--untied", untied, "write a separate output.weight instead of tying embeddings");
  app.add_option("--chat-style", sizes.chat_style,
                 "llama, qwen2, qwen3: special tokens and chat template, chatml (SmolLM2's, the "
                 "default) or llama3 (Llama 3 Instruct's)")
      ->check(CLI::IsMember({"chatml", "llama3"}));
  CLI11_PARSE(app, argc, argv);

  absl::Status status = CheckFlagsApply(arch, sizes);
  const std::optional<TinyHybridArch> hybrid = tessera::convert::ParseTinyHybridArch(arch);
  if (status.ok()) status = CheckOutputFlags(hybrid.has_value(), out);
  if (status.ok()) {
    status = hybrid ? WriteHybrid(*hybrid, sizes, untied, out.path)
                    : WriteDense(arch, sizes, untied, out);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tessera-make-tiny-model: error: %s\n",
                 std::string(status.message()).c_str());
    return 1;
  }
  std::error_code ignored;
  const bool directory = std::filesystem::is_directory(out.path, ignored);
  std::printf("tessera-make-tiny-model: wrote %s (%s %s, %s)\n", out.path.c_str(),
              arch.c_str(), directory ? out.format.c_str() : "gguf",
              directory ? "a Hugging Face directory"
                        : absl::StrCat(std::filesystem::file_size(out.path, ignored), " bytes")
                              .c_str());
  return 0;
}

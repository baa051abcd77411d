// `tessera inspect MODEL`: what a person needs to know about a model (a GGUF file or a HF
// safetensors directory) before serving it.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/chat/chat_template.h"
#include "common/gguf/gguf_file.h"
#include "common/model/hybrid_layout.h"
#include "common/model/hybrid_tensors.h"
#include "common/model/model_config.h"
#include "common/safetensors/hf_gguf_view.h"
#include "common/safetensors/model_file.h"
#include "common/tokenizer/tokenizer.h"
#include "tools/cli/commands.h"
#include "worker/cuda_packed_rule.h"
#include "worker/models/model_plan.h"

namespace tessera::cli {
namespace {

void PrintField(const char* label, const std::string& value) {
  std::printf("%-15s %s\n", absl::StrCat(label, ":").c_str(), value.c_str());
}

// The source format; a safetensors directory's counts are of its files, not of a GGUF layout.
void PrintFileFacts(const std::string& path, const gguf::GgufFile& file) {
  PrintField("model", path);
  if (file.HasKey(safetensors::kSourceFormatKey)) {
    PrintField("format", absl::StrFormat(
                             "safetensors directory (%d shard%s; %s)",
                             file.GetInt(safetensors::kSourceShardsKey).value_or(0),
                             file.GetInt(safetensors::kSourceShardsKey).value_or(0) == 1 ? ""
                                                                                          : "s",
                             file.GetString(safetensors::kSourceDtypesKey).value_or("")));
    return;
  }
  PrintField("format", "GGUF file");
  PrintField("gguf", absl::StrFormat("v%d, %d metadata keys, %d tensors, alignment %d, "
                                     "data at byte %d, %d bytes",
                                     file.version(), file.metadata().size(),
                                     file.tensors().size(), file.alignment(), file.data_offset(),
                                     file.file_size()));
}

// Only when the model scales RoPE, so unscaled models print what they always did.
void PrintRopeScaling(const model::ModelConfig& c) {
  const model::RopeScaling& s = c.rope_scaling;
  if (s.type == model::RopeScalingType::kNone) return;
  std::string text =
      absl::StrFormat("%s, factor %g", model::RopeScalingTypeName(s.type), s.factor);
  if (s.type == model::RopeScalingType::kYarn) {
    absl::StrAppendFormat(&text, ", original context %d, beta fast %g / slow %g",
                          s.original_context_length, s.yarn_beta_fast, s.yarn_beta_slow);
  }
  if (s.attn_factor != 1.0) absl::StrAppendFormat(&text, ", attn factor %g", s.attn_factor);
  PrintField("rope scaling", text);
}

// Llama 3.1+ conversions carry their frequency scaling as a tensor instead of metadata.
void PrintRopeFreqs(const gguf::GgufFile& file) {
  const gguf::GgufTensorInfo* freqs = file.FindTensor("rope_freqs.weight");
  if (freqs == nullptr) return;
  PrintField("rope freqs", absl::StrFormat("rope_freqs.weight %s [%s] (per-pair divisors)",
                                           gguf::GgmlTypeName(freqs->type),
                                           absl::StrJoin(freqs->dims, ", ")));
}

// "79036416 bytes (75.4 MiB)": exact for scripts, readable for people.
std::string Bytes(int64_t n) {
  if (n < 1024) return absl::StrCat(n, " bytes");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(n);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%d bytes (%.1f %s)", n, value, kUnits[unit]);
}

// The hybrid Gated-DeltaNet facts a person needs before serving one: what each layer kind holds,
// the experts, and the recurrent state every sequence carries next to its KV blocks.
void PrintHybridLayout(const model::ModelConfig& c, const model::HybridTensorForms& forms) {
  const model::HybridLayout& h = *c.hybrid;
  const model::GdnDims& g = h.gdn;
  PrintField("gdn", absl::StrFormat(
                        "conv kernel %d over %d channels, %d key heads x %d, %d value heads x %d "
                        "(%s onto key heads)%s",
                        g.conv_kernel, model::GdnConvChannels(g), g.num_k_heads, g.head_k_dim,
                        g.num_v_heads, g.head_v_dim,
                        g.head_order == model::GdnHeadOrder::kGrouped ? "grouped" : "tiled",
                        forms.gdn_fused_qkvz ? ", fused ssm_in" : ""));
  std::string attention = absl::StrFormat(
      "gated (attn_q = query + sigmoid gate), q/k RMSNorm, rope on %d of %d dims", c.rope_dim,
      c.head_dim);
  if (h.rope_sections[0] > 0) {
    absl::StrAppend(&attention, ", M-RoPE sections [", absl::StrJoin(h.rope_sections, ", "),
                    "] (neox for text)");
  }
  PrintField("attention", attention);
  if (h.moe) {
    PrintField("experts", absl::StrFormat("%d, %d used per token, expert ffn %d, shared expert "
                                          "ffn %d%s",
                                          h.moe->num_experts, h.moe->num_experts_used,
                                          h.moe->expert_ffn_size, h.moe->shared_expert_ffn_size,
                                          forms.moe_fused_gate_up ? ", fused gate_up" : ""));
  }
  const model::RecurrentStateBytes state = model::PerSequenceStateBytes(h);
  PrintField("state/sequence",
             absl::StrFormat("%s f32 over %d GDN layers (conv %d + delta rule %d)",
                             Bytes(state.total),
                             model::CountLayers(h, model::LayerKind::kGatedDeltaNet), state.conv,
                             state.ssm));
  if (h.num_nextn_layers > 0) {
    PrintField("mtp layers", absl::StrCat(h.num_nextn_layers, " after the trunk (not run)"));
  }
}

void PrintHyperParameters(const gguf::GgufFile& file, const model::ModelConfig& c) {
  PrintField("architecture", c.architecture);
  if (!c.name.empty()) PrintField("name", c.name);
  PrintField("layers", c.hybrid ? model::DescribeLayerLayout(*c.hybrid)
                                : absl::StrCat(c.num_layers));
  PrintField("hidden", absl::StrCat(c.hidden_size));
  // An MoE hybrid's FFN widths are on its "experts" line (feed_forward_length is at most their
  // fallback there).
  if (!c.hybrid || !c.hybrid->moe) PrintField("ffn", absl::StrCat(c.ffn_size));
  PrintField("heads", absl::StrCat(c.num_heads));
  PrintField("kv heads", absl::StrCat(c.num_kv_heads));
  PrintField("head dim", absl::StrCat(c.head_dim, " (rope dim ", c.rope_dim, ")"));
  PrintField("context", absl::StrCat(c.context_length));
  PrintField("vocab", absl::StrCat(c.vocab_size));
  // The pairing decides whether the Q/K weights are read as llama.cpp's permuted llama layout or
  // as trained (Qwen), so it is worth seeing next to theta.
  PrintField("rope", absl::StrFormat("theta %g, %s mode (%s)", c.rope_theta,
                                     c.rope_neox ? "neox" : "normal",
                                     c.rope_neox ? "pairs i, i + rope_dim/2" : "adjacent pairs"));
  PrintRopeScaling(c);
  PrintRopeFreqs(file);
  PrintField("rms eps", absl::StrFormat("%g", c.rms_norm_eps));
  PrintField("embeddings", c.tied_embeddings ? "tied (output reuses token_embd)" : "separate");
}

void PrintTensorSummary(const gguf::GgufFile& file) {
  std::map<std::string, int> count_by_type;
  uint64_t num_params = 0;
  uint64_t num_bytes = 0;
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    ++count_by_type[gguf::GgmlTypeName(t.type)];
    num_params += t.num_elements;
    num_bytes += t.num_bytes;
  }
  std::string types = absl::StrJoin(count_by_type, ", ", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first, " x", kv.second);
  });
  PrintField("tensors", absl::StrFormat("%d (%s); %.1fM parameters, %.1f MiB",
                                        file.tensors().size(), types, num_params / 1e6,
                                        num_bytes / double(1 << 20)));
}

// How the cuda backend holds the declared tensors at --dtype bf16 (worker/cuda_packed_rule.h):
// projections and expert stacks packed in their file's quantized format, an untied embedding
// table in its quantized rows, the rest dequantized to bf16.
void PrintCudaWeights(const gguf::GgufFile& file, const model::ModelConfig& config,
                      const model::HybridTensorForms& forms) {
  const absl::StatusOr<worker::ModelPlan> plan = worker::PlanModel(config, forms);
  if (!plan.ok()) return;  // an architecture no backend runs: nothing to say
  std::map<std::string, int> packed_by_type;
  int dense = 0;
  int64_t packed_params = 0, packed_bytes = 0, dense_bytes = 0;
  for (const worker::WeightSpec& spec : plan->weights.specs()) {
    const gguf::GgufTensorInfo* info = file.FindTensor(spec.name);
    if (info == nullptr || spec.role == worker::WeightRole::kDense) continue;
    if (const auto scheme = worker::CudaPackedScheme(spec, info->type)) {
      ++packed_by_type[gguf::GgmlTypeName(info->type)];
      packed_params += spec.elements();
      packed_bytes += cuda::PackedWeightBytes(*scheme, worker::PackedMatrixRows(spec), spec.cols());
    } else if (worker::KeepsEmbeddingRows(spec, info->type)) {
      ++packed_by_type[gguf::GgmlTypeName(info->type)];
      packed_params += spec.elements();
      packed_bytes += static_cast<int64_t>(info->num_bytes);
    } else {
      ++dense;
      dense_bytes += spec.elements() * 2;
    }
  }
  const std::string types = absl::StrJoin(
      packed_by_type, ", ",
      [](std::string* out, const auto& kv) { absl::StrAppend(out, kv.first, " x", kv.second); });
  const std::string packed =
      packed_by_type.empty()
          ? "none packed"
          : absl::StrFormat("packed %s (%.4f B/weight)", types,
                            double(packed_bytes) / double(packed_params));
  PrintField("cuda weights", absl::StrFormat("%s; %d dense in bf16; %.1f MiB at --dtype bf16",
                                             packed, dense,
                                             (packed_bytes + dense_bytes) / double(1 << 20)));
}

void PrintTensorList(const gguf::GgufFile& file) {
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    std::printf("  %-32s %-6s [%s]\n", t.name.c_str(), gguf::GgmlTypeName(t.type).c_str(),
                absl::StrJoin(t.dims, ", ").c_str());
  }
}

std::string DescribeToken(const tokenizer::Tokenizer& tok, tokenizer::TokenId id) {
  if (id < 0) return "none";
  return absl::StrCat(id, " '", std::string(tok.TokenText(id)), "'");
}

void PrintTokenizer(const gguf::GgufFile& file) {
  auto tok = tokenizer::Tokenizer::FromGguf(file);
  if (!tok.ok()) {
    PrintField("tokenizer", absl::StrCat("unsupported: ", tok.status().message()));
    return;
  }
  const tokenizer::TokenizerInfo& info = (*tok)->info();
  PrintField("tokenizer", absl::StrFormat("%s (pre-tokenizer %s), %d tokens, %d merges, "
                                          "%d special",
                                          info.model, info.pre_tokenizer, info.vocab_size,
                                          info.num_merges, info.num_special));
  PrintField("special ids", absl::StrCat("bos ", DescribeToken(**tok, info.bos_id), ", eos ",
                                         DescribeToken(**tok, info.eos_id), ", pad ",
                                         DescribeToken(**tok, info.pad_id), ", unk ",
                                         DescribeToken(**tok, info.unk_id)));
  PrintField("add bos/eos", absl::StrCat(info.add_bos ? "yes" : "no", "/",
                                         info.add_eos ? "yes" : "no"));
}

void PrintChatTemplate(const gguf::GgufFile& file) {
  auto chat_template = chat::ChatTemplate::FromGguf(file);
  if (!chat_template.ok()) {
    PrintField("chat template", absl::StrCat("unusable: ", chat_template.status().message()));
    return;
  }
  std::string description = absl::StrCat("jinja (", chat_template->shape());
  if (chat_template->has_default_system_prompt()) {
    absl::StrAppend(&description, "; default system prompt \"",
                    *chat_template->default_system_prompt(), "\"");
  }
  PrintField("chat template", description + ")");
}

// The verdict a person wants first: can `tessera serve` run this file, and if not, why.
void PrintServable(const gguf::GgufFile& file, const model::ModelConfig& config,
                   const model::HybridTensorForms& forms) {
  const absl::StatusOr<worker::ModelPlan> plan = worker::PlanModel(config, forms);
  if (!plan.ok()) {
    PrintField("can serve", absl::StrCat("no: ", plan.status().message()));
    return;
  }
  auto tok = tokenizer::Tokenizer::FromGguf(file);
  if (!tok.ok()) {
    PrintField("can serve", absl::StrCat("no: the tokenizer is unsupported (",
                                         tok.status().message(), ")"));
    return;
  }
  auto chat_template = chat::ChatTemplate::FromGguf(file);
  PrintField("can serve",
             chat_template.ok()
                 ? "yes (cpu and cuda backends; completions and chat)"
                 : absl::StrCat("yes, completions only: chat requests are refused because the "
                                "chat template is unusable (",
                                chat_template.status().message(),
                                "; --chat-template FILE supplies one)"));
}

}  // namespace

// A file no model definition serves: what it is, and a plain "no" saying why (exit 0: the file
// was read; it is the model that is unsupported).
void PrintUnservedArchitecture(const std::string& path, const gguf::GgufFile& file,
                               const std::string& architecture) {
  PrintFileFacts(path, file);
  PrintField("architecture", architecture);
  PrintField("name", file.GetString("general.name").value_or(""));
  PrintTensorSummary(file);
  PrintTokenizer(file);
  PrintChatTemplate(file);
  PrintField("can serve", absl::StrCat("no: architecture '", architecture,
                                       "' is not supported (supported: ",
                                       worker::kServedArchitectures, ")"));
}

absl::Status RunInspect(const InspectOptions& options) {
  auto file = safetensors::OpenModelFile(options.model_path);
  if (!file.ok()) return file.status();
  const absl::StatusOr<std::string> architecture = (*file)->GetString("general.architecture");
  if (architecture.ok() && !worker::IsServedArchitecture(*architecture)) {
    PrintUnservedArchitecture(options.model_path, **file, *architecture);
    return absl::OkStatus();
  }
  auto config = model::ReadModelConfig(**file);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.model_path, ": ", config.status().message()));
  }
  // A hybrid's tensors must match its declared layout before anything is shown as fact.
  model::HybridTensorForms forms;
  if (config->hybrid) {
    absl::StatusOr<model::HybridTensorForms> checked = model::CheckHybridTensors(**file, *config);
    if (!checked.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.model_path, ": ", checked.status().message()));
    }
    forms = *checked;
  }
  PrintFileFacts(options.model_path, **file);
  PrintHyperParameters(**file, *config);
  if (config->hybrid) PrintHybridLayout(*config, forms);
  PrintTensorSummary(**file);
  PrintCudaWeights(**file, *config, forms);
  if (options.list_tensors) PrintTensorList(**file);
  PrintTokenizer(**file);
  PrintChatTemplate(**file);
  PrintServable(**file, *config, forms);
  return absl::OkStatus();
}

}  // namespace tessera::cli

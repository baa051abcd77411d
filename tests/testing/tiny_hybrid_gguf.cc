#include "tests/testing/tiny_hybrid_gguf.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tessera::testing_util {
namespace {

using Dims = std::vector<uint64_t>;

constexpr uint64_t kHidden = kTinyHybridHidden;
constexpr uint64_t kVocab = kTinyHybridVocab;
constexpr uint64_t kHeads = 4;
constexpr uint64_t kKvHeads = 2;
constexpr uint64_t kHeadDim = 16;
constexpr uint64_t kConvKernel = 4;
constexpr uint64_t kKeyHeads = 2;
constexpr uint64_t kValueHeads = 4;
constexpr uint64_t kStateDim = 8;  // key and value head width
constexpr uint64_t kExperts = 4;
constexpr uint64_t kExpertFfn = 16;
constexpr uint64_t kSharedFfn = 24;
constexpr uint64_t kDenseFfn = 48;

template <typename T>
gguf::GgufValue Value(T v) {
  return gguf::GgufValue(gguf::GgufValue::Storage(std::in_place_type<T>, std::move(v)));
}

gguf::GgufValue Int32Array(const std::vector<int32_t>& values) {
  gguf::GgufArray array;
  array.element_type = gguf::GgufValueType::kInt32;
  for (int32_t v : values) array.elements.push_back(Value<int32_t>(v));
  return Value<gguf::GgufArray>(std::move(array));
}

std::string Blk(int layer, const char* what, const char* suffix = ".weight") {
  return absl::StrCat("blk.", layer, ".", what, suffix);
}

}  // namespace

TinyHybridGguf::TinyHybridGguf(std::string architecture) : architecture_(std::move(architecture)) {
  if (architecture_ != "qwen3next" && architecture_ != "qwen35" && architecture_ != "qwen35moe") {
    std::abort();  // a test bug: the fixture only knows these three
  }
  AddMetadata();
  AddTensors();
}

void TinyHybridGguf::AddMetadata() {
  SetValue("general.architecture", Value<std::string>(architecture_));
  SetValue("general.name", Value<std::string>("tiny-" + architecture_));
  SetUint32(Key("block_count"), kTinyHybridLayers);
  SetUint32(Key("context_length"), 256);
  SetUint32(Key("embedding_length"), kHidden);
  if (architecture_ != "qwen35moe") SetUint32(Key("feed_forward_length"), kDenseFfn);
  SetUint32(Key("attention.head_count"), kHeads);
  SetUint32(Key("attention.head_count_kv"), kKvHeads);
  SetUint32(Key("attention.key_length"), kHeadDim);
  SetUint32(Key("attention.value_length"), kHeadDim);
  SetValue(Key("attention.layer_norm_rms_epsilon"), Value<float>(1e-6f));
  SetUint32(Key("rope.dimension_count"), kHeadDim / 2);  // partial rotary factor 0.5
  SetValue(Key("rope.freq_base"), Value<float>(1e7f));
  SetUint32(Key("ssm.conv_kernel"), kConvKernel);
  SetUint32(Key("ssm.state_size"), kStateDim);
  SetUint32(Key("ssm.group_count"), kKeyHeads);
  SetUint32(Key("ssm.time_step_rank"), kValueHeads);
  SetUint32(Key("ssm.inner_size"), kStateDim * kValueHeads);
  SetUint32(Key("full_attention_interval"), 4);
  SetUint32(Key("vocab_size"), kVocab);
  if (architecture_ != "qwen35") {
    SetUint32(Key("expert_count"), kExperts);
    SetUint32(Key("expert_used_count"), 2);
    SetUint32(Key("expert_feed_forward_length"), kExpertFfn);
    SetUint32(Key("expert_shared_feed_forward_length"), kSharedFfn);
  }
  if (architecture_ != "qwen3next") {
    SetValue(Key("rope.dimension_sections"), Int32Array({2, 1, 1, 0}));  // 4 pairs = 8 dims
  }
}

void TinyHybridGguf::AddTensors() {
  SetTensorDims("token_embd.weight", {kHidden, kVocab});
  SetTensorDims("output_norm.weight", {kHidden});
  SetTensorDims("output.weight", {kHidden, kVocab});
  for (int layer = 0; layer < kTinyHybridLayers; ++layer) AddLayerTensors(layer);
}

void TinyHybridGguf::AddLayerTensors(int layer) {
  const uint64_t key_dim = kKeyHeads * kStateDim;
  const uint64_t value_dim = kValueHeads * kStateDim;
  SetTensorDims(Blk(layer, "attn_norm"), {kHidden});
  SetTensorDims(Blk(layer, "post_attention_norm"), {kHidden});
  if (layer % 4 == 3) {  // full attention; attn_q is [query | gate] per head
    SetTensorDims(Blk(layer, "attn_q"), {kHidden, 2 * kHeads * kHeadDim});
    SetTensorDims(Blk(layer, "attn_k"), {kHidden, kKvHeads * kHeadDim});
    SetTensorDims(Blk(layer, "attn_v"), {kHidden, kKvHeads * kHeadDim});
    SetTensorDims(Blk(layer, "attn_output"), {kHeads * kHeadDim, kHidden});
    SetTensorDims(Blk(layer, "attn_q_norm"), {kHeadDim});
    SetTensorDims(Blk(layer, "attn_k_norm"), {kHeadDim});
  } else {
    SetTensorDims(Blk(layer, "attn_qkv"), {kHidden, 2 * key_dim + value_dim});
    SetTensorDims(Blk(layer, "attn_gate"), {kHidden, value_dim});
    SetTensorDims(Blk(layer, "ssm_conv1d"), {kConvKernel, 2 * key_dim + value_dim});
    SetTensorDims(Blk(layer, "ssm_dt", ".bias"), {kValueHeads});
    SetTensorDims(Blk(layer, "ssm_a", ""), {kValueHeads});
    if (architecture_ == "qwen3next") {
      SetTensorDims(Blk(layer, "ssm_ba"), {kHidden, 2 * kValueHeads});
    } else {
      SetTensorDims(Blk(layer, "ssm_beta"), {kHidden, kValueHeads});
      SetTensorDims(Blk(layer, "ssm_alpha"), {kHidden, kValueHeads});
    }
    SetTensorDims(Blk(layer, "ssm_norm"), {kStateDim});
    SetTensorDims(Blk(layer, "ssm_out"), {value_dim, kHidden});
  }
  if (architecture_ == "qwen35") {
    SetTensorDims(Blk(layer, "ffn_gate"), {kHidden, kDenseFfn});
    SetTensorDims(Blk(layer, "ffn_up"), {kHidden, kDenseFfn});
    SetTensorDims(Blk(layer, "ffn_down"), {kDenseFfn, kHidden});
    return;
  }
  SetTensorDims(Blk(layer, "ffn_gate_inp"), {kHidden, kExperts});
  SetTensorDims(Blk(layer, "ffn_gate_exps"), {kHidden, kExpertFfn, kExperts});
  SetTensorDims(Blk(layer, "ffn_up_exps"), {kHidden, kExpertFfn, kExperts});
  SetTensorDims(Blk(layer, "ffn_down_exps"), {kExpertFfn, kHidden, kExperts});
  SetTensorDims(Blk(layer, "ffn_gate_inp_shexp"), {kHidden});
  SetTensorDims(Blk(layer, "ffn_gate_shexp"), {kHidden, kSharedFfn});
  SetTensorDims(Blk(layer, "ffn_up_shexp"), {kHidden, kSharedFfn});
  SetTensorDims(Blk(layer, "ffn_down_shexp"), {kSharedFfn, kHidden});
}

void TinyHybridGguf::SetUint32(const std::string& key, uint32_t value) {
  SetValue(key, Value<uint32_t>(value));
}

void TinyHybridGguf::SetValue(const std::string& key, gguf::GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void TinyHybridGguf::RemoveKey(const std::string& key) {
  std::erase_if(metadata_, [&](const auto& entry) { return entry.first == key; });
}

bool TinyHybridGguf::HasTensor(const std::string& name) const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [&](const auto& t) { return t.first == name; });
}

void TinyHybridGguf::RemoveTensor(const std::string& name) {
  std::erase_if(tensors_, [&](const auto& t) { return t.first == name; });
}

void TinyHybridGguf::SetTensorDims(const std::string& name, std::vector<uint64_t> dims) {
  for (auto& [n, d] : tensors_) {
    if (n == name) {
      d = std::move(dims);
      return;
    }
  }
  tensors_.emplace_back(name, std::move(dims));
}

gguf::GgufWriter TinyHybridGguf::ToWriter() const {
  gguf::GgufWriter writer;
  for (const auto& [key, value] : metadata_) writer.AddValue(key, value);
  for (const auto& [name, dims] : tensors_) {
    uint64_t elements = 1;
    for (uint64_t d : dims) elements *= d;
    const std::vector<uint8_t> zeros(elements * sizeof(float), 0);
    writer.AddTensor(name, dims, gguf::GgmlType::kF32, zeros);
  }
  return writer;
}

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> TinyHybridGguf::Parse() const {
  return gguf::GgufFile::FromBuffer(ToWriter().Serialize());
}

absl::Status TinyHybridGguf::WriteToFile(const std::string& path) const {
  return ToWriter().WriteToFile(path);
}

}  // namespace tessera::testing_util

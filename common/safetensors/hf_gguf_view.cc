#include "common/safetensors/hf_gguf_view.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/safetensors/hf_config.h"
#include "common/safetensors/hf_directory.h"
#include "common/safetensors/hf_tensor_names.h"
#include "common/safetensors/hf_tokenizer_metadata.h"
#include "common/safetensors/metadata_list.h"
#include "common/safetensors/modelopt_nvfp4.h"
#include "common/util/status_macros.h"

namespace tessera::safetensors {
namespace {

// What the assembled GgufFile keeps alive: the mappings and the copies made at assembly.
struct ViewStorage {
  std::unique_ptr<HfDirectory> dir;
  std::deque<std::vector<uint8_t>> copies;
};

std::optional<gguf::GgmlType> FloatType(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32:
      return gguf::GgmlType::kF32;
    case Dtype::kF16:
      return gguf::GgmlType::kF16;
    case Dtype::kBF16:
      return gguf::GgmlType::kBF16;
    default:
      return std::nullopt;
  }
}

// ggml order: the reverse of the row-major shape; a scalar is one element.
std::vector<uint64_t> GgufDims(const std::vector<uint64_t>& shape) {
  if (shape.empty()) return {1};
  return {shape.rbegin(), shape.rend()};
}

// "model" for /models/model/ (the name a person gave the directory).
std::string DirectoryName(const std::string& path) {
  std::filesystem::path normal = std::filesystem::absolute(path).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.filename().string();
}

// Turns the directory's tensors into GGUF parts, in shard order.
class PartBuilder {
 public:
  PartBuilder(const HfModelConfig& config, bool nvfp4, ViewStorage* storage)
      : config_(config), nvfp4_(nvfp4), storage_(storage) {}

  absl::Status Add(const SafetensorsTensor& tensor) {
    if (IsRecomputedHfTensor(tensor.name)) return absl::OkStatus();
    if (nvfp4_ && IsModelOptCompanionTensor(tensor.name)) return absl::OkStatus();
    if (tensor.name == "lm_head.weight" && config_.tie_word_embeddings) return absl::OkStatus();
    const std::optional<std::string> name = GgufTensorName(tensor.name);
    if (!name) {
      return absl::UnimplementedError(absl::StrCat(storage_->dir->path(), ": tensor '", tensor.name,
                                                   "' is not one ", config_.hf_architecture,
                                                   " has (or one we run)"));
    }
    if (std::optional<gguf::GgmlType> type = FloatType(tensor.dtype)) {
      parts_.push_back({*name, GgufDims(tensor.shape), *type, Aligned(tensor)});
      return absl::OkStatus();
    }
    if (nvfp4_ && tensor.dtype == Dtype::kU8) return AddNvfp4(tensor, *name);
    return absl::UnimplementedError(absl::StrCat(storage_->dir->path(), ": tensor '", tensor.name,
                                                 "' has dtype ",
                                                 std::string(DtypeName(tensor.dtype)),
                                                 "; weights must be F32, F16 or BF16 (or ModelOpt "
                                                 "NVFP4)"));
  }

  // The rope_freqs tensor (llama3 scaling) and the check that an untied head exists.
  absl::Status Finish() {
    if (!config_.tie_word_embeddings && storage_->dir->Find("lm_head.weight") == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(storage_->dir->path(),
                       ": config.json does not tie the embeddings (tie_word_embeddings "
                       "false) but there is no lm_head.weight"));
    }
    if (!config_.rope_freqs.empty()) {
      const std::span<const uint8_t> bytes = Copy(std::as_bytes(std::span(config_.rope_freqs)));
      parts_.push_back(
          {"rope_freqs.weight", {config_.rope_freqs.size()}, gguf::GgmlType::kF32, bytes});
    }
    return absl::OkStatus();
  }

  std::vector<gguf::GgufTensorPart> TakeParts() { return std::move(parts_); }

 private:
  std::span<const uint8_t> Copy(std::span<const std::byte> bytes) {
    std::vector<uint8_t>& copy = storage_->copies.emplace_back(bytes.size());
    std::memcpy(copy.data(), bytes.data(), bytes.size());
    return copy;
  }

  // Readers cast the bytes to the element type: a misaligned tensor is read from a copy.
  std::span<const uint8_t> Aligned(const SafetensorsTensor& tensor) {
    const auto address = reinterpret_cast<uintptr_t>(tensor.data.data());
    if (address % DtypeSize(tensor.dtype) == 0) return tensor.data;
    return Copy(std::as_bytes(tensor.data));
  }

  absl::Status AddNvfp4(const SafetensorsTensor& weight, const std::string& name) {
    constexpr std::string_view kSuffix = ".weight";
    const std::string module = weight.name.substr(
        0, weight.name.size() - (weight.name.ends_with(kSuffix) ? kSuffix.size() : 0));
    const SafetensorsTensor* scale = storage_->dir->Find(module + ".weight_scale");
    const SafetensorsTensor* scale_2 = storage_->dir->Find(module + ".weight_scale_2");
    if (!weight.name.ends_with(kSuffix) || scale == nullptr || scale_2 == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(storage_->dir->path(), ": U8 tensor '", weight.name,
                       "' is not an NVFP4 weight with its weight_scale and weight_scale_2"));
    }
    const std::vector<uint64_t> dims = {2 * weight.shape[1], weight.shape[0]};
    TESSERA_ASSIGN_OR_RETURN(std::optional<GgufNvfp4Weight> packed,
                             RepackModelOptNvfp4AsGguf(weight, *scale, *scale_2));
    // The embedding lookup reads f32 rows and applies no tensor scale.
    if (!packed || name == "token_embd.weight") {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<float> values,
                               DequantizeModelOptNvfp4(weight, *scale, *scale_2));
      parts_.push_back({name, dims, gguf::GgmlType::kF32, Copy(std::as_bytes(std::span(values)))});
      return absl::OkStatus();
    }
    parts_.push_back({name, dims, gguf::GgmlType::kNvfp4,
                      Copy(std::as_bytes(std::span(packed->blocks)))});
    // llama.cpp's sidecar: "<module>.scale", F32 [1], left out when it is 1.
    if (packed->tensor_scale != 1.0f) {
      const std::string scale_name = name.substr(0, name.size() - kSuffix.size()) + ".scale";
      parts_.push_back({scale_name, {1}, gguf::GgmlType::kF32,
                        Copy(std::as_bytes(std::span(&packed->tensor_scale, 1)))});
    }
    return absl::OkStatus();
  }

  const HfModelConfig& config_;
  const bool nvfp4_;
  ViewStorage* storage_;
  std::vector<gguf::GgufTensorPart> parts_;
};

// "BF16 x290, F32 x2": the stored dtypes, counted.
std::string DtypeSummary(const HfDirectory& dir) {
  std::map<std::string, int> counts;
  for (const std::unique_ptr<SafetensorsFile>& shard : dir.shards()) {
    for (const SafetensorsTensor& tensor : shard->tensors()) {
      ++counts[std::string(DtypeName(tensor.dtype))];
    }
  }
  return absl::StrJoin(counts, ", ", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first, " x", kv.second);
  });
}

// The GGUF tensors of the directory's weights (see the header).
absl::StatusOr<std::vector<gguf::GgufTensorPart>> TensorParts(const HfModelConfig& config,
                                                              ViewStorage* storage) {
  TESSERA_ASSIGN_OR_RETURN(const bool nvfp4, IsModelOptNvfp4(*storage->dir));
  PartBuilder builder(config, nvfp4, storage);
  for (const std::unique_ptr<SafetensorsFile>& shard : storage->dir->shards()) {
    for (const SafetensorsTensor& tensor : shard->tensors()) {
      TESSERA_RETURN_IF_ERROR(builder.Add(tensor));
    }
  }
  TESSERA_RETURN_IF_ERROR(builder.Finish());
  return builder.TakeParts();
}

}  // namespace

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenHfDirectoryAsGguf(const std::string& path,
                                                                      util::FileLoad load,
                                                                      bool with_tensors) {
  auto storage = std::make_shared<ViewStorage>();
  TESSERA_ASSIGN_OR_RETURN(storage->dir, HfDirectory::Open(path, load));
  const HfDirectory& dir = *storage->dir;
  MetadataList metadata;
  absl::StatusOr<HfModelConfig> config = ReadHfModelConfig(dir.config(), &metadata);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  metadata.AddString("general.name", DirectoryName(path));
  TESSERA_RETURN_IF_ERROR(AddHfTokenizerMetadata(dir, config->vocab_size, &metadata));
  std::vector<gguf::GgufTensorPart> parts;
  if (with_tensors) {
    TESSERA_ASSIGN_OR_RETURN(parts, TensorParts(*config, storage.get()));
  }
  metadata.AddString(kSourceFormatKey, "safetensors");
  metadata.AddUint32(kSourceShardsKey, static_cast<uint32_t>(dir.shards().size()));
  metadata.AddString(kSourceDtypesKey, DtypeSummary(dir));
  return gguf::GgufFile::FromParts(std::move(metadata).Take(), std::move(parts),
                                   std::move(storage));
}

}  // namespace tessera::safetensors

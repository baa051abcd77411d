// A Hugging Face model directory: config.json, the weights as `model.safetensors` or as shards
// listed by `model.safetensors.index.json` (every shard opened), and the side files a model
// carries next to them (tokenizer.json, tokenizer_config.json, hf_quant_config.json, ...).
//
// Checks beyond each shard's own (safetensors_file.h), each an error naming the file and tensor:
// the index's weight_map must be an object of plain file names (no path separators); every shard
// it names must open (NOT_FOUND when missing); a tensor it places in a shard must be in that
// shard; no tensor may be in two shards; and no shard may hold a tensor the index does not list.
//
// Ownership: owns every shard's mapping; tensor pointers live as long as the HfDirectory.
// Immutable after Open; any thread may read it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/safetensors/safetensors_file.h"
#include "common/util/mapped_file.h"
#include "nlohmann/json.hpp"

namespace tessera::safetensors {

inline constexpr char kConfigFile[] = "config.json";
inline constexpr char kSingleWeightsFile[] = "model.safetensors";
inline constexpr char kWeightsIndexFile[] = "model.safetensors.index.json";

// True when `path` is a directory holding config.json (what OpenModelFile serves as HF).
bool IsHfModelDirectory(const std::string& path);

class HfDirectory {
 public:
  // model.safetensors is used when present (as transformers does), else the index. NOT_FOUND
  // when config.json or both weight files are missing; INVALID_ARGUMENT for malformed JSON.
  static absl::StatusOr<std::unique_ptr<HfDirectory>> Open(
      const std::string& path, util::FileLoad load = util::FileLoad::kMap);

  const std::string& path() const { return path_; }
  const nlohmann::json& config() const { return config_; }  // config.json, an object
  // The shards in file-name order (one for model.safetensors).
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  const SafetensorsTensor* Find(std::string_view name) const;  // nullptr when absent

  // The text of a file in the directory, nullopt when it does not exist; errors for a file that
  // exists but cannot be read.
  absl::StatusOr<std::optional<std::string>> ReadOptionalFile(std::string_view name) const;
  // A JSON object file in the directory (nullopt when absent), parsed under the nesting cap.
  absl::StatusOr<std::optional<nlohmann::json>> ReadOptionalJson(std::string_view name) const;

 private:
  HfDirectory() = default;
  absl::Status OpenShards(util::FileLoad load);
  absl::Status OpenIndexedShards(util::FileLoad load);
  absl::Status IndexTensors();
  std::string ShardName(size_t shard) const;  // the shard's file name

  std::string path_;
  nlohmann::json config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  // The index's weight_map (tensor -> shard file name); empty for model.safetensors.
  absl::flat_hash_map<std::string, std::string> weight_map_;
  struct Located {
    const SafetensorsTensor* tensor;
    size_t shard;  // index into shards_
  };
  absl::flat_hash_map<std::string_view, Located> tensors_;
};

}  // namespace tessera::safetensors

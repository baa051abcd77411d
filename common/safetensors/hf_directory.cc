#include "common/safetensors/hf_directory.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/client_json.h"

namespace tessera::safetensors {
namespace {

namespace fs = std::filesystem;

std::string Join(const std::string& dir, std::string_view name) {
  return (fs::path(dir) / fs::path(name)).string();
}

absl::Status WithContext(const std::string& context, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

bool IsHfModelDirectory(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(Join(path, kConfigFile), error);
}

absl::StatusOr<std::unique_ptr<HfDirectory>> HfDirectory::Open(const std::string& path,
                                                               util::FileLoad load) {
  std::unique_ptr<HfDirectory> dir(new HfDirectory());
  dir->path_ = path;
  absl::StatusOr<std::optional<nlohmann::json>> config = dir->ReadOptionalJson(kConfigFile);
  if (!config.ok()) return config.status();
  if (!config->has_value()) {
    return absl::NotFoundError(absl::StrCat("'", path, "' has no ", kConfigFile));
  }
  dir->config_ = **std::move(config);
  if (absl::Status s = dir->OpenShards(load); !s.ok()) return s;
  if (absl::Status s = dir->IndexTensors(); !s.ok()) return s;
  return dir;
}

absl::Status HfDirectory::OpenShards(util::FileLoad load) {
  std::error_code error;
  const std::string single = Join(path_, kSingleWeightsFile);
  if (fs::exists(single, error)) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(single, load);
    if (!file.ok()) return file.status();
    shards_.push_back(*std::move(file));
    return absl::OkStatus();
  }
  if (fs::exists(Join(path_, kWeightsIndexFile), error)) return OpenIndexedShards(load);
  return absl::NotFoundError(
      absl::StrCat("'", path_, "' has neither ", kSingleWeightsFile, " nor ", kWeightsIndexFile));
}

absl::Status HfDirectory::OpenIndexedShards(util::FileLoad load) {
  const std::string index_path = Join(path_, kWeightsIndexFile);
  absl::StatusOr<std::optional<nlohmann::json>> index = ReadOptionalJson(kWeightsIndexFile);
  if (!index.ok()) return index.status();
  const auto map = (*index)->find("weight_map");
  if (map == (*index)->end() || !map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": no weight_map object"));
  }
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map places tensor '", tensor, "' in ", shard.dump(),
                       ", which is not a file name in the directory"));
    }
    weight_map_.emplace(tensor, shard.get<std::string>());
    shard_names.insert(shard.get<std::string>());
  }
  for (const std::string& name : shard_names) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::Open(Join(path_, name), load);
    if (!file.ok()) return WithContext(absl::StrCat(index_path, ": shard"), file.status());
    shards_.push_back(*std::move(file));
  }
  return absl::OkStatus();
}

absl::Status HfDirectory::IndexTensors() {
  for (size_t s = 0; s < shards_.size(); ++s) {
    for (const SafetensorsTensor& tensor : shards_[s]->tensors()) {
      const auto [it, inserted] = tensors_.emplace(tensor.name, Located{&tensor, s});
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ": tensor '", tensor.name, "' is in two shards, ",
                         ShardName(it->second.shard), " and ", ShardName(s)));
      }
      if (!weight_map_.empty() && !weight_map_.contains(tensor.name)) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": shard ", ShardName(s),
                                                       " holds tensor '", tensor.name, "', which ",
                                                       kWeightsIndexFile, " does not list"));
      }
    }
  }
  for (const auto& [tensor, shard] : weight_map_) {
    const auto it = tensors_.find(tensor);
    if (it == tensors_.end() || ShardName(it->second.shard) != shard) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": ", kWeightsIndexFile,
                                                     " places tensor '", tensor, "' in ", shard,
                                                     ", which does not hold it"));
    }
  }
  return absl::OkStatus();
}

std::string HfDirectory::ShardName(size_t shard) const {
  return fs::path(shards_[shard]->path()).filename().string();
}

const SafetensorsTensor* HfDirectory::Find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.tensor;
}

absl::StatusOr<std::optional<std::string>> HfDirectory::ReadOptionalFile(
    std::string_view name) const {
  const std::string file = Join(path_, name);
  std::error_code error;
  if (!fs::exists(file, error)) return std::optional<std::string>();
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::PermissionDeniedError(absl::StrCat("cannot read '", file, "'"));
  return std::optional<std::string>(text.str());
}

absl::StatusOr<std::optional<nlohmann::json>> HfDirectory::ReadOptionalJson(
    std::string_view name) const {
  absl::StatusOr<std::optional<std::string>> text = ReadOptionalFile(name);
  if (!text.ok()) return text.status();
  if (!text->has_value()) return std::optional<nlohmann::json>();
  const std::string file = Join(path_, name);
  absl::StatusOr<nlohmann::json> json = util::ParseClientJson(**text, file);
  if (!json.ok()) {  // the cap's message names a field of the file: say which file
    const absl::string_view message = json.status().message();
    return absl::InvalidArgumentError(
        absl::StartsWith(message, file) ? std::string(message) : absl::StrCat(file, ": ", message));
  }
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, " is not a JSON object"));
  }
  return std::optional<nlohmann::json>(*std::move(json));
}

}  // namespace tessera::safetensors

// GgufFile::FromParts: a GgufFile assembled from metadata and tensors already in memory (a Hugging
// Face safetensors directory presented as a GGUF model). The parts come from our own code, not from
// a file, but are checked with the parser's rules all the same so that every reader may rely on
// the invariants a parsed file has (unique keys and names, dims that fit, exact byte sizes).
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gguf/gguf_file.h"

namespace tessera::gguf {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

absl::Status PartError(const GgufTensorPart& part, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: assembled tensor '", part.name, "': ", std::string(what)));
}

// The info of `part` (offset left 0), its dims and byte size checked as the parser checks them.
absl::StatusOr<GgufTensorInfo> CheckedInfo(const GgufTensorPart& part) {
  if (part.dims.empty() || part.dims.size() > static_cast<size_t>(kGgufMaxDims)) {
    return PartError(part, absl::StrCat("has ", part.dims.size(), " dims (1..4 allowed)"));
  }
  uint64_t num_elements = 1;
  for (uint64_t dim : part.dims) {
    if (dim != 0 && num_elements > kInt64Max / dim) {
      return PartError(
          part, absl::StrCat("shape [", absl::StrJoin(part.dims, ", "), "] overflows int64"));
    }
    num_elements *= dim;
  }
  const GgmlTypeInfo& type = GetGgmlTypeInfo(part.type);
  if (part.dims[0] % type.block_size != 0) {
    return PartError(part, absl::StrCat("dims[0] = ", part.dims[0], " is not a multiple of the ",
                                        type.name, " block size ", type.block_size));
  }
  const uint64_t num_blocks = num_elements / type.block_size;
  if (num_blocks > std::numeric_limits<uint64_t>::max() / type.type_size) {
    return PartError(part, "byte size overflows uint64");
  }
  GgufTensorInfo info{.name = part.name,
                      .dims = part.dims,
                      .type = part.type,
                      .offset = 0,
                      .num_elements = num_elements,
                      .num_bytes = num_blocks * type.type_size};
  if (part.data.size() != info.num_bytes) {
    return PartError(
        part, absl::StrCat("has ", part.data.size(), " bytes of data, its ", type.name, " shape [",
                           absl::StrJoin(part.dims, ", "), "] needs ", info.num_bytes));
  }
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromParts(
    std::vector<GgufMetadataEntry> metadata, std::vector<GgufTensorPart> tensors,
    std::shared_ptr<const void> storage) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->assembled_ = true;
  file->part_storage_ = std::move(storage);
  file->metadata_ = std::move(metadata);
  for (size_t i = 0; i < file->metadata_.size(); ++i) {
    const std::string& key = file->metadata_[i].key;
    if (!file->metadata_index_.emplace(key, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: assembled metadata has the key '", key, "' twice"));
    }
  }
  file->tensors_.reserve(tensors.size());
  uint64_t offset = 0;
  for (const GgufTensorPart& part : tensors) {
    absl::StatusOr<GgufTensorInfo> info = CheckedInfo(part);
    if (!info.ok()) return info.status();
    info->offset = offset;
    offset += info->num_bytes;
    file->tensors_.push_back(*std::move(info));
    file->part_data_.push_back(part.data);
  }
  for (size_t i = 0; i < file->tensors_.size(); ++i) {
    if (!file->tensor_index_.emplace(file->tensors_[i].name, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: assembled tensor '", file->tensors_[i].name, "' appears twice"));
    }
  }
  file->assembled_size_ = offset;
  return file;
}

}  // namespace tessera::gguf

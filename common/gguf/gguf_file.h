// A parsed GGUF file (v2 or v3): header, metadata, tensor infos, and the tensor data region; or
// the same view assembled in memory from parts (FromParts: a Hugging Face safetensors directory
// presented as a GGUF model, common/safetensors/), which readers cannot tell apart.
//
// Ownership: the GgufFile owns its bytes (an mmap of the file, or a copied buffer, or the storage
// handed to FromParts); tensor data spans point into them and live as long as the GgufFile.
// Immutable after Open/FromBuffer/FromParts, so any thread may read it concurrently.
//
// Untrusted input: every malformed file yields an absl::Status naming the problem (truncation,
// wrong magic, absurd counts, offsets past the end, overflowing sizes, duplicate names, unknown
// types); parsing never crashes or reads out of bounds.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/util/mapped_file.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_value.h"

namespace tessera::gguf {

inline constexpr uint64_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;
// Arrays may nest (an array of arrays); deeper nesting than this is rejected as malformed. Real
// models use one level; the bound keeps parsing recursion shallow on hostile input.
inline constexpr int kGgufMaxArrayDepth = 8;

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t num_elements = 0;   // product of dims
  uint64_t num_bytes = 0;      // num_elements / block_size * type_size
};

struct GgufMetadataEntry {
  std::string key;
  GgufValue value;
};

// One tensor of an assembled GgufFile (FromParts): its bytes live in the storage FromParts keeps.
struct GgufTensorPart {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order
  GgmlType type = GgmlType::kF32;
  std::span<const uint8_t> data;
};

class GgufFile {
 public:
  // Maps (or copies, see util::FileLoad) the file read-only. Errors: NOT_FOUND /
  // PERMISSION_DENIED for the path, INVALID_ARGUMENT (with the reason) for a malformed file.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(
      const std::string& path, util::FileLoad load = util::FileLoad::kMap);
  // Parses an in-memory image (tests, fuzzing). The bytes are moved in and owned.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::vector<uint8_t> bytes);
  // Assembles a file from metadata and tensors already in memory; `storage` owns every byte the
  // tensor spans point into and is kept as long as the GgufFile. The result reads like a parsed
  // file: version() is 0 (no file), data_offset() 0, tensor offsets pack the tensors in order and
  // file_size() is their total. INVALID_ARGUMENT naming the key or tensor for a duplicate, dims
  // outside 1..4, a row that is not whole blocks of the type, or data of another byte size.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromParts(
      std::vector<GgufMetadataEntry> metadata, std::vector<GgufTensorPart> tensors,
      std::shared_ptr<const void> storage);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute file offset of tensor data
  uint64_t file_size() const { return assembled_ ? assembled_size_ : bytes_.size(); }

  // Metadata in file order; keys are unique (duplicates are rejected at parse time).
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  const GgufValue* FindMetadata(std::string_view key) const;  // nullptr when absent
  bool HasKey(std::string_view key) const { return FindMetadata(key) != nullptr; }

  // Typed getters. NOT_FOUND names a missing key; INVALID_ARGUMENT names the key, the expected and
  // the actual type. Integer getters accept any integer type whose value fits; float getters
  // accept float32/float64 and integers.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;

  // Tensor infos in file order; names are unique.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;  // nullptr when absent
  // The tensor's bytes (num_bytes long), validated at parse time to lie inside the file.
  std::span<const uint8_t> TensorData(const GgufTensorInfo& info) const;

 private:
  class Parser;
  GgufFile() = default;

  std::span<const uint8_t> bytes_;   // the whole file image
  std::vector<uint8_t> owned_;       // backing store for FromBuffer
  void* mapping_ = nullptr;          // backing store for Open (munmap'd in the destructor)
  size_t mapping_size_ = 0;
  // FromParts only: each tensor's bytes (by index into tensors_) and what keeps them alive.
  std::vector<std::span<const uint8_t>> part_data_;
  std::shared_ptr<const void> part_storage_;
  bool assembled_ = false;
  uint64_t assembled_size_ = 0;  // the tensors' total bytes

  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  // Name -> index into metadata_ / tensors_. Keys view the name bytes inside the file image
  // (bytes_), which is immutable and outlives the maps (FromParts: the names in metadata_ and
  // tensors_, which never change after assembly).
  absl::flat_hash_map<std::string_view, size_t> metadata_index_;
  absl::flat_hash_map<std::string_view, size_t> tensor_index_;
};

}  // namespace tessera::gguf

// One `.safetensors` file, mapped read-only and validated.
//
// Layout (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON (an
// object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end)}, plus an optional
// "__metadata__" string map, which we ignore), then the data section; offsets are relative to it.
//
// Untrusted input, validated as the reference implementation does: a header longer than 100 MB or
// running past the end of the file, JSON that does not parse or is not an object (or nests deeper
// than a header can, or names a tensor twice), a malformed entry, an unknown dtype, a name that is
// empty or holds an ASCII control character, an end - begin other than product(shape) x the dtype
// size, and data that is not contiguous (tensors sorted by offset must start at 0, follow each
// other with no gap or overlap and end exactly at the end of the file) are each INVALID_ARGUMENT
// naming the file and, where there is one, the tensor.
//
// Ownership: the file owns its mapping; tensor spans live as long as it. Immutable after Open; any
// thread may read it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/safetensors/safetensors_dtype.h"
#include "common/util/mapped_file.h"

namespace tessera::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's cap

struct SafetensorsTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<uint64_t> shape;  // row-major, outermost first (PyTorch order)
  uint64_t num_elements = 0;
  std::span<const uint8_t> data;  // num_elements × DtypeSize(dtype) bytes inside the mapping
};

class SafetensorsFile {
 public:
  // Errors: those of util::MappedFile::Open for the path, INVALID_ARGUMENT for a malformed file.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path, util::FileLoad load = util::FileLoad::kMap);

  const std::string& path() const { return path_; }
  // In data order (ascending offsets).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;  // nullptr when absent

 private:
  SafetensorsFile() = default;

  std::string path_;
  util::MappedFile mapping_;
  std::vector<SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string_view, size_t> index_;  // name (viewing tensors_) -> index
};

}  // namespace tessera::safetensors

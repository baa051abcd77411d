// Builds a `.safetensors` image in memory (safetensors_file.h describes the layout): the header
// names every tensor in insertion order, the data follow in the same order, contiguously, and the
// header is padded with spaces to a multiple of 8 bytes as the reference writer does (so data of
// any dtype stay aligned to their element size when the tensors are added largest element
// first). Used by the tiny-model tool (tools/convert) and tests. Single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/safetensors/safetensors_dtype.h"

namespace tessera::safetensors {

class SafetensorsWriter {
 public:
  // `data` must hold product(shape) × DtypeSize(dtype) bytes (checked, aborts otherwise).
  void Add(std::string name, Dtype dtype, std::vector<uint64_t> shape,
           std::span<const uint8_t> data);

  std::vector<uint8_t> Serialize() const;
  absl::Status WriteToFile(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    Dtype dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<Pending> tensors_;
};

}  // namespace tessera::safetensors

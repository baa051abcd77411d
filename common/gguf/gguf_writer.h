// Builds a GGUF v3 image in memory: metadata in insertion order, tensors aligned to `alignment`.
// Used by the tiny-test-model tool, the malformed-file corpus generator and tests.
// Not thread-safe; one writer per file.
//
// The writer is deliberately low-level: keys are written as added (a repeated key is written
// twice, and the reader then rejects the file), and `version` is written as given (v2 and v3 share
// the layout). An `alignment` other than 32 must be a power of two (checked) and is recorded as the
// uint32 `general.alignment` entry, added first by the constructor, as readers need it. Every
// tensor starts at an aligned offset and is zero-padded to the alignment, the last one included.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_value.h"

namespace tessera::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, uint64_t alignment = 32);

  void AddValue(std::string key, GgufValue value);
  void AddString(std::string key, std::string value);
  void AddUint32(std::string key, uint32_t value);
  void AddInt32(std::string key, int32_t value);
  void AddFloat32(std::string key, float value);
  void AddBool(std::string key, bool value);
  void AddStringArray(std::string key, const std::vector<std::string>& values);
  void AddInt32Array(std::string key, const std::vector<int32_t>& values);
  void AddFloat32Array(std::string key, const std::vector<float>& values);

  // `data` must hold exactly the bytes the (dims, type) pair implies (checked, aborts otherwise).
  // dims are in ggml order (dims[0] contiguous).
  void AddTensor(std::string name, std::vector<uint64_t> dims, GgmlType type,
                 std::span<const uint8_t> data);

  std::vector<uint8_t> Serialize() const;
  absl::Status WriteToFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    std::vector<uint8_t> data;
  };
  uint32_t version_;
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tessera::gguf

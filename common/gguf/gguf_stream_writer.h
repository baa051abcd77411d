// Writes a GGUF file tensor by tensor, so a tool converting a model (tessera quantize) holds one
// tensor in memory at a time, not the whole file: the header (metadata and every tensor's name,
// dims and type) is written first, then each tensor's data in the declared order, each padded
// to the alignment. The file is written to `path`.partial and renamed to `path` by Finish, so
// an interrupted conversion never leaves a truncated file under the final name.
//
// Not thread-safe; one writer per file, driven by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gguf/gguf_header_encoder.h"

namespace tessera::gguf {

class GgufStreamWriter {
 public:
  // Opens `path`.partial and writes the header. The alignment is the metadata's
  // `general.alignment` (a uint32 power of two) or 32 when absent. INVALID_ARGUMENT for a bad
  // alignment; the errno's code naming the path when the file cannot be created or written.
  static absl::StatusOr<std::unique_ptr<GgufStreamWriter>> Create(
      const std::string& path, const GgufMetadataList& metadata,
      std::vector<GgufTensorSpec> tensors);
  ~GgufStreamWriter();  // removes the .partial file unless Finish succeeded

  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // The next tensor's spec (in declaration order), or nullptr when all were written.
  const GgufTensorSpec* next() const;

  // Writes the next tensor's data. INVALID_ARGUMENT when every tensor was written or the size
  // differs from what its spec implies (naming the tensor).
  absl::Status WriteNext(std::span<const uint8_t> data);

  // After the last tensor: flushes, closes and renames to `path`. FAILED_PRECONDITION when
  // tensors are missing (naming the first).
  absl::Status Finish();

 private:
  GgufStreamWriter(std::string path, std::FILE* file, uint64_t alignment,
                   std::vector<GgufTensorSpec> tensors);
  absl::Status Write(std::span<const uint8_t> bytes);

  std::string path_;
  std::FILE* file_;
  uint64_t alignment_;
  std::vector<GgufTensorSpec> tensors_;
  size_t written_ = 0;     // tensors whose data is written
  uint64_t position_ = 0;  // bytes written so far
  bool finished_ = false;
};

}  // namespace tessera::gguf

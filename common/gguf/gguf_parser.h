// GgufFile::Parser: validates an untrusted GGUF image and fills a GgufFile (see gguf_parser.cc for
// the layout and the rules). Internal to common/gguf; one parser per file, used once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/binary_reader.h"
#include "common/gguf/gguf_file.h"
#include "common/util/absl_compat.h"

namespace tessera::gguf {

class GgufFile::Parser {
 public:
  explicit Parser(GgufFile* file) : file_(file), reader_(file->bytes_) {}

  absl::Status Parse() {
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    if (auto s = ParseHeader(&tensor_count, &kv_count); !s.ok()) return s;
    if (auto s = ParseMetadata(kv_count); !s.ok()) return s;
    if (auto s = ResolveAlignment(); !s.ok()) return s;
    if (auto s = ParseTensorInfos(tensor_count); !s.ok()) return s;
    return LocateTensorData();
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("gguf: ", context_, ": ", util::ToAbsl(what)));
  }

  // Reads one fixed-size field; a short read becomes "truncated reading <what>: ...".
  template <typename T>
  absl::Status ReadField(T* out, std::string_view what) {
    absl::Status s = reader_.Read(out);
    if (!s.ok())
      return Error(absl::StrCat("truncated reading ", util::ToAbsl(what), ": ", s.message()));
    return absl::OkStatus();
  }

  absl::Status ParseHeader(uint64_t* tensor_count, uint64_t* kv_count);
  absl::Status CheckCount(uint64_t count, uint64_t min_bytes, std::string_view what);
  absl::Status ParseMetadata(uint64_t kv_count);
  absl::Status ParseMetadataEntry(uint64_t index);
  absl::Status ReadStringView(std::string_view what, std::string_view* out);
  absl::Status ReadValueType(std::string_view what, GgufValueType* out);
  absl::Status ParseValue(GgufValueType type, int depth, GgufValue* out);
  absl::Status ParseArray(int depth, GgufValue* out);
  absl::Status ResolveAlignment();
  absl::Status ParseTensorInfos(uint64_t tensor_count);
  absl::Status ParseTensorInfo(uint64_t index);
  absl::Status ParseTensorShape(GgufTensorInfo* info);
  absl::Status ParseTensorType(uint32_t raw_type, GgufTensorInfo* info);
  absl::Status LocateTensorData();

  GgufFile* file_;
  internal::BinaryReader reader_;
  std::string context_ = "header";  // what is being parsed, for error messages
};

}  // namespace tessera::gguf

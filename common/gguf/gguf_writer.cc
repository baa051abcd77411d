// GgufWriter: serializes metadata and tensors into the GGUF layout the parser reads
// (see gguf_parser.cc). Tensor data is laid out like ggml's writer: each tensor starts at an
// aligned offset and is zero-padded to the alignment, the last one included.
#include "common/gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_header_encoder.h"
#include "common/util/check.h"

namespace tessera::gguf {
namespace {

template <typename T>
GgufValue MakeValue(T v) {
  return GgufValue(GgufValue::Storage(std::in_place_type<T>, std::move(v)));
}

template <typename T>
GgufValue MakeArray(GgufValueType element_type, const std::vector<T>& values) {
  GgufArray array;
  array.element_type = element_type;
  array.elements.reserve(values.size());
  for (const T& v : values) array.elements.push_back(MakeValue<T>(v));
  return MakeValue<GgufArray>(std::move(array));
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version, uint64_t alignment)
    : version_(version), alignment_(alignment) {
  TESSERA_CHECK(alignment > 0 && alignment <= UINT32_MAX && (alignment & (alignment - 1)) == 0,
                "GgufWriter: alignment must be a power of two that fits uint32");
  // Readers assume 32 unless the file says otherwise.
  if (alignment != kGgufDefaultAlignment) {
    AddUint32("general.alignment", static_cast<uint32_t>(alignment));
  }
}

void GgufWriter::AddValue(std::string key, GgufValue value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}
void GgufWriter::AddString(std::string key, std::string value) {
  AddValue(std::move(key), MakeValue<std::string>(std::move(value)));
}
void GgufWriter::AddUint32(std::string key, uint32_t value) {
  AddValue(std::move(key), MakeValue<uint32_t>(value));
}
void GgufWriter::AddInt32(std::string key, int32_t value) {
  AddValue(std::move(key), MakeValue<int32_t>(value));
}
void GgufWriter::AddFloat32(std::string key, float value) {
  AddValue(std::move(key), MakeValue<float>(value));
}
void GgufWriter::AddBool(std::string key, bool value) {
  AddValue(std::move(key), MakeValue<bool>(value));
}
void GgufWriter::AddStringArray(std::string key, const std::vector<std::string>& values) {
  AddValue(std::move(key), MakeArray(GgufValueType::kString, values));
}
void GgufWriter::AddInt32Array(std::string key, const std::vector<int32_t>& values) {
  AddValue(std::move(key), MakeArray(GgufValueType::kInt32, values));
}
void GgufWriter::AddFloat32Array(std::string key, const std::vector<float>& values) {
  AddValue(std::move(key), MakeArray(GgufValueType::kFloat32, values));
}

void GgufWriter::AddTensor(std::string name, std::vector<uint64_t> dims, GgmlType type,
                           std::span<const uint8_t> data) {
  GgufTensorSpec spec{std::move(name), std::move(dims), type};
  TESSERA_CHECK(data.size() == GgufTensorDataBytes(spec),
                "GgufWriter::AddTensor: data size does not match dims and type");
  tensors_.push_back(PendingTensor{std::move(spec.name), std::move(spec.dims), type,
                                   std::vector<uint8_t>(data.begin(), data.end())});
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<GgufTensorSpec> specs;
  specs.reserve(tensors_.size());
  for (const PendingTensor& t : tensors_) specs.push_back({t.name, t.dims, t.type});
  std::vector<uint8_t> out = EncodeGgufHeader(version_, alignment_, metadata_, specs);
  for (const PendingTensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(GgufAlignUp(out.size(), alignment_), 0);
  }
  return out;
}

absl::Status GgufWriter::WriteToFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::Status(
        absl::ErrnoToStatusCode(errno),
        absl::StrCat("gguf writer: cannot open '", path, "': ", std::strerror(errno)));
  }
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int write_errno = errno;
  if (std::fclose(f) != 0 || written != bytes.size()) {
    return absl::Status(absl::ErrnoToStatusCode(write_errno),
                        absl::StrCat("gguf writer: short write to '", path, "' (", written, " of ",
                                     bytes.size(), " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::gguf

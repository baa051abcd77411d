// GgufFile: ownership of the file image, lookups and typed metadata getters. Parsing and
// validation live in gguf_parser.cc.
#include "common/gguf/gguf_file.h"

#include <limits>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_parser.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "common/util/mapped_file.h"

namespace tessera::gguf {
namespace {

absl::Status WrongType(std::string_view key, std::string_view expected, const GgufValue& actual) {
  std::string actual_name = GgufValueTypeName(actual.type());
  if (const GgufArray* array = actual.GetIf<GgufArray>()) {
    actual_name = absl::StrCat("array of ", GgufValueTypeName(array->element_type));
  }
  return absl::InvalidArgumentError(absl::StrCat("gguf: metadata key '", util::ToAbsl(key),
                                                 "' has type ", actual_name, ", expected ",
                                                 util::ToAbsl(expected)));
}

absl::Status KeyNotFound(std::string_view key) {
  return absl::NotFoundError(
      absl::StrCat("gguf: metadata key '", util::ToAbsl(key), "' not found"));
}

bool IsIntegerType(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

bool FitsInt64(const GgufValue& v) {
  const uint64_t* u = v.GetIf<uint64_t>();
  return u == nullptr || *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                         util::FileLoad load) {
  absl::StatusOr<util::MappedFile> mapped = util::MappedFile::Open(path, load);
  if (!mapped.ok()) {
    return absl::Status(mapped.status().code(), absl::StrCat("gguf: ", mapped.status().message()));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = mapped->bytes();
  std::tie(file->mapping_, file->mapping_size_) = mapped->Release();
  if (absl::Status s = Parser(file.get()).Parse(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " [file '", path, "']"));
  }
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::vector<uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->owned_ = std::move(bytes);
  file->bytes_ = file->owned_;  // owned_ never changes again, so the span stays valid
  if (absl::Status s = Parser(file.get()).Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() { util::MappedFile::Unmap(mapping_, mapping_size_); }

const GgufValue* GgufFile::FindMetadata(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::TensorData(const GgufTensorInfo& info) const {
  if (assembled_) {
    const auto it = tensor_index_.find(info.name);
    TESSERA_CHECK(it != tensor_index_.end() && &tensors_[it->second] == &info,
                  "GgufFile::TensorData: tensor info does not belong to this file");
    return part_data_[it->second];
  }
  // Precondition: `info` is one of tensors(); its bounds were validated at parse time.
  TESSERA_CHECK(data_offset_ <= bytes_.size() && info.offset <= bytes_.size() - data_offset_ &&
                    info.num_bytes <= bytes_.size() - data_offset_ - info.offset,
                "GgufFile::TensorData: tensor info does not belong to this file");
  return bytes_.subspan(data_offset_ + info.offset, info.num_bytes);
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  const std::string* s = v->GetIf<std::string>();
  if (s == nullptr) return WrongType(key, "string", *v);
  return *s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  if (!v->IsInteger()) return WrongType(key, "an integer", *v);
  if (!FitsInt64(*v)) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: metadata key '", util::ToAbsl(key),
                                                   "' value ", v->DebugString(),
                                                   " does not fit int64"));
  }
  return v->AsInt64();
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  if (!v->IsFloat() && !v->IsInteger()) return WrongType(key, "a number", *v);
  return v->AsDouble();
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  const bool* b = v->GetIf<bool>();
  if (b == nullptr) return WrongType(key, "bool", *v);
  return *b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  const GgufArray* array = v->GetIf<GgufArray>();
  if (array == nullptr || array->element_type != GgufValueType::kString) {
    return WrongType(key, "array of string", *v);
  }
  std::vector<std::string> out;
  out.reserve(array->elements.size());
  for (const GgufValue& e : array->elements) out.push_back(*e.GetIf<std::string>());
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  const GgufArray* array = v->GetIf<GgufArray>();
  if (array == nullptr || !IsIntegerType(array->element_type)) {
    return WrongType(key, "array of integers", *v);
  }
  std::vector<int64_t> out;
  out.reserve(array->elements.size());
  for (size_t i = 0; i < array->elements.size(); ++i) {
    const GgufValue& e = array->elements[i];
    if (!e.IsInteger()) return WrongType(key, "array of integers", *v);
    if (!FitsInt64(e)) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: metadata key '", util::ToAbsl(key),
                                                     "' element ", i, " (", e.DebugString(),
                                                     ") does not fit int64"));
    }
    out.push_back(e.AsInt64());
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = FindMetadata(key);
  if (v == nullptr) return KeyNotFound(key);
  const GgufArray* array = v->GetIf<GgufArray>();
  if (array == nullptr) return WrongType(key, "array of numbers", *v);
  std::vector<double> out;
  out.reserve(array->elements.size());
  for (const GgufValue& e : array->elements) {
    if (!e.IsFloat() && !e.IsInteger()) return WrongType(key, "array of numbers", *v);
    out.push_back(e.AsDouble());
  }
  return out;
}

}  // namespace tessera::gguf

// GgufFile::Parser: turns an untrusted file image into a validated GgufFile.
//
// Layout (ggml docs/gguf.md, v2/v3 share it): header {magic "GGUF", u32 version, u64 tensor_count,
// u64 kv_count}, kv_count metadata entries {string key, u32 type, value}, tensor_count tensor infos
// {string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset}, zero padding up to the
// alignment, then the tensor data section. Strings are {u64 length, bytes}; arrays are
// {u32 element type, u64 count, elements}, and elements may themselves be arrays.
//
// Validation mirrors ggml's gguf.cpp where it has a rule (v1 and unknown versions rejected, counts
// bounded, non-empty unique keys, alignment a u32 power of two, unique tensor names, dims that fit
// int64 with a row length divisible by the block size, byte sizes that do not overflow) and adds
// the spec's rules ggml skips: bool bytes are 0 or 1, tensor offsets are aligned and every tensor's
// bytes lie inside the file. Tensors may overlap (ggml does not forbid it). Every count read from
// the file is checked against the bytes left before anything is allocated for it.
#include "common/gguf/gguf_parser.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::gguf {
namespace {

constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;
constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kMaxKeyBytes = 65535;  // gguf.md: keys are at most 2^16-1 bytes
// Smallest possible encodings, used to reject counts that cannot fit in the remaining bytes:
// a metadata entry is key length (8) + type (4) + >= 1 value byte (an empty key is encodable,
// and is rejected with its own message); a tensor info is name length (8) + n_dims (4) +
// >= 1 dim (8) + type (4) + offset (8).
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// Vectors are pre-sized up to this many elements; beyond it they grow only as elements are really
// parsed, so a huge (but byte-count-plausible) count in a huge file cannot force a giant
// allocation.
constexpr uint64_t kMaxReserve = uint64_t{1} << 20;
constexpr size_t kMaxNameInMessage = 80;
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Bytes one array element of `type` needs at minimum (strings: their length; arrays: type+count).
uint64_t MinEncodedBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 4 + 8;
  }
  return 1;
}

// Names from the file can hold any bytes; show them escaped and bounded.
std::string Printable(std::string_view name) {
  if (name.size() <= kMaxNameInMessage) return absl::CEscape(util::ToAbsl(name));
  return absl::StrCat(absl::CEscape(util::ToAbsl(name.substr(0, kMaxNameInMessage))), "...");
}

uint64_t AlignUp(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

absl::Status GgufFile::Parser::ParseHeader(uint64_t* tensor_count, uint64_t* kv_count) {
  const uint64_t size = reader_.size();
  if (size == 0) return Error("file is empty (0 bytes)");
  std::string_view magic;
  if (size < 4 || !reader_.ReadBytes(4, &magic).ok()) {
    return Error(absl::StrCat("truncated header: file is ", size, " bytes, the header needs ",
                              kHeaderBytes));
  }
  if (magic != "GGUF") {
    // No bytes of the file in the message: a server that loads client-named paths (LoadModel)
    // would otherwise hand out the start of any file it can read (e.g. "root" of /etc/passwd).
    return Error("bad magic (the file does not start with \"GGUF\"): not a GGUF file");
  }
  uint32_t version = 0;
  if (auto s = ReadField(&version, "version"); !s.ok()) return s;
  if (version == 1) {
    return Error(
        "GGUF version 1 is not supported (it used 32-bit counts); re-convert the model "
        "with a current llama.cpp to get v3");
  }
  if (version != 0 && (version & 0xFFFF) == 0) {
    return Error(absl::StrCat("version ", version, " (0x", absl::Hex(version),
                              ") looks byte-swapped: big-endian GGUF files are not supported"));
  }
  if (version < kMinVersion || version > kMaxVersion) {
    return Error(absl::StrCat("unsupported version ", version, " (supported: ", kMinVersion,
                              " and ", kMaxVersion, ")"));
  }
  file_->version_ = version;
  if (auto s = ReadField(tensor_count, "tensor count"); !s.ok()) return s;
  if (auto s = ReadField(kv_count, "metadata kv count"); !s.ok()) return s;
  if (auto s = CheckCount(*kv_count, kMinMetadataEntryBytes, "metadata kv count"); !s.ok()) {
    return s;
  }
  return CheckCount(*tensor_count, kMinTensorInfoBytes, "tensor count");
}

absl::Status GgufFile::Parser::CheckCount(uint64_t count, uint64_t min_bytes,
                                          std::string_view what) {
  if (count <= reader_.remaining() / min_bytes) return absl::OkStatus();
  return Error(absl::StrCat(util::ToAbsl(what), " ", count,
                            " is impossible: each entry needs at least ", min_bytes,
                            " bytes but only ", reader_.remaining(),
                            " bytes follow the header (file size ", reader_.size(), ")"));
}

absl::Status GgufFile::Parser::ParseMetadata(uint64_t kv_count) {
  file_->metadata_.reserve(std::min(kv_count, kMaxReserve));
  for (uint64_t i = 0; i < kv_count; ++i) {
    if (auto s = ParseMetadataEntry(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ParseMetadataEntry(uint64_t index) {
  context_ = absl::StrCat("metadata key #", index);
  std::string_view key;
  if (auto s = ReadStringView("key", &key); !s.ok()) return s;
  if (key.empty()) return Error("key is empty");
  if (key.size() > kMaxKeyBytes) {
    return Error(
        absl::StrCat("key is ", key.size(), " bytes long, over the GGUF limit of ", kMaxKeyBytes));
  }
  absl::StrAppend(&context_, " '", Printable(key), "'");
  const auto [it, inserted] = file_->metadata_index_.emplace(key, file_->metadata_.size());
  if (!inserted) {
    return Error(absl::StrCat("duplicate key (first defined by metadata key #", it->second, ")"));
  }
  GgufValueType type;
  if (auto s = ReadValueType("value type", &type); !s.ok()) return s;
  GgufValue value;
  if (auto s = ParseValue(type, /*depth=*/0, &value); !s.ok()) return s;
  file_->metadata_.push_back(GgufMetadataEntry{std::string(key), std::move(value)});
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadStringView(std::string_view what, std::string_view* out) {
  uint64_t length = 0;
  if (auto s = ReadField(&length, absl::StrCat(util::ToAbsl(what), " length")); !s.ok()) return s;
  if (length > reader_.remaining()) {
    return Error(absl::StrCat(util::ToAbsl(what), " length ", length,
                              " runs past end of file (offset ", reader_.offset(), ", file size ",
                              reader_.size(), ")"));
  }
  return reader_.ReadBytes(length, out);  // cannot fail: checked above
}

absl::Status GgufFile::Parser::ReadValueType(std::string_view what, GgufValueType* out) {
  const uint64_t at = reader_.offset();
  uint32_t raw = 0;
  if (auto s = ReadField(&raw, what); !s.ok()) return s;
  if (raw > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    return Error(absl::StrCat("unknown ", util::ToAbsl(what), " id ", raw, " at offset ", at,
                              " (valid ids are 0..12)"));
  }
  *out = static_cast<GgufValueType>(raw);
  return absl::OkStatus();
}

namespace {

template <typename T>
GgufValue MakeValue(T v) {
  return GgufValue(GgufValue::Storage(std::in_place_type<T>, std::move(v)));
}

}  // namespace

absl::Status GgufFile::Parser::ParseValue(GgufValueType type, int depth, GgufValue* out) {
  // Reads a scalar of wire type T into *out.
  auto scalar = [&]<typename T>(T /*tag*/) -> absl::Status {
    T v{};
    if (auto s = ReadField(&v, GgufValueTypeName(type)); !s.ok()) return s;
    *out = MakeValue<T>(v);
    return absl::OkStatus();
  };
  switch (type) {
    case GgufValueType::kUint8: return scalar(uint8_t{});
    case GgufValueType::kInt8: return scalar(int8_t{});
    case GgufValueType::kUint16: return scalar(uint16_t{});
    case GgufValueType::kInt16: return scalar(int16_t{});
    case GgufValueType::kUint32: return scalar(uint32_t{});
    case GgufValueType::kInt32: return scalar(int32_t{});
    case GgufValueType::kFloat32: return scalar(float{});
    case GgufValueType::kUint64: return scalar(uint64_t{});
    case GgufValueType::kInt64: return scalar(int64_t{});
    case GgufValueType::kFloat64: return scalar(double{});
    case GgufValueType::kBool: {
      const uint64_t at = reader_.offset();
      uint8_t byte = 0;
      if (auto s = ReadField(&byte, "bool"); !s.ok()) return s;
      // gguf.md: "0 is false and 1 is true. Anything else is invalid".
      if (byte > 1) {
        return Error(absl::StrCat("bool byte ", static_cast<int>(byte), " at offset ", at,
                                  " is neither 0 nor 1"));
      }
      *out = MakeValue<bool>(byte == 1);
      return absl::OkStatus();
    }
    case GgufValueType::kString: {
      std::string_view view;
      if (auto s = ReadStringView("string value", &view); !s.ok()) return s;
      *out = MakeValue<std::string>(std::string(view));
      return absl::OkStatus();
    }
    case GgufValueType::kArray: return ParseArray(depth + 1, out);
  }
  return Error("internal: unhandled value type");  // ReadValueType admits only the ids above
}

absl::Status GgufFile::Parser::ParseArray(int depth, GgufValue* out) {
  if (depth > kGgufMaxArrayDepth) {
    return Error(absl::StrCat("arrays nested deeper than ", kGgufMaxArrayDepth,
                              " levels (at offset ", reader_.offset(), ")"));
  }
  GgufArray array;
  if (auto s = ReadValueType("array element type", &array.element_type); !s.ok()) return s;
  uint64_t count = 0;
  if (auto s = ReadField(&count, "array length"); !s.ok()) return s;
  const uint64_t min_bytes = MinEncodedBytes(array.element_type);
  if (count > reader_.remaining() / min_bytes) {
    return Error(absl::StrCat(
        "array length ", count, " (", GgufValueTypeName(array.element_type), " elements, at least ",
        min_bytes, " bytes each) runs past end of file: only ", reader_.remaining(),
        " bytes remain (offset ", reader_.offset(), ", file size ", reader_.size(), ")"));
  }
  array.elements.reserve(std::min(count, kMaxReserve));
  for (uint64_t i = 0; i < count; ++i) {
    GgufValue element;
    if (auto s = ParseValue(array.element_type, depth, &element); !s.ok()) return s;
    array.elements.push_back(std::move(element));
  }
  *out = MakeValue<GgufArray>(std::move(array));
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ResolveAlignment() {
  context_ = "metadata key 'general.alignment'";
  const auto it = file_->metadata_index_.find("general.alignment");
  if (it == file_->metadata_index_.end()) return absl::OkStatus();  // default 32
  const GgufValue& value = file_->metadata_[it->second].value;
  const uint32_t* alignment = value.GetIf<uint32_t>();
  if (alignment == nullptr) {
    return Error(
        absl::StrCat("alignment must be of type uint32 but is ", GgufValueTypeName(value.type())));
  }
  if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0) {
    return Error(absl::StrCat("alignment ", *alignment, " is not a nonzero power of two"));
  }
  file_->alignment_ = *alignment;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ParseTensorInfos(uint64_t tensor_count) {
  file_->tensors_.reserve(std::min(tensor_count, kMaxReserve));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    if (auto s = ParseTensorInfo(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ParseTensorInfo(uint64_t index) {
  context_ = absl::StrCat("tensor #", index);
  std::string_view name;
  if (auto s = ReadStringView("tensor name", &name); !s.ok()) return s;
  absl::StrAppend(&context_, " '", Printable(name), "'");
  const auto [it, inserted] = file_->tensor_index_.emplace(name, file_->tensors_.size());
  if (!inserted) {
    return Error(absl::StrCat("duplicate tensor name (first used by tensor #", it->second, ")"));
  }
  GgufTensorInfo info;
  info.name = std::string(name);
  if (auto s = ParseTensorShape(&info); !s.ok()) return s;
  uint32_t raw_type = 0;
  if (auto s = ReadField(&raw_type, "ggml type"); !s.ok()) return s;
  if (auto s = ParseTensorType(raw_type, &info); !s.ok()) return s;
  if (auto s = ReadField(&info.offset, "data offset"); !s.ok()) return s;
  if (info.offset % file_->alignment_ != 0) {
    return Error(absl::StrCat("data offset ", info.offset, " is not a multiple of the alignment ",
                              file_->alignment_));
  }
  file_->tensors_.push_back(std::move(info));
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ParseTensorShape(GgufTensorInfo* info) {
  uint32_t n_dims = 0;
  if (auto s = ReadField(&n_dims, "n_dims"); !s.ok()) return s;
  if (n_dims < 1 || n_dims > static_cast<uint32_t>(kGgufMaxDims)) {
    return Error(absl::StrCat("n_dims ", n_dims, " is out of range [1, ", kGgufMaxDims, "]"));
  }
  info->dims.resize(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (auto s = ReadField(&info->dims[d], absl::StrCat("dims[", d, "]")); !s.ok()) return s;
    // ggml stores dims as int64 and rejects negative ones.
    if (info->dims[d] > kInt64Max) {
      return Error(absl::StrCat("dims[", d, "] = ", info->dims[d], " exceeds the int64 maximum"));
    }
  }
  // As in ggml, a zero dim makes an empty tensor and needs no overflow check.
  const bool empty = std::find(info->dims.begin(), info->dims.end(), 0) != info->dims.end();
  uint64_t num_elements = empty ? 0 : 1;
  for (uint32_t d = 0; d < n_dims && !empty; ++d) {
    if (num_elements > kInt64Max / info->dims[d]) {
      return Error(absl::StrCat("element count of shape [", absl::StrJoin(info->dims, ", "),
                                "] overflows int64"));
    }
    num_elements *= info->dims[d];
  }
  info->num_elements = num_elements;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ParseTensorType(uint32_t raw_type, GgufTensorInfo* info) {
  const std::optional<GgmlTypeInfo> type = LookupGgmlType(raw_type);
  if (!type.has_value()) {
    return Error(absl::StrCat("unknown or unsupported ggml type id ", raw_type));
  }
  info->type = type->type;
  // ggml requires whole blocks per row (dims[0] is the row).
  if (info->dims[0] % type->block_size != 0) {
    return Error(absl::StrCat("dims[0] = ", info->dims[0], " is not a multiple of the ", type->name,
                              " block size ", type->block_size));
  }
  const uint64_t num_blocks = info->num_elements / type->block_size;
  if (num_blocks > std::numeric_limits<uint64_t>::max() / type->type_size) {
    return Error(absl::StrCat("byte size of shape [", absl::StrJoin(info->dims, ", "), "] of ",
                              type->name, " overflows uint64"));
  }
  info->num_bytes = num_blocks * type->type_size;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::LocateTensorData() {
  context_ = "tensor data";
  const uint64_t size = reader_.size();
  const uint64_t aligned = AlignUp(reader_.offset(), file_->alignment_);
  if (file_->tensors_.empty()) {
    // Nothing to locate; like ggml, padding after the last info is then optional.
    file_->data_offset_ = std::min(aligned, size);
    return absl::OkStatus();
  }
  if (aligned > size) {
    return Error(absl::StrCat("data section would start at offset ", aligned,
                              " (end of tensor infos ", reader_.offset(), " aligned to ",
                              file_->alignment_, "), past end of file (size ", size, ")"));
  }
  file_->data_offset_ = aligned;
  const uint64_t available = size - aligned;
  for (size_t i = 0; i < file_->tensors_.size(); ++i) {
    const GgufTensorInfo& t = file_->tensors_[i];
    if (t.offset > available || t.num_bytes > available - t.offset) {
      context_ = absl::StrCat("tensor #", i, " '", Printable(t.name), "'");
      return Error(absl::StrCat("data [offset ", t.offset, ", +", t.num_bytes,
                                " bytes) runs past end of file: the data section starts at ",
                                aligned, " and holds ", available, " bytes (file size ", size,
                                ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::gguf

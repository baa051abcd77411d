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
#include "common/util/check.h"

namespace tessera::gguf {
namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>* out) : out_(out) {}

  template <typename T>
  void Put(T value) {
    static_assert(std::is_arithmetic_v<T>);
    using U = std::conditional_t<
        sizeof(T) == 1, uint8_t,
        std::conditional_t<sizeof(T) == 2, uint16_t,
                           std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
    U bits;
    std::memcpy(&bits, &value, sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) out_->push_back(static_cast<uint8_t>(bits >> (8 * i)));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_->insert(out_->end(), s.begin(), s.end());
  }
  void PutBytes(std::span<const uint8_t> bytes) {
    out_->insert(out_->end(), bytes.begin(), bytes.end());
  }
  void PadTo(uint64_t alignment) {
    while (out_->size() % alignment != 0) out_->push_back(0);
  }
  size_t size() const { return out_->size(); }

 private:
  std::vector<uint8_t>* out_;
};

// Writes the payload of `value` (without its type id, which the caller writes).
void PutValue(const GgufValue& value, ByteSink* sink) {
  std::visit(
      [sink](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          sink->Put<uint8_t>(v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          sink->PutString(v);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          sink->Put<uint32_t>(static_cast<uint32_t>(v.element_type));
          sink->Put<uint64_t>(v.elements.size());
          for (const GgufValue& e : v.elements) {
            TESSERA_CHECK(e.type() == v.element_type,
                          "GgufWriter: array element type differs from the array's element_type");
            PutValue(e, sink);
          }
        } else {
          sink->Put<T>(v);
        }
      },
      value.storage());
}

uint64_t AlignUp(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

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
  const GgmlTypeInfo& info = GetGgmlTypeInfo(type);
  TESSERA_CHECK(!dims.empty() && dims.size() <= static_cast<size_t>(kGgufMaxDims),
                "GgufWriter::AddTensor: need 1..4 dims");
  TESSERA_CHECK(dims[0] % info.block_size == 0,
                "GgufWriter::AddTensor: dims[0] must be a multiple of the block size");
  uint64_t num_elements = 1;
  for (uint64_t d : dims) num_elements *= d;
  TESSERA_CHECK(data.size() == num_elements / info.block_size * info.type_size,
                "GgufWriter::AddTensor: data size does not match dims and type");
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type,
                                   std::vector<uint8_t>(data.begin(), data.end())});
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  ByteSink sink(&out);
  sink.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("GGUF"), 4));
  sink.Put<uint32_t>(version_);
  sink.Put<uint64_t>(tensors_.size());
  sink.Put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    sink.PutString(key);
    sink.Put<uint32_t>(static_cast<uint32_t>(value.type()));
    PutValue(value, &sink);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const PendingTensor& t : tensors_) {
    sink.PutString(t.name);
    sink.Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) sink.Put<uint64_t>(d);
    sink.Put<uint32_t>(static_cast<uint32_t>(t.type));
    sink.Put<uint64_t>(offset);
    offset = AlignUp(offset + t.data.size(), alignment_);
  }
  sink.PadTo(alignment_);
  for (const PendingTensor& t : tensors_) {
    sink.PutBytes(t.data);
    sink.PadTo(alignment_);
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

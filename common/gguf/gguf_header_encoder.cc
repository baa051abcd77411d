// EncodeGgufHeader: the GGUF layout of gguf_parser.cc, little-endian, as ggml writes it.
#include "common/gguf/gguf_header_encoder.h"

#include <cstring>
#include <string_view>
#include <type_traits>
#include <variant>

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

}  // namespace

uint64_t GgufTensorDataBytes(const GgufTensorSpec& tensor) {
  const GgmlTypeInfo& info = GetGgmlTypeInfo(tensor.type);
  TESSERA_CHECK(!tensor.dims.empty() && tensor.dims.size() <= static_cast<size_t>(kGgufMaxDims),
                ("GGUF tensor '" + tensor.name + "': need 1..4 dims").c_str());
  TESSERA_CHECK(tensor.dims[0] % info.block_size == 0,
                ("GGUF tensor '" + tensor.name + "': dims[0] must be a multiple of the block size")
                    .c_str());
  uint64_t num_elements = 1;
  for (uint64_t d : tensor.dims) num_elements *= d;
  return num_elements / info.block_size * info.type_size;
}

uint64_t GgufAlignUp(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

std::vector<uint8_t> EncodeGgufHeader(uint32_t version, uint64_t alignment,
                                      const GgufMetadataList& metadata,
                                      const std::vector<GgufTensorSpec>& tensors) {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  ByteSink sink(&out);
  sink.Put<uint32_t>(version);
  sink.Put<uint64_t>(tensors.size());
  sink.Put<uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) {
    sink.PutString(key);
    sink.Put<uint32_t>(static_cast<uint32_t>(value.type()));
    PutValue(value, &sink);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const GgufTensorSpec& t : tensors) {
    sink.PutString(t.name);
    sink.Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) sink.Put<uint64_t>(d);
    sink.Put<uint32_t>(static_cast<uint32_t>(t.type));
    sink.Put<uint64_t>(offset);
    offset = GgufAlignUp(offset + GgufTensorDataBytes(t), alignment);
  }
  sink.PadTo(alignment);
  return out;
}

}  // namespace tessera::gguf

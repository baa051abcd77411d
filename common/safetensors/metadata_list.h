// GGUF metadata entries collected in order, for a GgufFile assembled with FromParts (the
// in-memory counterpart of GgufWriter's Add* calls). Single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/gguf/gguf_file.h"

namespace tessera::safetensors {

class MetadataList {
 public:
  void Add(std::string key, gguf::GgufValue::Storage value) {
    entries_.push_back({std::move(key), gguf::GgufValue(std::move(value))});
  }
  void AddString(std::string key, std::string value) { Add(std::move(key), std::move(value)); }
  void AddUint32(std::string key, uint32_t value) { Add(std::move(key), value); }
  void AddFloat32(std::string key, float value) { Add(std::move(key), value); }
  void AddBool(std::string key, bool value) { Add(std::move(key), value); }
  void AddStringArray(std::string key, std::vector<std::string> values) {
    gguf::GgufArray array{.element_type = gguf::GgufValueType::kString, .elements = {}};
    array.elements.reserve(values.size());
    for (std::string& v : values) array.elements.emplace_back(std::move(v));
    Add(std::move(key), std::move(array));
  }
  void AddInt32Array(std::string key, const std::vector<int32_t>& values) {
    gguf::GgufArray array{.element_type = gguf::GgufValueType::kInt32, .elements = {}};
    array.elements.reserve(values.size());
    for (int32_t v : values) array.elements.emplace_back(v);
    Add(std::move(key), std::move(array));
  }

  bool Has(const std::string& key) const {
    for (const gguf::GgufMetadataEntry& e : entries_) {
      if (e.key == key) return true;
    }
    return false;
  }
  std::vector<gguf::GgufMetadataEntry> Take() && { return std::move(entries_); }

 private:
  std::vector<gguf::GgufMetadataEntry> entries_;
};

}  // namespace tessera::safetensors

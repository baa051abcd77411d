// Helpers for the GGUF tests: a raw little-endian byte builder for hand-made (often broken) files,
// a tiny valid model built with GgufWriter, and file helpers.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_value.h"
#include "common/gguf/gguf_writer.h"
#include "gtest/gtest.h"

namespace tessera::gguf::testing {

// Appends little-endian fields; every method returns *this so files read top to bottom.
class GgufBytes {
 public:
  GgufBytes& U8(uint8_t v) { return Put(v); }
  GgufBytes& U16(uint16_t v) { return Put(v); }
  GgufBytes& U32(uint32_t v) { return Put(v); }
  GgufBytes& U64(uint64_t v) { return Put(v); }
  GgufBytes& I32(int32_t v) { return Put(v); }
  GgufBytes& F32(float v) { return Put(v); }
  GgufBytes& Str(std::string_view s) {
    U64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& Raw(const std::vector<uint8_t>& raw) {
    bytes_.insert(bytes_.end(), raw.begin(), raw.end());
    return *this;
  }
  GgufBytes& Header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return U32(version).U64(num_tensors).U64(num_kv);
  }
  // Key and value type id; the caller appends the value.
  GgufBytes& Key(std::string_view key, GgufValueType type) {
    return Str(key).U32(static_cast<uint32_t>(type));
  }
  GgufBytes& TensorInfo(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                        uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  GgufBytes& PadTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <typename T>
  GgufBytes& Put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));  // tests run on little-endian hosts only
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

template <typename T>
GgufValue Value(T v) {
  return GgufValue(GgufValue::Storage(std::in_place_type<T>, std::move(v)));
}

inline std::vector<uint8_t> F32Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A small valid model: a few metadata values and F32, Q8_0 and Q4_1 tensors.
inline GgufWriter TinyModelWriter(uint32_t version = 3, uint64_t alignment = 32) {
  GgufWriter w(version, alignment);
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.block_count", 2);
  w.AddFloat32("llama.rope.freq_base", 10000.0f);
  w.AddBool("tiny.flag", true);
  w.AddStringArray("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
  w.AddInt32Array("tokenizer.ggml.token_type", {3, 1, 1});
  std::vector<float> f32 = {1.0f, -2.0f, 0.5f, 3.25f, 0.0f, -0.125f, 8.0f, 100.0f};
  w.AddTensor("f32", {4, 2}, GgmlType::kF32, F32Bytes(f32));
  std::vector<float> ramp(64);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i) * 0.25f - 4.0f;
  w.AddTensor("q8", {32, 2}, GgmlType::kQ8_0, *QuantizeFromF32(GgmlType::kQ8_0, ramp));
  w.AddTensor("q41", {64}, GgmlType::kQ4_1, *QuantizeFromF32(GgmlType::kQ4_1, ramp));
  return w;
}

inline std::vector<uint8_t> TinyModel(uint32_t version = 3) {
  return TinyModelWriter(version).Serialize();
}

inline std::vector<uint8_t> ReadFileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A path under gtest's temp dir, unique per process so parallel ctest runs do not collide.
inline std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / (name + "." + std::to_string(::getpid()));
}

}  // namespace tessera::gguf::testing

// A small hybrid Gated-DeltaNet model file (general.architecture qwen3next, qwen35 or qwen35moe)
// with llama.cpp's metadata keys and tensor names and shapes, for tests of the model config, the
// tensor check and `tessera inspect`. The tensor list is written out here from llama.cpp's
// loaders (src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp), independently of
// common/model, so those readers are checked against llama.cpp rather than against themselves.
// Tensors are F32 zeros. Tests edit the fixture to break one thing, then parse or write it.
//
// The shape (kTiny*): 8 layers, attention every 4th (layers 3 and 7), hidden 32, 4 query heads and
// 2 KV heads of width 16, rope over 8 dims; GDN: conv kernel 4, 2 key heads and 4 value heads of
// width 8; qwen3next / qwen35moe: 4 experts (2 used) of width 16, a shared expert of width 24;
// qwen35: dense FFN of width 48; vocabulary 64. qwen35moe leaves out feed_forward_length, as its
// converter may.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_value.h"
#include "common/gguf/gguf_writer.h"

namespace tessera::testing_util {

inline constexpr int kTinyHybridLayers = 8;
inline constexpr int kTinyHybridHidden = 32;
inline constexpr int kTinyHybridVocab = 64;

class TinyHybridGguf {
 public:
  // Preconditions: architecture is "qwen3next", "qwen35" or "qwen35moe" (checked).
  explicit TinyHybridGguf(std::string architecture);

  const std::string& architecture() const { return architecture_; }

  // Metadata edits; `key` is the full key ("qwen35.ssm.conv_kernel"); Key() prefixes the
  // architecture. Set replaces an existing entry in place or appends a new one.
  std::string Key(const std::string& suffix) const { return architecture_ + "." + suffix; }
  void SetUint32(const std::string& key, uint32_t value);
  void SetValue(const std::string& key, gguf::GgufValue value);
  void RemoveKey(const std::string& key);

  // Tensor edits by full name ("blk.2.ssm_a"); dims in ggml order.
  bool HasTensor(const std::string& name) const;
  void RemoveTensor(const std::string& name);
  void SetTensorDims(const std::string& name, std::vector<uint64_t> dims);  // adds if absent

  gguf::GgufWriter ToWriter() const;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> Parse() const;
  absl::Status WriteToFile(const std::string& path) const;

 private:
  void AddMetadata();
  void AddTensors();
  void AddLayerTensors(int layer);

  std::string architecture_;
  std::vector<std::pair<std::string, gguf::GgufValue>> metadata_;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors_;
};

}  // namespace tessera::testing_util

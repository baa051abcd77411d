// A copy of an MoE hybrid GGUF with each layer's ffn_gate_exps and ffn_up_exps replaced by
// llama.cpp's fused ffn_gate_up_exps [hidden, 2 * ffn, experts]: expert e's matrix is its gate
// rows, then its up rows (llama.cpp views the fused product's first ffn rows as gate, the rest
// as up). Same metadata, same values: a model must compute the same logits from either file.
// For tests; header-only.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"

namespace tessera::testing_util {

inline absl::Status WriteFusedGateUpCopy(const std::string& source, const std::string& target) {
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(source);
  if (!file.ok()) return file.status();
  const gguf::GgufFile& in = **file;
  gguf::GgufWriter writer;
  for (const gguf::GgufMetadataEntry& entry : in.metadata()) {
    if (entry.key.rfind("GGUF.", 0) == 0 || entry.key == "general.alignment") continue;
    writer.AddValue(entry.key, entry.value);
  }
  for (const gguf::GgufTensorInfo& t : in.tensors()) {
    const std::string suffix = "ffn_gate_exps.weight";
    if (t.name.find("ffn_up_exps.weight") != std::string::npos) continue;  // fused below
    if (t.name.size() < suffix.size() ||
        t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      writer.AddTensor(t.name, t.dims, t.type, in.TensorData(t));
      continue;
    }
    const std::string prefix = t.name.substr(0, t.name.size() - suffix.size());
    const gguf::GgufTensorInfo* up = in.FindTensor(prefix + "ffn_up_exps.weight");
    if (up == nullptr || up->type != t.type || up->dims != t.dims) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": no matching ffn_up_exps"));
    }
    const std::span<const uint8_t> gate_bytes = in.TensorData(t);
    const std::span<const uint8_t> up_bytes = in.TensorData(*up);
    const uint64_t experts = t.dims[2];
    const size_t per_expert = gate_bytes.size() / experts;
    std::vector<uint8_t> fused(2 * gate_bytes.size());
    for (uint64_t e = 0; e < experts; ++e) {
      std::memcpy(fused.data() + 2 * e * per_expert, gate_bytes.data() + e * per_expert,
                  per_expert);
      std::memcpy(fused.data() + (2 * e + 1) * per_expert, up_bytes.data() + e * per_expert,
                  per_expert);
    }
    writer.AddTensor(prefix + "ffn_gate_up_exps.weight", {t.dims[0], 2 * t.dims[1], experts},
                     t.type, fused);
  }
  return writer.WriteToFile(target);
}

}  // namespace tessera::testing_util

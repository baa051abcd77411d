// QuantizeModel: header from the plan, then each tensor copied or requantized in row chunks.
#include "tools/quantize/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_stream_writer.h"
#include "common/gguf/quantize_fp4.h"
#include "common/util/status_macros.h"

namespace tessera::quantize {
namespace {

constexpr uint64_t kChunkElements = uint64_t{1} << 22;  // 16 MiB of f32 rows at a time

// llama.cpp's llama_ftype for a file whose matrices are mostly `type`, if it has one.
std::optional<uint32_t> LlamaFileType(gguf::GgmlType type) {
  if (type == gguf::GgmlType::kQ8_0) return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
  return std::nullopt;
}

gguf::GgufMetadataList OutputMetadata(const gguf::GgufFile& in, gguf::GgmlType target) {
  gguf::GgufMetadataList metadata;
  for (const gguf::GgufMetadataEntry& e : in.metadata()) {
    if (e.key == "general.file_type" || e.key == "general.quantized_by") continue;
    metadata.emplace_back(e.key, e.value);
  }
  if (const std::optional<uint32_t> file_type = LlamaFileType(target)) {
    metadata.emplace_back("general.file_type", gguf::GgufValue(gguf::GgufValue::Storage(
                                                   std::in_place_type<uint32_t>, *file_type)));
  }
  metadata.emplace_back("general.quantized_by",
                        gguf::GgufValue(gguf::GgufValue::Storage(
                            std::in_place_type<std::string>, std::string("tessera quantize"))));
  return metadata;
}

// Calls `each(values)` on the tensor's rows dequantized to f32, a chunk of whole rows at a time.
template <typename Each>
absl::Status ForEachChunk(const gguf::GgufFile& in, const gguf::GgufTensorInfo& t, Each each) {
  const uint64_t row_elements = t.dims[0];
  const uint64_t rows = t.num_elements / row_elements;
  const uint64_t row_bytes = t.num_bytes / rows;
  const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkElements / row_elements);
  const std::span<const uint8_t> data = in.TensorData(t);
  std::vector<float> values;
  for (uint64_t row = 0; row < rows; row += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, rows - row);
    values.resize(n * row_elements);
    const absl::Status status = gguf::DequantizeToF32(
        t.type, data.subspan(row * row_bytes, n * row_bytes), n * row_elements, values);
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat(t.name, ": ", status.message()));
    if (absl::Status s = each(std::span<const float>(values)); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(t.name, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

struct Requantized {
  std::vector<uint8_t> bytes;
  std::vector<float> tensor_scales;  // NVFP4's (one per expert of a stack), written as the sidecar
};

// NVFP4's two-level recipe: the tensor scale from the amax of the whole matrix (of each expert's
// matrix in a stack), then each block against its matrix's scale.
absl::StatusOr<Requantized> RequantizeNvfp4(const gguf::GgufFile& in, const gguf::GgufTensorInfo& t,
                                            uint64_t num_matrices) {
  const uint64_t matrix_elements = t.num_elements / num_matrices;
  std::vector<float> amax(num_matrices, 0.0f);
  uint64_t at = 0;
  TESSERA_RETURN_IF_ERROR(ForEachChunk(in, t, [&](std::span<const float> values) {
    for (float v : values) {
      float& m = amax[at++ / matrix_elements];
      m = std::max(m, std::fabs(v));
    }
    return absl::OkStatus();
  }));
  Requantized out;
  for (float m : amax) out.tensor_scales.push_back(gguf::Nvfp4TensorScale(std::span<const float>(&m, 1)));
  out.bytes.reserve(t.num_elements / gguf::kNvfp4BlockElements * gguf::kNvfp4BlockBytes);
  at = 0;
  TESSERA_RETURN_IF_ERROR(ForEachChunk(in, t, [&](std::span<const float> values) {
    for (size_t i = 0; i < values.size(); i += gguf::kNvfp4BlockElements) {
      uint8_t block[gguf::kNvfp4BlockBytes];
      // matrix_elements is a whole number of blocks (rows are), so no block spans two matrices.
      const float scale = out.tensor_scales[at / matrix_elements];
      gguf::QuantizeNvfp4Block(values.subspan(i).first<gguf::kNvfp4BlockElements>(), scale, block);
      out.bytes.insert(out.bytes.end(), block, block + sizeof(block));
      at += gguf::kNvfp4BlockElements;
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<Requantized> Requantize(const gguf::GgufFile& in, const TensorDecision& d) {
  if (d.output_type == gguf::GgmlType::kNvfp4) return RequantizeNvfp4(in, *d.tensor, d.scale_count);
  Requantized out;
  TESSERA_RETURN_IF_ERROR(ForEachChunk(in, *d.tensor, [&](std::span<const float> values) {
    absl::StatusOr<std::vector<uint8_t>> blocks = gguf::QuantizeFromF32(d.output_type, values);
    if (!blocks.ok()) return blocks.status();
    out.bytes.insert(out.bytes.end(), blocks->begin(), blocks->end());
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace

absl::StatusOr<QuantizeSummary> QuantizeModel(const gguf::GgufFile& in,
                                              const std::vector<TensorDecision>& plan,
                                              const std::string& out_path,
                                              const ProgressCallback& progress) {
  std::vector<gguf::GgufTensorSpec> specs;
  QuantizeProgress state;
  state.tensors_total = plan.size();
  gguf::GgmlType target = gguf::GgmlType::kF32;
  for (const TensorDecision& d : plan) {
    specs.push_back({d.tensor->name, d.tensor->dims, d.output_type});
    if (!d.scale_name.empty()) specs.push_back({d.scale_name, {d.scale_count}, gguf::GgmlType::kF32});
    state.bytes_total += d.tensor->num_bytes;
    if (d.action == TensorAction::kQuantize) target = d.output_type;
  }
  auto writer = gguf::GgufStreamWriter::Create(out_path, OutputMetadata(in, target), specs);
  if (!writer.ok()) return writer.status();
  QuantizeSummary summary;
  for (const TensorDecision& d : plan) {
    state.current = d.tensor->name;
    if (progress) progress(state);
    absl::Status written;
    if (d.action == TensorAction::kQuantize) {
      absl::StatusOr<Requantized> result = Requantize(in, d);
      if (!result.ok()) return result.status();
      written = (*writer)->WriteNext(result->bytes);
      if (written.ok() && !d.scale_name.empty()) {
        const std::span<const float> scales(result->tensor_scales);
        written = (*writer)->WriteNext(std::span<const uint8_t>(
            reinterpret_cast<const uint8_t*>(scales.data()), scales.size_bytes()));
        summary.output_bytes += scales.size_bytes();
      }
      ++summary.quantized;
      summary.quantized_elements += d.tensor->num_elements;
      summary.quantized_output_bytes += result->bytes.size();
      summary.output_bytes += result->bytes.size();
    } else {
      written = (*writer)->WriteNext(in.TensorData(*d.tensor));
      ++summary.copied;
      summary.output_bytes += d.tensor->num_bytes;
    }
    if (!written.ok()) return written;
    summary.input_bytes += d.tensor->num_bytes;
    ++state.tensors_done;
    state.bytes_done += d.tensor->num_bytes;
  }
  state.current = "";
  if (progress) progress(state);
  if (absl::Status finished = (*writer)->Finish(); !finished.ok()) return finished;
  return summary;
}

}  // namespace tessera::quantize

#include "worker/parallel/weight_sharding.h"

#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/util/status_macros.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

absl::Status CheckDivides(int tp, int value, const char* what) {
  if (value % tp == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel ", tp, ": the model's ", value,
                                                 " ", what, " do not divide into ", tp,
                                                 " equal shares"));
}

// `bytes` of new storage owned by `weights` (counted with its load-time copies); returns it.
void* OwnedBytes(HostModelWeights* weights, size_t bytes) {
  cpu::AlignedVector<float>& copy = weights->owned.emplace_back((bytes + 3) / 4);
  weights->num_dequantized_bytes += static_cast<int64_t>(bytes);
  return copy.data();
}

// Columns [first, first + cols) of every row of `full`: in its format when the cut falls on its
// blocks' boundaries, else dequantized to f32.
absl::StatusOr<cpu::WeightView> ColumnSlice(const cpu::WeightView& full, int64_t first,
                                            int64_t cols, const std::string& name,
                                            HostModelWeights* out) {
  const int64_t block = cpu::FormatBlockElements(full.format);
  if (first % block == 0 && cols % block == 0) {
    const size_t offset = cpu::RowBytes(full.format, first);
    const size_t row_bytes = cpu::RowBytes(full.format, cols);
    auto* data = static_cast<uint8_t*>(OwnedBytes(out, row_bytes * full.rows));
    for (int64_t r = 0; r < full.rows; ++r) {
      std::memcpy(data + r * row_bytes, full.Row(r) + offset, row_bytes);
    }
    return cpu::WeightView{full.format, data, full.rows, cols};
  }
  auto* data = static_cast<float*>(OwnedBytes(out, sizeof(float) * cols * full.rows));
  std::vector<float> row(static_cast<size_t>(full.cols));
  for (int64_t r = 0; r < full.rows; ++r) {
    const absl::Status status = gguf::DequantizeToF32(
        cpu::ToGgmlType(full.format),
        std::span<const uint8_t>(full.Row(r), cpu::RowBytes(full.format, full.cols)),
        static_cast<uint64_t>(full.cols), row);
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
    std::memcpy(data + r * cols, row.data() + first, sizeof(float) * cols);
  }
  return cpu::WeightView{cpu::WeightFormat::kF32, data, full.rows, cols};
}

// Rows [first, first + count) of each expert's matrix in `full`, copied in its format.
cpu::ExpertWeightsView ExpertRows(const cpu::ExpertWeightsView& full, int64_t first,
                                  int64_t count, HostModelWeights* out) {
  const size_t row_bytes = cpu::RowBytes(full.format, full.cols);
  auto* data = static_cast<uint8_t*>(OwnedBytes(out, row_bytes * count * full.num_experts));
  const auto* source = static_cast<const uint8_t*>(full.data);
  for (int64_t e = 0; e < full.num_experts; ++e) {
    std::memcpy(data + e * count * row_bytes, source + (e * full.rows + first) * row_bytes,
                row_bytes * count);
  }
  cpu::ExpertWeightsView view = full;
  view.data = data;
  view.rows = count;
  return view;
}

// An expert stack of rank `rank`: rows shrank (gate, up; the fused [gate | up] form shards each
// half) or columns shrank (down: a partial sum, completed after the MoE layer's combine).
absl::StatusOr<HostWeight> ShardExperts(const WeightSpec& full_spec, const HostWeight& full,
                                        const WeightSpec& spec, int rank, int tp,
                                        HostModelWeights* out) {
  HostWeight weight = full;
  const cpu::ExpertWeightsView& stack = full.experts;
  if (spec.cols() == full_spec.cols() && spec.rows() * tp == full_spec.rows()) {
    if (spec.name.find("gate_up_exps") == std::string::npos) {
      weight.experts = ExpertRows(stack, rank * spec.rows(), spec.rows(), out);
      return weight;
    }
    // Each expert's gate rows then its up rows: the rank's share of each half, in that order.
    const int64_t half = full_spec.rows() / 2, share = spec.rows() / 2;
    const cpu::ExpertWeightsView gate = ExpertRows(stack, rank * share, share, out);
    const cpu::ExpertWeightsView up = ExpertRows(stack, half + rank * share, share, out);
    const size_t row_bytes = cpu::RowBytes(stack.format, stack.cols);
    auto* data = static_cast<uint8_t*>(OwnedBytes(out, row_bytes * spec.rows() * stack.num_experts));
    for (int64_t e = 0; e < stack.num_experts; ++e) {
      uint8_t* to = data + e * spec.rows() * row_bytes;
      std::memcpy(to, static_cast<const uint8_t*>(gate.data) + e * share * row_bytes,
                  share * row_bytes);
      std::memcpy(to + share * row_bytes,
                  static_cast<const uint8_t*>(up.data) + e * share * row_bytes, share * row_bytes);
    }
    weight.experts.data = data;
    weight.experts.rows = spec.rows();
    return weight;
  }
  if (spec.rows() == full_spec.rows() && spec.cols() * tp == full_spec.cols()) {
    const cpu::WeightView all{stack.format, stack.data, stack.num_experts * stack.rows, stack.cols};
    TESSERA_ASSIGN_OR_RETURN(const cpu::WeightView cut, ColumnSlice(all, rank * spec.cols(),
                                                                    spec.cols(), spec.name, out));
    weight.experts.format = cut.format;
    weight.experts.data = cut.data;
    weight.experts.cols = spec.cols();
    weight.partial_sum = true;
    return weight;
  }
  return absl::UnimplementedError(absl::StrCat("tensor parallel: no rule shards the expert stack '",
                                               spec.name, "' into ", tp, " ranks"));
}

// One declared tensor of rank `rank`: see the header for the rule.
absl::StatusOr<HostWeight> ShardOne(const WeightSpec& full_spec, const HostWeight& full,
                                    const WeightSpec& spec, int rank, int tp,
                                    HostModelWeights* out) {
  if (!full.present || full_spec.dims == spec.dims || !spec.parts.empty()) return full;
  HostWeight weight = full;
  if (spec.role == WeightRole::kDense && spec.elements() * tp == full_spec.elements()) {
    weight.values = full.values.subspan(static_cast<size_t>(rank * spec.elements()),
                                        static_cast<size_t>(spec.elements()));
    return weight;
  }
  if (spec.role == WeightRole::kMatrix && spec.cols() == full_spec.cols() &&
      spec.rows() * tp == full_spec.rows()) {
    weight.matrix.data = full.matrix.Row(rank * spec.rows());
    weight.matrix.rows = spec.rows();
    return weight;
  }
  if (spec.role == WeightRole::kMatrix && spec.rows() == full_spec.rows() &&
      spec.cols() * tp == full_spec.cols()) {
    TESSERA_ASSIGN_OR_RETURN(weight.matrix, ColumnSlice(full.matrix, rank * spec.cols(),
                                                        spec.cols(), spec.name, out));
    weight.partial_sum = true;
    return weight;
  }
  if (spec.role == WeightRole::kExperts) return ShardExperts(full_spec, full, spec, rank, tp, out);
  return absl::UnimplementedError(absl::StrCat("tensor parallel: no rule shards '", spec.name,
                                               "' into ", tp, " ranks"));
}

}  // namespace

absl::StatusOr<model::ModelConfig> ShardModelConfig(const model::ModelConfig& config, int tp) {
  if (tp < 1) return absl::InvalidArgumentError("--tensor-parallel must be at least 1");
  model::ModelConfig shard = config;
  if (!config.hybrid.has_value()) {
    TESSERA_RETURN_IF_ERROR(CheckDivides(tp, config.num_heads, "attention heads"));
    TESSERA_RETURN_IF_ERROR(CheckDivides(tp, config.num_kv_heads, "KV heads"));
    TESSERA_RETURN_IF_ERROR(CheckDivides(tp, config.ffn_size, "FFN columns"));
    shard.num_heads /= tp;
    shard.num_kv_heads /= tp;
    shard.ffn_size /= tp;
    return shard;
  }
  // Hybrids: the FFN (dense, or every expert's and the shared expert's columns) is sharded; the
  // Gated DeltaNet and gated-attention mixers are replicated for now.
  std::optional<model::MoeDims>& moe = shard.hybrid->moe;
  if (!moe.has_value()) {
    TESSERA_RETURN_IF_ERROR(CheckDivides(tp, config.ffn_size, "FFN columns"));
    shard.ffn_size /= tp;
    return shard;
  }
  TESSERA_RETURN_IF_ERROR(CheckDivides(tp, moe->expert_ffn_size, "expert FFN columns"));
  moe->expert_ffn_size /= tp;
  if (moe->shared_expert_ffn_size > 0) {
    TESSERA_RETURN_IF_ERROR(
        CheckDivides(tp, moe->shared_expert_ffn_size, "shared-expert FFN columns"));
    moe->shared_expert_ffn_size /= tp;
  }
  return shard;
}

absl::StatusOr<std::unique_ptr<HostModelWeights>> ShardWeights(
    const WeightDeclaration& full, const HostModelWeights& weights,
    const WeightDeclaration& rank_declaration, int rank, int tp) {
  auto shard = std::make_unique<HostModelWeights>();
  for (const WeightSpec& spec : rank_declaration.specs()) {
    const WeightId id = full.Find(spec.name);
    if (id == kNoWeight) {
      return absl::InternalError(absl::StrCat("tensor parallel: '", spec.name,
                                              "' is declared by a rank but not by the model"));
    }
    TESSERA_ASSIGN_OR_RETURN(HostWeight weight,
                             ShardOne(full.spec(id), weights[id], spec, rank, tp, shard.get()));
    shard->tensors.push_back(std::move(weight));
  }
  return shard;
}

}  // namespace tessera::worker

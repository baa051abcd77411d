#include "worker/cpu/int8_packed_weights.h"

#include <sys/mman.h>

#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

bool Packable(const cpu::WeightView& w) {
  return cpu::Int8MatmulSupportsFormat(w.format) && w.cols % cpu::kQuantBlockSize == 0;
}

size_t PackedBytes(const cpu::WeightView& w) {
  return Packable(w) ? cpu::PackedInt8Bytes(w.format, w.rows, w.cols) : 0;
}

}  // namespace

std::vector<std::string> UnpackableInt8Weights(const WeightDeclaration& declaration,
                                               const HostModelWeights& weights) {
  std::vector<std::string> names;
  for (WeightId id = 0; id < declaration.size(); ++id) {
    const HostWeight& w = weights[id];
    const std::string& name = declaration.spec(id).name;
    if (!w.present || w.role == WeightRole::kDense || w.role == WeightRole::kEmbedding) continue;
    if (w.role == WeightRole::kExperts) {
      names.push_back(absl::StrCat(name, " (expert stack: no int8 MoE path)"));
    } else if (!Packable(w.matrix)) {
      const auto format = util::ToAbsl(cpu::WeightFormatName(w.matrix.format));
      names.push_back(absl::StrCat(name, " (", format, ", ", w.matrix.cols, " cols)"));
    }
  }
  return names;
}

absl::Status CheckInt8Packable(const WeightDeclaration& declaration,
                               const HostModelWeights& weights) {
  const std::vector<std::string> unpackable = UnpackableInt8Weights(declaration, weights);
  if (unpackable.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "int8 activations need every matmul weight in Q8_0, Q4_0 or Q4_1 with a multiple of 32 "
      "columns; this model has ", unpackable.size(), " that are not: ",
      absl::StrJoin(unpackable, ", ")));
}

Int8PackedWeights::Int8PackedWeights(const WeightDeclaration& declaration,
                                     const HostModelWeights& weights)
    : packed_(static_cast<size_t>(declaration.size())) {
  const absl::Status packable = CheckInt8Packable(declaration, weights);
  TESSERA_CHECK(packable.ok(), std::string(packable.message()).c_str());
  const auto is_matrix = [&](WeightId id) {
    return weights[id].present && weights[id].role == WeightRole::kMatrix;
  };
  size_t bytes = 0;
  for (WeightId id = 0; id < declaration.size(); ++id) {
    if (is_matrix(id)) bytes += PackedBytes(weights[id].matrix);
  }
  if (bytes == 0) return;
  absl::StatusOr<util::HugePageBuffer> memory = util::HugePageBuffer::Allocate(bytes);
  TESSERA_CHECK(memory.ok(), "Int8PackedWeights: cannot allocate memory for packed weights");
  memory_ = *std::move(memory);
  size_t offset = 0;
  for (WeightId id = 0; id < declaration.size(); ++id) {
    if (!is_matrix(id)) continue;
    const size_t size = PackedBytes(weights[id].matrix);
    packed_[static_cast<size_t>(id)] =
        cpu::PackInt8Weights(weights[id].matrix, std::span<uint8_t>(memory_.data() + offset, size));
    offset += size;
    ++packed_count_;
  }
  ::mprotect(memory_.data(), bytes, PROT_READ);  // immutable from here on
}

}  // namespace tessera::worker

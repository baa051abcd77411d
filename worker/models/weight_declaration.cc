#include "worker/models/weight_declaration.h"

#include <utility>

#include "common/util/check.h"

namespace tessera::worker {

int64_t WeightSpec::rows() const { return dims.size() >= 2 ? static_cast<int64_t>(dims[1]) : 1; }
int64_t WeightSpec::cols() const { return dims.empty() ? 1 : static_cast<int64_t>(dims[0]); }
int64_t WeightSpec::experts() const {
  return dims.size() >= 3 ? static_cast<int64_t>(dims[2]) : 1;
}

int64_t WeightSpec::elements() const {
  int64_t n = 1;
  for (uint64_t d : dims) n *= static_cast<int64_t>(d);
  return n;
}

WeightId WeightDeclaration::Add(WeightSpec spec) {
  if (const WeightId existing = Find(spec.name); existing != kNoWeight) return existing;
  TESSERA_CHECK(!spec.dims.empty(), "WeightDeclaration: a tensor needs at least one dim");
  const WeightId id = static_cast<WeightId>(specs_.size());
  ids_.emplace(spec.name, id);
  specs_.push_back(std::move(spec));
  return id;
}

WeightId WeightDeclaration::Matrix(const std::string& name, int64_t rows, int64_t cols,
                                   bool optional) {
  return Add({.name = name,
              .role = WeightRole::kMatrix,
              .dims = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)},
              .optional = optional,
              .positive = false});
}

WeightId WeightDeclaration::Vector(const std::string& name, int64_t size, bool optional) {
  return Add({.name = name,
              .role = WeightRole::kDense,
              .dims = {static_cast<uint64_t>(size)},
              .optional = optional,
              .positive = false});
}

WeightId WeightDeclaration::Concat(const std::string& name, std::vector<WeightId> parts,
                                   std::vector<WeightId> only_without) {
  TESSERA_CHECK(parts.size() >= 2, "WeightDeclaration: a concatenation needs two parts");
  uint64_t rows = 0;
  const uint64_t cols = spec(parts.front()).dims[0];
  for (const WeightId part : parts) {
    const WeightSpec& p = spec(part);
    TESSERA_CHECK(p.role == WeightRole::kMatrix && p.parts.empty() && p.dims.size() == 2 &&
                      p.dims[0] == cols && !p.f32_output,
                  "WeightDeclaration: concatenated parts must be plain matrices of equal cols");
    rows += p.dims[1];
  }
  return Add({.name = name, .role = WeightRole::kMatrix, .dims = {cols, rows}, .optional = true,
              .positive = false, .f32_output = false, .parts = std::move(parts),
              .only_without = std::move(only_without)});
}

WeightId WeightDeclaration::Find(const std::string& name) const {
  const auto it = ids_.find(name);
  return it == ids_.end() ? kNoWeight : it->second;
}

}  // namespace tessera::worker

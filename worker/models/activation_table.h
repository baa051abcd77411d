// The activations a model's forward pass writes, declared by the model (DESIGN.md §5): a name,
// how many rows (the step's tokens, or one per sequence that samples) and a width. A backend
// sizes and owns the storage; ops name activations by ActId, so a new model adds rows to its
// table instead of changing a backend.
//
// Plain data; built with the model's plan, read-only afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::worker {

using ActId = int32_t;
inline constexpr ActId kNoAct = -1;  // an activation a model variant does not use

enum class ActRows {
  kTokens,        // one row per token of the step
  kSamplingRows,  // one row per sequence whose logits the step needs
};

enum class ActType {
  kCompute,  // the backend's compute type (cpu: f32; cuda: bf16, f16 or f32)
  kF32,      // always f32 (logits, recurrent gates)
};

struct ActivationSpec {
  std::string name;
  ActRows rows = ActRows::kTokens;
  int64_t width = 0;
  ActType type = ActType::kCompute;
  // RmsNorm writes it in place (q/k norms, the final norm): a backend that cannot normalise in
  // place swaps its buffer with a spare of the largest such activation.
  bool normed_in_place = false;
};

class ActivationTable {
 public:
  ActId Add(ActivationSpec spec) {
    specs_.push_back(std::move(spec));
    return static_cast<ActId>(specs_.size() - 1);
  }
  const ActivationSpec& operator[](ActId id) const { return specs_.at(static_cast<size_t>(id)); }
  const std::vector<ActivationSpec>& specs() const { return specs_; }
  int size() const { return static_cast<int>(specs_.size()); }
  // The widest activation of `rows` (the backends' scratch for in-place ops).
  int64_t MaxWidth(ActRows rows) const {
    int64_t width = 0;
    for (const ActivationSpec& s : specs_) {
      if (s.rows == rows && s.width > width) width = s.width;
    }
    return width;
  }

 private:
  std::vector<ActivationSpec> specs_;
};

}  // namespace tessera::worker

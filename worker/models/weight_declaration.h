// What a model reads from its file, declared once from its config (DESIGN.md §5): every tensor's
// GGUF name, its shape in ggml order, its role (how a backend stores it) and whether it may be
// absent. A loader binds the declaration against a file (one error naming the first missing or
// misshapen tensor) and gives each backend a table indexed by WeightId; the model definition then
// names weights only by id, so no backend ever names an architecture's tensors.
//
// Plain data; built on the loader's thread, read-only afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::worker {

using WeightId = int32_t;
inline constexpr WeightId kNoWeight = -1;

enum class WeightRole {
  kMatrix,   // a projection [rows, cols] (ggml dims {cols, rows}); kept in a format the backend's
             // matmul reads, else converted at load. A 1-D {cols} tensor reads as [1, cols].
  kEmbedding,  // a table [rows, cols] whose rows Embed gathers; stored like kMatrix (a tied output
               // head declares it kMatrix instead: it is then a projection too)
  kExperts,  // num_experts projections [rows, cols] back to back (ggml dims {cols, rows, experts})
  kDense,    // f32 values of any shape: norms, biases, conv kernels, per-head constants
};

struct WeightSpec {
  std::string name;             // GGUF tensor name, e.g. "blk.3.ssm_conv1d.weight"
  WeightRole role = WeightRole::kDense;
  std::vector<uint64_t> dims;   // ggml order (innermost first); absent trailing dims count as 1
  bool optional = false;        // absent: the backend's table holds an empty entry (Has() false)
  bool positive = false;        // kDense: every value must be finite and > 0 (RoPE divisors)
  // kMatrix: the model reads this projection's output in f32 (the logits, router logits), so a
  // backend keeps it in a form its f32-output GEMM reads (the cuda backend: not packed).
  bool f32_output = false;
  // Set: not a file tensor but the concatenation of these kMatrix weights' rows, in order (equal
  // cols), which a backend may store as one matrix so that one GEMM computes them all (QKV,
  // gate/up). A backend that does not (other storage formats or scales among the parts, or a
  // backend that gains nothing) leaves it absent and keeps the parts; one that does leaves the
  // parts absent. The model definition asks Has(concatenation) and uses one or the others.
  std::vector<WeightId> parts = {};
  // A concatenation is made only when none of these optional weights is present (they need the
  // parts: biases, norms the model applies to each part's output).
  std::vector<WeightId> only_without = {};

  int64_t rows() const;         // kMatrix / kExperts: dims[1] (1 for a 1-D tensor)
  int64_t cols() const;         // dims[0]
  int64_t experts() const;      // kExperts: dims[2]
  int64_t elements() const;     // product of dims
};

class WeightDeclaration {
 public:
  // Declares a tensor; returns its id. A name declared twice returns the first id (a tied output
  // head names the embedding table).
  WeightId Add(WeightSpec spec);
  WeightId Matrix(const std::string& name, int64_t rows, int64_t cols, bool optional = false);
  WeightId Vector(const std::string& name, int64_t size, bool optional = false);
  // Declares the concatenation of `parts` (declared kMatrix weights of equal cols) as `name`,
  // to be made only when none of `only_without` is present.
  WeightId Concat(const std::string& name, std::vector<WeightId> parts,
                  std::vector<WeightId> only_without = {});

  // kNoWeight when `name` was not declared.
  WeightId Find(const std::string& name) const;
  const WeightSpec& spec(WeightId id) const { return specs_.at(static_cast<size_t>(id)); }
  const std::vector<WeightSpec>& specs() const { return specs_; }
  int size() const { return static_cast<int>(specs_.size()); }

 private:
  std::vector<WeightSpec> specs_;
  std::unordered_map<std::string, WeightId> ids_;
};

}  // namespace tessera::worker

#include "tools/convert/tiny_weights.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/util/check.h"

namespace tessera::convert {

uint64_t TinyTensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL + h;  // splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double PortableExp(double x) {
  TESSERA_CHECK(std::fabs(x) <= 4.0, "PortableExp: |x| must be at most 4");
  // 4^40 / 40! < 1e-23: the series has converged far below double precision by then.
  double term = 1.0;
  double sum = 1.0;
  for (int n = 1; n <= 40; ++n) {
    term = term * x / n;
    sum += term;
  }
  return sum;
}

uint64_t TinyNumElements(const TinyTensorPlan& plan) {
  uint64_t n = 1;
  for (uint64_t d : plan.dims) n *= d;
  return n;
}

std::vector<float> DrawTinyTensorValues(const TinyTensorPlan& plan, uint64_t seed) {
  TinyRandomStream random(TinyTensorSeed(seed, plan.name));
  std::vector<float> values(TinyNumElements(plan));
  const TinyInit& init = plan.init;
  const double low = init.a;
  const double width = static_cast<double>(init.b) - init.a;
  for (float& v : values) {
    switch (init.kind) {
      case TinyInit::Kind::kNormal:
        v = init.a + init.b * random.Normal();
        break;
      case TinyInit::Kind::kUniform:
        v = static_cast<float>(low + width * random.Uniform());
        break;
      case TinyInit::Kind::kNegExpUniform:
        v = static_cast<float>(-PortableExp(low + width * random.Uniform()));
        break;
    }
  }
  return values;
}

absl::Status AddTinyTensor(const TinyTensorPlan& plan, uint64_t seed, gguf::GgufWriter* writer) {
  const std::vector<float> values = DrawTinyTensorValues(plan, seed);
  absl::StatusOr<std::vector<uint8_t>> bytes = gguf::QuantizeFromF32(plan.type, values);
  if (!bytes.ok()) {
    return absl::InternalError(
        absl::StrCat("tiny model: encoding ", plan.name, " failed: ", bytes.status().ToString()));
  }
  writer->AddTensor(plan.name, plan.dims, plan.type, *bytes);
  return absl::OkStatus();
}

}  // namespace tessera::convert

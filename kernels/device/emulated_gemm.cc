#include "kernels/device/emulated_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

namespace tessera::device {
namespace {

float Load(DataType type, const void* base, int64_t index) {
  switch (type) {
    case DataType::kF32: return static_cast<const float*>(base)[index];
    case DataType::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
    case DataType::kF16: return __half2float(static_cast<const __half*>(base)[index]);
  }
  return 0.0f;
}

void Store(DataType type, void* base, int64_t index, float value) {
  switch (type) {
    case DataType::kF32: static_cast<float*>(base)[index] = value; return;
    case DataType::kBf16:
      static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(value);
      return;
    case DataType::kF16: static_cast<__half*>(base)[index] = __float2half_rn(value); return;
  }
}

std::vector<float> ToFloats(DataType type, const void* base, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[i] = Load(type, base, i);
  return values;
}

}  // namespace

void EmulatedGemm(const GemmArgs& args) {
  const std::vector<float> a = ToFloats(args.a_type, args.a, args.m * args.k);
  std::vector<float> b_row(static_cast<size_t>(args.k));
  for (int64_t n = 0; n < args.n; ++n) {
    for (int64_t k = 0; k < args.k; ++k) b_row[k] = Load(args.b_type, args.b, n * args.k + k);
    for (int64_t m = 0; m < args.m; ++m) {
      const float* a_row = a.data() + m * args.k;
      float sum = 0.0f;
      for (int64_t k = 0; k < args.k; ++k) sum += a_row[k] * b_row[k];
      Store(args.c_type, args.c, m * args.n + n, sum);
    }
  }
}

}  // namespace tessera::device

#include "common/model/hybrid_layout.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::model {
namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();
constexpr int64_t kF32Bytes = 4;

// a * b for non-negative a and b, pinned at INT64_MAX: the dims come from an untrusted file and
// the callers only compare the result against limits.
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return kSaturated;
  return product;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return kSaturated;
  return sum;
}

std::string Ordinal(int n) {
  const int mod100 = n % 100;
  const char* suffix = "th";
  if (mod100 < 11 || mod100 > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return absl::StrCat(n, suffix);
}

// "3, 7, 11, ..., 47": the first few indices and the last, so 60-layer models stay one line.
std::string ShortIndexList(const std::vector<int>& indices) {
  constexpr size_t kShown = 4;
  if (indices.size() <= kShown + 1) return absl::StrJoin(indices, ", ");
  std::vector<int> head(indices.begin(), indices.begin() + kShown);
  return absl::StrCat(absl::StrJoin(head, ", "), ", ..., ", indices.back());
}

}  // namespace

std::string_view LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention:
      return "attention";
    case LayerKind::kGatedDeltaNet:
      return "GDN";
  }
  return "unknown";
}

int64_t GdnKeyDim(const GdnDims& d) { return SaturatingMul(d.num_k_heads, d.head_k_dim); }

int64_t GdnValueDim(const GdnDims& d) { return SaturatingMul(d.num_v_heads, d.head_v_dim); }

int64_t GdnConvChannels(const GdnDims& d) {
  return SaturatingAdd(SaturatingMul(2, GdnKeyDim(d)), GdnValueDim(d));
}

int CountLayers(const HybridLayout& layout, LayerKind kind) {
  return static_cast<int>(
      std::count(layout.layer_kinds.begin(), layout.layer_kinds.end(), kind));
}

RecurrentStateBytes PerSequenceStateBytes(const HybridLayout& layout) {
  const GdnDims& d = layout.gdn;
  const int num_gdn = CountLayers(layout, LayerKind::kGatedDeltaNet);
  const int64_t conv_columns = std::max(d.conv_kernel - 1, 0);
  const int64_t conv_layer =
      SaturatingMul(SaturatingMul(conv_columns, GdnConvChannels(d)), kF32Bytes);
  const int64_t ssm_layer = SaturatingMul(
      SaturatingMul(SaturatingMul(d.num_v_heads, d.head_k_dim), d.head_v_dim), kF32Bytes);
  RecurrentStateBytes bytes;
  bytes.conv = SaturatingMul(conv_layer, num_gdn);
  bytes.ssm = SaturatingMul(ssm_layer, num_gdn);
  bytes.total = SaturatingAdd(bytes.conv, bytes.ssm);
  return bytes;
}

std::string DescribeLayerLayout(const HybridLayout& layout) {
  std::vector<int> attention;
  for (size_t i = 0; i < layout.layer_kinds.size(); ++i) {
    if (layout.layer_kinds[i] == LayerKind::kAttention) attention.push_back(static_cast<int>(i));
  }
  const size_t num_layers = layout.layer_kinds.size();
  std::string text = absl::StrCat(num_layers, " = ", num_layers - attention.size(), " GDN + ",
                                  attention.size(), " attention");
  if (attention.empty()) return text;
  if (layout.full_attention_interval == 1) {
    absl::StrAppend(&text, " (every layer)");
  } else if (layout.full_attention_interval > 1) {
    absl::StrAppend(&text, " (every ", Ordinal(layout.full_attention_interval), ": ",
                    ShortIndexList(attention), ")");
  } else {
    absl::StrAppend(&text, " (attention at ", ShortIndexList(attention), ")");
  }
  return text;
}

}  // namespace tessera::model

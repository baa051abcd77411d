// The layer layout of a hybrid Gated-DeltaNet model (llama.cpp's `qwen3next`, `qwen35` and
// `qwen35moe`): which layers are GDN linear attention and which gated full attention, the GDN and
// MoE widths, and the recurrent state a sequence carries. Plain data: ReadModelConfig fills it
// once (hybrid_config.h) and it is shared read-only afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::model {

enum class LayerKind {
  kAttention,      // gated full attention over the paged KV cache
  kGatedDeltaNet,  // linear attention: a fixed-size recurrent state per sequence, no KV
};

std::string_view LayerKindName(LayerKind kind);  // "attention", "GDN"

// Which key head a GDN value head reads when there are more value heads than key heads
// (r = num_v_heads / num_k_heads). The converters store the heads differently: qwen3next keeps
// HF's grouping (value head h reads key head h / r; llama.cpp repeat-interleaves q/k), while
// qwen35/qwen35moe reorder the value heads when converting so that value head h reads key head
// h % num_k_heads (llama.cpp tiles q/k with ggml_repeat).
enum class GdnHeadOrder {
  kGrouped,  // key head = h / r
  kTiled,    // key head = h % num_k_heads
};

// One GDN layer's widths, from the `{arch}.ssm.*` keys as llama.cpp reads them.
struct GdnDims {
  int conv_kernel = 0;  // ssm.conv_kernel: causal depthwise conv width over [q, k, v] channels
  int num_k_heads = 0;  // ssm.group_count
  int num_v_heads = 0;  // ssm.time_step_rank: one decay (a, dt, A) and one beta per value head
  int head_k_dim = 0;   // ssm.state_size (d_k)
  int head_v_dim = 0;   // ssm.inner_size / ssm.time_step_rank (d_v; equals d_k in llama.cpp)
  GdnHeadOrder head_order = GdnHeadOrder::kGrouped;
};

int64_t GdnKeyDim(const GdnDims& d);    // num_k_heads * head_k_dim: width of q and of k
int64_t GdnValueDim(const GdnDims& d);  // num_v_heads * head_v_dim: width of v, z and the output
// Channels of the causal conv and its state: [q | k | v] = 2 * key dim + value dim.
int64_t GdnConvChannels(const GdnDims& d);

// The routed experts of an MoE hybrid (every layer of qwen3next and qwen35moe has them, plus one
// shared expert behind a sigmoid gate).
struct MoeDims {
  int num_experts = 0;             // expert_count
  int num_experts_used = 0;        // expert_used_count: top-k per token
  int expert_ffn_size = 0;         // expert_feed_forward_length, else ffn / k (llama.cpp's rule)
  int shared_expert_ffn_size = 0;  // expert_shared_feed_forward_length, else feed_forward_length
};

struct HybridLayout {
  // [num_layers]: the trunk the forward runs, in order.
  std::vector<LayerKind> layer_kinds;
  // {arch}.full_attention_interval (llama.cpp's default 4): layer i is attention exactly when
  // (i + 1) % interval == 0. 0 when {arch}.attention.recurrent_layers listed the kinds instead.
  int full_attention_interval = 0;
  // {arch}.nextn_predict_layers: multi-token-prediction blocks stored after the trunk (blk.N for
  // N >= num_layers). block_count counts them; the forward does not run them.
  int num_nextn_layers = 0;
  GdnDims gdn;
  // The routed experts; nullopt when every layer has a dense SwiGLU FFN of ModelConfig::ffn_size
  // (qwen35).
  std::optional<MoeDims> moe;
  // {arch}.rope.dimension_sections (qwen35, qwen35moe): llama.cpp rotates with interleaved
  // M-RoPE, which picks a position axis per rotated pair. A text token has the same position on
  // the t/h/w axes, and ReadHybridLayout checks that no pair falls on the fourth, so this is NeoX
  // RoPE over rope_dim. Zeros for qwen3next (plain NeoX).
  std::array<int, 4> rope_sections = {};
};

int CountLayers(const HybridLayout& layout, LayerKind kind);

// The f32 recurrent state one sequence holds over all GDN layers, as llama.cpp sizes it
// (n_embd_r: the last conv_kernel - 1 input columns of every conv channel; n_embd_s: a
// [num_v_heads, head_k_dim, head_v_dim] matrix per layer). Saturates at INT64_MAX instead of
// overflowing (ReadModelConfig rejects layouts anywhere near that).
struct RecurrentStateBytes {
  int64_t conv = 0;  // all GDN layers' conv states
  int64_t ssm = 0;   // all GDN layers' delta-rule states
  int64_t total = 0;
};
RecurrentStateBytes PerSequenceStateBytes(const HybridLayout& layout);

// "48 = 36 GDN + 12 attention (every 4th: 3, 7, 11, ..., 47)" for `tessera inspect`; layouts
// from attention.recurrent_layers list the attention layers ("attention at 0, 5").
std::string DescribeLayerLayout(const HybridLayout& layout);

}  // namespace tessera::model

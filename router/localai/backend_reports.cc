#include "router/localai/backend_reports.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/chat/chat_template.h"

namespace tessera::router::localai {
namespace {

// Sums of one metric family over its label sets.
struct FamilyTotals {
  double counter = 0;
  uint64_t samples = 0;  // histogram observations
  double sample_sum = 0;
};

FamilyTotals Totals(const std::vector<prometheus::MetricFamily>& families,
                    std::string_view name) {
  FamilyTotals totals;
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      totals.counter += metric.counter.value;
      totals.samples += metric.histogram.sample_count;
      totals.sample_sum += metric.histogram.sample_sum;
    }
  }
  return totals;
}

int32_t ClampToInt32(double count) {
  constexpr double kMax = std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(std::clamp(count, 0.0, kMax));
}

// The one-message conversation rendered with enable_thinking = `thinking`; nullopt when the
// template refuses it.
std::optional<std::string> RenderProbe(const chat::ChatTemplate& chat_template, bool thinking) {
  const std::vector<chat::ChatMessage> messages = {{.role = "user", .content = "test"}};
  const nlohmann::ordered_json kwargs = {{"enable_thinking", thinking}};
  absl::StatusOr<std::vector<chat::PromptPiece>> pieces = chat_template.ApplyPieces(
      messages, /*add_generation_prompt=*/true, {.template_kwargs = &kwargs});
  if (!pieces.ok()) return std::nullopt;
  std::string text;
  for (const chat::PromptPiece& piece : *pieces) text += piece.text;
  return text;
}

}  // namespace

::backend::MetricsResponse MetricsOf(const prometheus::Registry& registry) {
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  const FamilyTotals generated = Totals(families, "tessera_generation_tokens_total");
  const FamilyTotals prompt = Totals(families, "tessera_prompt_tokens_total");
  const FamilyTotals gaps = Totals(families, "tessera_inter_token_latency_seconds");
  ::backend::MetricsResponse response;
  response.set_slot_id(0);
  response.set_tokens_generated(ClampToInt32(generated.counter));
  response.set_prompt_tokens_processed(ClampToInt32(prompt.counter));
  if (gaps.samples > 0 && gaps.sample_sum > 0) {
    response.set_tokens_per_second(
        static_cast<float>(static_cast<double>(gaps.samples) / gaps.sample_sum));
  }
  return response;
}

::backend::ModelMetadataResponse ModelMetadataOf(const ModelFrontend& frontend) {
  ::backend::ModelMetadataResponse response;
  if (!frontend.chat_template.has_value()) return response;
  const chat::ChatTemplate& chat_template = *frontend.chat_template;
  const std::optional<std::string> thinking = RenderProbe(chat_template, true);
  const std::optional<std::string> plain = RenderProbe(chat_template, false);
  if (thinking.has_value()) response.set_rendered_template(*thinking);
  const bool has_switch = thinking.has_value() && plain.has_value() && *thinking != *plain;
  response.set_supports_thinking(has_switch ||
                                 chat_template.reasoning_format() != chat::ReasoningFormat::kNone);
  return response;
}

}  // namespace tessera::router::localai

// Chat template rendering cost (issue 25's target: <= 50 us for a 10-turn conversation):
// ChatTemplate::ApplyPieces on real templates (tests/data/chat; run from the repository root)
// with a 10-turn conversation, and Qwen3's with a tool offered. Results: docs/perf/structured.md.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/chat/chat_template.h"
#include "common/util/check.h"

namespace tessera::chat {
namespace {

ChatTemplate Load(const std::string& name) {
  std::ifstream in("tests/data/chat/" + name);
  TESSERA_CHECK(in.good(), "run from the repository root (tests/data/chat)");
  std::stringstream source;
  source << in.rdbuf();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source.str(), {.bos = "<s>", .eos = "</s>"});
  TESSERA_CHECK(t.ok(), "template does not parse");
  return *std::move(t);
}

std::vector<ChatMessage> TenTurns() {
  std::vector<ChatMessage> messages = {{.role = "system", .content = "You are a concise assistant."}};
  for (int i = 0; i < 10; ++i) {
    messages.push_back({.role = "user", .content = "Question number " + std::to_string(i) +
                                                  ": what is a good name for a small boat?"});
    if (i < 9) {
      messages.push_back({.role = "assistant",
                          .content = "A short, friendly name works well, for example Wren."});
    }
  }
  return messages;
}

void BM_Render(benchmark::State& state, const char* name, bool with_tools) {
  const ChatTemplate t = Load(name);
  const std::vector<ChatMessage> messages = TenTurns();
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "get_weather", "description": "Weather for a city.", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const ChatExtras extras{.tools = with_tools ? &tools : nullptr};
  size_t bytes = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<PromptPiece>> pieces = t.ApplyPieces(messages, true, extras);
    TESSERA_CHECK(pieces.ok(), "render failed");
    bytes = 0;
    for (const PromptPiece& p : *pieces) bytes += p.text.size();
    benchmark::DoNotOptimize(pieces);
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

BENCHMARK_CAPTURE(BM_Render, smollm2, "smollm2_instruct.jinja", false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, llama3, "llama3_instruct.jinja", false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3, "qwen3.jinja", false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3_tools, "qwen3.jinja", true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, mistral_small, "mistral_small_3_1.jinja", false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3_6, "qwen3_6.jinja", false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3_6_tools, "qwen3_6.jinja", true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, llama3_2_tools, "llama3_2_instruct.jinja", true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, gemma3, "gemma3_it.jinja", false)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::chat

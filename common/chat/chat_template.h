// ChatTemplate turns a conversation into the prompt text a chat model was trained on, by
// rendering the model's own Jinja template (common/chat/jinja_render.h) as Hugging Face's
// apply_chat_template does: context `messages`, `add_generation_prompt`, `bos_token`,
// `eos_token` (the tokenizer's texts). Whatever the template does with the conversation is what
// the model gets; a template that refuses it (raise_exception, a role it does not know) is an
// INVALID_ARGUMENT naming the template's message.
//
// Content is not markup: ApplyPieces keeps the template's own text apart from message content
// (the engine tracks each output byte's provenance), so a caller tokenizes content as plain text
// (Tokenizer::EncodeSegments) and a user cannot close their turn by spelling a control token.
//
// shape() names the template when it is one tessera knows structurally (known_templates.h:
// "chatml", "chatml-default-system", "qwen2.5"), else "jinja"; only a label.
//
// Ownership/threading: cheap to copy (the parsed template is shared); Apply is thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/jinja_render.h"
#include "common/chat/known_templates.h"
#include "common/gguf/gguf_file.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {

struct ChatMessage {
  std::string role = {};  // "system" | "developer" | "user" | "assistant" | "tool"
  std::string content = {};  // OpenAI's `"content": null` arrives as "" (as vLLM gives templates)
  // An assistant turn's calls as OpenAI sends them, each function's `arguments` parsed to an
  // object where it is JSON (templates print it with tojson); null: none.
  nlohmann::ordered_json tool_calls = nullptr;
  std::string tool_call_id = {};  // role tool: the call it answers
  std::string name = {};          // optional author / tool name
  std::string reasoning_content = {};  // an assistant turn's reasoning (Qwen3 replays it)
};

// How a model's output carries its reasoning, from its template (vLLM's reasoning parsers'
// cases): none; `<think>…</think>` the model writes itself (Qwen3); or the generation prompt
// already opened `<think>`, so the output is reasoning until `</think>` (DeepSeek-R1).
enum class ReasoningFormat { kNone, kThinkTags, kStartsInThinking };

// How a model writes tool calls, from its template: Hermes/Qwen `<tool_call>{json}</tool_call>`,
// Qwen3-Coder/Qwen3.5's `<tool_call><function=…><parameter=…>…</tool_call>` XML, Mistral
// `[TOOL_CALLS][{...}, ...]`, Llama 3's bare `{"name": ..., "parameters": ...}`, or none the
// server parses.
enum class ToolCallFormat { kNone, kHermes, kQwenXml, kMistral, kLlama3Json };

// What a request adds to the template's context besides the messages.
struct ChatExtras {
  const nlohmann::ordered_json* tools = nullptr;  // OpenAI `tools` (a list), or null: undefined
  // chat_template_kwargs: each key becomes a template variable (enable_thinking, ...).
  const nlohmann::ordered_json* template_kwargs = nullptr;
};

// The tokenizer's special-token texts a template may print.
struct ChatTokens {
  std::string bos;
  std::string eos;
};

// One piece of a rendered prompt: the template's markup (turn markers, role names, the default
// system prompt) or a message's content, copied verbatim.
struct PromptPiece {
  std::string text;
  bool is_markup = false;
};

inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

class ChatTemplate {
 public:
  // Parses `jinja_source` (as stored in GGUF `tokenizer.chat_template` or HF
  // tokenizer_config.json). INVALID_ARGUMENT for an empty template or one the engine cannot
  // parse (naming the construct and quoting the template's beginning).
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view jinja_source,
                                                 ChatTokens tokens = {});
  // Reads `tokenizer.chat_template` and the BOS/EOS texts from the file. NOT_FOUND naming the
  // key when it is absent; otherwise as FromSource.
  static absl::StatusOr<ChatTemplate> FromGguf(const gguf::GgufFile& file);
  // The BOS/EOS texts a template of this model's sees (`bos_token`, `eos_token`).
  static ChatTokens TokensOf(const gguf::GgufFile& file);

  // A known template's label, else "jinja".
  const std::string& shape() const { return shape_; }
  // The system prompt a known template inserts when messages[0] is not a system message.
  bool has_default_system_prompt() const { return default_system_prompt_.has_value(); }
  const std::optional<std::string>& default_system_prompt() const {
    return default_system_prompt_;
  }

  // Decided once from the template: kStartsInThinking when a one-message conversation's
  // generation prompt ends inside an unclosed `<think>`, kThinkTags when the template mentions
  // `</think>` otherwise, else kNone.
  ReasoningFormat reasoning_format() const { return reasoning_; }
  // A request's: its chat_template_kwargs may close the think block the generation prompt
  // opens (Qwen3.5/3.6 and DeepSeek-R1 style with enable_thinking=false): kThinkTags then, so
  // the answer is content. Costs one render of a one-message conversation, only for
  // kStartsInThinking templates given kwargs.
  ReasoningFormat ReasoningFormatFor(const ChatExtras& extras) const;
  // From the markers the template prints: `<tool_call>` Hermes, `[TOOL_CALLS]` Mistral,
  // `<|python_tag|>` or an `ipython` role Llama 3 JSON; else kNone.
  ToolCallFormat tool_call_format() const { return tool_calls_; }

  // Renders `messages`, then (when `add_generation_prompt`) the opening of an assistant turn.
  // INVALID_ARGUMENT for no messages, and for whatever the template refuses.
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;
  // The same prompt as pieces; concatenated they equal Apply's text. Same errors.
  absl::StatusOr<std::vector<PromptPiece>> ApplyPieces(std::span<const ChatMessage> messages,
                                                       bool add_generation_prompt,
                                                       const ChatExtras& extras = {}) const;

 private:
  ChatTemplate(jinja::Template engine, ChatTokens tokens) : engine_(std::move(engine)), tokens_(std::move(tokens)) {}

  jinja::Template engine_;
  ChatTokens tokens_;
  std::string shape_ = "jinja";
  std::optional<std::string> default_system_prompt_;
  ReasoningFormat reasoning_ = ReasoningFormat::kNone;
  ToolCallFormat tool_calls_ = ToolCallFormat::kNone;
};

}  // namespace tessera::chat

#include "common/chat/known_templates.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/check.h"

namespace tessera::chat {
namespace {

constexpr std::string_view kSystemPlaceholder = "@@SYSTEM@@";

struct KnownTemplate {
  std::string_view shape;
  ChatMlVariant variant;
  std::string_view source;
};

// The ChatML template from the Hugging Face chat-templating docs (no default system prompt).
constexpr std::string_view kPlainChatMl =
    R"jinja({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})jinja";

// The same, with the guard some models (OpenHermes, Dolphin, ...) put in front.
constexpr std::string_view kPlainChatMlGuarded =
    R"jinja({% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})jinja";

// Qwen2-Instruct and SmolLM2-Instruct: a default system turn unless the caller gives one.
constexpr std::string_view kDefaultSystemChatMl =
    R"jinja({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n@@SYSTEM@@<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})jinja";

// Qwen2.5-Instruct. It has tool-calling branches, but tessera passes no `tools` and accepts no
// tool messages or tool_calls, so for every conversation Apply accepts it renders exactly like
// kDefaultSystemChatMl: the first system message (or the default) once, then each turn.
constexpr std::string_view kQwen25ChatMl = R"jinja({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- '@@SYSTEM@@' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\n@@SYSTEM@@<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)jinja";

constexpr KnownTemplate kKnownTemplates[] = {
    {"chatml", ChatMlVariant::kPlain, kPlainChatMl},
    {"chatml", ChatMlVariant::kPlain, kPlainChatMlGuarded},
    {"chatml-default-system", ChatMlVariant::kDefaultSystem, kDefaultSystemChatMl},
    {"qwen2.5", ChatMlVariant::kDefaultSystem, kQwen25ChatMl},
};

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Matches one token against a pattern token; a string pattern holding the placeholder matches
// any string with the same prefix and suffix, and the text in between is captured (it must be
// the same at every occurrence).
bool MatchToken(const JinjaToken& pattern, const JinjaToken& token,
                std::optional<std::string>* capture) {
  size_t at = pattern.kind == JinjaTokenKind::kString ? pattern.value.find(kSystemPlaceholder)
                                                      : std::string::npos;
  if (at == std::string::npos) return pattern == token;
  if (token.kind != JinjaTokenKind::kString) return false;
  std::string_view prefix = std::string_view(pattern.value).substr(0, at);
  std::string_view suffix = std::string_view(pattern.value).substr(at + kSystemPlaceholder.size());
  std::string_view value = token.value;
  if (value.size() < prefix.size() + suffix.size() || !value.starts_with(prefix) ||
      !value.ends_with(suffix)) {
    return false;
  }
  std::string middle(value.substr(prefix.size(), value.size() - prefix.size() - suffix.size()));
  // A ChatML control token inside the "system prompt" means the structure is something else.
  if (Contains(middle, "<|im_start|>") || Contains(middle, "<|im_end|>")) return false;
  if (capture->has_value() && **capture != middle) return false;
  *capture = std::move(middle);
  return true;
}

}  // namespace

std::optional<KnownTemplateMatch> MatchKnownTemplate(const std::vector<JinjaToken>& tokens) {
  for (const KnownTemplate& known : kKnownTemplates) {
    absl::StatusOr<std::vector<JinjaToken>> pattern = TokenizeJinja(known.source);
    TESSERA_CHECK(pattern.ok(), "a built-in chat template does not lex");
    if (pattern->size() != tokens.size()) continue;
    std::optional<std::string> capture;
    bool matched = true;
    for (size_t i = 0; i < tokens.size() && matched; ++i) {
      matched = MatchToken((*pattern)[i], tokens[i], &capture);
    }
    if (!matched) continue;
    KnownTemplateMatch match{known.variant, std::string(known.shape), std::move(capture)};
    TESSERA_CHECK(
        match.default_system_prompt.has_value() == (known.variant == ChatMlVariant::kDefaultSystem),
        "a built-in chat template's placeholder does not fit its variant");
    return match;
  }
  return std::nullopt;
}

}  // namespace tessera::chat

// Finds the tool calls in a chat choice's content (after its reasoning is split off), in the
// format the model's template declares (chat::ToolCallFormat), as OpenAI's `tool_calls`:
//   kHermes     `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any number, text
//               around them stays content; an unclosed last call is read at the end of output
//               (a client's stop string may have cut its closing tag);
//   kQwenXml    the same, each body the XML of xml_tool_call.h, its values typed by the
//               request's tool schemas;
//   kMistral    `[TOOL_CALLS]` then a JSON list of {"name", "arguments"} to the end of output;
//   kLlama3Json the whole output one `{"name": ..., "parameters"|"arguments": ...}` object
//               (optionally after `<|python_tag|>`).
// Streaming: content before a call streams as usual; a call is held until it is complete
// (its closing tag, or the end of output) and then emitted whole, its arguments as a JSON
// string. Text that looked like a call but does not parse as one is given back as content.
// Forced (tool_choice "required" or a named function, forced_tool_choice.h): the whole output is
// the JSON a grammar made it — the named function's arguments, or a list of {"name",
// "parameters"} — held to the end and returned as the calls (as content if it does not parse,
// e.g. cut short by max_tokens).
// Model output is untrusted: JSON is parsed under util::kMaxClientJsonDepth.
//
// One per choice, on the request's thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/chat/chat_template.h"
#include "router/openai/xml_tool_call.h"

namespace tessera::router::openai {

// How one choice's output carries tool calls.
struct ToolCallMode {
  chat::ToolCallFormat format = chat::ToolCallFormat::kNone;  // the template's (tool_choice auto)
  bool forced = false;          // tool_choice forced a call: the output is the grammar's JSON
  std::string forced_function = {};  // named: the function; "" for "required"
  std::string tools_json = {};  // the request's `tools` (kQwenXml types its values by them)
  // parallel_tool_calls false: 1 (later calls the model writes are dropped); 0: no limit.
  int max_calls = 0;
  bool active() const { return forced || format != chat::ToolCallFormat::kNone; }
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};

class ToolCallParser {
 public:
  struct Output {
    std::string content;
    std::vector<ParsedToolCall> calls;
  };

  explicit ToolCallParser(ToolCallMode mode)
      : format_(mode.format),
        forced_(mode.forced),
        forced_function_(std::move(mode.forced_function)),
        parameter_types_(mode.format == chat::ToolCallFormat::kQwenXml
                             ? ParameterTypesOf(mode.tools_json)
                             : ToolParameterTypes()) {}

  Output Feed(std::string_view content);
  Output Finish();
  static Output ParseAll(const ToolCallMode& mode, std::string_view content);

 private:
  // kHermes / kQwenXml: calls inside <tool_call>…</tool_call>, text around them content.
  bool tagged() const {
    return format_ == chat::ToolCallFormat::kHermes || format_ == chat::ToolCallFormat::kQwenXml;
  }
  Output FeedTagged();
  // One `<tool_call>` body's calls into `calls`; false when it is not a call.
  bool ParseTagged(std::string_view body, std::vector<ParsedToolCall>* calls) const;
  Output FinishWhole();
  Output FinishForced();

  chat::ToolCallFormat format_;
  bool forced_ = false;
  std::string forced_function_;
  ToolParameterTypes parameter_types_;
  std::string buffer_;
  bool in_call_ = false;   // kHermes / kQwenXml: inside <tool_call>
  bool holding_ = false;   // kMistral / kLlama3Json: the output may be a call; held to the end
  bool decided_ = false;   // kMistral / kLlama3Json: whether it may be a call is known
};

}  // namespace tessera::router::openai

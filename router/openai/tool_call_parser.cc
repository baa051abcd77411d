#include "router/openai/tool_call_parser.h"

#include <algorithm>
#include <utility>

#include "common/util/client_json.h"
#include "router/openai/partial_tag.h"
#include "nlohmann/json.hpp"

namespace tessera::router::openai {
namespace {

using Json = nlohmann::ordered_json;
using chat::ToolCallFormat;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralStart = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// {"name": str, "arguments"|"parameters": object|str} as a call; false otherwise.
bool CallOf(const Json& json, ParsedToolCall* out) {
  if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) return false;
  const char* key = json.contains("arguments") ? "arguments" : "parameters";
  const Json arguments = json.contains(key) ? json[key] : Json::object();
  out->name = json["name"].get<std::string>();
  out->arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
  return true;
}

bool ParseCalls(std::string_view text, std::vector<ParsedToolCall>* calls) {
  absl::StatusOr<Json> json = util::ParseClientOrderedJson(text, "tool call");
  if (!json.ok()) return false;
  std::vector<ParsedToolCall> found;
  const Json list = json->is_array() ? *json : Json::array({*json});
  for (const Json& item : list) {
    ParsedToolCall call;
    if (!CallOf(item, &call)) return false;
    found.push_back(std::move(call));
  }
  if (found.empty()) return false;
  calls->insert(calls->end(), found.begin(), found.end());
  return true;
}

std::string_view TrimLeft(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

}  // namespace

ToolCallParser::Output ToolCallParser::Feed(std::string_view content) {
  Output out;
  if (forced_) {  // the whole output is one JSON value: nothing to show until it is complete
    buffer_.append(content);
    return out;
  }
  if (format_ == ToolCallFormat::kNone) {
    out.content.assign(content);
    return out;
  }
  buffer_.append(content);
  if (tagged()) return FeedTagged();
  if (!decided_) {  // a call only if the output starts with one
    const std::string_view start = TrimLeft(buffer_);
    if (start.empty()) return out;
    const std::string_view marker =
        format_ == ToolCallFormat::kMistral ? kMistralStart : std::string_view("{");
    const bool may_be =
        start.substr(0, std::min(start.size(), marker.size())) ==
            marker.substr(0, std::min(start.size(), marker.size())) ||
        (format_ == ToolCallFormat::kLlama3Json &&
         start.substr(0, std::min(start.size(), kPythonTag.size())) ==
             kPythonTag.substr(0, std::min(start.size(), kPythonTag.size())));
    if (may_be && start.size() < marker.size()) return out;  // not enough yet to tell
    decided_ = true;
    holding_ = may_be;
  }
  if (!holding_) out.content = std::exchange(buffer_, "");
  return out;
}

bool ToolCallParser::ParseTagged(std::string_view body, std::vector<ParsedToolCall>* calls) const {
  return format_ == ToolCallFormat::kQwenXml ? ParseXmlToolCalls(body, parameter_types_, calls)
                                             : ParseCalls(body, calls);
}

ToolCallParser::Output ToolCallParser::FeedTagged() {
  Output out;
  while (true) {
    if (!in_call_) {
      const size_t open = buffer_.find(kHermesOpen);
      if (open == std::string::npos) {
        const size_t keep = PartialTagSuffix(buffer_, kHermesOpen);
        out.content.append(buffer_, 0, buffer_.size() - keep);
        buffer_.erase(0, buffer_.size() - keep);
        return out;
      }
      out.content.append(buffer_, 0, open);
      buffer_.erase(0, open + kHermesOpen.size());
      in_call_ = true;
    }
    const size_t close = buffer_.find(kHermesClose);
    if (close == std::string::npos) return out;  // the call is not complete yet
    const std::string body = buffer_.substr(0, close);
    if (!ParseTagged(body, &out.calls)) {
      out.content.append(kHermesOpen).append(body).append(kHermesClose);
    }
    buffer_.erase(0, close + kHermesClose.size());
    in_call_ = false;
  }
}

ToolCallParser::Output ToolCallParser::FinishWhole() {
  Output out;
  std::string_view text = TrimLeft(buffer_);
  if (format_ == ToolCallFormat::kMistral && text.starts_with(kMistralStart)) {
    text.remove_prefix(kMistralStart.size());
  } else if (format_ == ToolCallFormat::kLlama3Json && text.starts_with(kPythonTag)) {
    text.remove_prefix(kPythonTag.size());
  }
  if (!ParseCalls(text, &out.calls)) out.content = buffer_;
  return out;
}

ToolCallParser::Output ToolCallParser::FinishForced() {
  Output out;
  const std::string_view text = TrimLeft(buffer_);
  if (forced_function_.empty()) {
    if (!ParseCalls(text, &out.calls)) out.content = buffer_;
    return out;
  }
  absl::StatusOr<Json> arguments = util::ParseClientOrderedJson(text, "tool call arguments");
  if (arguments.ok() && arguments->is_object()) {
    out.calls.push_back({.name = forced_function_, .arguments = arguments->dump()});
  } else {
    out.content = buffer_;
  }
  return out;
}

ToolCallParser::Output ToolCallParser::Finish() {
  Output out;
  if (forced_) {
    out = FinishForced();
  } else if (tagged()) {
    if (!in_call_) {
      out.content = buffer_;
    } else if (!ParseTagged(buffer_, &out.calls)) {  // unclosed: a call if it parses whole
      out.content = std::string(kHermesOpen) + buffer_;
    }
  } else if (holding_ || !decided_) {
    out = FinishWhole();
  } else {
    out.content = buffer_;
  }
  buffer_.clear();
  in_call_ = false;
  return out;
}

ToolCallParser::Output ToolCallParser::ParseAll(const ToolCallMode& mode,
                                                std::string_view content) {
  ToolCallParser parser(mode);
  Output out = parser.Feed(content);
  Output rest = parser.Finish();
  out.content += rest.content;
  out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
  return out;
}

}  // namespace tessera::router::openai

// JSON (a chat request's messages, tools, chat_template_kwargs) as Jinja values
// (jinja_value.h): objects keep their key order, numbers stay integers when they are, and every
// string is content (it came from the client), so the rendered prompt tokenizes it as text.
// Pure function; thread-safe.
#pragma once

#include "common/chat/jinja_value.h"
#include "nlohmann/json.hpp"

namespace tessera::chat::jinja {

Value FromJson(const nlohmann::ordered_json& json);

}  // namespace tessera::chat::jinja

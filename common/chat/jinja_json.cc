#include "common/chat/jinja_json.h"

#include <string>

namespace tessera::chat::jinja {

Value FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::Content(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(FromJson(item));
      return Value::MakeArray(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object object;
      for (const auto& [key, value] : json.items()) object.items.emplace_back(key, FromJson(value));
      return Value::MakeObject(std::move(object));
    }
    default: return Value();
  }
}

}  // namespace tessera::chat::jinja

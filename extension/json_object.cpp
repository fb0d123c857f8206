#include "json_object.hpp"

#include <cstdio>

namespace pg_inbox {

std::string json_string(std::string_view value) {
  std::string out = "\"";
  for (char ch : value) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(ch));
          out += escaped;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

void JsonObject::key(std::string_view name) {
  if (out_.size() > 1) out_ += ", ";
  out_ += json_string(name);
  out_ += ": ";
}

JsonObject &JsonObject::string(std::string_view name, std::string_view value) {
  key(name);
  out_ += json_string(value);
  return *this;
}

JsonObject &JsonObject::number(std::string_view name, int64_t value) {
  key(name);
  out_ += std::to_string(value);
  return *this;
}

JsonObject &JsonObject::boolean(std::string_view name, bool value) {
  key(name);
  out_ += value ? "true" : "false";
  return *this;
}

JsonObject &JsonObject::null(std::string_view name) {
  key(name);
  out_ += "null";
  return *this;
}

JsonObject &JsonObject::strings(std::string_view name, const std::vector<std::string> &values) {
  key(name);
  out_ += "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out_ += ", ";
    out_ += json_string(values[i]);
  }
  out_ += "]";
  return *this;
}

}  // namespace pg_inbox

// One JSON object, written field by field with every string escaped: the
// only way C++ in the extension writes JSON (reconcile and scan_gaps
// reports). Pure C++, no Postgres headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pg_inbox {

class JsonObject {
 public:
  JsonObject &string(std::string_view name, std::string_view value);
  JsonObject &number(std::string_view name, int64_t value);
  JsonObject &boolean(std::string_view name, bool value);
  JsonObject &null(std::string_view name);
  JsonObject &strings(std::string_view name, const std::vector<std::string> &values);
  // The object's text, closed.
  std::string text() const { return out_ + "}"; }

 private:
  void key(std::string_view name);
  std::string out_ = "{";
};

// value as a JSON string literal, quotes included.
std::string json_string(std::string_view value);

}  // namespace pg_inbox

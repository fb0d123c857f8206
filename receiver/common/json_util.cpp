#include "common/json_util.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <map>

namespace inbox {

std::string rfc3339_utc(std::int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

std::string json_quote(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xf]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

// A DOM parser per thread: parsers are not thread-safe but reusable, and
// reuse keeps their buffers warm.
static simdjson::dom::parser& thread_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

namespace {

// RFC 8259 validation without converting numbers: jsonb stores any number
// exactly (numeric), so 99999999999999999999 and 1e309 are valid here too,
// where simdjson's DOM refuses them. Iterative (an explicit stack), so a
// hostile nesting depth cannot overflow ours.
struct JsonValidator {
  const char* p;
  const char* end;

  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool lit(const char* word) {
    for (; *word; ++word, ++p)
      if (p >= end || *p != *word) return false;
    return true;
  }
  bool digits() {
    const char* b = p;
    while (p < end && *p >= '0' && *p <= '9') ++p;
    return p > b;
  }
  bool number() {
    if (p < end && *p == '-') ++p;
    if (p < end && *p == '0') ++p;
    else if (!digits()) return false;
    if (p < end && *p == '.') {
      ++p;
      if (!digits()) return false;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      if (!digits()) return false;
    }
    return true;
  }
  bool string() {  // at the opening quote; UTF-8 is checked separately
    ++p;
    while (p < end) {
      unsigned char c = static_cast<unsigned char>(*p++);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (p >= end) return false;
      char e = *p++;
      if (e == 'u') {
        for (int i = 0; i < 4; ++i, ++p)
          if (p >= end || !std::isxdigit(static_cast<unsigned char>(*p))) return false;
      } else if (!std::strchr("\"\\/bfnrt", e) || e == 0) {
        return false;
      }
    }
    return false;
  }
  bool value_scalar() {
    if (p >= end) return false;
    switch (*p) {
      case '"': return string();
      case 't': return lit("true");
      case 'f': return lit("false");
      case 'n': return lit("null");
      default: return number();
    }
  }
  bool run() {
    std::vector<char> stack;  // '{' or '['
    ws();
    for (;;) {
      // A value is expected here.
      if (p >= end) return false;
      if (*p == '{' || *p == '[') {
        if (stack.size() >= 100000) return false;
        char open = *p++;
        stack.push_back(open);
        ws();
        if (p < end && *p == (open == '{' ? '}' : ']')) {
          ++p;
          stack.pop_back();
        } else {
          if (open == '{') {
            if (p >= end || *p != '"' || !string()) return false;
            ws();
            if (p >= end || *p++ != ':') return false;
            ws();
          }
          continue;
        }
      } else if (!value_scalar()) {
        return false;
      }
      // After a value: a comma, a closing bracket, or the end.
      for (;;) {
        ws();
        if (stack.empty()) return p == end;
        char open = stack.back();
        if (p >= end) return false;
        if (*p == ',') {
          ++p;
          ws();
          if (open == '{') {
            if (p >= end || *p != '"' || !string()) return false;
            ws();
            if (p >= end || *p++ != ':') return false;
            ws();
          }
          break;  // the next value
        }
        if (*p != (open == '{' ? '}' : ']')) return false;
        ++p;
        stack.pop_back();
      }
    }
  }
};

}  // namespace

bool is_valid_json(std::string_view s) {
  if (!is_valid_utf8(s)) return false;
  JsonValidator v{s.data(), s.data() + s.size()};
  return v.run();
}

// Lazily (on demand): only the values on the pointer's path are parsed, so
// numbers beyond 64 bits or double range elsewhere do not matter.
static JsonIdError id_on_demand(std::string_view json, const std::string& pointer, std::string& out) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(json);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return JsonIdError::not_json;
  simdjson::ondemand::value v;
  if (doc.at_pointer(pointer).get(v) != simdjson::SUCCESS) return JsonIdError::missing;
  simdjson::ondemand::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) return JsonIdError::not_json;
  if (t == simdjson::ondemand::json_type::string) {
    std::string_view sv;
    if (v.get_string().get(sv) != simdjson::SUCCESS) return JsonIdError::not_scalar;
    out.assign(sv);
    return JsonIdError::none;
  }
  if (t == simdjson::ondemand::json_type::null) return JsonIdError::missing;
  if (t != simdjson::ondemand::json_type::number) return JsonIdError::not_scalar;
  std::string_view raw = v.raw_json_token();
  while (!raw.empty() && std::isspace(static_cast<unsigned char>(raw.back()))) raw.remove_suffix(1);
  // Integers only, in decimal as sent (a big one keeps all its digits).
  if (raw.find_first_of(".eE") != std::string_view::npos) return JsonIdError::not_scalar;
  out.assign(raw);
  return JsonIdError::none;
}

// A scalar as id text: strings as-is, integers in decimal.
static JsonIdError scalar_text(simdjson::dom::element v, std::string& out) {
  switch (v.type()) {
    case simdjson::dom::element_type::STRING: {
      std::string_view sv;
      if (v.get_string().get(sv) != simdjson::SUCCESS) return JsonIdError::not_scalar;
      out.assign(sv);
      return JsonIdError::none;
    }
    case simdjson::dom::element_type::INT64:
      out = std::to_string(int64_t(v));
      return JsonIdError::none;
    case simdjson::dom::element_type::UINT64:
      out = std::to_string(uint64_t(v));
      return JsonIdError::none;
    case simdjson::dom::element_type::NULL_VALUE:
      return JsonIdError::missing;
    default:
      return JsonIdError::not_scalar;  // floats, booleans, objects: not an id
  }
}

JsonIdError json_id_at(std::string_view json, const std::string& pointer, std::string& out) {
  simdjson::dom::element doc;
  auto error = thread_parser().parse(json.data(), json.size()).get(doc);
  if (error == simdjson::NUMBER_ERROR)  // beyond 64 bits or double range
    return is_valid_json(json) ? id_on_demand(json, pointer, out) : JsonIdError::not_json;
  if (error != simdjson::SUCCESS) return JsonIdError::not_json;
  simdjson::dom::element v;
  if (doc.at_pointer(pointer).get(v) != simdjson::SUCCESS) return JsonIdError::missing;
  return scalar_text(v, out);
}

JsonListError json_ids_at(std::string_view json, const std::string& array_pointer,
                          const std::string& item_pointer, std::vector<std::string>& out,
                          long long& skipped) {
  simdjson::dom::element doc;
  if (thread_parser().parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS)
    return JsonListError::not_json;
  simdjson::dom::element v;
  if (doc.at_pointer(array_pointer).get(v) != simdjson::SUCCESS || v.is_null()) return JsonListError::missing;
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return JsonListError::not_array;
  for (simdjson::dom::element item : arr) {
    simdjson::dom::element idv = item;
    std::string id;
    if ((item_pointer.empty() || item.at_pointer(item_pointer).get(idv) == simdjson::SUCCESS) &&
        scalar_text(idv, id) == JsonIdError::none)
      out.push_back(std::move(id));
    else
      ++skipped;
  }
  return JsonListError::none;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static std::optional<std::string> url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  if (!is_valid_utf8(out)) return std::nullopt;
  return out;
}

// Calls fn(key, value) for each decoded pair; false if anything is malformed.
template <typename Fn>
static bool for_each_form_pair(std::string_view body, Fn fn) {
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t amp = body.find('&', pos);
    if (amp == std::string_view::npos) amp = body.size();
    std::string_view pair = body.substr(pos, amp - pos);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      auto key = url_decode(pair.substr(0, eq));
      auto value = url_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
      if (!key || !value) return false;
      fn(std::move(*key), std::move(*value));
    }
    pos = amp + 1;
  }
  return true;
}

// {"k":"v",...} from string pairs, keys in order.
static std::string json_object(const std::map<std::string, std::string>& fields) {
  std::string out = "{";
  for (const auto& [k, v] : fields) {
    if (out.size() > 1) out.push_back(',');
    out += json_quote(k);
    out.push_back(':');
    out += json_quote(v);
  }
  out.push_back('}');
  return out;
}

std::optional<std::string> form_to_json(std::string_view body) {
  std::map<std::string, std::string> fields;
  if (!for_each_form_pair(body, [&](std::string k, std::string v) { fields[std::move(k)] = std::move(v); }))
    return std::nullopt;
  return json_object(fields);
}

std::optional<std::string> form_field(std::string_view body, std::string_view name) {
  std::optional<std::string> found;
  bool ok = for_each_form_pair(body, [&](std::string k, std::string v) {
    if (k == name) found = std::move(v);
  });
  if (!ok) return std::nullopt;
  return found;
}

static std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Names lower-cased, values of one name joined with ", ". The multimap
// orders names by their lower-case bytes, so copies of a name are adjacent
// and come in the order a map of lower-case names would give: one pass, no
// second container.
std::string headers_json(const Headers& headers) {
  std::string out = "{", key, last, merged;
  bool have = false;
  auto flush = [&] {
    if (!have) return;
    if (out.size() > 1) out.push_back(',');
    out += json_quote(last);
    out.push_back(':');
    out += json_quote(merged);
  };
  for (const auto& [name, value] : headers) {
    key.assign(name);
    for (char& c : key) c = static_cast<char>(CaseInsensitiveLess::fold(c));
    if (key == "authorization" || key == "proxy-authorization" || key == "cookie" ||
        key == "remote_addr" || key == "remote_port" || key == "local_addr" || key == "local_port")
      continue;
    if (!is_valid_utf8(key) || !is_valid_utf8(value)) continue;
    if (have && key == last) {
      merged += ", ";
      merged += value;
      continue;
    }
    flush();
    last.swap(key);
    merged.assign(value);
    have = true;
  }
  flush();
  out.push_back('}');
  return out;
}

bool is_form_content_type(const std::string& content_type) {
  std::string ct = lower(content_type);
  return ct.rfind("application/x-www-form-urlencoded", 0) == 0;
}

}  // namespace inbox

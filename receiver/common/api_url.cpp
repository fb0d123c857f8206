#include "common/api_url.h"

#include "common/config.h"

namespace inbox {

BackfillUrl parse_backfill_url(const std::string& url) {
  BackfillUrl out = parse_api_url(url, "url");
  if (out.path_template.find("{id}") == std::string::npos)
    throw ConfigError("\"url\" must contain {id} (where the event id goes)");
  return out;
}

BackfillUrl parse_api_url(const std::string& url, const std::string& key) {
  const std::string where = "\"" + key + "\"";
  std::string rest;
  if (url.rfind("https://", 0) == 0) rest = url.substr(8);
  else if (url.rfind("http://", 0) == 0) rest = url.substr(7);
  else throw ConfigError(where + " must start with http:// or https://");
  size_t slash = rest.find('/');
  if (slash == std::string::npos) throw ConfigError(where + " needs a path");
  std::string authority = rest.substr(0, slash);
  if (authority.empty()) throw ConfigError(where + " has no host");
  if (authority.find_first_of("{}@ ") != std::string::npos)
    throw ConfigError(where + ": the host part may not hold placeholders, credentials or spaces");
  BackfillUrl out;
  out.origin = url.substr(0, url.size() - rest.size()) + authority;
  out.path_template = rest.substr(slash);
  if (out.path_template.find('#') != std::string::npos)
    throw ConfigError(where + " may not contain a fragment (#)");
  return out;
}

std::string url_encode(const std::string& s) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

std::string fill_path(const std::string& path_template, const std::string& id) {
  return fill_placeholder(path_template, "{id}", id);
}

std::string fill_placeholder(const std::string& path_template, const std::string& placeholder,
                             const std::string& value) {
  const std::string encoded = url_encode(value);
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = path_template.find(placeholder, at)) != std::string::npos; at = hit + placeholder.size())
    out += path_template.substr(at, hit - at) + encoded;
  return out + path_template.substr(at);
}

std::string path_for_humans(const std::string& path) { return path.substr(0, path.find('?')); }

}  // namespace inbox

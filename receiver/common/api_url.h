// The backfill API's URL template: "https://api.example.com/v1/events/{id}".
#pragma once

#include <string>

namespace inbox {

struct BackfillUrl {
  std::string origin;         // "https://api.example.com:443" (scheme, host, port) for httplib::Client
  std::string path_template;  // "/v1/events/{id}" (path and query)
};

// Throws ConfigError unless the template is http(s)://host[:port]/... with
// {id} in the path or query.
BackfillUrl parse_backfill_url(const std::string& url);

// The same split for any API URL template; `key` names it in errors. No
// placeholder is required here.
BackfillUrl parse_api_url(const std::string& url, const std::string& key);

// Percent-encodes everything but RFC 3986 unreserved characters, so an id
// can never add a path segment or a query parameter.
std::string url_encode(const std::string& s);

// The path with every {id} replaced by the encoded id.
std::string fill_path(const std::string& path_template, const std::string& id);

// The path with every `placeholder` (e.g. "{from}") replaced by the encoded value.
std::string fill_placeholder(const std::string& path_template, const std::string& placeholder,
                             const std::string& value);

// The path without its query (which may carry an API key): for logs and reasons.
std::string path_for_humans(const std::string& path);

}  // namespace inbox

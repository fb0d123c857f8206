// JSON helpers: validation and id lookup (simdjson), and building JSON text
// ourselves where a body is not JSON (form posts) or for stored headers.
#pragma once

#include "common/headers.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inbox {

bool is_valid_utf8(std::string_view s);

// `s` as a quoted JSON string; control characters, quotes and backslashes escaped.
// The caller must have checked the input is valid UTF-8.
std::string json_quote(std::string_view s);

// A unix time as RFC 3339 in UTC, whole seconds: "2025-11-30T14:00:00Z".
std::string rfc3339_utc(std::int64_t unix_s);

// Full validation (simdjson DOM), the same strictness as Postgres' jsonb input.
bool is_valid_json(std::string_view s);

enum class JsonIdError { none, not_json, missing, not_scalar };

// The value at `pointer` (RFC 6901) as text: strings as-is, integers in decimal.
JsonIdError json_id_at(std::string_view json, const std::string& pointer, std::string& out);

enum class JsonListError { none, not_json, missing, not_array };

// The array at `array_pointer` ("" = the whole document) and, for each
// element, the text at `item_pointer` inside it ("" = the element itself),
// as json_id_at gives it. Elements without such a value are counted in
// `skipped`, not returned.
JsonListError json_ids_at(std::string_view json, const std::string& array_pointer,
                          const std::string& item_pointer, std::vector<std::string>& out,
                          long long& skipped);

// application/x-www-form-urlencoded -> {"key":"value",...} (later duplicates win);
// nullopt on bad percent-encoding or invalid UTF-8.
std::optional<std::string> form_to_json(std::string_view body);

// One url-decoded field of a form body, nullopt when absent or malformed.
std::optional<std::string> form_field(std::string_view body, std::string_view name);

// Request headers as a JSON object for inbox.events.headers. Credentials and
// the pseudo headers cpp-httplib adds (REMOTE_ADDR, ...) are left out.
std::string headers_json(const Headers& headers);

bool is_form_content_type(const std::string& content_type);

}  // namespace inbox

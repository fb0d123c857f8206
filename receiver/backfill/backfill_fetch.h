// Calls to a provider's API for the backfill worker: ApiClient makes one
// bounded GET (shared by the "get event" and "list events" calls), and
// BackfillFetcher says what a "get event" answer means: found (200), not
// found (404/410) or failed (anything else).
#pragma once

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>

#include "common/api_url.h"
#include "common/config.h"

namespace inbox {

// Answers above this are failures: an event is far smaller, and the worker
// must not hold an unbounded body in memory.
constexpr std::size_t kMaxResponseBytes = 16u << 20;

// One GET's answer: status 0 and `error` set when there was none.
struct ApiAnswer {
  int status = 0;
  std::string body;
  std::string error;        // short and safe to log: never the body
  std::string retry_after;  // the Retry-After header as sent
};

// An HTTP client for one origin with the provider's auth header and
// timeouts; keep-alive across requests, redirects not followed.
class ApiClient {
 public:
  ApiClient(const std::string& origin, const BackfillApiConfig& api);
  // GET path (path and query); bodies over kMaxResponseBytes are an error.
  ApiAnswer get(const std::string& path);
  int timeout_ms() const { return api_.timeout_ms; }

 private:
  BackfillApiConfig api_;
  std::unique_ptr<httplib::Client> client_;
};

enum class FetchKind { found, not_found, failed };

struct FetchResult {
  FetchKind kind = FetchKind::failed;
  int http_status = 0;           // 0: no answer (connect error, timeout)
  std::string payload_json;      // found: the event, minified when a pointer picked it
  std::string error;             // failed: short and safe to store and log (no body)
  std::optional<int> retry_after_s;  // the provider's Retry-After, in seconds
  std::string request;           // "GET /v1/events/evt_1", without host or query
};

class BackfillFetcher {
 public:
  explicit BackfillFetcher(const BackfillApiConfig& api);
  FetchResult fetch(const std::string& external_id);
  int timeout_ms() const { return client_.timeout_ms(); }

 private:
  BackfillApiConfig api_;
  BackfillUrl url_;
  ApiClient client_;
};

// Retry-After as delta-seconds (HTTP dates are ignored), capped at one hour.
std::optional<int> parse_retry_after(const std::string& value);

}  // namespace inbox

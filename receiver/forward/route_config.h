// [forward] and [[route]]: what `inbox-receiver forward` delivers where.
// Read from the same TOML file as the rest of the config (common/config
// only lets the two keys through).
#pragma once

#include <string>
#include <vector>

namespace inbox {

struct RouteConfig {
  std::string name;                 // [a-z0-9_-]{1,63}; recorded in inbox.outbox_attempts.route
  std::vector<std::string> topics;  // outbox topics, or
  std::string provider;             // the incoming events of one provider (inbox.claim)
  std::string url;                  // http(s)://host[:port]/path the messages are POSTed to
  std::string secret;               // whsec_<base64>: Standard Webhooks signing key; never logged
  int timeout_ms = 10000;           // connect, and each read/write of one POST
  int concurrency = 2;              // messages of this route in flight at once (one thread each)
  double rate_per_s = 0;            // POSTs per second at most over the replica; 0: no limit
  bool ordered = false;             // one in flight per key, in publish order (topics only)
  std::string on_lease_expiry = "reclaim";  // reclaim (at-least-once) or hold (topics only)
  int lease_s = 60;                 // longer than timeout_ms plus the completion
  int batch_size = 10;              // messages claimed at once by each thread
  int max_attempts = 0;             // 0: pg_inbox.max_attempts (topics only)
  int backoff_base_ms = 0;          // 0: pg_inbox.backoff_base (topics only)
  int backoff_max_s = 0;            // 0: pg_inbox.backoff_max (topics only)
};

struct ForwardConfig {
  bool enabled = false;      // also run the forwarder as threads inside serve
  std::string database_url;  // empty: the top-level database_url
  int poll_interval_ms = 500;
  std::vector<RouteConfig> routes;
};

// Parses [forward] and [[route]] of a config file's text; throws ConfigError.
// env: whether { env = "NAME" } secrets must be set.
ForwardConfig parse_forward_config(const std::string& toml_text, const std::string& source_name,
                                   const std::string& top_level_database_url);
ForwardConfig load_forward_config(const std::string& path, const std::string& top_level_database_url);

}  // namespace inbox

// The receiver's TOML configuration: what `serve` and `check-config` read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace inbox {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// [provider.backfill]: the provider's "get one event" API, for the backfill worker.
struct BackfillApiConfig {
  std::string url;                   // http(s)://host[:port]/path with {id} (URL-encoded when filled)
  std::string auth_header;           // empty: no auth header is sent
  std::string auth_value;            // resolved value; never logged
  int timeout_ms = 10000;            // connect, and each read/write
  std::string payload_json_pointer;  // empty: the whole body is the event

  // The provider's "list events" API, for `listed` id sources; empty list_url: no listing.
  std::string list_url;                  // template with {from} and {to}; optional {cursor} in the query
  std::string list_time_format = "unix"; // how {from}/{to} are written: unix (seconds) or rfc3339 (UTC)
  std::string list_ids_json_pointer;     // the array in the answer; empty: the body is the array
  std::string list_id_json_pointer;      // the id inside each element; empty: the element is the id
  std::string list_cursor_json_pointer;  // the next page's cursor (with {cursor}); absent/null/"": last page
  int list_window_s = 3600;              // each listing covers [now - list_window_s, now]
  int list_interval_s = 300;             // how often to list
  int list_max_pages = 100;              // pages per listing at most
  // The same API asked for the ids after the highest one received, for the
  // tail of a `sequence` source while its sequence_tail_silence check fires;
  // empty: no tail listing. {after} (the id) or {after_number}; optional
  // {cursor}. Shares the list_*_json_pointer keys, list_interval_s and
  // list_max_pages with list_url.
  std::string list_after_url;
};

struct ProviderConfig {
  std::string name;    // URL segment and inbox.events.provider: [a-z0-9_-]{1,63}
  std::string scheme;  // github, stripe, shopify, slack, standard, hmac
  std::vector<std::string> secrets;       // resolved values; every one is tried
  std::vector<std::string> secret_names;  // "inline #1", "env GITHUB_SECRET" (for messages only)
  // Where the external id comes from: exactly one of the two is set.
  std::string id_header;
  std::string id_json_pointer;
  std::int64_t tolerance_seconds = 300;  // stripe, slack, standard; 0 turns the check off
  // Only for scheme "hmac".
  std::string signature_header;
  std::string algorithm = "sha256";  // sha1, sha256, sha512
  std::string encoding = "hex";      // hex, base64
  std::string prefix;                // e.g. "sha256=" in front of the digest
  std::optional<BackfillApiConfig> backfill;  // unset: the worker never claims this provider
};

// [backfill]: the worker's settings (inbox-receiver backfill, or inside serve).
struct BackfillConfig {
  bool enabled = false;       // also run the worker as a thread inside serve
  std::string database_url;   // empty: the top-level database_url
  int poll_interval_ms = 5000;
  int batch_size = 10;        // claim_backfill max_rows
  int lease_s = 120;          // claim_backfill lease; longer than a provider call can take
  int max_attempts = 10;      // backfill_failed max_attempts
};

// [[alert_target]]: where alerts go (docs/alerts.md).
struct AlertTargetConfig {
  std::string name;
  std::string kind;                 // slack, webhook, alertmanager, log
  std::string url;                  // resolved; never logged (Slack's holds its secret)
  std::string secret;               // webhook: whsec_... (Standard Webhooks signing key)
  std::string min_severity = "P3";  // alerts at this severity or more urgent
  int timeout_ms = 5000;            // connect, and each read/write
};

// [alerts]: the sender (inbox-receiver alerts, or a thread inside serve).
struct AlertsConfig {
  bool enabled = false;             // also run the sender as a thread inside serve
  std::string database_url;         // empty: the top-level database_url (a login with inbox_alerter)
  int poll_interval_ms = 2000;
  int lookback_s = 900;             // alerts created this long ago are still looked at
  int claim_timeout_ms = 1500;      // past it the claim fails open: the alert is sent
  int window_s[4] = {0, 86400, 3600, 3600};  // dedup window per severity P0..P3 (P0: none)
  int retry_attempts = 8;           // per target and alert
  int retry_base_ms = 500;          // doubled per attempt
  int retry_max_ms = 60000;
  int database_unreachable_s = 60;  // own alert: no answer from the database this long
  double error_rate = 0.05;         // own alert: share of 5xx answers (serve) over a minute
  int error_rate_min_requests = 20;
  std::string own_severity = "P1";  // severity of the sidecar's own alerts
  std::string status_url;           // linked from alerts (generatorURL); empty: none
};

// admin_listen and [admin]: /status, /status.json, /metrics, /healthz, /readyz.
struct AdminConfig {
  std::string listen;               // empty: no admin listener
  std::string token;                // empty: no bearer token asked
  std::string database_url;         // empty: the top-level one (a login with inbox_monitor only)
  int cache_ms = 5000;              // the health summary is read at most this often
  int refresh_s = 30;               // the page reloads itself
};

struct Config {
  std::string listen = "127.0.0.1:8080";
  std::string database_url;  // empty: libpq falls back to the PG* environment variables
  std::size_t max_body_bytes = 1 << 20;

  // [http]
  int http_threads = 0;  // I/O threads of the listener; 0: half the cores (at least 1)
  int read_timeout_ms = 5000;  // total deadline for a request head, from its first byte
  int write_timeout_ms = 5000;
  int keep_alive_timeout_s = 5;
  int keep_alive_max_requests = 1000;
  int listen_backlog = 1024;
  int http_max_queued = 64;  // obsolete since 0.2.0 (no thread per connection); accepted, unused
  int max_connections = 1000;     // open connections; past it new ones are closed at once
  int max_header_bytes = 16384;   // request line + headers; past it: 431
  int max_header_count = 100;     // header lines; past it: 431
  int min_body_rate = 16384;      // bytes/s a body must arrive at (after read_timeout_ms of grace)
  int drain_ms = 10000;           // on SIGTERM: time for requests in flight to be answered

  // [database]
  int pool_size = 2;  // connections, one flusher thread each (few: bigger batches)
  int connect_timeout_s = 3;
  int statement_timeout_ms = 3000;
  int deadline_ms = 5000;  // not committed by then: answer 503
  int retry_after_s = 5;   // Retry-After on 503
  std::size_t max_queued_bytes = 64 << 20;  // events waiting for a commit; past it: 503 at once
  int stats_interval_ms = 5000;  // counters to inbox.report_receiver_stats at most this often; 0: off

  // [batching]
  bool batching = true;  // false: one transaction per request (benchmark baseline)
  int batch_max_events = 64;
  int batch_max_wait_us = 200;

  BackfillConfig backfill;
  AlertsConfig alerts;
  std::vector<AlertTargetConfig> alert_targets;
  AdminConfig admin;

  std::vector<ProviderConfig> providers;

  const ProviderConfig* find_provider(const std::string& name) const;
};

// How to treat { env = "NAME" } values whose variable is unset.
enum class EnvPolicy {
  require,  // an error (serve, check-config)
  lenient,  // left out / empty (sign: needs only the one provider's secret)
};

// Parses and validates; throws ConfigError naming the key at fault.
// A wing's own check of one provider (intake: its scheme and secrets), run
// while parsing so that its errors are listed with all the others; throws
// ConfigError. Common code knows no schemes.
using ProviderCheck = std::function<void(const ProviderConfig&)>;

Config parse_config(const std::string& toml_text, const std::string& source_name = "config",
                    EnvPolicy env = EnvPolicy::require, const ProviderCheck& check = {});
Config load_config(const std::string& path, EnvPolicy env = EnvPolicy::require, const ProviderCheck& check = {});

bool valid_provider_name(const std::string& name);

// Severity names P0 (most urgent) .. P3 as 0..3; -1 when not one.
int severity_index(const std::string& s);

}  // namespace inbox

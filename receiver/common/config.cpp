#include "common/config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "common/api_url.h"

namespace inbox {
namespace {

// Unknown keys are errors: a typo such as `secret = ` must not silently
// leave a provider without its secret list.
void reject_unknown_keys(const toml::table& t, const std::set<std::string>& known,
                         const std::string& where) {
  for (auto&& [key, value] : t) {
    (void)value;
    if (!known.count(std::string(key.str())))
      throw ConfigError(where + ": unknown key \"" + std::string(key.str()) + "\"");
  }
}

std::string get_string(const toml::table& t, const char* key, const std::string& where,
                       std::string fallback = {}) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (auto v = n->value_exact<std::string>()) return *v;
  throw ConfigError(where + ": \"" + key + "\" must be a string");
}

int get_int(const toml::table& t, const char* key, const std::string& where, int fallback,
            std::int64_t min, std::int64_t max) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  auto v = n->value_exact<std::int64_t>();
  if (!v) throw ConfigError(where + ": \"" + key + "\" must be an integer");
  if (*v < min || *v > max)
    throw ConfigError(where + ": \"" + key + "\" must be between " + std::to_string(min) +
                      " and " + std::to_string(max));
  return static_cast<int>(*v);
}

bool get_bool(const toml::table& t, const char* key, const std::string& where, bool fallback) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (auto v = n->value_exact<bool>()) return *v;
  throw ConfigError(where + ": \"" + key + "\" must be true or false");
}

const toml::table* get_table(const toml::table& t, const char* key) {
  const toml::node* n = t.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) throw ConfigError(std::string("\"") + key + "\" must be a table");
  return n->as_table();
}

// Errors that do not stop parsing (an unset environment variable): collected
// while parse_config runs, so check-config can list them all in one run.
thread_local std::vector<std::string>* t_soft_errors = nullptr;

void soft_error(const std::string& message) {
  if (!t_soft_errors) throw ConfigError(message);
  t_soft_errors->push_back(message);
}

// A string value given inline or as { env = "NAME" }; nullopt when the key is
// absent (or, under EnvPolicy::lenient, when the variable is unset).
std::optional<std::string> get_string_or_env(const toml::table& t, const char* key,
                                             const std::string& where, EnvPolicy env) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  if (auto v = n->value_exact<std::string>()) return *v;
  const toml::table* et = n->as_table();
  std::string w = where + " " + key;
  if (!et) throw ConfigError(w + ": a string or { env = \"NAME\" } expected");
  reject_unknown_keys(*et, {"env"}, w);
  std::string var = get_string(*et, "env", w);
  if (var.empty()) throw ConfigError(w + ": { env = \"NAME\" } expected");
  const char* value = std::getenv(var.c_str());
  if (!value || !*value) {
    if (env == EnvPolicy::lenient) return std::nullopt;
    soft_error(w + ": environment variable " + var + " is not set or empty");
    return std::nullopt;
  }
  return std::string(value);
}

// Pointers in the config are empty or start with '/'.
void check_pointer(const std::string& value, const char* key, const std::string& where, const char* example) {
  if (!value.empty() && value[0] != '/')
    throw ConfigError(where + ": \"" + key + "\" is a JSON pointer such as \"" + example + "\"");
}

// The {cursor} of a list URL template: in the query (the first page is asked
// without its parameter), and exactly when the cursor pointer is set.
void check_cursor(const std::string& path, const char* key, const std::string& pointer, const std::string& where) {
  const size_t cursor = path.find("{cursor}");
  if (cursor != std::string::npos && pointer.empty())
    throw ConfigError(where + ": \"" + key + "\" has {cursor} but \"list_cursor_json_pointer\" is not set");
  if (cursor == std::string::npos && !pointer.empty())
    throw ConfigError(where + ": \"list_cursor_json_pointer\" is set but \"" + key + "\" has no {cursor}");
  if (cursor != std::string::npos && (path.find('?') == std::string::npos || cursor < path.find('?')))
    throw ConfigError(where + ": {cursor} must be in the query of \"" + key + "\" (e.g. &cursor={cursor})");
}

// A list URL template's path and query; errors never quote the URL.
std::string list_path(const std::string& url, const char* key, const std::string& where) {
  try {
    return parse_api_url(url, key).path_template;
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what());
  }
}

// The list_* keys of [provider.backfill]: the "list events" API, asked for
// a time window (list_url, `listed` sources) or for the ids after the highest
// received (list_after_url, the tail of `sequence` sources). Messages never
// quote a URL (its query may hold an API key).
void read_list_api(const toml::table& t, const std::string& where, BackfillApiConfig& b) {
  b.list_url = get_string(t, "list_url", where);
  b.list_after_url = get_string(t, "list_after_url", where);
  if (b.list_url.empty())
    for (const char* key : {"list_time_format", "list_window_s"})
      if (t.get(key)) throw ConfigError(where + ": \"" + key + "\" needs \"list_url\"");
  if (b.list_url.empty() && b.list_after_url.empty()) {
    for (const char* key : {"list_ids_json_pointer", "list_id_json_pointer", "list_cursor_json_pointer",
                            "list_interval_s", "list_max_pages"})
      if (t.get(key)) throw ConfigError(where + ": \"" + key + "\" needs \"list_url\" or \"list_after_url\"");
    return;
  }
  b.list_ids_json_pointer = get_string(t, "list_ids_json_pointer", where);
  check_pointer(b.list_ids_json_pointer, "list_ids_json_pointer", where, "/data");
  b.list_id_json_pointer = get_string(t, "list_id_json_pointer", where);
  check_pointer(b.list_id_json_pointer, "list_id_json_pointer", where, "/id");
  b.list_cursor_json_pointer = get_string(t, "list_cursor_json_pointer", where);
  check_pointer(b.list_cursor_json_pointer, "list_cursor_json_pointer", where, "/next_cursor");
  b.list_interval_s = get_int(t, "list_interval_s", where, b.list_interval_s, 10, 86400);
  b.list_max_pages = get_int(t, "list_max_pages", where, b.list_max_pages, 1, 10000);
  if (!b.list_after_url.empty()) {
    const std::string path = list_path(b.list_after_url, "list_after_url", where);
    if (path.find("{after}") == std::string::npos && path.find("{after_number}") == std::string::npos)
      throw ConfigError(where + ": \"list_after_url\" must contain {after} or {after_number} (the highest id received)");
    for (const char* p : {"{id}", "{from}", "{to}"})
      if (path.find(p) != std::string::npos)
        throw ConfigError(where + ": \"list_after_url\" may not contain " + p + " (it lists the ids after {after})");
    check_cursor(path, "list_after_url", b.list_cursor_json_pointer, where);
  }
  if (b.list_url.empty()) return;
  const std::string path = list_path(b.list_url, "list_url", where);
  if (path.find("{from}") == std::string::npos || path.find("{to}") == std::string::npos)
    throw ConfigError(where + ": \"list_url\" must contain {from} and {to} (the time window)");
  if (path.find("{id}") != std::string::npos)
    throw ConfigError(where + ": \"list_url\" may not contain {id} (it lists many events)");
  b.list_time_format = get_string(t, "list_time_format", where, b.list_time_format);
  if (b.list_time_format != "unix" && b.list_time_format != "rfc3339")
    throw ConfigError(where + ": \"list_time_format\" must be unix or rfc3339");
  check_cursor(path, "list_url", b.list_cursor_json_pointer, where);
  b.list_window_s = get_int(t, "list_window_s", where, b.list_window_s, 60, 31 * 86400);
  if (b.list_interval_s > b.list_window_s)
    throw ConfigError(where + ": \"list_interval_s\" must not exceed \"list_window_s\", or events sent "
                              "between two listings are never listed");
}

// [provider.backfill]: url (with {id}), optional auth header, timeout, payload pointer.
BackfillApiConfig read_backfill_api(const toml::table& t, const std::string& provider_where,
                                    EnvPolicy env) {
  const std::string where = provider_where + " [backfill]";
  reject_unknown_keys(t,
                      {"url", "auth_header", "auth_value", "timeout_ms", "payload_json_pointer", "list_url",
                       "list_time_format", "list_ids_json_pointer", "list_id_json_pointer",
                       "list_cursor_json_pointer", "list_window_s", "list_interval_s", "list_max_pages",
                       "list_after_url"},
                      where);
  BackfillApiConfig b;
  b.url = get_string(t, "url", where);
  if (b.url.empty()) throw ConfigError(where + ": \"url\" is required (a template with {id})");
  try {
    parse_backfill_url(b.url);
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what());
  }
  b.auth_header = get_string(t, "auth_header", where);
  std::optional<std::string> value = get_string_or_env(t, "auth_value", where, env);
  if (value) b.auth_value = *value;
  bool has_value = t.get("auth_value") != nullptr;
  if (b.auth_header.empty() != !has_value)
    throw ConfigError(where + ": set both \"auth_header\" and \"auth_value\", or neither");
  for (char c : b.auth_header + b.auth_value)
    if (c == '\r' || c == '\n')
      throw ConfigError(where + ": \"auth_header\" and \"auth_value\" may not contain line breaks");
  b.timeout_ms = get_int(t, "timeout_ms", where, b.timeout_ms, 100, 600000);
  b.payload_json_pointer = get_string(t, "payload_json_pointer", where);
  check_pointer(b.payload_json_pointer, "payload_json_pointer", where, "/data");
  read_list_api(t, where, b);
  return b;
}

// database_url = "postgresql://..." or { env = "NAME" } (keeps passwords out of the file).
std::string read_database_url(const toml::table& t, const std::string& where, EnvPolicy env) {
  if (const toml::table* dt = t.get("database_url") ? t.get("database_url")->as_table() : nullptr) {
    reject_unknown_keys(*dt, {"env"}, "database_url");
    std::string var = get_string(*dt, "env", "database_url");
    const char* value = var.empty() ? nullptr : std::getenv(var.c_str());
    if ((!value || !*value) && env == EnvPolicy::lenient) value = "";
    if (!value || (!*value && env == EnvPolicy::require)) {
      soft_error("database_url: environment variable " + (var.empty() ? "(none)" : var) +
                 " is not set or empty");
      return "";
    }
    return value;
  }
  return get_string(t, "database_url", where);
}

// A secret is either an inline string or { env = "NAME" }.
void read_secrets(const toml::table& t, const std::string& where, ProviderConfig& p, EnvPolicy env) {
  const toml::node* n = t.get("secrets");
  if (!n) throw ConfigError(where + ": \"secrets\" is required (a list)");
  const toml::array* arr = n->as_array();
  if (!arr || arr->empty()) throw ConfigError(where + ": \"secrets\" must be a non-empty list");
  int index = 0;
  for (const toml::node& s : *arr) {
    ++index;
    if (auto v = s.value_exact<std::string>()) {
      p.secrets.push_back(*v);
      p.secret_names.push_back("inline #" + std::to_string(index));
    } else if (const toml::table* st = s.as_table()) {
      std::string w = where + " secrets[" + std::to_string(index) + "]";
      reject_unknown_keys(*st, {"env"}, w);
      std::string var = get_string(*st, "env", w);
      if (var.empty()) throw ConfigError(w + ": { env = \"NAME\" } expected");
      const char* value = std::getenv(var.c_str());
      if (!value || !*value) {
        if (env == EnvPolicy::lenient) continue;
        soft_error(w + ": environment variable " + var + " is not set or empty");
        continue;
      }
      p.secrets.push_back(value);
      p.secret_names.push_back("env " + var);
    } else {
      throw ConfigError(where + ": each secret is a string or { env = \"NAME\" }");
    }
    if (p.secrets.back().empty()) throw ConfigError(where + ": empty secret");
  }
}

ProviderConfig read_provider(const toml::table& t, int index, EnvPolicy env) {
  std::string where = "provider #" + std::to_string(index);
  reject_unknown_keys(t,
                      {"name", "scheme", "secrets", "id_header", "id_json_pointer",
                       "tolerance_seconds", "signature_header", "algorithm", "encoding", "prefix",
                       "backfill"},
                      where);
  ProviderConfig p;
  p.name = get_string(t, "name", where);
  if (!valid_provider_name(p.name))
    throw ConfigError(where + ": \"name\" must be 1..63 characters of [a-z0-9_-]");
  where = "provider \"" + p.name + "\"";
  p.scheme = get_string(t, "scheme", where);
  // Which schemes exist is intake's business (intake/providers/schemes.cpp).
  if (p.scheme.empty()) throw ConfigError(where + ": \"scheme\" is required");
  read_secrets(t, where, p, env);
  p.id_header = get_string(t, "id_header", where);
  p.id_json_pointer = get_string(t, "id_json_pointer", where);
  if (!p.id_header.empty() && !p.id_json_pointer.empty())
    throw ConfigError(where + ": set either \"id_header\" or \"id_json_pointer\", not both");
  if (!p.id_json_pointer.empty() && p.id_json_pointer[0] != '/')
    throw ConfigError(where + ": \"id_json_pointer\" is a JSON pointer such as \"/id\"");
  p.tolerance_seconds = get_int(t, "tolerance_seconds", where, 300, 0, 86400);

  bool generic = p.scheme == "hmac";
  for (const char* key : {"signature_header", "algorithm", "encoding", "prefix"})
    if (!generic && t.get(key))
      throw ConfigError(where + ": \"" + key + "\" only applies to scheme \"hmac\"");
  if (generic) {
    p.signature_header = get_string(t, "signature_header", where);
    if (p.signature_header.empty())
      throw ConfigError(where + ": scheme \"hmac\" needs \"signature_header\"");
    p.algorithm = get_string(t, "algorithm", where, "sha256");
    if (p.algorithm != "sha1" && p.algorithm != "sha256" && p.algorithm != "sha512")
      throw ConfigError(where + ": \"algorithm\" must be sha1, sha256 or sha512");
    p.encoding = get_string(t, "encoding", where, "hex");
    if (p.encoding != "hex" && p.encoding != "base64")
      throw ConfigError(where + ": \"encoding\" must be hex or base64");
    p.prefix = get_string(t, "prefix", where);
    if (p.id_header.empty() && p.id_json_pointer.empty())
      throw ConfigError(where + ": scheme \"hmac\" needs \"id_header\" or \"id_json_pointer\"");
  }
  if (const toml::node* bn = t.get("backfill")) {
    if (!bn->is_table()) throw ConfigError(where + ": \"backfill\" must be a table ([provider.backfill])");
    p.backfill = read_backfill_api(*bn->as_table(), where, env);
  }
  return p;
}

// A lease must outlive the slowest provider call (connect + read, each up to
// timeout_ms), or another worker could claim the request while it is fetched.
void check_backfill(const Config& c) {
  bool any = false;
  for (const ProviderConfig& p : c.providers) {
    if (!p.backfill) continue;
    any = true;
    if (std::int64_t(c.backfill.lease_s) * 1000 <= 2 * std::int64_t(p.backfill->timeout_ms))
      throw ConfigError("[backfill] lease_s (" + std::to_string(c.backfill.lease_s) +
                        " s) must be longer than twice provider \"" + p.name +
                        "\" backfill timeout_ms (" + std::to_string(p.backfill->timeout_ms) + " ms)");
  }
  if (c.backfill.enabled && !any)
    throw ConfigError("[backfill] enabled = true, but no provider has a [provider.backfill] table");
}

AlertTargetConfig read_alert_target(const toml::table& t, int index, EnvPolicy env) {
  std::string where = "alert_target #" + std::to_string(index);
  reject_unknown_keys(t, {"name", "kind", "url", "secret", "min_severity", "timeout_ms"}, where);
  AlertTargetConfig a;
  a.name = get_string(t, "name", where);
  if (!valid_provider_name(a.name)) throw ConfigError(where + ": \"name\" must be 1..63 characters of [a-z0-9_-]");
  where = "alert_target \"" + a.name + "\"";
  a.kind = get_string(t, "kind", where);
  if (a.kind != "slack" && a.kind != "webhook" && a.kind != "alertmanager" && a.kind != "log")
    throw ConfigError(where + ": \"kind\" must be slack, webhook, alertmanager or log");
  if (std::optional<std::string> url = get_string_or_env(t, "url", where, env)) a.url = *url;
  if (a.kind == "log") {
    if (t.get("url") || t.get("secret")) throw ConfigError(where + ": kind \"log\" takes no \"url\" or \"secret\"");
  } else {
    if (!t.get("url")) throw ConfigError(where + ": \"url\" is required");
    try {
      if (!a.url.empty()) parse_api_url(a.url, "url");  // the message never quotes it (Slack's holds a secret)
    } catch (const ConfigError& e) {
      throw ConfigError(where + ": " + e.what());
    }
  }
  if (std::optional<std::string> secret = get_string_or_env(t, "secret", where, env)) a.secret = *secret;
  if (t.get("secret") && a.kind != "webhook") throw ConfigError(where + ": \"secret\" only applies to kind \"webhook\"");
  if (!a.secret.empty() && a.secret.rfind("whsec_", 0) != 0)
    throw ConfigError(where + ": \"secret\" is a Standard Webhooks key (whsec_...)");
  a.min_severity = get_string(t, "min_severity", where, a.min_severity);
  if (severity_index(a.min_severity) < 0) throw ConfigError(where + ": \"min_severity\" must be P0, P1, P2 or P3");
  a.timeout_ms = get_int(t, "timeout_ms", where, a.timeout_ms, 100, 600000);
  return a;
}

// admin_listen, [admin], [alerts] and [[alert_target]] (docs/alerts.md).
void read_alerts_and_admin(const toml::table& root, Config& c, EnvPolicy env) {
  c.admin.listen = get_string(root, "admin_listen", "top level");
  if (!c.admin.listen.empty() && c.admin.listen.rfind(':') == std::string::npos)
    throw ConfigError("\"admin_listen\" must be host:port, e.g. \"127.0.0.1:9090\"");
  if (const toml::table* a = get_table(root, "admin")) {
    reject_unknown_keys(*a, {"token", "database_url", "cache_ms", "refresh_s"}, "[admin]");
    if (std::optional<std::string> token = get_string_or_env(*a, "token", "[admin]", env)) c.admin.token = *token;
    c.admin.database_url = read_database_url(*a, "[admin]", env);
    c.admin.cache_ms = get_int(*a, "cache_ms", "[admin]", c.admin.cache_ms, 0, 600000);
    c.admin.refresh_s = get_int(*a, "refresh_s", "[admin]", c.admin.refresh_s, 1, 3600);
  }
  if (const toml::table* a = get_table(root, "alerts")) {
    const std::string w = "[alerts]";
    reject_unknown_keys(*a, {"enabled", "database_url", "poll_interval_ms", "lookback_s", "claim_timeout_ms",
                             "window_p1_s", "window_p2_s", "window_p3_s", "retry_attempts", "retry_base_ms",
                             "retry_max_ms", "database_unreachable_s", "error_rate", "error_rate_min_requests",
                             "own_severity", "status_url"},
                        w);
    AlertsConfig& x = c.alerts;
    x.enabled = get_bool(*a, "enabled", w, x.enabled);
    x.database_url = read_database_url(*a, w, env);
    x.poll_interval_ms = get_int(*a, "poll_interval_ms", w, x.poll_interval_ms, 10, 3600000);
    x.lookback_s = get_int(*a, "lookback_s", w, x.lookback_s, 1, 7 * 86400);
    x.claim_timeout_ms = get_int(*a, "claim_timeout_ms", w, x.claim_timeout_ms, 10, 60000);
    x.window_s[1] = get_int(*a, "window_p1_s", w, x.window_s[1], 1, 30 * 86400);
    x.window_s[2] = get_int(*a, "window_p2_s", w, x.window_s[2], 1, 30 * 86400);
    x.window_s[3] = get_int(*a, "window_p3_s", w, x.window_s[3], 1, 30 * 86400);
    x.retry_attempts = get_int(*a, "retry_attempts", w, x.retry_attempts, 1, 100);
    x.retry_base_ms = get_int(*a, "retry_base_ms", w, x.retry_base_ms, 1, 3600000);
    x.retry_max_ms = get_int(*a, "retry_max_ms", w, x.retry_max_ms, 1, 3600000);
    x.database_unreachable_s = get_int(*a, "database_unreachable_s", w, x.database_unreachable_s, 1, 86400);
    if (const toml::node* n = a->get("error_rate")) {
      std::optional<double> v = n->value<double>();
      if (!v || *v <= 0 || *v > 1) throw ConfigError(w + ": \"error_rate\" must be a number in (0, 1]");
      x.error_rate = *v;
    }
    x.error_rate_min_requests = get_int(*a, "error_rate_min_requests", w, x.error_rate_min_requests, 1, 1000000);
    x.own_severity = get_string(*a, "own_severity", w, x.own_severity);
    if (severity_index(x.own_severity) < 0) throw ConfigError(w + ": \"own_severity\" must be P0, P1, P2 or P3");
    x.status_url = get_string(*a, "status_url", w);
    // A row still in the lookback whose claim expired would be sent again by
    // a replica that starts then: the lookback must end before any window.
    for (int sev = 1; sev <= 3; ++sev)
      if (x.lookback_s >= x.window_s[sev])
        throw ConfigError(w + ": \"lookback_s\" (" + std::to_string(x.lookback_s) + ") must be shorter than \"window_p" +
                          std::to_string(sev) + "_s\" (" + std::to_string(x.window_s[sev]) +
                          "), or a replica started later resends alerts whose window ended");
  }
  if (const toml::node* n = root.get("alert_target")) {
    const toml::array* arr = n->as_array();
    if (!arr) throw ConfigError("alert targets are [[alert_target]] tables");
    int index = 0;
    for (const toml::node& tn : *arr) {
      const toml::table* tt = tn.as_table();
      if (!tt) throw ConfigError("alert targets are [[alert_target]] tables");
      AlertTargetConfig t = read_alert_target(*tt, ++index, env);
      for (const AlertTargetConfig& other : c.alert_targets)
        if (other.name == t.name) throw ConfigError("alert_target \"" + t.name + "\" is listed twice");
      c.alert_targets.push_back(std::move(t));
    }
  }
  if (c.alerts.enabled && c.alert_targets.empty())
    throw ConfigError("[alerts] enabled = true, but no [[alert_target]] is configured");
}

}  // namespace

int severity_index(const std::string& s) {
  if (s.size() == 2 && s[0] == 'P' && s[1] >= '0' && s[1] <= '3') return s[1] - '0';
  return -1;
}

bool valid_provider_name(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

const ProviderConfig* Config::find_provider(const std::string& name) const {
  for (const auto& p : providers)
    if (p.name == name) return &p;
  return nullptr;
}

Config parse_config(const std::string& toml_text, const std::string& source_name, EnvPolicy env,
                    const ProviderCheck& check) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
        << e.description();
    throw ConfigError(msg.str());
  }
  // Each part is checked even when an earlier one failed: every error is
  // reported at once.
  std::vector<std::string> errors;
  struct Scope {
    explicit Scope(std::vector<std::string>* e) { t_soft_errors = e; }
    ~Scope() { t_soft_errors = nullptr; }
  } scope(&errors);
  auto collect = [&](auto part) {
    try {
      part();
    } catch (const ConfigError& e) {
      errors.push_back(e.what());
    }
  };
  Config c;
  collect([&] {
  reject_unknown_keys(root,
                      {"listen", "database_url", "max_body_bytes", "http", "database", "batching",
                       "backfill", "provider", "forward", "route", "admin_listen", "admin", "alerts",
                       "alert_target"},
                      "top level");  // forward, route: read by forward/route_config
  });
  collect([&] {
  c.listen = get_string(root, "listen", "top level", c.listen);
  if (c.listen.rfind(':') == std::string::npos)
    throw ConfigError("\"listen\" must be host:port, e.g. \"127.0.0.1:8080\"");
  });
  collect([&] { c.database_url = read_database_url(root, "top level", env); });
  collect([&] {
  c.max_body_bytes = static_cast<std::size_t>(
      get_int(root, "max_body_bytes", "top level", static_cast<int>(c.max_body_bytes), 1,
              64 << 20));
  });

  collect([&] {
  if (const toml::table* h = get_table(root, "http")) {
    reject_unknown_keys(*h, {"threads", "read_timeout_ms", "write_timeout_ms",
                             "keep_alive_timeout_s", "keep_alive_max_requests", "backlog", "max_queued",
                             "max_connections", "max_header_bytes", "max_header_count", "min_body_rate",
                             "drain_ms"},
                        "[http]");
    c.http_threads = get_int(*h, "threads", "[http]", c.http_threads, 0, 256);
    c.read_timeout_ms = get_int(*h, "read_timeout_ms", "[http]", c.read_timeout_ms, 10, 600000);
    c.write_timeout_ms = get_int(*h, "write_timeout_ms", "[http]", c.write_timeout_ms, 10, 600000);
    c.keep_alive_timeout_s =
        get_int(*h, "keep_alive_timeout_s", "[http]", c.keep_alive_timeout_s, 0, 3600);
    c.keep_alive_max_requests =
        get_int(*h, "keep_alive_max_requests", "[http]", c.keep_alive_max_requests, 1, 1000000);
    c.listen_backlog = get_int(*h, "backlog", "[http]", c.listen_backlog, 1, 65535);
    c.http_max_queued = get_int(*h, "max_queued", "[http]", c.http_max_queued, 1, 100000);
    c.max_connections = get_int(*h, "max_connections", "[http]", c.max_connections, 1, 1000000);
    c.max_header_bytes = get_int(*h, "max_header_bytes", "[http]", c.max_header_bytes, 1024, 1 << 20);
    c.max_header_count = get_int(*h, "max_header_count", "[http]", c.max_header_count, 8, 10000);
    c.min_body_rate = get_int(*h, "min_body_rate", "[http]", c.min_body_rate, 1, 1 << 30);
    c.drain_ms = get_int(*h, "drain_ms", "[http]", c.drain_ms, 0, 600000);
  }
  });
  collect([&] {
  if (const toml::table* d = get_table(root, "database")) {
    reject_unknown_keys(*d, {"pool_size", "connect_timeout_s", "statement_timeout_ms",
                             "deadline_ms", "retry_after_s", "max_queued_bytes", "stats_interval_ms"},
                        "[database]");
    c.pool_size = get_int(*d, "pool_size", "[database]", c.pool_size, 1, 256);
    c.connect_timeout_s =
        get_int(*d, "connect_timeout_s", "[database]", c.connect_timeout_s, 1, 600);
    c.statement_timeout_ms =
        get_int(*d, "statement_timeout_ms", "[database]", c.statement_timeout_ms, 0, 600000);
    c.deadline_ms = get_int(*d, "deadline_ms", "[database]", c.deadline_ms, 10, 600000);
    c.retry_after_s = get_int(*d, "retry_after_s", "[database]", c.retry_after_s, 1, 3600);
    c.stats_interval_ms = get_int(*d, "stats_interval_ms", "[database]", c.stats_interval_ms, 0, 3600000);
    if (c.stats_interval_ms > 0 && c.stats_interval_ms < 100)
      throw ConfigError("[database] stats_interval_ms must be 0 (off) or at least 100");
    c.max_queued_bytes = static_cast<std::size_t>(
        get_int(*d, "max_queued_bytes", "[database]", static_cast<int>(c.max_queued_bytes), 1 << 16, 1 << 30));
  }
  });
  collect([&] {
  if (const toml::table* b = get_table(root, "batching")) {
    reject_unknown_keys(*b, {"enabled", "max_events", "max_wait_us"}, "[batching]");
    c.batching = get_bool(*b, "enabled", "[batching]", c.batching);
    c.batch_max_events = get_int(*b, "max_events", "[batching]", c.batch_max_events, 1, 10000);
    c.batch_max_wait_us = get_int(*b, "max_wait_us", "[batching]", c.batch_max_wait_us, 0, 100000);
  }

  });
  collect([&] {
  if (const toml::table* b = get_table(root, "backfill")) {
    reject_unknown_keys(*b, {"enabled", "database_url", "poll_interval_ms", "batch_size", "lease_s",
                             "max_attempts"},
                        "[backfill]");
    BackfillConfig& w = c.backfill;
    w.enabled = get_bool(*b, "enabled", "[backfill]", w.enabled);
    w.database_url = read_database_url(*b, "[backfill]", env);
    w.poll_interval_ms = get_int(*b, "poll_interval_ms", "[backfill]", w.poll_interval_ms, 10, 3600000);
    w.batch_size = get_int(*b, "batch_size", "[backfill]", w.batch_size, 1, 1000);
    w.lease_s = get_int(*b, "lease_s", "[backfill]", w.lease_s, 1, 86400);
    w.max_attempts = get_int(*b, "max_attempts", "[backfill]", w.max_attempts, 1, 1000);
  }

  });

  collect([&] {
  if (const toml::node* n = root.get("provider")) {
    const toml::array* arr = n->as_array();
    if (!arr) throw ConfigError("providers are [[provider]] tables");
    int index = 0;
    for (const toml::node& pn : *arr) {
      ++index;
      const toml::table* pt = pn.as_table();
      if (!pt) throw ConfigError("providers are [[provider]] tables");
      collect([&] {
        ProviderConfig p = read_provider(*pt, index, env);
        if (check) check(p);
        if (c.find_provider(p.name)) throw ConfigError("provider \"" + p.name + "\" is listed twice");
        c.providers.push_back(std::move(p));
      });
    }
  }
  });
  collect([&] { read_alerts_and_admin(root, c, env); });
  if (!root.get("provider") && !root.get("route"))  // a forward-only config needs none
    errors.push_back("no [[provider]] configured");
  if (errors.empty()) collect([&] { check_backfill(c); });
  if (!errors.empty()) {
    std::string all;
    for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
    throw ConfigError(all);
  }
  return c;
}

Config load_config(const std::string& path, EnvPolicy env, const ProviderCheck& check) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, env, check);
}

}  // namespace inbox

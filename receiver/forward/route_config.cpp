#include "forward/route_config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "common/config.h"

namespace inbox {
namespace {

void reject_unknown(const toml::table& t, const std::set<std::string>& known, const std::string& where) {
  for (auto&& [key, value] : t) {
    (void)value;
    if (!known.count(std::string(key.str())))
      throw ConfigError(where + ": unknown key \"" + std::string(key.str()) + "\"");
  }
}

std::string str(const toml::table& t, const char* key, const std::string& where, std::string fallback = {}) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (auto v = n->value_exact<std::string>()) return *v;
  throw ConfigError(where + ": \"" + key + "\" must be a string");
}

long long integer(const toml::table& t, const char* key, const std::string& where, long long fallback,
                  long long min, long long max) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  auto v = n->value_exact<std::int64_t>();
  if (!v || *v < min || *v > max)
    throw ConfigError(where + ": \"" + key + "\" must be an integer between " + std::to_string(min) + " and " +
                      std::to_string(max));
  return *v;
}

// The secret: inline or { env = "NAME" }.
std::string secret(const toml::table& t, const std::string& where) {
  const toml::node* n = t.get("secret");
  if (!n) throw ConfigError(where + ": \"secret\" is required (whsec_...)");
  std::string value;
  if (auto v = n->value_exact<std::string>()) {
    value = *v;
  } else if (const toml::table* et = n->as_table()) {
    reject_unknown(*et, {"env"}, where + " secret");
    std::string var = str(*et, "env", where + " secret");
    const char* env = var.empty() ? nullptr : std::getenv(var.c_str());
    if (!env || !*env) throw ConfigError(where + ": environment variable " + var + " is not set or empty");
    value = env;
  } else {
    throw ConfigError(where + ": \"secret\" must be a string or { env = \"NAME\" }");
  }
  if (value.rfind("whsec_", 0) != 0 || value.size() < 6 + 24)
    throw ConfigError(where + ": \"secret\" must be whsec_ followed by base64 of at least 18 bytes");
  return value;
}

RouteConfig read_route(const toml::table& t, const std::string& where) {
  reject_unknown(t, {"name", "topics", "provider", "url", "secret", "timeout_ms", "concurrency", "rate_per_s",
                     "ordered", "on_lease_expiry", "lease_s", "batch_size", "max_attempts", "backoff_base_ms",
                     "backoff_max_s"},
                 where);
  RouteConfig r;
  r.name = str(t, "name", where);
  if (!valid_provider_name(r.name)) throw ConfigError(where + ": \"name\" must be 1 to 63 of a-z, 0-9, _ and -");
  std::string w = "route " + r.name;
  if (const toml::node* n = t.get("topics")) {
    const toml::array* a = n->as_array();
    if (!a || a->empty()) throw ConfigError(w + ": \"topics\" must be a non-empty list of strings");
    for (const toml::node& e : *a) {
      auto v = e.value_exact<std::string>();
      if (!v || v->empty()) throw ConfigError(w + ": \"topics\" must be a non-empty list of strings");
      r.topics.push_back(*v);
    }
  }
  r.provider = str(t, "provider", w);
  if (r.topics.empty() == r.provider.empty())
    throw ConfigError(w + ": exactly one of \"topics\" (outbox) and \"provider\" (incoming events) is needed");
  r.url = str(t, "url", w);
  if (r.url.rfind("http://", 0) != 0 && r.url.rfind("https://", 0) != 0)
    throw ConfigError(w + ": \"url\" must start with http:// or https://");
  r.secret = secret(t, w);
  r.timeout_ms = static_cast<int>(integer(t, "timeout_ms", w, r.timeout_ms, 100, 300000));
  r.concurrency = static_cast<int>(integer(t, "concurrency", w, r.concurrency, 1, 256));
  if (const toml::node* n = t.get("rate_per_s")) {
    auto d = n->value<double>();
    if (!d || *d < 0) throw ConfigError(w + ": \"rate_per_s\" must be a number >= 0");
    r.rate_per_s = *d;
  }
  if (const toml::node* n = t.get("ordered")) {
    auto b = n->value_exact<bool>();
    if (!b) throw ConfigError(w + ": \"ordered\" must be true or false");
    r.ordered = *b;
  }
  r.on_lease_expiry = str(t, "on_lease_expiry", w, r.on_lease_expiry);
  if (r.on_lease_expiry == "retry") r.on_lease_expiry = "reclaim";  // the issue's word for it
  if (r.on_lease_expiry != "reclaim" && r.on_lease_expiry != "hold")
    throw ConfigError(w + ": \"on_lease_expiry\" must be reclaim (or retry) or hold");
  r.lease_s = static_cast<int>(integer(t, "lease_s", w, r.lease_s, 1, 86400));
  if (r.lease_s * 1000LL <= r.timeout_ms)
    throw ConfigError(w + ": \"lease_s\" must be longer than \"timeout_ms\"");
  r.batch_size = static_cast<int>(integer(t, "batch_size", w, r.batch_size, 1, 1000));
  r.max_attempts = static_cast<int>(integer(t, "max_attempts", w, 0, 1, 1000));
  r.backoff_base_ms = static_cast<int>(integer(t, "backoff_base_ms", w, 0, 1, 86400000));
  r.backoff_max_s = static_cast<int>(integer(t, "backoff_max_s", w, 0, 1, 30 * 86400));
  if (!r.provider.empty() && (r.ordered || t.get("on_lease_expiry") || r.max_attempts || r.backoff_base_ms ||
                              r.backoff_max_s))
    throw ConfigError(w + ": ordered, on_lease_expiry and the retry settings of a provider route are the "
                          "provider's own (inbox.register_provider)");
  return r;
}

}  // namespace

ForwardConfig parse_forward_config(const std::string& toml_text, const std::string& source_name,
                                   const std::string& top_level_database_url) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(source_name + ": " + std::string(e.description()));
  }
  ForwardConfig f;
  f.database_url = top_level_database_url;
  if (const toml::node* n = root.get("forward")) {
    const toml::table* t = n->as_table();
    if (!t) throw ConfigError("\"forward\" must be a table");
    reject_unknown(*t, {"enabled", "database_url", "poll_interval_ms"}, "forward");
    if (const toml::node* e = t->get("enabled")) {
      auto b = e->value_exact<bool>();
      if (!b) throw ConfigError("forward: \"enabled\" must be true or false");
      f.enabled = *b;
    }
    f.database_url = str(*t, "database_url", "forward", f.database_url);
    f.poll_interval_ms = static_cast<int>(integer(*t, "poll_interval_ms", "forward", f.poll_interval_ms, 10, 60000));
  }
  if (const toml::node* n = root.get("route")) {
    const toml::array* a = n->as_array();
    if (!a) throw ConfigError("\"route\" must be an array of tables ([[route]])");
    std::set<std::string> names, topics, providers;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table* t = a->get(i)->as_table();
      std::string where = "route #" + std::to_string(i + 1);
      if (!t) throw ConfigError(where + ": a table expected");
      RouteConfig r = read_route(*t, where);
      if (!names.insert(r.name).second) throw ConfigError("route " + r.name + ": the name is used twice");
      // One delivery state per message: a topic (or provider) belongs to one route.
      for (const std::string& topic : r.topics)
        if (!topics.insert(topic).second)
          throw ConfigError("route " + r.name + ": topic " + topic + " already belongs to another route");
      if (!r.provider.empty() && !providers.insert(r.provider).second)
        throw ConfigError("route " + r.name + ": provider " + r.provider + " already belongs to another route");
      f.routes.push_back(std::move(r));
    }
  }
  if (f.enabled && f.routes.empty()) throw ConfigError("[forward] enabled = true, but there is no [[route]]");
  return f;
}

ForwardConfig load_forward_config(const std::string& path, const std::string& top_level_database_url) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_forward_config(ss.str(), path, top_level_database_url);
}

}  // namespace inbox

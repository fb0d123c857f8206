// Every signature scheme, in one table: adding a scheme is its own file
// (a Provider subclass and its make_ function) plus one row here.
#include "intake/providers/provider.h"

namespace inbox {

std::unique_ptr<Provider> make_github(const ProviderConfig&);
std::unique_ptr<Provider> make_stripe(const ProviderConfig&);
std::unique_ptr<Provider> make_shopify(const ProviderConfig&);
std::unique_ptr<Provider> make_slack(const ProviderConfig&);
std::unique_ptr<Provider> make_standard(const ProviderConfig&);
std::unique_ptr<Provider> make_hmac(const ProviderConfig&);

namespace {

struct Scheme {
  const char* name;
  const char* id_header;        // where the id is unless the config says otherwise,
  const char* id_json_pointer;  // one of the two (none for hmac: the config must say)
  std::unique_ptr<Provider> (*make)(const ProviderConfig&);
};

const Scheme kSchemes[] = {
    {"github", "X-GitHub-Delivery", "", make_github},
    {"stripe", "", "/id", make_stripe},
    {"shopify", "X-Shopify-Webhook-Id", "", make_shopify},
    {"slack", "", "/event_id", make_slack},
    {"standard", "webhook-id", "", make_standard},
    {"hmac", "", "", make_hmac},
};

const Scheme& scheme_of(const ProviderConfig& p) {
  std::string names;
  for (const Scheme& s : kSchemes) {
    if (p.scheme == s.name) return s;
    names += names.empty() ? s.name : std::string(", ") + s.name;
  }
  throw ConfigError("provider \"" + p.name + "\": \"scheme\" must be one of " + names);
}

void apply_defaults(const Scheme& s, ProviderConfig& p) {
  if (!p.id_header.empty() || !p.id_json_pointer.empty()) return;
  p.id_header = s.id_header;
  p.id_json_pointer = s.id_json_pointer;
}

}  // namespace

std::unique_ptr<Provider> make_provider(const ProviderConfig& config) {
  const Scheme& s = scheme_of(config);
  ProviderConfig p = config;
  apply_defaults(s, p);
  return s.make(p);
}

void apply_schemes(Config& config) {
  for (ProviderConfig& p : config.providers) apply_defaults(scheme_of(p), p);
}

}  // namespace inbox

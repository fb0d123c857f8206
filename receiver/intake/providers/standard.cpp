// Standard Webhooks (and Svix): webhook-id, webhook-timestamp and
// webhook-signature: "v1,<base64>" entries separated by spaces. The MAC is
// HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed with the base64 bytes after
// the whsec_ prefix. Svix's svix-* header names are accepted too.
#include "intake/providers/provider.h"

namespace inbox {
namespace {

class Standard final : public Provider {
 public:
  explicit Standard(const ProviderConfig& c) : Provider(c) {
    for (size_t i = 0; i < c.secrets.size(); ++i) {
      std::string s = c.secrets[i];
      if (s.rfind("whsec_", 0) == 0) s.erase(0, 6);
      auto key = base64_decode(s);
      if (!key || key->empty())
        throw ConfigError("provider \"" + c.name + "\": secret " + c.secret_names[i] +
                          " is not whsec_<base64>");
      keys_.push_back(std::move(*key));
    }
  }

  Check verify(const Delivery& d) const override {
    std::string id = either(d, "webhook-id", "svix-id");
    std::string ts = either(d, "webhook-timestamp", "svix-timestamp");
    std::string sigs = either(d, "webhook-signature", "svix-signature");
    if (id.empty()) return Check::fail(401, "missing webhook-id header");
    if (ts.empty()) return Check::fail(401, "missing webhook-timestamp header");
    if (sigs.empty()) return Check::fail(401, "missing webhook-signature header");
    std::vector<std::string> candidates;
    size_t pos = 0;
    while (pos < sigs.size()) {
      size_t sp = sigs.find(' ', pos);
      if (sp == std::string::npos) sp = sigs.size();
      std::string_view entry = std::string_view(sigs).substr(pos, sp - pos);
      if (entry.rfind("v1,", 0) == 0)  // other versions (v1a = ed25519) are not ours
        if (auto mac = base64_decode(entry.substr(3))) candidates.push_back(std::move(*mac));
      pos = sp + 1;
    }
    if (candidates.empty()) return Check::fail(401, "webhook-signature has no v1 signature");
    std::string content = id + "." + ts + "." + std::string(d.body);
    bool ok = false;
    for (const std::string& key : keys_)
      for (const std::string& c : candidates)
        ok = ok || constant_time_equal(hmac(HmacAlgorithm::sha256, key, content), c);
    if (!ok) return Check::fail(401, "signature does not match");
    return check_timestamp("webhook-timestamp", ts, d.now);
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t now) const override {
    SignedRequest r;
    std::string ts = std::to_string(now);
    r.headers.emplace_back("webhook-id", id);
    r.headers.emplace_back("webhook-timestamp", ts);
    r.headers.emplace_back(
        "webhook-signature",
        "v1," + base64_encode(hmac(HmacAlgorithm::sha256, keys_.front(), id + "." + ts + "." + body)));
    if (config_.id_header != "webhook-id") add_id_header(r, id);
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    return r;
  }

 protected:
  std::string id_from_header(const Delivery& d) const override {
    std::string id = d.header(config_.id_header);
    if (id.empty() && config_.id_header == "webhook-id") id = d.header("svix-id");
    return id;
  }

 private:
  static std::string either(const Delivery& d, const char* a, const char* b) {
    std::string v = d.header(a);
    return v.empty() ? d.header(b) : v;
  }

  std::vector<std::string> keys_;
};

}  // namespace

std::unique_ptr<Provider> make_standard(const ProviderConfig& c) { return std::make_unique<Standard>(c); }

}  // namespace inbox

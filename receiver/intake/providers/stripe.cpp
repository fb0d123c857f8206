// Stripe: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]; the MAC is
// HMAC-SHA256 of "<t>.<body>" keyed with the whole whsec_... string.
// The id is the event object's "id" (evt_...).
#include "intake/providers/provider.h"

namespace inbox {
namespace {

const std::string kHeader = "Stripe-Signature";

class Stripe final : public Provider {
 public:
  using Provider::Provider;

  Check verify(const Delivery& d) const override {
    std::string value = d.header(kHeader);
    if (value.empty()) return Check::fail(401, "missing " + kHeader + " header");
    std::string t;
    std::vector<std::string> v1;
    size_t pos = 0;
    while (pos <= value.size()) {
      size_t comma = value.find(',', pos);
      if (comma == std::string::npos) comma = value.size();
      std::string item = value.substr(pos, comma - pos);
      size_t eq = item.find('=');
      if (eq != std::string::npos) {
        std::string key = item.substr(0, eq), val = item.substr(eq + 1);
        if (key == "t") t = val;
        else if (key == "v1")
          if (auto mac = hex_decode(val)) v1.push_back(std::move(*mac));
      }
      pos = comma + 1;
    }
    if (t.empty() || v1.empty()) return Check::fail(401, kHeader + " needs t= and v1=");
    std::string signed_payload = t + "." + std::string(d.body);
    bool ok = any_secret_matches(
        [&](const std::string& s) { return hmac(HmacAlgorithm::sha256, s, signed_payload); }, v1);
    if (!ok) return Check::fail(401, "signature does not match");
    return check_timestamp(kHeader + " t", t, d.now);
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t now) const override {
    SignedRequest r;
    std::string t = std::to_string(now);
    r.headers.emplace_back(
        kHeader, "t=" + t + ",v1=" +
                     hex_encode(hmac(HmacAlgorithm::sha256, config_.secrets.front(), t + "." + body)));
    add_id_header(r, id);
    r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
    r.body = std::move(body);
    return r;
  }
};

}  // namespace

std::unique_ptr<Provider> make_stripe(const ProviderConfig& c) { return std::make_unique<Stripe>(c); }

}  // namespace inbox

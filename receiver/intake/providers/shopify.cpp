// Shopify: X-Shopify-Hmac-Sha256: base64 HMAC-SHA256 of the body;
// the id is X-Shopify-Webhook-Id (configurable, e.g. X-Shopify-Event-Id).
#include "intake/providers/provider.h"

namespace inbox {
namespace {

const std::string kHeader = "X-Shopify-Hmac-Sha256";

class Shopify final : public Provider {
 public:
  using Provider::Provider;

  Check verify(const Delivery& d) const override {
    std::string value = d.header(kHeader);
    if (value.empty()) return Check::fail(401, "missing " + kHeader + " header");
    auto mac = base64_decode(value);
    if (!mac) return Check::fail(401, kHeader + " is not base64");
    bool ok = any_secret_matches(
        [&](const std::string& s) { return hmac(HmacAlgorithm::sha256, s, d.body); }, {*mac});
    return ok ? Check::pass() : Check::fail(401, "signature does not match");
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t) const override {
    SignedRequest r;
    r.headers.emplace_back(kHeader,
                           base64_encode(hmac(HmacAlgorithm::sha256, config_.secrets.front(), body)));
    add_id_header(r, id);
    r.headers.emplace_back("X-Shopify-Topic", "orders/create");
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    return r;
  }
};

}  // namespace

std::unique_ptr<Provider> make_shopify(const ProviderConfig& c) { return std::make_unique<Shopify>(c); }

}  // namespace inbox

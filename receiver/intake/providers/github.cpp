// GitHub: X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>;
// the id is the X-GitHub-Delivery header (stable across redeliveries).
#include "common/json_util.h"
#include "intake/providers/provider.h"

namespace inbox {
namespace {

const std::string kSignatureHeader = "X-Hub-Signature-256";

class GitHub final : public Provider {
 public:
  using Provider::Provider;

  Check verify(const Delivery& d) const override {
    std::string sig = d.header(kSignatureHeader);
    if (sig.empty()) return Check::fail(401, "missing " + kSignatureHeader + " header");
    if (sig.rfind("sha256=", 0) != 0) return Check::fail(401, kSignatureHeader + " must start with sha256=");
    auto mac = hex_decode(std::string_view(sig).substr(7));
    if (!mac) return Check::fail(401, kSignatureHeader + " is not hex");
    bool ok = any_secret_matches(
        [&](const std::string& s) { return hmac(HmacAlgorithm::sha256, s, d.body); }, {*mac});
    return ok ? Check::pass() : Check::fail(401, "signature does not match");
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t) const override {
    SignedRequest r;
    r.headers.emplace_back(kSignatureHeader,
                           "sha256=" + hex_encode(hmac(HmacAlgorithm::sha256, config_.secrets.front(), body)));
    add_id_header(r, id);
    r.headers.emplace_back("X-GitHub-Event", "ping");
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    return r;
  }

 protected:
  // GitHub can be set to post application/x-www-form-urlencoded with the
  // JSON in a `payload` field; the signature covers the form body.
  Check payload_json(const Delivery& d, std::string& out) const override {
    if (is_form_content_type(d.header("Content-Type"))) {
      auto payload = form_field(d.body, "payload");
      if (!payload || !is_valid_json(*payload))
        return Check::fail(400, "form body without a JSON payload field");
      out = std::move(*payload);
      return Check::pass();
    }
    return Provider::payload_json(d, out);
  }
};

}  // namespace

std::unique_ptr<Provider> make_github(const ProviderConfig& c) { return std::make_unique<GitHub>(c); }

}  // namespace inbox

// Generic HMAC: one header carrying [prefix]<hex|base64 MAC of the body>,
// sha1/sha256/sha512; the id from a header or a JSON pointer. No timestamp.
#include "intake/providers/provider.h"

namespace inbox {
namespace {

class GenericHmac final : public Provider {
 public:
  explicit GenericHmac(const ProviderConfig& c)
      : Provider(c), algorithm_(*parse_algorithm(c.algorithm)), base64_(c.encoding == "base64") {}

  Check verify(const Delivery& d) const override {
    const std::string& h = config_.signature_header;
    std::string value = d.header(h);
    if (value.empty()) return Check::fail(401, "missing " + h + " header");
    if (value.rfind(config_.prefix, 0) != 0)
      return Check::fail(401, h + " must start with " + config_.prefix);
    std::string_view digest = std::string_view(value).substr(config_.prefix.size());
    auto mac = base64_ ? base64_decode(digest) : hex_decode(digest);
    if (!mac) return Check::fail(401, h + " is not " + config_.encoding);
    bool ok = any_secret_matches([&](const std::string& s) { return hmac(algorithm_, s, d.body); },
                                 {*mac});
    return ok ? Check::pass() : Check::fail(401, "signature does not match");
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t) const override {
    SignedRequest r;
    std::string mac = hmac(algorithm_, config_.secrets.front(), body);
    r.headers.emplace_back(config_.signature_header,
                           config_.prefix + (base64_ ? base64_encode(mac) : hex_encode(mac)));
    add_id_header(r, id);
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    return r;
  }

 private:
  HmacAlgorithm algorithm_;
  bool base64_;
};

}  // namespace

std::unique_ptr<Provider> make_hmac(const ProviderConfig& c) { return std::make_unique<GenericHmac>(c); }

}  // namespace inbox

// Slack: X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">,
// X-Slack-Request-Timestamp: <ts>. Events API bodies are JSON (id: event_id);
// slash commands and interactivity post forms, stored as a JSON object.
#include <simdjson.h>

#include "common/json_util.h"
#include "intake/providers/provider.h"

namespace inbox {
namespace {

const std::string kSignature = "X-Slack-Signature";
const std::string kTimestamp = "X-Slack-Request-Timestamp";

class Slack final : public Provider {
 public:
  using Provider::Provider;

  Check verify(const Delivery& d) const override {
    std::string sig = d.header(kSignature);
    if (sig.empty()) return Check::fail(401, "missing " + kSignature + " header");
    std::string ts = d.header(kTimestamp);
    if (ts.empty()) return Check::fail(401, "missing " + kTimestamp + " header");
    if (sig.rfind("v0=", 0) != 0) return Check::fail(401, kSignature + " must start with v0=");
    auto mac = hex_decode(std::string_view(sig).substr(3));
    if (!mac) return Check::fail(401, kSignature + " is not hex");
    std::string base = "v0:" + ts + ":" + std::string(d.body);
    bool ok = any_secret_matches(
        [&](const std::string& s) { return hmac(HmacAlgorithm::sha256, s, base); }, {*mac});
    if (!ok) return Check::fail(401, "signature does not match");
    return check_timestamp(kTimestamp, ts, d.now);
  }

  // Slack checks a new Events URL by posting {"type":"url_verification",
  // "challenge":...} and expects the challenge back; nothing is stored.
  std::optional<std::string> handshake_reply(const std::string& payload) const override {
    if (payload.find("url_verification") == std::string::npos) return std::nullopt;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(payload).get(doc) != simdjson::SUCCESS) return std::nullopt;
    std::string_view type, challenge;
    if (doc["type"].get(type) != simdjson::SUCCESS || type != "url_verification") return std::nullopt;
    if (doc["challenge"].get(challenge) != simdjson::SUCCESS) return std::nullopt;
    return "{\"challenge\":" + json_quote(challenge) + "}";
  }

  SignedRequest sign(std::string body, const std::string& id, std::int64_t now) const override {
    SignedRequest r;
    std::string ts = std::to_string(now);
    r.headers.emplace_back(
        kSignature, "v0=" + hex_encode(hmac(HmacAlgorithm::sha256, config_.secrets.front(),
                                            "v0:" + ts + ":" + body)));
    r.headers.emplace_back(kTimestamp, ts);
    add_id_header(r, id);
    bool form = !body.empty() && body.front() != '{';
    r.headers.emplace_back("Content-Type", form ? "application/x-www-form-urlencoded" : "application/json");
    r.body = std::move(body);
    return r;
  }

 protected:
  Check payload_json(const Delivery& d, std::string& out) const override {
    if (!is_form_content_type(d.header("Content-Type"))) return Provider::payload_json(d, out);
    auto json = form_to_json(d.body);
    if (!json) return Check::fail(400, "form body is not valid url-encoded UTF-8");
    out = std::move(*json);
    return Check::pass();
  }
};

}  // namespace

std::unique_ptr<Provider> make_slack(const ProviderConfig& c) { return std::make_unique<Slack>(c); }

}  // namespace inbox

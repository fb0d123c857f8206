// Every scheme, without HTTP or a database: good delivery, tampered body,
// wrong secret, missing header, rotated secret, timestamps out either way,
// plus the published vectors and id extraction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "common/json_util.h"
#include "intake/sign_command.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;

namespace {

inbox::Headers headers_of(const SignedRequest& r) {
  inbox::Headers h;
  for (const auto& [k, v] : r.headers) h.emplace(k, v);
  return h;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool has_timestamp(const std::string& scheme) {
  return scheme == "stripe" || scheme == "slack" || scheme == "standard";
}

std::string wrong_secret(const std::string& scheme) {
  return scheme == "standard" ? "whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldA==" : "wrong-secret";
}

class SchemeTest : public ::testing::TestWithParam<std::string> {
 protected:
  SchemeTest() : verifier_(make_provider(test_provider(GetParam()))) {}

  // A body the scheme's id source finds `id` in.
  std::string body_for(const std::string& id) const {
    const ProviderConfig& c = verifier_->config();
    return c.id_json_pointer.empty() ? "{\"type\":\"test\",\"n\":1}" : body_with_id_at(c.id_json_pointer, id);
  }

  SignedRequest signed_with(const std::string& secret, std::int64_t at, const std::string& id = "evt_1") const {
    return signer(GetParam(), secret)->sign(body_for(id), id, at);
  }

  Check verify(const SignedRequest& r, std::int64_t now) const {
    inbox::Headers h = headers_of(r);
    return verifier_->verify(Delivery{h, r.body, now});
  }

  std::unique_ptr<Provider> verifier_;
  const std::int64_t now_ = 1700000000;
};

TEST_P(SchemeTest, GoodDeliveryVerifiesAndYieldsTheId) {
  SignedRequest r = signed_with(GetParam() == "standard" ? kStandardNew : kNewSecret, now_, "evt_good");
  EXPECT_TRUE(verify(r, now_).ok()) << verify(r, now_).message;
  inbox::Headers h = headers_of(r);
  Extracted x;
  Check c = verifier_->extract(Delivery{h, r.body, now_}, x);
  ASSERT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(x.external_id, "evt_good");
  EXPECT_TRUE(is_valid_json(x.payload_json));
}

TEST_P(SchemeTest, RotatedSecretsOldAndNewBothAccepted) {
  bool standard = GetParam() == "standard";
  EXPECT_TRUE(verify(signed_with(standard ? kStandardNew : kNewSecret, now_), now_).ok());
  EXPECT_TRUE(verify(signed_with(standard ? kStandardOld : kOldSecret, now_), now_).ok());
}

TEST_P(SchemeTest, TamperedBodyRefused) {
  SignedRequest r = signed_with(GetParam() == "standard" ? kStandardNew : kNewSecret, now_);
  r.body.insert(r.body.size() - 1, ",\"amount\":1000000");
  Check c = verify(r, now_);
  EXPECT_EQ(c.status, 401);
  EXPECT_EQ(c.message, "signature does not match");
}

TEST_P(SchemeTest, WrongSecretRefused) {
  Check c = verify(signed_with(wrong_secret(GetParam()), now_), now_);
  EXPECT_EQ(c.status, 401);
}

TEST_P(SchemeTest, MissingSignatureHeaderRefusedAndNamed) {
  SignedRequest r = signed_with(GetParam() == "standard" ? kStandardNew : kNewSecret, now_);
  std::string name = lower(signature_header(GetParam()));
  r.headers.erase(std::remove_if(r.headers.begin(), r.headers.end(),
                                 [&](const auto& h) { return lower(h.first) == name; }),
                  r.headers.end());
  Check c = verify(r, now_);
  EXPECT_EQ(c.status, 401);
  EXPECT_NE(lower(c.message).find(name), std::string::npos) << c.message;
}

TEST_P(SchemeTest, TimestampOutsideToleranceRefusedBothWays) {
  if (!has_timestamp(GetParam())) GTEST_SKIP() << GetParam() << " signs no timestamp";
  const char* secret = GetParam() == "standard" ? kStandardNew : kNewSecret;
  EXPECT_EQ(verify(signed_with(secret, now_ - 301), now_).status, 401);  // too old (replay)
  EXPECT_EQ(verify(signed_with(secret, now_ + 301), now_).status, 401);  // from the future
  EXPECT_TRUE(verify(signed_with(secret, now_ - 299), now_).ok());
  EXPECT_TRUE(verify(signed_with(secret, now_ + 299), now_).ok());
}

TEST_P(SchemeTest, MissingIdIs400NamingTheSource) {
  if (GetParam() == "standard") GTEST_SKIP() << "webhook-id is signed: without it the signature fails";
  SignedRequest r = signer(GetParam(), GetParam() == "standard" ? kStandardNew : kNewSecret)
                        ->sign("{\"type\":\"no id here\"}", "", now_);
  inbox::Headers h = headers_of(r);
  Delivery d{h, r.body, now_};
  ASSERT_TRUE(verifier_->verify(d).ok());
  Extracted x;
  Check c = verifier_->extract(d, x);
  EXPECT_EQ(c.status, 400);
  const ProviderConfig& pc = verifier_->config();
  std::string source = pc.id_header.empty() ? pc.id_json_pointer : pc.id_header;
  EXPECT_NE(c.message.find(source), std::string::npos) << c.message;
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, SchemeTest,
                         ::testing::Values("github", "stripe", "shopify", "slack", "standard", "hmac"),
                         [](const auto& info) { return info.param; });

}  // namespace

// GitHub's documented example, through the provider.
TEST(PublishedVectors, GitHub) {
  ProviderConfig p = test_provider("github");
  p.secrets = {"It's a Secret to Everybody"};
  auto gh = make_provider(p);
  inbox::Headers h{{"X-Hub-Signature-256",
                      "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}};
  EXPECT_TRUE(gh->verify(Delivery{h, "Hello, World!", 0}).ok());
  EXPECT_EQ(gh->verify(Delivery{h, "Hello, World?", 0}).status, 401);
}

// From the Standard Webhooks reference libraries' tests, clock pinned.
TEST(PublishedVectors, StandardWebhooks) {
  ProviderConfig p = test_provider("standard");
  p.secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
  auto sw = make_provider(p);
  inbox::Headers h{{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                     {"webhook-timestamp", "1614265330"},
                     {"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}};
  const std::string body = "{\"test\": 2432232314}";
  EXPECT_TRUE(sw->verify(Delivery{h, body, 1614265330}).ok());
  // Several signatures, one of them right (rotation on the sender's side).
  inbox::Headers several = h;
  several.find("webhook-signature")->second =
      "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  EXPECT_TRUE(sw->verify(Delivery{several, body, 1614265330}).ok());
  // The real clock is years later: outside the tolerance.
  EXPECT_EQ(sw->verify(Delivery{h, body, unix_now()}).status, 401);
  // Svix's header names carry the same scheme.
  inbox::Headers svix{{"svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                        {"svix-timestamp", "1614265330"},
                        {"svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}};
  EXPECT_TRUE(sw->verify(Delivery{svix, body, 1614265330}).ok());
  Extracted x;
  ASSERT_TRUE(sw->extract(Delivery{svix, body, 1614265330}, x).ok());
  EXPECT_EQ(x.external_id, "msg_p5jXN8AQM9LWM0D4loKWxJek");
}

TEST(Extraction, StripeIdFromBody) {
  auto p = make_provider(test_provider("stripe"));
  inbox::Headers h;
  Extracted x;
  ASSERT_TRUE(p->extract(Delivery{h, R"({"id":"evt_1N","object":"event"})", 0}, x).ok());
  EXPECT_EQ(x.external_id, "evt_1N");
  EXPECT_EQ(p->extract(Delivery{h, R"({"object":"event"})", 0}, x).status, 400);
  EXPECT_EQ(p->extract(Delivery{h, R"({"id":{"x":1}})", 0}, x).status, 400);
  EXPECT_EQ(p->extract(Delivery{h, R"({"id":"evt_1N")", 0}, x).status, 400);  // not JSON
  Check c = p->extract(Delivery{h, "{\"id\":\"" + std::string(256, 'a') + "\"}", 0}, x);
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(c.message.find("255"), std::string::npos);
}

TEST(Extraction, SlackFormBecomesEscapedJson) {
  ProviderConfig pc = test_provider("slack");
  pc.id_json_pointer = "/trigger_id";
  auto p = make_provider(pc);
  inbox::Headers h{{"Content-Type", "application/x-www-form-urlencoded"}};
  Extracted x;
  std::string body = "command=%2Fdeploy&text=say+%22hi%22%5C%0Anow+%E2%9C%93&trigger_id=123.456";
  ASSERT_TRUE(p->extract(Delivery{h, body, 0}, x).ok());
  EXPECT_EQ(x.external_id, "123.456");
  EXPECT_EQ(x.payload_json,
            "{\"command\":\"/deploy\",\"text\":\"say \\\"hi\\\"\\\\\\nnow \xE2\x9C\x93\",\"trigger_id\":\"123.456\"}");
  EXPECT_TRUE(is_valid_json(x.payload_json));
  EXPECT_EQ(p->extract(Delivery{h, "text=%ZZ&trigger_id=1", 0}, x).status, 400);
  EXPECT_EQ(p->extract(Delivery{h, "text=%FF&trigger_id=1", 0}, x).status, 400);  // not UTF-8
}

TEST(Extraction, SlackUrlVerificationIsAnsweredNotStored) {
  auto p = make_provider(test_provider("slack"));
  inbox::Headers h;
  Extracted x;
  ASSERT_TRUE(p->extract(Delivery{h, R"({"token":"t","challenge":"3eZbrw1aB","type":"url_verification"})", 0}, x).ok());
  ASSERT_TRUE(x.handshake_reply);
  EXPECT_EQ(*x.handshake_reply, R"({"challenge":"3eZbrw1aB"})");
  EXPECT_FALSE(p->handshake_reply(R"({"type":"event_callback","event_id":"Ev1"})"));
}

TEST(Extraction, GitHubFormPayloadField) {
  auto p = make_provider(test_provider("github"));
  inbox::Headers h{{"Content-Type", "application/x-www-form-urlencoded"},
                     {"X-GitHub-Delivery", "d-1"}};
  Extracted x;
  ASSERT_TRUE(p->extract(Delivery{h, "payload=%7B%22zen%22%3A%22ok%22%7D", 0}, x).ok());
  EXPECT_EQ(x.payload_json, R"({"zen":"ok"})");
  EXPECT_EQ(x.external_id, "d-1");
}

TEST(Extraction, HeadersJsonLeavesOutCredentialsAndPseudoHeaders) {
  inbox::Headers h{{"X-GitHub-Event", "push"},
                     {"Authorization", "Bearer s3cret"},
                     {"REMOTE_ADDR", "6.6.6.6"},
                     {"X-Quote", "a\"b"}};
  std::string j = headers_json(h);
  EXPECT_EQ(j, R"({"x-github-event":"push","x-quote":"a\"b"})");
}

TEST(Extraction, GenericHmacHexSha1WithoutPrefixAndIdHeader) {
  ProviderConfig pc = test_provider("hmac");
  pc.algorithm = "sha1";
  pc.encoding = "hex";
  pc.prefix = "";
  pc.id_json_pointer = "";
  pc.id_header = "X-Event-Id";
  auto p = make_provider(pc);
  SignedRequest r = p->sign("{\"a\":1}", "e-1", 0);
  inbox::Headers h = headers_of(r);
  EXPECT_TRUE(p->verify(Delivery{h, r.body, 0}).ok());
  EXPECT_EQ(h.find("X-Signature")->second, hex_encode(hmac(HmacAlgorithm::sha1, kNewSecret, "{\"a\":1}")));
  Extracted x;
  ASSERT_TRUE(p->extract(Delivery{h, r.body, 0}, x).ok());
  EXPECT_EQ(x.external_id, "e-1");
}

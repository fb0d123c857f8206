// Real HTTP against an in-process receiver and the real database: every
// scheme end to end, refusals that must leave no row, and the ops endpoints.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "intake/http_server.h"
#include "intake/sign_command.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;

namespace {

const char* secret_for(const std::string& scheme, bool old = false) {
  if (scheme == "standard") return old ? kStandardOld : kStandardNew;
  return old ? kOldSecret : kNewSecret;
}

// A body in which the scheme's configured id source finds `id`.
std::string body_for(const std::string& scheme, const std::string& id, const std::string& extra = "") {
  ProviderConfig p = test_provider(scheme);
  std::string body = p.id_json_pointer.empty() ? "{\"type\":\"test\"}" : body_with_id_at(p.id_json_pointer, id);
  if (!extra.empty()) body.insert(body.size() - 1, "," + extra);
  return body;
}

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    db_ = std::make_unique<Db>();
    receiver_ = std::make_unique<Receiver>(config());
    port_ = receiver_->start();
  }
  void TearDown() override {
    if (receiver_) receiver_->stop();
  }
  virtual Config config() { return test_config(); }

  HttpResult deliver(const std::string& scheme, const std::string& id, bool old_secret = false,
                     std::int64_t at = 0) {
    SignedRequest r = signer(scheme, secret_for(scheme, old_secret))
                          ->sign(body_for(scheme, id), id, at ? at : unix_now());
    return post(port_, "/webhooks/t_" + scheme, r);
  }

  std::unique_ptr<Db> db_;
  std::unique_ptr<Receiver> receiver_;
  int port_ = 0;
};

class SchemeHttpTest : public HttpTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(SchemeHttpTest, FirstDeliveryRedeliveryAndDuplicate) {
  const std::string scheme = GetParam();
  const std::string id = unique_id(scheme);
  HttpResult r = deliver(scheme, id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"status":"accepted"})");
  EXPECT_EQ(db_->count("t_" + scheme, id), 1);
  // The stored payload is the body; headers are kept, without credentials.
  EXPECT_EQ(*db_->scalar("SELECT payload = " + db_->quote(body_for(scheme, id)) +
                         "::jsonb FROM inbox.events WHERE provider = 't_" + scheme + "' AND external_id = " + db_->quote(id)),
            "t");
  EXPECT_TRUE(db_->scalar("SELECT headers ->> 'content-type' FROM inbox.events WHERE provider = 't_" + scheme + "' AND external_id = " +
                          db_->quote(id)));
  // Redelivery before processing: still accepted, still one row.
  r = deliver(scheme, id);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"accepted"})");
  EXPECT_EQ(db_->count("t_" + scheme, id), 1);
  // After processing: a duplicate is still a success (never 409).
  db_->exec("UPDATE inbox.events SET status = 'done', processed_at = now() WHERE provider = 't_" + scheme +
            "' AND external_id = " + db_->quote(id));
  r = deliver(scheme, id);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"duplicate"})");
}

// Issue 12: every delivery is a row of the delivery log, with the SHA-256 of
// the raw body as sent (not of the stored JSON) and the scheme that
// verified it; a duplicate of a processed event too.
TEST_P(SchemeHttpTest, DeliveryLogHoldsTheRawBodyDigest) {
  const std::string scheme = GetParam();
  const std::string id = unique_id(scheme);
  SignedRequest r = signer(scheme, secret_for(scheme))->sign(body_for(scheme, id), id, unix_now());
  ASSERT_EQ(post(port_, "/webhooks/t_" + scheme, r).status, 200);
  db_->exec("UPDATE inbox.events SET status = 'done', processed_at = now() WHERE provider = 't_" + scheme +
            "' AND external_id = " + db_->quote(id));
  ASSERT_EQ(post(port_, "/webhooks/t_" + scheme, r).status, 200);
  EXPECT_EQ(*db_->scalar("SELECT string_agg(concat_ws(' ', delivery, outcome, body_hashed, signature_scheme, "
                         "body_sha256 = sha256(convert_to(" + db_->quote(r.body) + ", 'UTF8'))), ', ' ORDER BY delivery) "
                         "FROM inbox.deliveries WHERE provider = 't_" + scheme + "' AND external_id = " + db_->quote(id)),
            "1 inserted raw " + scheme + " t, 2 duplicate raw " + scheme + " t");
  EXPECT_FALSE(db_->scalar("SELECT 1 FROM inbox.verify_log() LIMIT 1")) << "the log verifies";
}

TEST_P(SchemeHttpTest, RotatedSecretsBothAccepted) {
  const std::string scheme = GetParam();
  std::string a = unique_id(scheme), b = unique_id(scheme);
  EXPECT_EQ(deliver(scheme, a, false).status, 200);
  EXPECT_EQ(deliver(scheme, b, true).status, 200);
  EXPECT_EQ(db_->count("t_" + scheme, a), 1);
  EXPECT_EQ(db_->count("t_" + scheme, b), 1);
}

TEST_P(SchemeHttpTest, BadSignaturesWriteNothing) {
  const std::string scheme = GetParam();
  const std::string id = unique_id(scheme);
  // Tampered body.
  SignedRequest r = signer(scheme, secret_for(scheme))->sign(body_for(scheme, id), id, unix_now());
  SignedRequest tampered = r;
  tampered.body = body_for(scheme, id, "\"amount\":99");
  EXPECT_EQ(post(port_, "/webhooks/t_" + scheme, tampered).status, 401);
  // Wrong secret.
  SignedRequest wrong = signer(scheme, scheme == "standard" ? "whsec_d3Jvbmctc2VjcmV0LXdyb25n" : "nope")
                            ->sign(body_for(scheme, id), id, unix_now());
  EXPECT_EQ(post(port_, "/webhooks/t_" + scheme, wrong).status, 401);
  // Missing signature header.
  SignedRequest missing = r;
  std::string drop = signature_header(scheme);
  for (auto it = missing.headers.begin(); it != missing.headers.end();)
    it = strcasecmp(it->first.c_str(), drop.c_str()) == 0 ? missing.headers.erase(it) : it + 1;
  HttpResult m = post(port_, "/webhooks/t_" + scheme, missing);
  EXPECT_EQ(m.status, 401);
  EXPECT_NE(m.body.find("missing"), std::string::npos) << m.body;
  // Timestamps outside the tolerance, both ways.
  if (scheme == "stripe" || scheme == "slack" || scheme == "standard") {
    EXPECT_EQ(deliver(scheme, id, false, unix_now() - 400).status, 401);
    EXPECT_EQ(deliver(scheme, id, false, unix_now() + 400).status, 401);
  }
  EXPECT_EQ(db_->count("t_" + scheme, id), 0);
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, SchemeHttpTest,
                         ::testing::Values("github", "stripe", "shopify", "slack", "standard", "hmac"),
                         [](const auto& info) { return info.param; });

TEST_F(HttpTest, NoIdIs400AndWritesNothing) {
  SignedRequest r = signer("stripe", kNewSecret)->sign(R"({"object":"event"})", "", unix_now());
  HttpResult res = post(port_, "/webhooks/t_stripe", r);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("/id"), std::string::npos) << res.body;
  r = signer("github", kNewSecret)->sign(R"({"zen":"x"})", "", unix_now());
  res = post(port_, "/webhooks/t_github", r);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("X-GitHub-Delivery"), std::string::npos) << res.body;
}

TEST_F(HttpTest, UnknownProviderIs404) {
  SignedRequest r = signer("github", kNewSecret)->sign("{}", "x", unix_now());
  EXPECT_EQ(post(port_, "/webhooks/nobody", r).status, 404);
  EXPECT_EQ(post(port_, "/webhooks/t_github/extra", r).status, 404);
}

// Refused bodies (chunked, gzip, oversized, no length) never reach the
// database: each is correctly signed and carries an id, yet leaves no row.
TEST_F(HttpTest, RefusedBodiesLeaveNoRow) {
  auto request = [&](const std::string& id, const std::string& extra_headers, const std::string& body_part) {
    SignedRequest s = signer("github", kNewSecret)->sign("{\"a\":1}", id, unix_now());
    std::string req = "POST /webhooks/t_github HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto& [k, v] : s.headers) req += k + ": " + v + "\r\n";
    return req + extra_headers + "\r\n" + body_part;
  };
  std::string chunked = unique_id("chunked"), gzip = unique_id("gzip"), big = unique_id("big"),
              nolen = unique_id("nolen");
  EXPECT_EQ(raw_status(port_, request(chunked, "Transfer-Encoding: chunked\r\n", "7\r\n{\"a\":1}\r\n0\r\n\r\n")), 411);
  EXPECT_EQ(raw_status(port_, request(gzip, "Content-Encoding: gzip\r\nContent-Length: 7\r\n", "{\"a\":1}")), 415);
  EXPECT_EQ(raw_status(port_, request(big, "Content-Length: 2000000\r\n", std::string(70000, ' '))), 413);
  EXPECT_EQ(raw_status(port_, request(nolen, "", "")), 411);
  // The same request with a proper Content-Length is accepted.
  std::string ok = unique_id("ok");
  EXPECT_EQ(raw_status(port_, request(ok, "Content-Length: 7\r\n", "{\"a\":1}")), 200);
  for (const auto& id : {chunked, gzip, big, nolen}) EXPECT_EQ(db_->count("t_github", id), 0) << id;
  EXPECT_EQ(db_->count("t_github", ok), 1);
  // An oversized body through a normal client: 413, nothing stored.
  std::string huge_id = unique_id("huge");
  SignedRequest huge = signer("github", kNewSecret)
                           ->sign("{\"pad\":\"" + std::string(1100000, 'x') + "\"}", huge_id, unix_now());
  HttpResult hr = post(port_, "/webhooks/t_github", huge);
  EXPECT_TRUE(hr.status == 413 || hr.status == 0) << hr.status;
  EXPECT_EQ(db_->count("t_github", huge_id), 0);
}

// A refused body is never read; its bytes must not be taken for the next
// request on the connection (request smuggling / proxy desync).
TEST_F(HttpTest, RefusedBodyIsNotParsedAsTheNextRequest) {
  const std::string smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string& framing : {std::string("Transfer-Encoding: chunked\r\n"),
                                     std::string("Content-Encoding: gzip\r\nContent-Length: 36\r\n"),
                                     std::string("Content-Length: 5000000\r\n")}) {
    std::string req = "POST /webhooks/t_github HTTP/1.1\r\nHost: x\r\n" + framing + "\r\n" + smuggled;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int> statuses = raw_statuses(port_, req);
    ASSERT_EQ(statuses.size(), 1u) << framing;  // no second answer for the smuggled GET
    EXPECT_NE(statuses[0], 200) << framing;
    // The server closed the connection (raw_statuses would wait 3 s otherwise).
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << framing;
  }
}

// The standard-webhooks vector through HTTP with the receiver's clock pinned.
class PinnedClockTest : public HttpTest {
 protected:
  Config config() override {
    Config c = test_config();
    for (auto& p : c.providers)
      if (p.scheme == "standard") p.secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
    return c;
  }
  void SetUp() override {
    REQUIRE_DATABASE();
    db_ = std::make_unique<Db>();
    receiver_ = std::make_unique<Receiver>(config(), [] { return std::int64_t{1614265330}; });
    port_ = receiver_->start();
  }
};

TEST_F(PinnedClockTest, StandardWebhooksPublishedVector) {
  // The vector's id is fixed, so clear it from earlier runs first.
  db_->exec("DELETE FROM inbox.events WHERE provider = 't_standard' AND external_id = 'msg_p5jXN8AQM9LWM0D4loKWxJek'");
  SignedRequest r;
  r.headers = {{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
               {"webhook-timestamp", "1614265330"},
               {"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}};
  r.body = "{\"test\": 2432232314}";
  HttpResult res = post(port_, "/webhooks/t_standard", r);
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(db_->count("t_standard", "msg_p5jXN8AQM9LWM0D4loKWxJek"), 1);
  r.body = "{\"test\": 2432232315}";
  EXPECT_EQ(post(port_, "/webhooks/t_standard", r).status, 401);
}

TEST_F(HttpTest, GitHubPublishedVectorPassesTheSignatureCheck) {
  // The documented body "Hello, World!" is not JSON: the signature passes,
  // so the refusal is 400 (nothing to store), not 401.
  Config c = test_config();
  SignedRequest r;
  r.headers = {{"X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
               {"X-GitHub-Delivery", unique_id("vector")},
               {"Content-Type", "text/plain"}};
  r.body = "Hello, World!";
  receiver_->stop();
  for (auto& p : c.providers)
    if (p.scheme == "github") p.secrets = {"It's a Secret to Everybody"};
  receiver_ = std::make_unique<Receiver>(c);
  port_ = receiver_->start();
  HttpResult res = post(port_, "/webhooks/t_github", r);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("not valid JSON"), std::string::npos);
}

TEST_F(HttpTest, FiftyConcurrentCopiesGiveOneRowAndFifty200s) {
  const std::string id = unique_id("fifty");
  SignedRequest r = signer("stripe", kNewSecret)->sign(body_for("stripe", id), id, unix_now());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i)
    threads.emplace_back([&] {
      if (post(port_, "/webhooks/t_stripe", r).status == 200) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 50);
  EXPECT_EQ(db_->count("t_stripe", id), 1);
  EXPECT_EQ(*db_->scalar("SELECT delivery_count FROM inbox.events WHERE provider = 't_stripe' AND external_id = " +
                         db_->quote(id)),
            "50");
}

TEST_F(HttpTest, SlackFormAndHandshake) {
  const std::string trigger = unique_id("slash");
  Config c = test_config();
  receiver_->stop();
  for (auto& p : c.providers)
    if (p.scheme == "slack") p.id_json_pointer = "/trigger_id";
  receiver_ = std::make_unique<Receiver>(c);
  port_ = receiver_->start();
  SignedRequest form = signer("slack", kNewSecret)
                           ->sign("command=%2Fdeploy&text=%22prod%22+now&trigger_id=" + trigger, "", unix_now());
  HttpResult res = post(port_, "/webhooks/t_slack", form);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(*db_->scalar("SELECT payload ->> 'text' FROM inbox.events WHERE provider = 't_slack' AND external_id = " + db_->quote(trigger)),
            "\"prod\" now");
  SignedRequest hello = signer("slack", kNewSecret)
                            ->sign(R"({"type":"url_verification","challenge":"abc123","token":"x"})", "", unix_now());
  res = post(port_, "/webhooks/t_slack", hello);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, R"({"challenge":"abc123"})");
}

// TCP_NODELAY: without it on the server, each keep-alive request waited
// ~40 ms (Nagle plus delayed ACK). Twenty deliveries on one connection must
// take far less.
TEST_F(HttpTest, KeepAliveRequestsAreNotDelayed) {
  httplib::Client cli("127.0.0.1", port_);
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);  // the client's side of the same problem
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    const std::string id = unique_id("keepalive");
    SignedRequest r = signer("github", kNewSecret)->sign(body_for("github", id), id, unix_now());
    httplib::Headers h;
    for (const auto& [k, v] : r.headers)
      if (k != "Content-Type") h.emplace(k, v);
    auto res = cli.Post("/webhooks/t_github", h, r.body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));
}

TEST_F(HttpTest, OpsEndpoints) {
  EXPECT_EQ(get(port_, "/healthz").status, 200);
  EXPECT_EQ(get(port_, "/readyz").status, 200);
  deliver("github", unique_id("metrics"));
  SignedRequest bad = signer("github", "nope")->sign("{}", "x", unix_now());
  post(port_, "/webhooks/t_github", bad);
  const std::vector<std::string> needles = {
      "inbox_receiver_requests_total{provider=\"t_github\",outcome=\"accepted\",code=\"200\"}",
      "inbox_receiver_requests_total{provider=\"t_github\",outcome=\"bad_signature\",code=\"401\"}",
      "inbox_receiver_signature_failures_total{provider=\"t_github\"}",
      "inbox_receiver_request_duration_seconds_bucket{le=\"+Inf\"}",
      "inbox_receiver_batch_events_count"};
  auto all_present = [&](const std::string& body) {
    for (const auto& needle : needles)
      if (body.find(needle) == std::string::npos) return false;
    return true;
  };
  // A request is counted by the access logger, which runs after the answer
  // has been sent: the client can be faster than the count.
  HttpResult m = get(port_, "/metrics");
  for (int i = 0; i < 40 && !all_present(m.body); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    m = get(port_, "/metrics");
  }
  EXPECT_EQ(m.status, 200);
  for (const auto& needle : needles) EXPECT_NE(m.body.find(needle), std::string::npos) << needle;
}

}  // namespace

// Hostile clients and database faults against the real listener and the
// real database (issue 10): every case is a real TCP conversation.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "intake/http_server.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using Clock = std::chrono::steady_clock;

namespace {

// A raw signed request for t_github (id in X-GitHub-Delivery).
std::string github_request(const std::string& id, const std::string& body, const std::string& extra = "") {
  SignedRequest s = signer("github", kNewSecret)->sign(body, id, unix_now());
  std::string req = "POST /webhooks/t_github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  for (const auto& [k, v] : s.headers) req += k + ": " + v + "\r\n";
  return req + extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    db_ = std::make_unique<Db>();
  }
  void start(Config c) {
    receiver_ = std::make_unique<Receiver>(std::move(c));
    port_ = receiver_->start();
  }
  void TearDown() override {
    if (receiver_) receiver_->stop();
  }
  HttpResult deliver_github(const std::string& id, const std::string& body = "{\"a\":1}") {
    return post(port_, "/webhooks/t_github", signer("github", kNewSecret)->sign(body, id, unix_now()));
  }
  std::string stored(const std::string& sql_expr, const std::string& id) {
    return db_->scalar("SELECT " + sql_expr + " FROM inbox.events WHERE provider = 't_github' AND external_id = " +
                       db_->quote(id))
        .value_or("<none>");
  }

  std::unique_ptr<Db> db_;
  std::unique_ptr<Receiver> receiver_;
  int port_ = 0;
};

// 200 connections dripping a head one byte at a time do not slow signed
// deliveries, and are cut off at the head deadline.
TEST_F(HostileTest, SlowDripDoesNotStopDeliveries) {
  Config c = test_config();
  c.read_timeout_ms = 2000;
  start(c);
  std::vector<int> drip;
  for (int i = 0; i < 200; ++i) {
    int fd = connect_loopback(port_);
    ASSERT_GE(fd, 0);
    drip.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread dripper([&] {
    const std::string head = "POST /webhooks/t_github HTTP/1.1\r\nX-Slow: ";
    for (std::size_t i = 0; !done && i < 40; ++i) {
      for (int fd : drip) ::send(fd, head.data() + (i % head.size()), 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (int i = 0; i < 10; ++i) {
    std::string id = unique_id("drip");
    auto t0 = Clock::now();
    HttpResult r = deliver_github(id);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
    EXPECT_EQ(db_->count("t_github", id), 1);
  }
  // Past the head deadline every dripping connection has been closed.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  done = true;
  dripper.join();
  int closed = 0;
  for (int fd : drip) {
    pollfd p{fd, POLLIN, 0};
    char b;
    if (::poll(&p, 1, 1000) == 1 && ::recv(fd, &b, 1, MSG_DONTWAIT) <= 0) ++closed;
    ::close(fd);
  }
  EXPECT_EQ(closed, 200);
}

// Many small headers, or a few huge ones: 431 before anything else, and the
// memory stays flat.
TEST_F(HostileTest, HeaderBombsRefusedWith431AndMemoryFlat) {
  start(test_config());
  std::string small;
  for (int i = 0; i < 200; ++i) small += "X-H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(raw_status(port_, "POST /webhooks/t_github HTTP/1.1\r\n" + small + "\r\n"), 431);
  // The bomb is built before measuring (it lives in this process too).
  std::string bomb = "POST /webhooks/t_github HTTP/1.1\r\n";
  while (bomb.size() < (12u << 20)) bomb += "X-Bomb: " + std::string(40, 'b') + "\r\n";
  EXPECT_EQ(raw_status(port_, bomb), 431);  // warm up: threads, buffers
  long before = rss_kb();
  std::vector<std::thread> bombs;
  for (int t = 0; t < 4; ++t) bombs.emplace_back([&] { EXPECT_EQ(raw_status(port_, bomb), 431); });
  for (auto& t : bombs) t.join();
  long after = rss_kb();
  // The receiver held at most 16 KB of each head (12 MB each before).
  EXPECT_LT(after - before, 20 * 1024) << before << " kB -> " << after << " kB";
  // A signed delivery with a header over the byte limit: 431, nothing stored.
  std::string id = unique_id("bigheader");
  EXPECT_EQ(raw_status(port_, github_request(id, "{}", "X-Big: " + std::string(20000, 'x') + "\r\n")), 431);
  EXPECT_EQ(db_->count("t_github", id), 0);
}

// Two or three requests in one write: all answered, in order, all stored.
TEST_F(HostileTest, PipelinedRequestsAllAnsweredAndStored) {
  start(test_config());
  std::vector<std::string> ids = {unique_id("pipe"), unique_id("pipe"), unique_id("pipe")};
  std::string bytes;
  for (const auto& id : ids) bytes += github_request(id, "{\"n\":1}");
  bytes += "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::vector<int> statuses = raw_statuses(port_, bytes);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200, 200}));
  for (const auto& id : ids) EXPECT_EQ(db_->count("t_github", id), 1) << id;
}

// The two smuggling forms, and obs-fold: 400, nothing stored.
TEST_F(HostileTest, SmugglingFormsRefusedWith400) {
  start(test_config());
  std::string a = unique_id("te-space"), b = unique_id("two-cl"), f = unique_id("fold");
  std::string body = "{\"a\":1}";
  std::string te = github_request(a, body);
  te.insert(te.find("\r\n") + 2, "Transfer-Encoding : chunked\r\n");
  EXPECT_EQ(raw_status(port_, te), 400);
  std::string two = github_request(b, body, "Content-Length: 3\r\n");
  EXPECT_EQ(raw_status(port_, two), 400);
  std::string fold = github_request(f, body, "X-Folded: a\r\n b\r\n");
  EXPECT_EQ(raw_status(port_, fold), 400);
  for (const auto& id : {a, b, f}) EXPECT_EQ(db_->count("t_github", id), 0) << id;
}

// Header values are raw: X-%41 and X-A are two events; a Standard Webhooks
// id with % verifies.
TEST_F(HostileTest, PercentSignsKeptByteForByte) {
  start(test_config());
  std::string base = unique_id("pct");
  std::string encoded = base + "-%41", plain = base + "-A";
  EXPECT_EQ(raw_status(port_, github_request(encoded, "{\"v\":1}")), 200);
  EXPECT_EQ(raw_status(port_, github_request(plain, "{\"v\":2}")), 200);
  EXPECT_EQ(stored("payload->>'v'", encoded), "1");
  EXPECT_EQ(stored("payload->>'v'", plain), "2");
  std::string sw = unique_id("sw") + "%2F%00";
  SignedRequest s = signer("standard", kStandardNew)->sign("{\"type\":\"t\"}", sw, unix_now());
  std::string req = "POST /webhooks/t_standard HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  for (const auto& [k, v] : s.headers) req += k + ": " + v + "\r\n";
  req += "Content-Length: " + std::to_string(s.body.size()) + "\r\n\r\n" + s.body;
  EXPECT_EQ(raw_status(port_, req), 200);
  EXPECT_EQ(db_->count("t_standard", sw), 1);
}

// A body under max_body_bytes whose jsonb form is over
// pg_inbox.max_payload_size: a definitive 413, counted, never 503.
TEST_F(HostileTest, JsonbOversizeIs413) {
  start(test_config());
  std::string body = "{\"n\":[";
  while (body.size() < 400000) body += "1,";
  body += "1]}";
  std::string id = unique_id("oversize");
  HttpResult r = deliver_github(id, body);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(r.retry_after, "");
  EXPECT_EQ(r.body.find("max_payload_size"), std::string::npos) << "database text sent to the sender";
  EXPECT_EQ(db_->count("t_github", id), 0);
  EXPECT_NE(receiver_->metrics().render().find("outcome=\"too_large\",code=\"413\""), std::string::npos);
}

// Numbers beyond 64 bits and double range are valid JSON and jsonb keeps them.
TEST_F(HostileTest, HugeNumbersStoredExactly) {
  start(test_config());
  std::string id = unique_id("huge-number");
  HttpResult r = deliver_github(id, "{\"big\":99999999999999999999,\"far\":1e309,\"neg\":-1E-400}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(stored("payload->>'big'", id), "99999999999999999999");
  EXPECT_EQ(stored("(payload->'far')::numeric = 1e309", id), "t");
  // An id that is a huge number, found by the JSON pointer.
  std::string big_id = "123456789012345678901234567890";
  db_->exec("DELETE FROM inbox.events WHERE provider = 't_stripe' AND external_id = '" + big_id + "'");
  SignedRequest s = signer("stripe", kNewSecret)->sign("{\"id\":" + big_id + ",\"x\":1e999}", "", unix_now());
  EXPECT_EQ(post(port_, "/webhooks/t_stripe", s).status, 200);
  EXPECT_EQ(db_->count("t_stripe", big_id), 1);
  // Still strict: not JSON is 400.
  EXPECT_EQ(deliver_github(unique_id("notjson"), "{\"a\":01}").status, 400);
}

// A NUL (raw) in an unsigned header: stored escaped, counted; %00 is text.
TEST_F(HostileTest, NulInUnsignedHeaderStoredEscaped) {
  start(test_config());
  std::string id = unique_id("nul");
  static const char kHeaders[] = "X-Note: a\0b\r\nX-Pct: c%00d\r\n";
  std::string req = github_request(id, "{\"a\":1}", std::string(kHeaders, sizeof kHeaders - 1));
  EXPECT_EQ(raw_status(port_, req), 200);
  EXPECT_EQ(stored("headers->>'x-note'", id), "a\\u0000b");
  EXPECT_EQ(stored("headers->>'x-pct'", id), "c%00d");
  EXPECT_NE(receiver_->metrics().render().find("inbox_receiver_header_nul_bytes_total 1"), std::string::npos);
}

// Refused before routing: logged and counted with its own empty provider,
// not the previous request's.
TEST_F(HostileTest, RefusalsBeforeRoutingCountedWithoutProvider) {
  start(test_config());
  EXPECT_EQ(deliver_github(unique_id("before")).status, 200);
  std::string bytes = "POST /webhooks/t_github HTTP/1.1\r\n";
  for (int i = 0; i < 150; ++i) bytes += "X: y\r\n";
  EXPECT_EQ(raw_status(port_, bytes + "\r\n"), 431);
  std::string m = receiver_->metrics().render();
  EXPECT_NE(m.find("provider=\"-\",outcome=\"refused_head\",code=\"431\""), std::string::npos) << m;
  EXPECT_EQ(m.find("provider=\"t_github\",outcome=\"refused_head\""), std::string::npos) << m;
}

// Ingest failing (here: a login without the inbox_receiver grant) is 503
// with a generic reason, and /readyz says 503 too.
TEST_F(HostileTest, IngestFailingIsGeneric503AndNotReady) {
  db_->exec("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inbox_t_nogrant') THEN "
            "CREATE ROLE inbox_t_nogrant LOGIN PASSWORD 'nogrant'; END IF; END $$");
  Config c = test_config();
  c.database_url = login_database_url("inbox_t_nogrant", "nogrant");
  start(c);
  EXPECT_EQ(get(port_, "/readyz").status, 503);
  HttpResult r = deliver_github(unique_id("nogrant"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "{\"error\":\"temporarily unavailable\"}");
  EXPECT_FALSE(r.retry_after.empty());
  EXPECT_EQ(get(port_, "/readyz").status, 503);
  EXPECT_EQ(get(port_, "/healthz").status, 200);
}

// Expect: 100-continue over the limit: 413 without 100 Continue.
TEST_F(HostileTest, ExpectContinueAnsweredAfterTheLengthCheck) {
  start(test_config());
  int fd = connect_loopback(port_);
  ASSERT_GE(fd, 0);
  std::string head = "POST /webhooks/t_github HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ::close(fd);
  ASSERT_GT(n, 12);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 413");
}

}  // namespace

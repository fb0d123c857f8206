// The backfill worker against a real database and a stand-in for the
// provider's "get event" API on 127.0.0.1: 200 -> ingested with source
// 'backfill', 404/410 -> tombstoned, errors -> retried, leases fence reports;
// and the [provider.backfill] / [backfill] configuration.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backfill/backfill.h"
#include "common/api_url.h"
#include "intake/http_server.h"
#include "stand_in_api.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using namespace std::chrono_literals;

namespace {


const char* const kToken = "Bearer backfill-token-for-tests";

std::string base_toml(const std::string& backfill_table, const std::string& top = "") {
  return "database_url = \"postgresql://x@127.0.0.1/db\"\n" + top +
         "[[provider]]\nname = \"shop\"\nscheme = \"stripe\"\nsecrets = [\"s\"]\n" + backfill_table;
}

std::string config_error(const std::string& toml) {
  try {
    parse_config(toml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BackfillConfig, ProviderBackfillTable) {
  setenv("INBOX_TEST_BACKFILL_TOKEN", "Bearer from-env", 1);
  Config c = parse_config(base_toml(
      "[provider.backfill]\nurl = \"https://api.example.com/v1/events/{id}?expand=data\"\n"
      "auth_header = \"Authorization\"\nauth_value = { env = \"INBOX_TEST_BACKFILL_TOKEN\" }\n"
      "timeout_ms = 3000\npayload_json_pointer = \"/event\"\n",
      "[backfill]\nenabled = true\nlease_s = 30\nbatch_size = 50\npoll_interval_ms = 1000\n"));
  ASSERT_TRUE(c.providers[0].backfill);
  const BackfillApiConfig& b = *c.providers[0].backfill;
  EXPECT_EQ(b.auth_header, "Authorization");
  EXPECT_EQ(b.auth_value, "Bearer from-env");
  EXPECT_EQ(b.timeout_ms, 3000);
  EXPECT_EQ(b.payload_json_pointer, "/event");
  EXPECT_TRUE(c.backfill.enabled);
  EXPECT_EQ(c.backfill.lease_s, 30);
  EXPECT_EQ(c.backfill.batch_size, 50);
  // Without the table the provider is simply not backfilled.
  EXPECT_FALSE(parse_config(base_toml("")).providers[0].backfill);
}

TEST(BackfillConfig, BadTablesAreClearErrors) {
  auto error_of = [](const std::string& table, const std::string& top = "") {
    return config_error(base_toml(table, top));
  };
  EXPECT_NE(error_of("[provider.backfill]\ntimeout_ms = 1000\n").find("\"url\" is required"), std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://api.example.com/v1/events\"\n").find("must contain {id}"),
            std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"ftp://x/{id}\"\n").find("http:// or https://"), std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://{id}.example.com/e\"\n").find("host part"),
            std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://x/{id}\"\nauth_header = \"Authorization\"\n")
                .find("\"auth_header\" and \"auth_value\""),
            std::string::npos);
  unsetenv("INBOX_TEST_UNSET_TOKEN");
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://x/{id}\"\nauth_header = \"A\"\n"
                     "auth_value = { env = \"INBOX_TEST_UNSET_TOKEN\" }\n")
                .find("INBOX_TEST_UNSET_TOKEN is not set"),
            std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://x/{id}\"\npayload_json_pointer = \"data\"\n")
                .find("JSON pointer"),
            std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://x/{id}\"\nuri = 1\n").find("unknown key \"uri\""),
            std::string::npos);
  EXPECT_NE(error_of("[provider.backfill]\nurl = \"https://x/{id}\"\ntimeout_ms = 60000\n", "[backfill]\nlease_s = 60\n")
                .find("lease_s (60 s) must be longer than twice"),
            std::string::npos);
  EXPECT_NE(error_of("", "[backfill]\nenabled = true\n").find("no provider has a [provider.backfill]"),
            std::string::npos);
  EXPECT_NE(error_of("", "[backfill]\nbatch_size = 0\n").find("\"batch_size\" must be between 1 and 1000"),
            std::string::npos);
}

TEST(BackfillUrlTest, IdsAreEncodedIntoThePath) {
  BackfillUrl u = parse_backfill_url("https://api.example.com:8443/v1/events/{id}?x={id}&key=k");
  EXPECT_EQ(u.origin, "https://api.example.com:8443");
  EXPECT_EQ(fill_path(u.path_template, "a/b c?d&e"), "/v1/events/a%2Fb%20c%3Fd%26e?x=a%2Fb%20c%3Fd%26e&key=k");
  EXPECT_EQ(fill_path("/e/{id}", "evt_1-A.b~"), "/e/evt_1-A.b~");
  EXPECT_EQ(path_for_humans("/v1/events/x?key=secret"), "/v1/events/x");
  EXPECT_EQ(parse_retry_after("120"), 120);
  EXPECT_EQ(parse_retry_after("99999"), 3600);
  EXPECT_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));
}

class BackfillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    static std::atomic<int> n{0};
    provider_ = "t_bf_" + run_id() + "_" + std::to_string(++n);
    db_ = std::make_unique<Db>();
    db_->exec("SELECT inbox.register_provider(" + db_->quote(provider_) + ")");
  }

  Config config(int timeout_ms = 2000) const {
    Config c;
    c.database_url = worker_database_url();
    ProviderConfig p = test_provider("stripe");
    p.name = provider_;
    BackfillApiConfig b;
    b.url = api_.url_template();
    b.auth_header = "Authorization";
    b.auth_value = kToken;
    b.timeout_ms = timeout_ms;
    p.backfill = b;
    c.providers.push_back(p);
    c.backfill.batch_size = 2;  // several claims per drain
    return c;
  }

  void request(const std::string& id) {
    db_->exec("INSERT INTO inbox.backfill_requests (provider, external_id) VALUES (" + db_->quote(provider_) +
              ", " + db_->quote(id) + ")");
  }

  BackfillStats drain(const Config& c) {
    BackfillWorker worker(c);
    BackfillStats stats;
    std::string error;
    EXPECT_TRUE(worker.drain(stats, error)) << error;
    return stats;
  }
  BackfillStats drain() { return drain(config()); }

  std::string field(const std::string& id, const std::string& column) {
    return db_->scalar("SELECT " + column + " FROM inbox.backfill_requests WHERE provider = " +
                       db_->quote(provider_) + " AND external_id = " + db_->quote(id))
        .value_or("(null)");
  }
  std::string event_field(const std::string& id, const std::string& column) {
    return db_->scalar("SELECT " + column + " FROM inbox.events WHERE provider = " + db_->quote(provider_) +
                       " AND external_id = " + db_->quote(id))
        .value_or("(none)");
  }
  std::string tombstone_reason(const std::string& id) {
    return db_->scalar("SELECT reason FROM inbox.tombstones WHERE provider = " + db_->quote(provider_) +
                       " AND external_id = " + db_->quote(id))
        .value_or("(none)");
  }
  void make_due(const std::string& id) {
    db_->exec("UPDATE inbox.backfill_requests SET next_attempt_at = now() WHERE provider = " +
              db_->quote(provider_) + " AND external_id = " + db_->quote(id));
  }

  std::string provider_;
  std::unique_ptr<Db> db_;
  StandInApi api_;
};

TEST_F(BackfillTest, FetchedIsIngestedAndNotFoundIsTombstoned) {
  api_.event("evt_1", "{\"id\":\"evt_1\",\"amount\":100}");
  api_.event("evt_2", "{\"id\":\"evt_2\",\"amount\":200}");
  api_.event("odd/id ?&", "{\"odd\":true}");
  api_.always("gone_1", {410, "{}", "", 0});
  for (const char* id : {"evt_1", "evt_2", "odd/id ?&", "never_1", "gone_1"}) request(id);

  BackfillStats s = drain();
  EXPECT_EQ(s.fetched, 3);
  EXPECT_EQ(s.not_found, 2);
  EXPECT_EQ(s.handled(), 5);

  for (const char* id : {"evt_1", "evt_2", "odd/id ?&"}) {
    EXPECT_EQ(db_->count(provider_, id), 1) << id;
    EXPECT_EQ(event_field(id, "source"), "backfill") << id;
    EXPECT_EQ(field(id, "status"), "fetched") << id;
  }
  EXPECT_EQ(event_field("evt_2", "payload ->> 'amount'"), "200");
  EXPECT_EQ(event_field("odd/id ?&", "payload ->> 'odd'"), "true");
  EXPECT_EQ(field("never_1", "status"), "not_found");
  EXPECT_EQ(tombstone_reason("never_1"), "HTTP 404 from GET /v1/events/never_1");
  EXPECT_EQ(field("gone_1", "status"), "not_found");
  EXPECT_EQ(tombstone_reason("gone_1"), "HTTP 410 from GET /v1/events/gone_1");
  EXPECT_EQ(db_->count(provider_, "never_1"), 0);

  // Every call carried the auth header; the odd id reached the API whole.
  auto calls = api_.calls();
  ASSERT_EQ(calls.size(), 5u);
  bool odd_seen = false;
  for (const auto& c : calls) {
    EXPECT_EQ(c.authorization, kToken) << c.id;
    odd_seen = odd_seen || c.id == "odd/id ?&";
  }
  EXPECT_TRUE(odd_seen);

  // Nothing is left: a second drain calls nobody.
  EXPECT_EQ(drain().handled(), 0);
  EXPECT_EQ(api_.calls().size(), 5u);
}

TEST_F(BackfillTest, WrappedPayloadIsPickedByPointer) {
  api_.event("evt_w", "{\"object\":\"wrapper\",\"data\":{\"id\":\"evt_w\",\"n\":7}}");
  api_.event("evt_missing", "{\"object\":\"wrapper\"}");
  request("evt_w");
  request("evt_missing");
  Config c = config();
  c.providers[0].backfill->payload_json_pointer = "/data";
  BackfillStats s = drain(c);
  EXPECT_EQ(s.fetched, 1);
  EXPECT_EQ(s.retried, 1);
  EXPECT_EQ(event_field("evt_w", "payload::text"), "{\"n\": 7, \"id\": \"evt_w\"}");
  EXPECT_EQ(field("evt_missing", "last_error"), "HTTP 200 without a value at /data");
}

TEST_F(BackfillTest, ErrorsAreRetriedWithBackoffThenSucceed) {
  api_.script("evt_flaky", {{500, "{}", "", 0}});
  api_.event("evt_flaky", "{\"id\":\"evt_flaky\"}");
  api_.always("evt_busy", {429, "{}", "120", 0});
  api_.always("evt_garbage", {200, "<html>not json</html>", "", 0});
  api_.always("evt_slow", {200, "{}", "", 60000});  // answers only when the stand-in stops
  api_.always("evt_denied", {401, "{}", "", 0});
  api_.always("evt_huge", {200, "\"" + std::string(kMaxResponseBytes, 'x') + "\"", "", 0});
  api_.always("evt_nul", {200, "{\"s\":\"a\\u0000b\"}", "", 0});  // valid JSON that jsonb refuses
  for (const char* id : {"evt_flaky", "evt_busy", "evt_garbage", "evt_slow", "evt_denied", "evt_huge", "evt_nul"})
    request(id);

  // The timeout is the default, not a short one: every other answer (16 MiB
  // included) must arrive within it even on a loaded machine; only evt_slow never does.
  BackfillStats s = drain(config(2000));
  EXPECT_EQ(s.retried, 7);
  EXPECT_EQ(s.fetched, 0);
  EXPECT_EQ(field("evt_flaky", "status"), "pending");
  EXPECT_EQ(field("evt_flaky", "last_error"), "HTTP 500");
  // The SQL's backoff: 15..30 s after the first attempt; Retry-After as given.
  EXPECT_EQ(field("evt_flaky", "next_attempt_at > now() + interval '10 seconds'"), "t");
  EXPECT_EQ(field("evt_busy", "last_error"), "HTTP 429");
  EXPECT_EQ(field("evt_busy", "next_attempt_at BETWEEN now() + interval '110 seconds' AND now() + interval '121 seconds'"),
            "t");
  EXPECT_EQ(field("evt_garbage", "last_error"), "HTTP 200 with a body that is not JSON");
  EXPECT_NE(field("evt_slow", "last_error").find("no answer from the provider"), std::string::npos)
      << field("evt_slow", "last_error");
  EXPECT_EQ(field("evt_denied", "last_error"), "HTTP 401");
  EXPECT_EQ(field("evt_huge", "last_error"), "answer larger than 16 MiB");
  EXPECT_EQ(field("evt_nul", "last_error"), "HTTP 200 but the database refused the event: SQLSTATE 22P05");
  EXPECT_EQ(db_->count(provider_, "evt_garbage"), 0);

  // Not due yet: nothing is called.
  size_t calls = api_.calls().size();
  EXPECT_EQ(drain().handled(), 0);
  EXPECT_EQ(api_.calls().size(), calls);

  // Due again: the 500 is now a 200.
  make_due("evt_flaky");
  s = drain();
  EXPECT_EQ(s.fetched, 1);
  EXPECT_EQ(field("evt_flaky", "status"), "fetched");
  EXPECT_EQ(field("evt_flaky", "attempts"), "2");
  EXPECT_EQ(event_field("evt_flaky", "source"), "backfill");
}

TEST_F(BackfillTest, ConnectErrorIsRetriedAndMaxAttemptsGivesUp) {
  Config c = config();
  c.providers[0].backfill->url = "http://127.0.0.1:" + std::to_string(unused_loopback_port()) + "/v1/events/{id}";
  c.backfill.max_attempts = 2;
  request("evt_unreachable");
  EXPECT_EQ(drain(c).retried, 1);
  EXPECT_NE(field("evt_unreachable", "last_error").find("no answer from the provider"), std::string::npos);
  make_due("evt_unreachable");
  EXPECT_EQ(drain(c).gave_up, 1);
  EXPECT_EQ(field("evt_unreachable", "status"), "gave_up");
}

// https goes through OpenSSL with certificate verification: a self-signed
// certificate on a loopback stand-in is refused (nothing is fetched, retried).
TEST_F(BackfillTest, HttpsRefusesAnUntrustedCertificate) {
  const std::string dir = "/tmp/inbox-backfill-tls-" + run_id();
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  ASSERT_EQ(std::system(("mkdir -p " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key +
                         " -out " + cert + " -days 1 -subj /CN=127.0.0.1 2>/dev/null")
                            .c_str()),
            0);
  httplib::SSLServer tls(cert.c_str(), key.c_str());
  ASSERT_TRUE(tls.is_valid());
  std::atomic<int> served{0};
  tls.Get(R"(/v1/events/(.+))", [&](const httplib::Request&, httplib::Response& res) {
    ++served;
    res.set_content("{}", "application/json");
  });
  int port = tls.bind_to_any_port("127.0.0.1");
  std::thread t([&] { tls.listen_after_bind(); });
  while (!tls.is_running()) std::this_thread::sleep_for(1ms);

  Config c = config();
  c.providers[0].backfill->url = "https://127.0.0.1:" + std::to_string(port) + "/v1/events/{id}";
  request("evt_tls");
  EXPECT_EQ(drain(c).retried, 1);
  tls.stop();
  t.join();
  std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(field("evt_tls", "last_error"), "no answer from the provider: TLS certificate not trusted");
  EXPECT_EQ(served.load(), 0);
  EXPECT_EQ(db_->count(provider_, "evt_tls"), 0);
}

// While the worker waits for the API, its lease expires and another worker
// claims the request: the late report changes nothing.
TEST_F(BackfillTest, LostLeaseCannotCloseTheRequest) {
  api_.event("evt_stolen", "{\"id\":\"evt_stolen\"}");
  request("evt_stolen");
  request("never_stolen");
  std::string p = provider_;
  api_.on_request([p](const std::string& id) {
    Db other;
    other.exec("UPDATE inbox.backfill_requests SET lease_expires_at = now() - interval '1 second' "
               "WHERE provider = " + other.quote(p) + " AND external_id = " + other.quote(id));
    other.exec("SELECT * FROM inbox.claim_backfill(10, '1 minute', " + other.quote(p) + ")");
  });
  BackfillStats s = drain();
  EXPECT_EQ(s.lost, 2);
  EXPECT_EQ(s.fetched + s.not_found, 0);
  EXPECT_EQ(db_->count(provider_, "evt_stolen"), 0);
  EXPECT_EQ(tombstone_reason("never_stolen"), "(none)");
  for (const char* id : {"evt_stolen", "never_stolen"}) {
    EXPECT_EQ(field(id, "status"), "leased") << id;
    EXPECT_EQ(field(id, "attempts"), "2") << id;
  }
}

// [backfill] enabled = true: the same worker as a thread next to serve,
// counted in /metrics.
TEST_F(BackfillTest, RunsInsideServeAndCountsOutcomes) {
  api_.event("evt_serve", "{\"id\":\"evt_serve\"}");
  request("evt_serve");
  request("never_serve");
  Config c = test_config();
  Config w = config();
  c.providers.push_back(w.providers[0]);
  c.backfill.enabled = true;
  c.backfill.database_url = worker_database_url();
  c.backfill.poll_interval_ms = 50;
  Receiver receiver(c);
  int port = receiver.start();
  {
    BackfillThread worker(c, &receiver.metrics());
    for (int i = 0; i < 100 && field("never_serve", "status") != "not_found"; ++i) std::this_thread::sleep_for(50ms);
    for (int i = 0; i < 100 && field("evt_serve", "status") != "fetched"; ++i) std::this_thread::sleep_for(50ms);
  }
  std::string m = get(port, "/metrics").body;
  receiver.stop();
  EXPECT_EQ(field("evt_serve", "status"), "fetched");
  EXPECT_NE(m.find("inbox_receiver_backfill_total{provider=\"" + provider_ + "\",outcome=\"fetched\"} 1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("inbox_receiver_backfill_total{provider=\"" + provider_ + "\",outcome=\"not_found\"} 1"),
            std::string::npos);
}

}  // namespace

// The forwarder (inbox-receiver forward), as a real process against the real
// database and real HTTP consumers: signing, outcomes, the kill -9 between
// the consumer's 2xx and the completion, ordered routes, and signatures
// verified by the Standard Webhooks reference library (node).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "forward/route_config.h"
#include "forward/webhook_signer.h"
#include "test_support.h"

using namespace inbox::test;
using namespace std::chrono_literals;

namespace {

const char* const kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// A login (password = name) that is a member of `roles` and nothing else,
// created once per process.
std::string login_in(const std::string& name, const std::string& roles) {
  static std::mutex mu;
  static std::set<std::string> made;
  std::lock_guard<std::mutex> lock(mu);
  if (made.insert(name).second) {
    Db db;
    db.exec("DO $$ BEGIN CREATE ROLE " + name + " LOGIN PASSWORD '" + name + "' IN ROLE " + roles +
            "; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  }
  return login_database_url(name, name);
}

// The forwarder's least privilege; provider routes need inbox_worker as well.
std::string forwarder_database_url() { return login_in("inbox_forward_test", "inbox_forwarder"); }
std::string event_forwarder_database_url() {
  return login_in("inbox_forward_events_test", "inbox_forwarder, inbox_worker");
}

// A consumer stand-in on 127.0.0.1: records every request, answers what
// `answer` says (200 by default) and applies each webhook-id once.
class Consumer {
 public:
  struct Request {
    std::string id, attempt, timestamp, signature, replay, topic, tenant, body;
  };
  using AnswerFn = std::function<int(const Request&, int n)>;

  explicit Consumer(AnswerFn answer = nullptr) : answer_(std::move(answer)) {
    server_.Post("/hooks", [this](const httplib::Request& req, httplib::Response& res) {
      Request r{req.get_header_value("webhook-id"),        req.get_header_value("webhook-attempt"),
                req.get_header_value("webhook-timestamp"), req.get_header_value("webhook-signature"),
                req.get_header_value("x-inbox-replay"),    req.get_header_value("x-inbox-topic"),
                req.get_header_value("x-tenant"),          req.body};
      int n;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(r);
        n = static_cast<int>(requests_.size());
      }
      int status = answer_ ? answer_(r, n) : 200;
      if (status >= 200 && status < 300) {
        std::lock_guard<std::mutex> lock(mu_);
        applied_.insert(r.id);
      }
      res.status = status;
      res.set_content("ok", "text/plain");
    });
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };  // a thread per keep-alive connection
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Consumer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hooks"; }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::set<std::string> applied() {
    std::lock_guard<std::mutex> lock(mu_);
    return applied_;
  }

 private:
  AnswerFn answer_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Request> requests_;
  std::set<std::string> applied_;
};

class ForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/inbox-forward-" + run_id();
    std::system(("mkdir -p " + dir_).c_str());
    // Topics are lower case: one topic per test and run.
    topic_ = "t." + run_id() + "." + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : topic_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  void TearDown() override {
    for (pid_t pid : children_) terminate_and_wait(pid);
    std::system(("rm -rf " + dir_).c_str());
  }

  // A config with one route for topic_; `extra` adds route keys.
  std::string write_config(const std::string& url, const std::string& extra = "",
                           const std::string& secret = kSecret, int lease_s = 5) {
    std::string path = dir_ + "/forward-" + std::to_string(++configs_) + ".toml";
    std::ofstream(path) << "database_url = " << toml_string(forwarder_database_url()) << "\n"
                        << "[forward]\npoll_interval_ms = 50\n"
                        << "[[route]]\nname = \"billing\"\ntopics = [" << toml_string(topic_) << "]\n"
                        << "url = " << toml_string(url) << "\nsecret = " << toml_string(secret) << "\n"
                        << "timeout_ms = 2000\nlease_s = " << lease_s << "\nbackoff_base_ms = 100\nbackoff_max_s = 1\n"
                        << extra;
    return path;
  }

  // A config with one provider route (the events of `provider`) to `url`.
  std::string write_provider_route(const std::string& provider, const std::string& url) {
    std::string path = dir_ + "/events-" + std::to_string(++configs_) + ".toml";
    std::ofstream(path) << "database_url = " << toml_string(event_forwarder_database_url()) << "\n"
                        << "[[route]]\nname = \"events\"\nprovider = " << toml_string(provider) << "\n"
                        << "url = " << toml_string(url) << "\nsecret = " << toml_string(kSecret) << "\n";
    return path;
  }

  int run_once(const std::string& config, std::string* out = nullptr) {
    int rc = -1;
    std::string text = run_command(std::string(INBOX_RECEIVER_BIN) + " forward --once --config " + config + " 2>&1", &rc);
    if (out) *out = text;
    return rc;
  }

  pid_t spawn(const std::string& config, const char* command = "forward") {
    std::string log = dir_ + "/forward-" + std::to_string(children_.size()) + ".log";
    pid_t pid = fork();
    if (pid == 0) {
      if (!freopen(log.c_str(), "w", stdout)) _exit(126);
      execl(INBOX_RECEIVER_BIN, INBOX_RECEIVER_BIN, command, "--config", config.c_str(), nullptr);
      _exit(127);
    }
    children_.push_back(pid);
    return pid;
  }

  std::string publish(Db& db, const std::string& key, const std::string& payload) {
    return *db.scalar("SELECT inbox.publish(" + db.quote(topic_) + ", " + (key.empty() ? "NULL" : db.quote(key)) +
                      ", " + db.quote(payload) + ")");
  }

  std::string state(Db& db, const std::string& id) {
    return db.scalar("SELECT status || ' ' || attempts FROM inbox.outbox_delivery WHERE message_id = " + id)
        .value_or("none");
  }
  std::string history(Db& db, const std::string& id) {
    return db.scalar("SELECT string_agg(attempt || ':' || outcome || coalesce(':' || status_code, ''), ',' "
                     "ORDER BY attempt) FROM inbox.outbox_attempts WHERE message_id = " + id)
        .value_or("");
  }

  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 15s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return done();
  }

  std::string dir_;
  std::string topic_;
  std::vector<pid_t> children_;
  int configs_ = 0;
};

TEST(ForwardConfigTest, RoutesAreChecked) {
  auto parse = [](const std::string& text) { return inbox::parse_forward_config(text, "t.toml", ""); };
  const std::string ok = "url = \"http://127.0.0.1:1/h\"\nsecret = \"" + std::string(kSecret) + "\"\n";
  EXPECT_EQ(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\n" + ok).routes.size(), 1u);
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\n" + ok), inbox::ConfigError);  // neither topics nor provider
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\nprovider = \"p\"\n" + ok), inbox::ConfigError);
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\n" + ok + "[[route]]\nname = \"b\"\ntopics = [\"x\"]\n" + ok),
               inbox::ConfigError);  // a topic belongs to one route
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\nurl = \"ftp://h/\"\nsecret = \"" + std::string(kSecret) + "\"\n"),
               inbox::ConfigError);
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\nurl = \"http://h/\"\nsecret = \"plain\"\n"),
               inbox::ConfigError);
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\non_lease_expiry = \"never\"\n" + ok), inbox::ConfigError);
  EXPECT_EQ(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\non_lease_expiry = \"retry\"\n" + ok).routes[0].on_lease_expiry,
            "reclaim");
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\nprovider = \"p\"\nordered = true\n" + ok), inbox::ConfigError);
  EXPECT_THROW(parse("[[route]]\nname = \"a\"\ntopics = [\"x\"]\nsecrets = []\n" + ok), inbox::ConfigError);
}

// The Standard Webhooks specification's own example (whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,
// msg_p5jXN8AQM9LWM0D4loKWxJek, 1614265330, {"test": 2432232314}).
TEST(WebhookSignerTest, MatchesTheSpecificationExample) {
  inbox::WebhookSigner signer(kSecret);
  EXPECT_EQ(signer.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, "{\"test\": 2432232314}"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST_F(ForwardTest, DeliversSignedMessagesOnceAndKeepsTheHistory) {
  REQUIRE_DATABASE();
  Db db;
  Consumer consumer;
  std::string a = publish(db, "inv_1", "{\"n\": 1}");
  std::string b = *db.scalar("SELECT inbox.publish(" + db.quote(topic_) + ", 'inv_2', '{\"n\": 2}', '{\"x-tenant\": \"acme\", \"webhook-id\": \"forged\"}')");
  std::string out;
  ASSERT_EQ(run_once(write_config(consumer.url()), &out), 0) << out;
  auto reqs = consumer.requests();
  ASSERT_EQ(reqs.size(), 2u) << out;
  inbox::WebhookSigner signer(kSecret);
  std::map<std::string, Consumer::Request> by_id;
  for (const auto& r : reqs) {
    by_id[r.id] = r;
    EXPECT_EQ(r.signature, signer.sign(r.id, std::stoll(r.timestamp), r.body));
    EXPECT_EQ(r.attempt, "1");
    EXPECT_EQ(r.replay, "false");
    EXPECT_EQ(r.topic, topic_);
    EXPECT_LE(std::llabs(std::stoll(r.timestamp) - unix_now()), 30);
  }
  ASSERT_TRUE(by_id.count("msg_" + a) && by_id.count("msg_" + b));
  EXPECT_EQ(by_id["msg_" + a].body, "{\"n\": 1}");
  EXPECT_EQ(by_id["msg_" + b].tenant, "acme") << "message headers are sent";
  EXPECT_EQ(state(db, a), "done 1");
  EXPECT_EQ(history(db, a), "1:delivered:200");
  // Nothing left: a second run sends nothing.
  ASSERT_EQ(run_once(write_config(consumer.url())), 0);
  EXPECT_EQ(consumer.requests().size(), 2u);
}

TEST_F(ForwardTest, FailuresRetryWithBackoffAndGoneRejects) {
  REQUIRE_DATABASE();
  Db db;
  std::string retry_id, gone_id;
  Consumer consumer([&](const Consumer::Request& r, int) {
    if (r.id == "msg_" + gone_id) return 410;
    return r.attempt == "1" ? 503 : 200;
  });
  retry_id = publish(db, "", "{\"r\": 1}");
  gone_id = publish(db, "", "{\"g\": 1}");
  std::string config = write_config(consumer.url());
  ASSERT_EQ(run_once(config), 0);
  EXPECT_EQ(state(db, retry_id), "pending 1");
  EXPECT_EQ(history(db, retry_id), "1:retry:503");
  EXPECT_EQ(state(db, gone_id), "rejected 1");
  EXPECT_EQ(history(db, gone_id), "1:rejected:410");
  // backoff_base_ms = 100: due again within 100 ms.
  std::this_thread::sleep_for(150ms);
  ASSERT_EQ(run_once(config), 0);
  EXPECT_EQ(state(db, retry_id), "done 2");
  EXPECT_EQ(history(db, retry_id), "1:retry:503,2:delivered:200");
  EXPECT_EQ(consumer.requests().size(), 3u) << "a rejected message is never sent again";
}

TEST_F(ForwardTest, MaxAttemptsMakesTheMessageDead) {
  REQUIRE_DATABASE();
  Db db;
  Consumer consumer([](const Consumer::Request&, int) { return 500; });
  std::string id = publish(db, "", "{}");
  std::string config = write_config(consumer.url(), "max_attempts = 2\n");
  ASSERT_EQ(run_once(config), 0);
  std::this_thread::sleep_for(150ms);
  ASSERT_EQ(run_once(config), 0);
  EXPECT_EQ(state(db, id), "dead 2");
  EXPECT_EQ(*db.scalar("SELECT processed_at IS NOT NULL FROM inbox.outbox_delivery WHERE message_id = " + id), "t");
  EXPECT_EQ(history(db, id), "1:retry:500,2:dead:500");
}

// The seed's "kill between commit and publish", downstream: the consumer
// answered 2xx, the forwarder dies before its completion commits. The
// message comes again with the same webhook-id and webhook-attempt 2; the
// consumer applies it once.
TEST_F(ForwardTest, KillNineAfterTheAnswerRedeliversWithTheSameId) {
  REQUIRE_DATABASE();
  Db db;
  Db locker;  // used only by the consumer's handler thread
  std::string id;
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  Consumer consumer([&](const Consumer::Request&, int n) {
    if (n == 1) {
      // Hold the delivery row: the forwarder's completion waits behind it.
      locker.exec("BEGIN");
      locker.exec("SELECT 1 FROM inbox.outbox_delivery WHERE message_id = " + id + " FOR UPDATE");
      std::lock_guard<std::mutex> lock(mu);
      answered = true;
      cv.notify_all();
    }
    return 200;
  });
  id = publish(db, "inv_kill", "{\"amount\": 100}");
  std::string config = write_config(consumer.url(), "", kSecret, 3);
  pid_t pid = spawn(config);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 15s, [&] { return answered; })) << "the consumer got nothing";
  }
  const std::string waiting =
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
      "AND application_name = 'inbox-receiver forward' AND wait_event_type = 'Lock' "
      "AND query LIKE '%complete_outbox%'";
  ASSERT_TRUE(wait_until([&] { return db.scalar(waiting) == std::optional<std::string>("1"); }))
      << "the completion never waited";
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  children_.clear();
  // The forwarder is gone; its statement is still waiting in the server, as
  // it would be for a forwarder whose machine died. End it before it commits.
  db.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
          "AND application_name = 'inbox-receiver forward' AND query LIKE '%complete_outbox%'");
  locker.exec("ROLLBACK");
  EXPECT_EQ(state(db, id), "processing 1") << "the completion must not have committed";

  spawn(config);
  ASSERT_TRUE(wait_until([&] { return state(db, id) == "done 2"; }, 20s)) << state(db, id);
  auto reqs = consumer.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].id, "msg_" + id);
  EXPECT_EQ(reqs[1].id, reqs[0].id) << "the same webhook-id: the consumer can deduplicate";
  EXPECT_EQ(reqs[0].attempt, "1");
  EXPECT_EQ(reqs[1].attempt, "2");
  EXPECT_EQ(consumer.applied().size(), 1u) << "applied once";
  EXPECT_EQ(history(db, id), "1:expired,2:delivered:200") << "the duplicate is explained by the history";
}

// Ordered route: a key's second message is not sent before its first is
// finished, while other keys go on; the first fails once, so its successor
// must wait through the retry.
TEST_F(ForwardTest, OrderedRouteKeepsEachKeysOrder) {
  REQUIRE_DATABASE();
  Db db;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(publish(db, "k1", "{\"k1\": " + std::to_string(i) + "}"));
    ids.push_back(publish(db, "k2", "{\"k2\": " + std::to_string(i) + "}"));
  }
  std::set<std::string> failed_once;
  std::mutex mu;
  Consumer consumer([&](const Consumer::Request& r, int) {
    std::lock_guard<std::mutex> lock(mu);
    return failed_once.insert(r.id).second && r.body.find("\"k1\": 0") != std::string::npos ? 503 : 200;
  });
  std::string config = write_config(consumer.url(), "ordered = true\nconcurrency = 4\nbatch_size = 10\n");
  for (int round = 0; round < 20 && db.scalar("SELECT count(*) FROM inbox.outbox_delivery d JOIN inbox.outbox m "
                                              "ON m.id = d.message_id WHERE m.topic = " + db.quote(topic_) +
                                              " AND d.status <> 'done'") != std::optional<std::string>("0");
       ++round) {
    ASSERT_EQ(run_once(config), 0);
    std::this_thread::sleep_for(120ms);
  }
  // Per key, the 2xx answers came in publish order.
  std::map<std::string, std::vector<std::string>> delivered;
  for (const auto& r : consumer.requests()) {
    bool k1 = r.body.find("k1") != std::string::npos;
    if (r.attempt == "1" && r.body.find("\"k1\": 0") != std::string::npos) continue;  // the 503
    delivered[k1 ? "k1" : "k2"].push_back(r.id);
  }
  EXPECT_EQ(delivered["k1"], (std::vector<std::string>{"msg_" + ids[0], "msg_" + ids[2], "msg_" + ids[4]}));
  EXPECT_EQ(delivered["k2"], (std::vector<std::string>{"msg_" + ids[1], "msg_" + ids[3], "msg_" + ids[5]}));
  // k2 did not wait for k1's retry: its first message went in the first run.
  EXPECT_EQ(history(db, ids[1]), "1:delivered:200");
}

// Each route has its own threads: a slow consumer holds only its own route's
// `concurrency` connections, and another route's messages go on meanwhile,
// no faster than its rate_per_s.
TEST_F(ForwardTest, RoutesHaveTheirOwnLimitsAndASlowOneStarvesNoOther) {
  REQUIRE_DATABASE();
  Db db;
  std::atomic<int> in_flight{0}, most_in_flight{0};
  Consumer slow([&](const Consumer::Request&, int) {
    int now = ++in_flight;
    for (int seen = most_in_flight; now > seen && !most_in_flight.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(1000ms);
    --in_flight;
    return 200;
  });
  Consumer fast;
  const std::string fast_topic = topic_ + ".fast";
  for (int i = 0; i < 6; ++i) publish(db, "", "{}");
  for (int i = 0; i < 20; ++i) db.exec("SELECT inbox.publish(" + db.quote(fast_topic) + ", NULL, '{}')");
  std::string path = dir_ + "/two-routes.toml";
  std::ofstream(path) << "database_url = " << toml_string(forwarder_database_url()) << "\n"
                      << "[forward]\npoll_interval_ms = 50\n"
                      << "[[route]]\nname = \"slow\"\ntopics = [" << toml_string(topic_) << "]\n"
                      << "url = " << toml_string(slow.url()) << "\nsecret = " << toml_string(kSecret) << "\n"
                      << "concurrency = 2\nbatch_size = 1\ntimeout_ms = 5000\nlease_s = 30\n"
                      << "[[route]]\nname = \"fast\"\ntopics = [" << toml_string(fast_topic) << "]\n"
                      << "url = " << toml_string(fast.url()) << "\nsecret = " << toml_string(kSecret) << "\n"
                      << "concurrency = 2\nrate_per_s = 40\n";
  auto done_of = [&](const std::string& topic) {
    return std::stoi(*db.scalar("SELECT count(*) FROM inbox.outbox_delivery WHERE status = 'done' AND topic = " +
                                db.quote(topic)));
  };
  auto t0 = std::chrono::steady_clock::now();
  spawn(path);
  ASSERT_TRUE(wait_until([&] { return done_of(fast_topic) == 20; }, 20s));
  auto fast_elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(done_of(topic_), 6) << "the fast route finished while the slow one was still busy";
  EXPECT_GE(fast_elapsed, 450ms) << "20 messages at 40/s take at least 19/40 s";
  ASSERT_TRUE(wait_until([&] { return done_of(topic_) == 6; }, 30s));
  EXPECT_EQ(most_in_flight.load(), 2) << "concurrency = 2";
}

// [forward] enabled = true runs the forwarder inside serve; check-config
// names a bad route and lists the good ones.
TEST_F(ForwardTest, ServeRunsTheForwarderWhenEnabled) {
  REQUIRE_DATABASE();
  Db db;
  Consumer consumer;
  auto write = [&](const std::string& name, const std::string& url) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "listen = \"127.0.0.1:" << unused_loopback_port() << "\"\n"
                        << "database_url = " << toml_string(receiver_database_url()) << "\n"
                        << "[forward]\nenabled = true\npoll_interval_ms = 50\n"
                        << "database_url = " << toml_string(forwarder_database_url()) << "\n"
                        << "[[provider]]\nname = \"t_stripe\"\nscheme = \"stripe\"\nsecrets = [\"s\"]\n"
                        << "[[route]]\nname = \"billing\"\ntopics = [" << toml_string(topic_) << "]\n"
                        << "url = " << toml_string(url) << "\nsecret = " << toml_string(kSecret) << "\n";
    return path;
  };
  int rc = -1;
  std::string out = run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " +
                                    write("bad.toml", "ftp://127.0.0.1/x") + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("route billing: \"url\" must start with http:// or https://"), std::string::npos) << out;
  std::string good = write("serve.toml", consumer.url());
  out = run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + good + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("route billing: 1 topic(s)"), std::string::npos) << out;
  EXPECT_EQ(out.find("whsec_"), std::string::npos) << "the secret is never printed";

  std::string id = publish(db, "", "{\"served\": true}");
  pid_t pid = spawn(good, "serve");
  ASSERT_TRUE(wait_until([&] { return state(db, id) == "done 1"; })) << state(db, id);
  ASSERT_EQ(consumer.requests().size(), 1u);
  int status = terminate_and_wait(pid);
  children_.clear();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A provider route is the no-code consumer: the provider's incoming events,
// claimed with inbox.claim(provider), completed with inbox.complete.
TEST_F(ForwardTest, ProviderRouteForwardsIncomingEvents) {
  REQUIRE_DATABASE();
  Db db;
  Consumer consumer([](const Consumer::Request& r, int) { return r.body.find("fail") != std::string::npos ? 500 : 200; });
  const std::string provider = "t_fwd_" + run_id();
  db.exec("SELECT inbox.register_provider(" + db.quote(provider) + ", max_attempts => 1)");
  db.exec("SELECT inbox.ingest(" + db.quote(provider) + ", 'evt_ok', '{\"type\": \"invoice.paid\"}')");
  db.exec("SELECT inbox.ingest(" + db.quote(provider) + ", 'evt_bad', '{\"type\": \"fail\"}')");
  std::string path = write_provider_route(provider, consumer.url());
  std::string out;
  ASSERT_EQ(run_once(path, &out), 0) << out;
  auto status = [&](const std::string& ext) {
    return db.scalar("SELECT status FROM inbox.events WHERE provider = " + db.quote(provider) +
                     " AND external_id = " + db.quote(ext)).value_or("none");
  };
  EXPECT_EQ(status("evt_ok"), "done");
  EXPECT_EQ(status("evt_bad"), "dead") << "the provider's own max_attempts (1)";
  auto reqs = consumer.requests();
  ASSERT_EQ(reqs.size(), 2u);
  std::string id = *db.scalar("SELECT id FROM inbox.events WHERE provider = " + db.quote(provider) +
                              " AND external_id = 'evt_ok'");
  EXPECT_TRUE(reqs[0].id == "evt_" + id || reqs[1].id == "evt_" + id);
  inbox::WebhookSigner signer(kSecret);
  for (const auto& r : reqs) EXPECT_EQ(r.signature, signer.sign(r.id, std::stoll(r.timestamp), r.body));
}

// An event run again with inbox.replay reaches the consumer with the same
// webhook-id, the next webhook-attempt and x-inbox-replay: true, so the
// consumer can tell a deliberate re-run from a retry it already applied.
TEST_F(ForwardTest, ReplayedEventsCarryTheReplayHeader) {
  REQUIRE_DATABASE();
  Db db;
  Consumer consumer;
  const std::string provider = "t_fwd_replay_" + run_id();
  db.exec("SELECT inbox.register_provider(" + db.quote(provider) + ")");
  db.exec("SELECT inbox.ingest(" + db.quote(provider) + ", 'evt_r', '{\"type\": \"invoice.paid\"}')");
  std::string path = write_provider_route(provider, consumer.url());
  std::string out;
  ASSERT_EQ(run_once(path, &out), 0) << out;
  std::string id = *db.scalar("SELECT id FROM inbox.events WHERE provider = " + db.quote(provider));
  EXPECT_EQ(db.scalar("SELECT inbox.replay(" + id + ", 'the consumer lost its copy')").value_or(""), "2");
  ASSERT_EQ(run_once(path, &out), 0) << out;
  auto reqs = consumer.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].replay, "false");
  EXPECT_EQ(reqs[0].attempt, "1");
  EXPECT_EQ(reqs[1].replay, "true");
  EXPECT_EQ(reqs[1].attempt, "2");
  EXPECT_EQ(reqs[1].id, reqs[0].id) << "one event, one webhook-id";
  EXPECT_EQ(db.scalar("SELECT status FROM inbox.events WHERE id = " + id).value_or(""), "done");
}

// The consumer side verifies with the reference library (npm standardwebhooks);
// a wrong secret fails there, so the check can fail.
TEST_F(ForwardTest, ReferenceLibraryVerifiesTheSignatures) {
  REQUIRE_DATABASE();
  const std::string dir = std::string(INBOX_SOURCE_DIR) + "/test/forward";
  if (access((dir + "/node_modules/standardwebhooks").c_str(), F_OK) != 0)
    FAIL() << "run scripts/deps.sh: test/forward/node_modules is missing";
  Db db;
  const std::string log = dir_ + "/node.log";
  pid_t node = fork();
  if (node == 0) {
    if (!freopen(log.c_str(), "w", stdout)) _exit(126);
    execlp("node", "node", (dir + "/consumer.js").c_str(), kSecret, nullptr);
    _exit(127);
  }
  children_.push_back(node);
  int port = 0;
  ASSERT_TRUE(wait_until([&] { return std::sscanf(read_file(log).c_str(), "{\"port\":%d}", &port) == 1; }, 10s));
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/hooks";
  for (int i = 0; i < 5; ++i) publish(db, "", "{\"amount\": " + std::to_string(i) + ", \"note\": \"caf\\u00e9 \\\"x\\\"\"}");
  ASSERT_EQ(run_once(write_config(url)), 0);
  // The same messages signed with another key are refused by the library.
  std::string other = publish(db, "", "{\"forged\": true}");
  ASSERT_EQ(run_once(write_config(url, "", "whsec_" + std::string("c2VjcmV0LW5vdC10aGUtY29uc3VtZXJzLWtleQ=="))), 0);
  std::string text = read_file(log);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"verified\":true"), 5u) << text;
  EXPECT_EQ(count("\"verified\":false"), 1u) << text;
  EXPECT_EQ(state(db, other), "pending 1") << "a 401 is retried";
}

// 10k messages, 4 forwarder replicas, a consumer failing 20% of requests at
// random, and one replica killed with SIGKILL midway (replaced): every
// message is delivered, none is lost, and every message the consumer answered
// 2xx more than once has an expired attempt in its history (a completion the
// killed replica never committed).
TEST_F(ForwardTest, TenThousandMessagesFourReplicasFlakyConsumer) {
  REQUIRE_DATABASE();
  const int n = 10000;
  Db db;
  std::mutex mu;
  std::mt19937 rng(12345);
  std::map<std::string, int> ok_answers;
  Consumer consumer([&](const Consumer::Request& r, int) {
    std::lock_guard<std::mutex> lock(mu);
    if (std::uniform_int_distribution<int>(1, 100)(rng) <= 20) return 503;
    ++ok_answers[r.id];
    return 200;
  });
  db.exec("SELECT count(inbox.publish(" + db.quote(topic_) + ", NULL, jsonb_build_object('i', i))) "
          "FROM generate_series(1, " + std::to_string(n) + ") i");
  std::string config = write_config(consumer.url(),
                                    "concurrency = 2\nbatch_size = 5\nmax_attempts = 100\n", kSecret, 4);
  std::vector<pid_t> replicas;
  for (int i = 0; i < 4; ++i) replicas.push_back(spawn(config));
  const std::string where = " FROM inbox.outbox_delivery d JOIN inbox.outbox m ON m.id = d.message_id WHERE m.topic = " +
                            db.quote(topic_);
  auto done = [&] { return std::stol(*db.scalar("SELECT count(*)" + where + " AND d.status = 'done'")); };
  ASSERT_TRUE(wait_until([&] { return done() >= n / 3; }, 120s)) << done();
  kill(replicas[0], SIGKILL);
  waitpid(replicas[0], nullptr, 0);
  children_.erase(children_.begin());
  spawn(config);
  ASSERT_TRUE(wait_until([&] { return done() == n; }, 240s)) << done() << " of " << n << " done";

  // Every message delivered (applied by the consumer), none lost.
  EXPECT_EQ(consumer.applied().size(), static_cast<size_t>(n));
  EXPECT_EQ(*db.scalar("SELECT count(*)" + where + " AND d.status <> 'done'"), "0");
  // Duplicates: exactly the messages with an expired attempt can have more
  // than one 2xx.
  std::set<std::string> expired;
  db.exec("CREATE TEMP TABLE IF NOT EXISTS load_expired (id text)");
  for (int row = 0;; ++row) {
    auto id = db.scalar("SELECT 'msg_' || a.message_id FROM inbox.outbox_attempts a JOIN inbox.outbox m "
                        "ON m.id = a.message_id WHERE m.topic = " + db.quote(topic_) +
                        " AND a.outcome = 'expired' ORDER BY a.message_id, a.attempt OFFSET " + std::to_string(row) +
                        " LIMIT 1");
    if (!id) break;
    expired.insert(*id);
  }
  long duplicates = 0, unexplained = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [id, count] : ok_answers) {
      if (count <= 1) continue;
      duplicates += count - 1;
      if (!expired.count(id)) ++unexplained;
    }
  }
  EXPECT_EQ(unexplained, 0) << "a duplicate without an expired attempt";
  // Every attempt ended with a recorded outcome.
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.outbox_attempts a JOIN inbox.outbox m ON m.id = a.message_id "
                       "WHERE m.topic = " + db.quote(topic_) + " AND a.outcome IS NULL"), "0");
  const auto requests = consumer.requests().size();
  std::cout << "[ load ] messages " << n << ", requests " << requests << ", duplicates " << duplicates
            << ", expired attempts " << expired.size() << ", retries "
            << *db.scalar("SELECT count(*) FROM inbox.outbox_attempts a JOIN inbox.outbox m ON m.id = a.message_id "
                          "WHERE m.topic = " + db.quote(topic_) + " AND a.outcome = 'retry'")
            << "\n";
}

}  // namespace

// Group commit and failure handling against the real database: one bad
// event in a batch, database down and back, a database too slow, batching
// off, shutdown with requests in flight, and the binary's subcommands.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "intake/group_commit.h"
#include "intake/http_server.h"
#include "intake/sign_command.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using namespace std::chrono_literals;

namespace {

SignedRequest stripe_event(const std::string& id, const std::string& extra = "") {
  std::string body = "{\"id\":\"" + id + "\",\"object\":\"event\"" + (extra.empty() ? "" : "," + extra) + "}";
  return signer("stripe", kNewSecret)->sign(body, id, unix_now());
}


long metric(const std::string& text, const std::string& series) {
  size_t at = text.find(series + " ");
  return at == std::string::npos ? -1 : std::stol(text.substr(at + series.size() + 1));
}

TEST(GroupCommit, OneBadEventDoesNotFailTheOthers) {
  REQUIRE_DATABASE();
  Db db;
  DbPool pool(DbSettings{receiver_database_url(), 3, 3000}, 1);
  Metrics metrics;
  GroupCommitOptions o;
  o.max_events = 5;
  o.max_wait = std::chrono::microseconds(2s);
  o.flushers = 1;
  GroupCommit gc(pool, metrics, o);
  // Held for the whole test: the flusher keeps gathering until 5 are queued,
  // so all five land in one ingest_batch call.
  GroupCommit::Arrival holder(gc);

  std::vector<Event> events;
  std::vector<std::string> good;
  for (int i = 0; i < 3; ++i) {
    good.push_back(unique_id("batch-good"));
    events.push_back({"t_github", good.back(), "{\"n\":" + std::to_string(i) + "}", "{}", "", ""});
  }
  const std::string unregistered = unique_id("batch-unregistered");
  const std::string nul = unique_id("batch-nul");
  events.push_back({"t_not_registered", unregistered, "{}", "{}", "", ""});    // 42704 in the database
  events.push_back({"t_github", nul, "{\"s\":\"a\\u0000b\"}", "{}", "", ""});  // valid JSON, refused by jsonb

  std::vector<EventResult> results(events.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < events.size(); ++i)
    threads.emplace_back([&, i] {
      GroupCommit::Arrival a(gc);
      results[i] = gc.submit(events[i], a);
    });
  for (auto& t : threads) t.join();

  for (int i = 0; i < 3; ++i) EXPECT_EQ(results[i].outcome, Outcome::inserted) << results[i].detail;
  EXPECT_EQ(results[3].outcome, Outcome::unavailable);
  EXPECT_NE(results[3].detail.find("t_not_registered"), std::string::npos) << results[3].detail;
  EXPECT_EQ(results[4].outcome, Outcome::invalid) << results[4].detail;
  for (const auto& id : good) EXPECT_EQ(db.count("t_github", id), 1);
  EXPECT_EQ(db.count("t_not_registered", unregistered), 0);
  EXPECT_EQ(db.count("t_github", nul), 0);
  // One batch of five was tried (the retries one by one are not batches).
  std::string m = metrics.render();
  EXPECT_EQ(metric(m, "inbox_receiver_batch_events_count"), 1);
  EXPECT_EQ(metric(m, "inbox_receiver_batch_events_bucket{le=\"4\"}"), 0);
}

class ReceiverDbTest : public ::testing::Test {
 protected:
  void start(Config c) {
    receiver_ = std::make_unique<Receiver>(std::move(c));
    port_ = receiver_->start();
  }
  void SetUp() override { REQUIRE_DATABASE(); }
  void TearDown() override {
    if (receiver_) receiver_->stop();
  }
  std::unique_ptr<Receiver> receiver_;
  int port_ = 0;
};

TEST_F(ReceiverDbTest, ConcurrentRequestsShareTransactions) {
  start(test_config());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 5; ++j)
        if (post(port_, "/webhooks/t_stripe", stripe_event(unique_id("gc"))).status == 200) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
  std::string m = get(port_, "/metrics").body;
  long batches = metric(m, "inbox_receiver_batch_events_count");
  EXPECT_GT(batches, 0);
  EXPECT_LT(batches, 160) << "no two events ever shared a transaction";
}

TEST_F(ReceiverDbTest, BatchingOffIsOneTransactionPerRequest) {
  Config c = test_config();
  c.batching = false;
  start(c);
  Db db;
  std::vector<std::thread> threads;
  std::vector<std::string> ids(16);
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      ids[i] = unique_id("nobatch");
      if (post(port_, "/webhooks/t_stripe", stripe_event(ids[i])).status == 200) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
  for (const auto& id : ids) EXPECT_EQ(db.count("t_stripe", id), 1);
  std::string m = get(port_, "/metrics").body;
  EXPECT_EQ(metric(m, "inbox_receiver_batch_events_count"), 16);
  EXPECT_EQ(metric(m, "inbox_receiver_batch_events_bucket{le=\"1\"}"), 16);
}

// A table lock makes the database "slow": the receiver answers 503 with
// Retry-After at its deadline instead of hanging; later the same event lands.
TEST_F(ReceiverDbTest, SlowDatabaseIs503AtTheDeadline) {
  Config c = test_config();
  c.deadline_ms = 500;
  start(c);
  Db locker, db;
  locker.exec("BEGIN");
  locker.exec("LOCK TABLE inbox.events IN ACCESS EXCLUSIVE MODE");
  const std::string id = unique_id("slow");
  auto t0 = std::chrono::steady_clock::now();
  HttpResult r = post(port_, "/webhooks/t_stripe", stripe_event(id));
  auto waited = std::chrono::steady_clock::now() - t0;
  locker.exec("ROLLBACK");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.retry_after, "7");
  EXPECT_LT(waited, 3s);
  // The provider retries: accepted, and exactly one row.
  r = post(port_, "/webhooks/t_stripe", stripe_event(id));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(db.count("t_stripe", id), 1);
}

// Database stopped: 503 + Retry-After, never a 200 that was not committed;
// back up: deliveries succeed and nothing answered 200 is missing.
TEST_F(ReceiverDbTest, DatabaseDownThenBackLosesNothing) {
  const char* stop_cmd = std::getenv("INBOX_TEST_PG_STOP");
  const char* start_cmd = std::getenv("INBOX_TEST_PG_START");
  if (!stop_cmd || !start_cmd || !*stop_cmd || !*start_cmd)
    GTEST_SKIP() << "INBOX_TEST_PG_STOP / INBOX_TEST_PG_START not set";
  Config c = test_config();
  c.deadline_ms = 2000;
  start(c);

  std::mutex mu;
  std::vector<std::pair<std::string, int>> sent;  // id, status
  std::atomic<bool> done{false};
  std::atomic<int> after_restart_ok{0};
  std::atomic<bool> restarted{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t)
    load.emplace_back([&] {
      while (!done) {
        std::string id = unique_id("outage");
        HttpResult r = post(port_, "/webhooks/t_stripe", stripe_event(id));
        {
          std::lock_guard<std::mutex> lock(mu);
          sent.emplace_back(id, r.status);
        }
        if (r.status == 503) {
          EXPECT_FALSE(r.retry_after.empty());
        }
        if (r.status == 200 && restarted) ++after_restart_ok;
        std::this_thread::sleep_for(5ms);
      }
    });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(std::system(stop_cmd), 0) << stop_cmd;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(get(port_, "/readyz").status, 503);
  ASSERT_EQ(std::system(start_cmd), 0) << start_cmd;
  restarted = true;
  for (int i = 0; i < 300 && after_restart_ok < 20; ++i) std::this_thread::sleep_for(100ms);
  done = true;
  for (auto& t : load) t.join();
  EXPECT_GE(after_restart_ok.load(), 20) << "deliveries did not recover after the restart";
  // Readiness follows the latest ingest: the load's last requests may still
  // have met a connection that had not reconnected. One more delivery that
  // is stored makes the receiver ready again.
  int last = 0;
  for (int i = 0; i < 50 && last != 200; ++i) {
    last = post(port_, "/webhooks/t_stripe", stripe_event(unique_id("outage-after"))).status;
    if (last != 200) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(last, 200) << "no delivery was stored after the restart";
  EXPECT_EQ(get(port_, "/readyz").status, 200);

  Db db;  // the old superuser connection died with the server
  int ok = 0, unavailable = 0;
  for (const auto& [id, status] : sent) {
    if (status == 200) {
      ++ok;
      EXPECT_EQ(db.count("t_stripe", id), 1) << "answered 200 but not stored: " << id;
    } else {
      ++unavailable;
      EXPECT_EQ(status, 503) << id;
      // The provider's retry: accepted now.
      EXPECT_EQ(post(port_, "/webhooks/t_stripe", stripe_event(id)).status, 200);
      EXPECT_EQ(db.count("t_stripe", id), 1);
    }
  }
  EXPECT_GT(unavailable, 0) << "the outage was never observed";
  EXPECT_GT(ok, 0);
}

// stop() (what SIGTERM triggers) with requests in flight: each got an answer
// or a refused connection, and every 200 is in the table.
TEST_F(ReceiverDbTest, ShutdownFinishesInFlightRequests) {
  start(test_config());
  std::mutex mu;
  std::vector<std::pair<std::string, int>> sent;
  std::atomic<bool> done{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 8; ++t)
    load.emplace_back([&] {
      while (!done) {
        std::string id = unique_id("shutdown");
        int status = post(port_, "/webhooks/t_stripe", stripe_event(id)).status;
        std::lock_guard<std::mutex> lock(mu);
        sent.emplace_back(id, status);
        if (status == 0) return;  // listener closed
      }
    });
  std::this_thread::sleep_for(300ms);
  auto t0 = std::chrono::steady_clock::now();
  receiver_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  done = true;
  for (auto& t : load) t.join();
  Db db;
  int ok = 0;
  for (const auto& [id, status] : sent) {
    EXPECT_TRUE(status == 200 || status == 503 || status == 0) << status;
    if (status == 200) {
      ++ok;
      EXPECT_EQ(db.count("t_stripe", id), 1) << id;
    }
  }
  EXPECT_GT(ok, 0);
}

// The binary: check-config, sign, and serve stopped by SIGTERM.
class BinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/inbox-receiver-test-" + run_id();
    std::system(("mkdir -p " + dir_).c_str());
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string write_config(int port, const std::string& db_url) {
    std::string escaped;
    for (char ch : db_url) {
      if (ch == '"' || ch == '\\') escaped.push_back('\\');
      escaped.push_back(ch);
    }
    std::string path = dir_ + "/receiver.toml";
    std::ofstream(path) << "listen = \"127.0.0.1:" << port << "\"\n"
                        << "database_url = \"" << escaped << "\"\n"
                        << "[[provider]]\nname = \"t_stripe\"\nscheme = \"stripe\"\n"
                        << "secrets = [{ env = \"INBOX_TEST_STRIPE_SECRET\" }, \"" << kOldSecret << "\"]\n";
    setenv("INBOX_TEST_STRIPE_SECRET", kNewSecret, 1);
    return path;
  }

  static std::string run(const std::string& cmd, int* rc) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    *rc = WEXITSTATUS(pclose(p));
    return out;
  }

  std::string dir_;
};

TEST_F(BinaryTest, CheckConfigAndSign) {
  std::string config = write_config(8080, "postgresql://x@127.0.0.1/db");
  int rc = -1;
  std::string out = run(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + config, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("inbox.register_provider('t_stripe', on_lease_expiry => 'hold');"), std::string::npos) << out;
  // The secret itself is never printed.
  EXPECT_EQ(out.find(kNewSecret), std::string::npos);

  out = run(std::string(INBOX_RECEIVER_BIN) + " sign --config " + config +
                " --provider t_stripe --id evt_cli --format headers --timestamp 1700000000",
            &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Stripe-Signature: t=1700000000,v1="), std::string::npos) << out;
  EXPECT_NE(out.find("\"id\":\"evt_cli\""), std::string::npos) << out;

  std::ofstream(dir_ + "/bad.toml") << "[[provider]]\nname = \"x\"\nscheme = \"stripe\"\nsecrets = [\"a\"]\nsecret = 1\n";
  out = run(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + dir_ + "/bad.toml 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("unknown key \"secret\""), std::string::npos) << out;
}

TEST_F(BinaryTest, ServeAnswersAndStopsOnSigterm) {
  REQUIRE_DATABASE();
  // A free port: bind port 0, read it, release it for the child.
  int port = unused_loopback_port();
  std::string config = write_config(port, receiver_database_url());
  std::string log = dir_ + "/serve.log";
  pid_t pid = spawn_serve(config, log, port);
  ASSERT_NE(pid, -1) << "receiver did not come up";
  const std::string id = unique_id("binary");
  EXPECT_EQ(post(port, "/webhooks/t_stripe", stripe_event(id)).status, 200);
  Db db;
  EXPECT_EQ(db.count("t_stripe", id), 1);

  int status = terminate_and_wait(pid);
  ASSERT_NE(status, -1) << "no exit within 10 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string text = read_file(log);
  EXPECT_NE(text.find("\"msg\":\"stopped\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"external_id\":\"" + id + "\""), std::string::npos);
  // No secret and no payload in the log.
  EXPECT_EQ(text.find(kNewSecret), std::string::npos);
  EXPECT_EQ(text.find("\"object\""), std::string::npos);
}

}  // namespace

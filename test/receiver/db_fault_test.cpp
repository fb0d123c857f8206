// Database faults (issue 10): a database that stops answering (a local TCP
// proxy this test controls stops forwarding: a black hole), recovery when
// it answers again, SIGTERM while it is stuck, and a crash of a server with
// synchronous_commit = off losing nothing that was acknowledged.
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
#include <map>
#include <thread>
#include <vector>

#include "intake/http_server.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

int database_port() {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(database_url(), &err);
  int port = 5432;
  for (PQconninfoOption* o = opts; o && o->keyword; ++o)
    if (std::string(o->keyword) == "port" && o->val) port = std::stoi(o->val);
  PQconninfoFree(opts);
  return port;
}

// Forwards 127.0.0.1:port() to the database; black_hole(true) stops reading,
// writing and accepting (connections open, nothing answers), like a
// network partition or a frozen server.
class Proxy {
 public:
  explicit Proxy(int upstream) : upstream_(upstream) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 64);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Proxy() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, peer] : peers_) ::close(fd);
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  void black_hole(bool on) { hole_ = on; }

 private:
  void run() {
    while (!stop_) {
      std::vector<pollfd> fds;
      if (!hole_) {
        fds.push_back({listen_fd_, POLLIN, 0});
        for (auto& [fd, peer] : peers_) fds.push_back({fd, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) {
        if (fds.empty()) std::this_thread::sleep_for(50ms);
        continue;
      }
      for (const pollfd& p : fds) {
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (p.fd == listen_fd_) {
          int c = ::accept(listen_fd_, nullptr, nullptr);
          int u = ::socket(AF_INET, SOCK_STREAM, 0);
          sockaddr_in a{};
          a.sin_family = AF_INET;
          a.sin_port = htons(static_cast<uint16_t>(upstream_));
          a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          if (c < 0 || ::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(c);
            ::close(u);
            continue;
          }
          peers_[c] = u;
          peers_[u] = c;
          continue;
        }
        auto it = peers_.find(p.fd);
        if (it == peers_.end()) continue;
        char buf[65536];
        ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
        if (n <= 0 || ::send(it->second, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
          int other = it->second;
          ::close(p.fd);
          ::close(other);
          peers_.erase(p.fd);
          peers_.erase(other);
        }
      }
    }
  }

  int upstream_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> hole_{false}, stop_{false};
  std::map<int, int> peers_;  // fd -> the other side
  std::thread thread_;
};

SignedRequest stripe_event(const std::string& id) {
  return signer("stripe", kNewSecret)->sign("{\"id\":\"" + id + "\",\"object\":\"event\"}", id, unix_now());
}

class DbFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    db_ = std::make_unique<Db>();
    proxy_ = std::make_unique<Proxy>(database_port());
    proxied_url_ = receiver_database_url() + " port=" + std::to_string(proxy_->port());
  }
  Config fault_config() {
    Config c = test_config();
    c.database_url = proxied_url_;
    c.statement_timeout_ms = 1000;
    c.deadline_ms = 2000;
    c.connect_timeout_s = 1;
    c.drain_ms = 2000;
    return c;
  }
  // A serve config in `dir` (created) with drain and deadlines of 2 s.
  static std::string write_serve_config(const std::string& dir, int port, const std::string& url) {
    std::system(("mkdir -p " + dir).c_str());
    std::string escaped;
    for (char ch : url) {
      if (ch == '"' || ch == '\\') escaped.push_back('\\');
      escaped.push_back(ch);
    }
    std::string config = dir + "/receiver.toml";
    std::ofstream(config) << "listen = \"127.0.0.1:" << port << "\"\ndatabase_url = \"" << escaped << "\"\n"
                          << "[http]\ndrain_ms = 2000\n[database]\ndeadline_ms = 2000\nstatement_timeout_ms = 1000\n"
                          << "connect_timeout_s = 1\n"
                          << "[[provider]]\nname = \"t_stripe\"\nscheme = \"stripe\"\nsecrets = [\"" << kNewSecret
                          << "\"]\n";
    return config;
  }

  std::unique_ptr<Db> db_;
  std::unique_ptr<Proxy> proxy_;
  std::string proxied_url_;
};

TEST_F(DbFaultTest, BlackHoleAnswers503WithinTheDeadlineAndRecovers) {
  Receiver receiver(fault_config());
  int port = receiver.start();
  std::string first = unique_id("hole-before");
  ASSERT_EQ(post(port, "/webhooks/t_stripe", stripe_event(first)).status, 200);

  proxy_->black_hole(true);
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    HttpResult r = post(port, "/webhooks/t_stripe", stripe_event(unique_id("hole")));
    EXPECT_EQ(r.status, 503);
    EXPECT_FALSE(r.retry_after.empty());
    EXPECT_LT(Clock::now() - t0, 3s) << "the deadline is 2 s";
  }
  EXPECT_EQ(get(port, "/readyz").status, 503);

  proxy_->black_hole(false);
  auto back = Clock::now();
  std::string after;
  int status = 0;
  while (Clock::now() - back < 10s) {
    after = unique_id("hole-after");
    status = post(port, "/webhooks/t_stripe", stripe_event(after)).status;
    if (status == 200) break;
    std::this_thread::sleep_for(100ms);
  }
  auto recovery = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - back);
  ASSERT_EQ(status, 200);
  EXPECT_LT(recovery, 5s) << recovery.count() << " ms";
  std::printf("recovery after the database answered again: %lld ms\n", static_cast<long long>(recovery.count()));
  EXPECT_EQ(db_->count("t_stripe", after), 1);
  EXPECT_EQ(get(port, "/readyz").status, 200);
  receiver.stop();
}

// /readyz waits up to a second for a stuck database: on a thread of its
// own, so the listener goes on answering meanwhile (here with one I/O thread,
// which a probe run on it would hold for that second).
TEST_F(DbFaultTest, ReadyzWaitingForAStuckDatabaseHoldsNoIoThread) {
  Config c = fault_config();
  c.http_threads = 1;
  Receiver receiver(c);
  int port = receiver.start();
  ASSERT_EQ(get(port, "/readyz").status, 200);
  proxy_->black_hole(true);
  std::atomic<int> ready_status{0};
  std::thread probe([&] { ready_status = get(port, "/readyz").status; });
  std::this_thread::sleep_for(100ms);  // the probe is waiting for the database now
  auto t0 = Clock::now();
  EXPECT_EQ(get(port, "/healthz").status, 200);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  EXPECT_LT(took, 600ms) << took.count() << " ms behind the probe";
  probe.join();
  EXPECT_EQ(ready_status.load(), 503);
  proxy_->black_hole(false);
  receiver.stop();
}

TEST_F(DbFaultTest, SigtermFinishesWithinItsDrainTimeWhileTheDatabaseIsStuck) {
  int port = unused_loopback_port();
  std::string dir = "/tmp/inbox-dbfault-" + std::to_string(::getpid());
  std::string config = write_serve_config(dir, port, proxied_url_);
  pid_t pid = spawn_serve(config, dir + "/serve.log", port);
  ASSERT_NE(pid, -1) << "receiver did not come up";
  ASSERT_EQ(post(port, "/webhooks/t_stripe", stripe_event(unique_id("term-before"))).status, 200);
  proxy_->black_hole(true);
  std::thread inflight([&] { post(port, "/webhooks/t_stripe", stripe_event(unique_id("term-stuck"))); });
  std::this_thread::sleep_for(300ms);
  auto t0 = Clock::now();
  int status = terminate_and_wait(pid);
  auto took = Clock::now() - t0;
  inflight.join();
  proxy_->black_hole(false);
  ASSERT_NE(status, -1) << "no exit within 10 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // drain_ms (2 s) plus one query deadline at most.
  EXPECT_LT(took, 4500ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  std::system(("rm -rf " + dir).c_str());
}

// A database that refuses the connection: 503 for the sender, and the log
// says why, once (not the raw error to the sender).
TEST_F(DbFaultTest, FailedConnectIsLoggedWithItsCause) {
  int port = unused_loopback_port();
  std::string dir = "/tmp/inbox-dbconnect-" + std::to_string(::getpid());
  std::string url = receiver_database_url() + " port=" + std::to_string(unused_loopback_port());
  std::string config = write_serve_config(dir, port, url);
  pid_t pid = spawn_serve(config, dir + "/serve.log", port);
  ASSERT_NE(pid, -1) << "receiver did not come up";
  HttpResult r = post(port, "/webhooks/t_stripe", stripe_event(unique_id("refused")));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body.find("refused"), std::string::npos) << r.body;
  EXPECT_EQ(terminate_and_wait(pid), 0);
  std::string log = read_file(dir + "/serve.log");
  EXPECT_NE(log.find("\"msg\":\"database connect failed\""), std::string::npos) << log;
  EXPECT_NE(log.find("Connection refused"), std::string::npos) << log;
  std::system(("rm -rf " + dir).c_str());
}

// With synchronous_commit = off on the server and a long WAL writer delay,
// a crash loses recent commits, unless the receiver's own sessions commit
// synchronously (they set synchronous_commit = on).
TEST_F(DbFaultTest, SynchronousCommitOffOnTheServerLosesNothingAcknowledged) {
  db_->exec("ALTER SYSTEM SET synchronous_commit = off");
  db_->exec("ALTER SYSTEM SET wal_writer_delay = '10s'");
  db_->exec("SELECT pg_reload_conf()");
  std::vector<std::string> acked;
  {
    Config c = test_config();
    Receiver receiver(c);
    int port = receiver.start();
    for (int i = 0; i < 30; ++i) {
      std::string id = unique_id("crash");
      if (post(port, "/webhooks/t_stripe", stripe_event(id)).status == 200) acked.push_back(id);
    }
    receiver.stop();
  }
  ASSERT_EQ(acked.size(), 30u);
  // A backend killed with SIGKILL: the postmaster resets shared memory (the
  // WAL buffers with it) and recovers from what was flushed, as after a crash.
  try {
    db_->exec("DO $$ BEGIN EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'kill -9 ' || pg_backend_pid()); END $$");
  } catch (...) {
  }
  db_.reset();
  std::unique_ptr<Db> db;
  for (int i = 0; i < 100 && !db; ++i) {
    std::this_thread::sleep_for(200ms);
    try {
      db = std::make_unique<Db>();
      db->scalar("SELECT 1");
    } catch (...) {
      db.reset();
    }
  }
  ASSERT_TRUE(db) << "the server did not come back";
  db->exec("ALTER SYSTEM RESET synchronous_commit");
  db->exec("ALTER SYSTEM RESET wal_writer_delay");
  db->exec("SELECT pg_reload_conf()");
  long found = 0;
  for (const auto& id : acked) found += db->count("t_stripe", id);
  EXPECT_EQ(found, static_cast<long>(acked.size()));
}


// What the receiver reported to inbox.receiver_stats for t_stripe over the
// last hour, summed: requests_2xx, 4xx, 5xx, signature_failures,
// refused_bodies, db_unavailable, duplicates.
std::vector<long> reported(Db& db) {
  std::vector<long> out;
  for (const char* col : {"requests_2xx", "requests_4xx", "requests_5xx", "signature_failures",
                          "refused_bodies", "db_unavailable", "duplicates"})
    out.push_back(std::stol(*db.scalar(std::string("SELECT coalesce(sum(") + col +
                                       "), 0) FROM inbox.receiver_stats WHERE provider = 't_stripe' "
                                       "AND minute > now() - interval '1 hour'")));
  return out;
}

std::vector<long> plus(std::vector<long> a, const std::vector<long>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Polls until the reported counters reach `want` (or 10 s pass).
std::vector<long> wait_reported(Db& db, const std::vector<long>& want) {
  auto t0 = Clock::now();
  std::vector<long> got = reported(db);
  while (got != want && Clock::now() - t0 < 10s) {
    std::this_thread::sleep_for(100ms);
    got = reported(db);
  }
  return got;
}

TEST_F(DbFaultTest, ReceiverReportsWhatOnlyItSeesOverHttp) {
  Config c = fault_config();
  c.stats_interval_ms = 200;
  c.max_body_bytes = 4096;
  std::vector<long> before = reported(*db_);
  Receiver receiver(c);
  int port = receiver.start();
  std::string id = unique_id("stats-good");
  ASSERT_EQ(post(port, "/webhooks/t_stripe", stripe_event(id)).status, 200);
  // Processed, so that its re-delivery is a duplicate.
  db_->exec("UPDATE inbox.events SET status = 'done', processed_at = now() WHERE provider = 't_stripe' "
            "AND external_id = " + db_->quote(id));
  ASSERT_EQ(post(port, "/webhooks/t_stripe", stripe_event(id)).status, 200);  // a duplicate
  std::string forged_id = unique_id("stats-forged");
  SignedRequest forged = signer("stripe", "not-the-secret")->sign(
      "{\"id\":\"" + forged_id + "\",\"object\":\"event\"}", forged_id, unix_now());
  ASSERT_EQ(post(port, "/webhooks/t_stripe", forged).status, 401);
  std::string big_id = unique_id("stats-big");
  SignedRequest big = signer("stripe", kNewSecret)->sign(
      "{\"id\":\"" + big_id + "\",\"pad\":\"" + std::string(8192, 'x') + "\"}", big_id, unix_now());
  ASSERT_EQ(post(port, "/webhooks/t_stripe", big).status, 413);
  ASSERT_EQ(post(port, "/webhooks/t_nobody", stripe_event(unique_id("stats-unknown"))).status, 404);

  //                                        2xx 4xx 5xx sig refused db  dup
  std::vector<long> want = plus(before, {2, 2, 0, 1, 1, 0, 1});
  EXPECT_EQ(wait_reported(*db_, want), want);
  db_->exec("SELECT inbox.refresh_stats()");
  EXPECT_EQ(reported(*db_), want) << "the refresh keeps the receiver's rows";
  std::this_thread::sleep_for(600ms);  // three more intervals: nothing is sent twice
  EXPECT_EQ(reported(*db_), want);
  receiver.stop();
}

TEST_F(DbFaultTest, ReceiverStatsSurviveTheDatabaseDownDuringAFlush) {
  Config c = fault_config();
  c.stats_interval_ms = 200;
  std::vector<long> before = reported(*db_);
  Receiver receiver(c);
  int port = receiver.start();
  ASSERT_EQ(post(port, "/webhooks/t_stripe", stripe_event(unique_id("stats-before"))).status, 200);
  std::vector<long> first = plus(before, {1, 0, 0, 0, 0, 0, 0});
  ASSERT_EQ(wait_reported(*db_, first), first);

  proxy_->black_hole(true);
  auto t0 = Clock::now();
  EXPECT_EQ(post(port, "/webhooks/t_stripe", stripe_event(unique_id("stats-hole"))).status, 503);
  EXPECT_EQ(post(port, "/webhooks/t_stripe", stripe_event(unique_id("stats-hole"))).status, 503);
  SignedRequest forged = signer("stripe", "not-the-secret")->sign("{\"id\":\"f\"}", "f", unix_now());
  EXPECT_EQ(post(port, "/webhooks/t_stripe", forged).status, 401);
  EXPECT_LT(Clock::now() - t0, 6s) << "a stuck flush never holds intake";
  std::this_thread::sleep_for(2500ms);  // flushes fail (or hang) while the hole lasts
  EXPECT_EQ(reported(*db_), first);
  proxy_->black_hole(false);

  std::vector<long> want = plus(first, {0, 1, 2, 1, 0, 2, 0});
  EXPECT_EQ(wait_reported(*db_, want), want);
  std::this_thread::sleep_for(3s);  // any unanswered COMMIT settled: never counted twice
  EXPECT_EQ(reported(*db_), want);
  receiver.stop();
}

}  // namespace

// Local stand-ins for the alert tests: a target that records what it is
// sent (and can answer errors first), and a TCP proxy in front of Postgres
// that can delay every answer, to play a store slower than the claim timeout.
#pragma once

#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace inbox::test {

class StandInTarget {
 public:
  struct Post {
    std::string path;
    std::string body;
    httplib::Headers headers;
  };
  StandInTarget();
  ~StandInTarget();
  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const;
  // The next `n` posts are answered `status` (then 200 again).
  void fail_next(int n, int status);
  std::vector<Post> posts() const;
  // Posts whose body contains `needle`.
  int count(const std::string& needle) const;
  // Waits up to `ms` until count(needle) >= n; returns count(needle).
  int wait_for(const std::string& needle, int n, int ms) const;

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::vector<Post> posts_;
  int fail_left_ = 0;
  int fail_status_ = 503;
};

class DelayProxy {
 public:
  DelayProxy(const std::string& host, int port);  // forwards 127.0.0.1:this->port() to host:port
  ~DelayProxy();
  int port() const { return listen_port_; }
  // Every chunk from the server is held this long before it is passed on.
  void set_delay_ms(int ms) { delay_ms_ = ms; }
  // Chunks the clients sent (about one per query): to count database reads.
  long client_chunks() const { return client_chunks_; }

 private:
  void accept_loop();
  void pump(int from, int to, bool delayed);

  std::string host_;
  int port_;
  int listen_fd_ = -1;
  int listen_port_ = 0;
  std::atomic<int> delay_ms_{0};
  std::atomic<long> client_chunks_{0};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

// A login (password = its name) that is a member of `group` and nothing
// else, created once; returns its connection string.
std::string member_login_url(const std::string& login, const std::string& group);

// The port the test database listens on.
int database_port();

}  // namespace inbox::test

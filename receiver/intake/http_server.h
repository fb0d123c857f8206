// The HTTP side: cpp-httplib server, hardening, routes, answers.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/config.h"
#include "intake/db_pool.h"
#include "intake/group_commit.h"
#include "common/metrics.h"
#include "intake/providers/provider.h"

namespace inbox {

using UnixClock = std::function<std::int64_t()>;

class Receiver {
 public:
  // Throws ConfigError if a provider cannot be built. `clock` (unix seconds)
  // is for tests that pin the time; default: the system clock.
  explicit Receiver(Config config, UnixClock clock = {});
  ~Receiver();
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Binds config.listen (port 0 picks a free port) and returns the port.
  int bind();
  // Serves until stop(); call bind() first.
  void serve();
  // bind() + serve() on a background thread (tests).
  int start();
  // Stops accepting, lets in-flight requests finish, commits queued events.
  void stop();

  int port() const { return port_; }
  Metrics& metrics() { return metrics_; }

 private:
  void install_routes();
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res);
  void handle_webhook(const httplib::Request& req, httplib::Response& res);
  void handle_ready(httplib::Response& res);
  void after_response(const httplib::Request& req, const httplib::Response& res);

  Config config_;
  UnixClock clock_;
  Metrics metrics_;
  std::map<std::string, std::unique_ptr<Provider>> providers_;
  DbPool pool_;
  std::unique_ptr<GroupCommit> group_commit_;
  httplib::Server server_;
  std::thread serve_thread_;
  int port_ = 0;
  int listen_fd_ = -1;
  bool stopped_ = false;
};

// Splits "host:port" (IPv6 as "[::1]:8080"); throws ConfigError.
std::pair<std::string, int> split_listen(const std::string& listen);

}  // namespace inbox

// The intake's HTTP routes and answers, on the Beast listener
// (intake/http_listener.h): webhooks, /healthz, /readyz, /metrics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/metrics.h"
#include "intake/db_pool.h"
#include "intake/group_commit.h"
#include "intake/http_listener.h"
#include "intake/providers/provider.h"
#include "intake/receiver_stats.h"

namespace inbox {

using UnixClock = std::function<std::int64_t()>;

class Receiver : public HttpHandler {
 public:
  // Throws ConfigError if a provider cannot be built. `clock` (unix seconds)
  // is for tests that pin the time; default: the system clock.
  explicit Receiver(Config config, UnixClock clock = {});
  ~Receiver() override;
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Binds config.listen (port 0 picks a free port) and returns the port.
  int bind();
  // bind() (if not yet) and the I/O threads; returns the port.
  int start();
  // Stops accepting, answers the requests in flight (at most drain_ms),
  // commits what is queued.
  void stop();

  int port() const { return port_; }
  Metrics& metrics() { return metrics_; }
  ReceiverStats& stats() { return *stats_; }

  void handle(HttpRequest req, Respond respond, boost::asio::any_io_executor executor) override;
  void answered(const HttpRequest& req, const HttpResponse& res, double seconds) override;

 private:
  void handle_webhook(const std::string& name, HttpRequest& req, Respond& respond);
  HttpResponse ready();
  // /readyz waits for the database (up to a second): answered from a thread
  // of its own, never an I/O thread, one probe at a time and its answer
  // shared by every request that waited for it.
  void ready_async(Respond respond);
  void ready_loop();
  // The configured provider a webhook answer belongs to, or empty.
  std::string provider_of(const std::string& path, const HttpResponse& res) const;

  Config config_;
  UnixClock clock_;
  Metrics metrics_;
  std::map<std::string, std::unique_ptr<Provider>> providers_;
  DbPool pool_;
  std::unique_ptr<GroupCommit> group_commit_;
  std::unique_ptr<ReceiverStats> stats_;
  std::unique_ptr<HttpListener> listener_;
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  std::vector<Respond> ready_waiters_;
  bool ready_stop_ = false;
  std::thread ready_thread_;
  int port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

// Splits "host:port" (IPv6 as "[::1]:8080"); throws ConfigError.
std::pair<std::string, int> split_listen(const std::string& listen);

}  // namespace inbox

// The targets alerts are delivered to: Slack, a signed JSON webhook,
// Alertmanager, the log. Each HTTP target has its own queue and thread and
// retries with exponential backoff, so a slow or unreachable target delays
// only itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "alerts/alert.h"
#include "alerts/alert_payloads.h"
#include "common/config.h"

namespace httplib {
class Client;
}

namespace inbox {

class AlertTarget {
 public:
  AlertTarget(AlertTargetConfig target, const AlertsConfig& alerts);
  ~AlertTarget();  // stops; alerts still queued are logged as dropped
  AlertTarget(const AlertTarget&) = delete;
  AlertTarget& operator=(const AlertTarget&) = delete;

  // Queues (or, for the log, writes) the alert when its severity reaches the
  // target's min_severity. Never blocks on the network.
  void submit(const Alert& a);
  const std::string& name() const { return cfg_.name; }
  const std::string& kind() const { return cfg_.kind; }

  struct Counts {
    std::uint64_t sent = 0, retried = 0, gave_up = 0, queued = 0;
  };
  Counts counts() const;
  // Nothing queued or in flight (retries waiting count as queued).
  bool idle() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Job {
    Alert alert;
    std::string body;
    int attempt = 0;
    Clock::time_point due;
  };
  void run();
  // One POST; false with the reason when it failed (retryable: worth another try).
  bool deliver(const Job& job, std::string& error, bool& retryable);
  std::chrono::milliseconds backoff(int attempt) const;

  AlertTargetConfig cfg_;
  AlertsConfig alerts_;
  std::string path_;
  std::unique_ptr<httplib::Client> client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  Counts counts_;
  bool stopping_ = false;
  bool in_flight_ = false;
  std::thread thread_;
};

}  // namespace inbox

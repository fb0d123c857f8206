// The forwarder: delivers outbox messages (and, for provider routes, incoming
// events) to HTTP endpoints, signed with Standard Webhooks. Each route gets
// `concurrency` threads; each thread claims with a lease, POSTs, and reports
// complete / fail / reject fenced by the lease token. Any number of replicas
// may run: every guarantee is in the database.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "forward/route_config.h"

namespace inbox {

struct ForwardStats {
  std::atomic<long long> delivered{0};  // 2xx, completion committed
  std::atomic<long long> retried{0};    // fail -> 'retry'
  std::atomic<long long> dead{0};       // fail -> 'dead'
  std::atomic<long long> rejected{0};   // 410 -> 'rejected'
  std::atomic<long long> lost{0};       // the lease was no longer ours
  std::atomic<long long> db_errors{0};  // a claim or report that did not reach the database
};

// A stop request that sleeping threads wake up for.
class ForwardStop {
 public:
  void stop();
  bool stopped() const;
  bool wait_for(std::chrono::milliseconds d);  // true when stopped

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

// At most rate_per_s POSTs per second for one route in this replica.
class RateLimit {
 public:
  explicit RateLimit(double rate_per_s) : rate_(rate_per_s) {}
  // Waits for the next slot. Not cut short by a stop: a claimed message is
  // sent and reported, never left to its lease (a hold route would hold it).
  void acquire();

 private:
  double rate_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point next_{};
};

class Forwarder {
 public:
  // Throws ConfigError when there is no route.
  Forwarder(const Config& config, ForwardConfig forward);
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Starts every route's threads. once: each thread ends when a claim finds nothing.
  void start(bool once);
  void stop();  // stops claiming, finishes the messages claimed, joins
  void join();  // waits for the threads (after once)
  const ForwardStats& stats() const { return stats_; }

 private:
  void run_route(size_t route_index, bool once);

  Config config_;
  ForwardConfig forward_;
  std::vector<std::unique_ptr<RateLimit>> limits_;
  ForwardStats stats_;
  ForwardStop stop_;
  std::vector<std::thread> threads_;
};

}  // namespace inbox

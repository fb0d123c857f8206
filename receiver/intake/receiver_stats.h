// What only the receiver sees, counted per provider and minute and reported
// to inbox.report_receiver_stats (docs/checks.md) by a background thread:
// at most one transaction every `interval`, through the common libpq helper.
// A flush that failed keeps its counts for the next one (bounded: minutes
// the database would refuse, past 55 minutes, are dropped); a flush whose
// COMMIT went unanswered is settled by its transaction id before anything
// is sent again, so nothing stored is ever sent twice.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/pg_session.h"

namespace inbox {

// One minute's counters of one provider, in the order of the JSON keys.
enum StatCounter : std::size_t {
  kRequests2xx,
  kRequests4xx,
  kRequests5xx,
  kSignatureFailures,
  kRefusedBodies,
  kDbUnavailable,
  kDuplicates,
  kStatCounterCount
};

class ReceiverStats {
 public:
  using Counts = std::array<std::uint64_t, kStatCounterCount>;
  using Key = std::pair<std::string, std::int64_t>;  // provider, unix minute (seconds, truncated)
  using Buckets = std::map<Key, Counts>;

  // interval_ms 0: nothing is counted or sent.
  ReceiverStats(const DbSettings& settings, int interval_ms);
  ~ReceiverStats();
  ReceiverStats(const ReceiverStats&) = delete;
  ReceiverStats& operator=(const ReceiverStats&) = delete;

  // Counts one answer to a webhook of a configured provider (never blocks on the database).
  void answered(const std::string& provider, int status, const std::string& outcome);
  void start();
  // Stops the thread after one last flush (bounded by the query deadline).
  void stop();
  // One flush now (the thread's step; tests call it too). True when nothing is left to send.
  bool flush();

  static constexpr std::size_t kMaxBuckets = 1000;  // one report's limit

 private:
  void run();
  void merge_back(Buckets& from);  // under mu_
  std::string report_json(const Buckets& b) const;

  int interval_ms_;
  PgSession session_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Buckets current_;
  // Owned by the flushing thread: what was sent, and, when its COMMIT went
  // unanswered, the transaction to ask about before sending anything again.
  std::mutex flush_mu_;
  Buckets in_flight_;
  std::optional<std::string> unsettled_xid_;
  std::string last_error_;  // what the last failed report said (logged once per cause)
  std::chrono::steady_clock::time_point last_logged_{};
  std::thread thread_;
};

}  // namespace inbox

// The alert sender: reads the recent rows of inbox.alerts, decides per alert
// whether this replica sends it (P0: always; otherwise whoever claims its key
// for the severity's window, failing open when the claim cannot be had in
// time), and hands it to every target. It also raises the sidecar's own
// alerts, for what the database cannot see: the database unreachable for
// database_unreachable_s, and (inside serve) 5xx answers above error_rate.
// Those go through the same path; while the store is down they fail open and
// are deduplicated per process with the same windows.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alerts/alert.h"
#include "alerts/alert_claims.h"
#include "alerts/alert_targets.h"
#include "common/config.h"
#include "common/pg_session.h"

namespace inbox {

// {answers, of which 5xx} since start; from serve's metrics.
using AnswerCounts = std::function<std::pair<std::uint64_t, std::uint64_t>()>;

class AlertSender {
 public:
  explicit AlertSender(const Config& config, AnswerCounts answers = {});
  ~AlertSender();  // stops the loop and the targets
  AlertSender(const AlertSender&) = delete;
  AlertSender& operator=(const AlertSender&) = delete;

  // The polling loop, on a thread of its own.
  void start();

  // One round: read the recent alerts, dispatch the new ones, check the
  // sidecar's own conditions. Returns false when the database did not answer.
  bool poll_once();

  // Dedup, then every target. Returns how it went: "claimed", "bypass" (P0),
  // "failed_open", "held_elsewhere", "held_here". `before_start`: the row is
  // older than this process (a P0 then goes through the claim too).
  std::string dispatch(const Alert& a, bool before_start = false);

  // Waits until every target has delivered or given up, at most `ms`; true when all are idle.
  bool drain(int ms) const;

  // Prometheus text for /metrics: per-target counts and dedup outcomes.
  std::string render_metrics() const;

 private:
  using Clock = std::chrono::steady_clock;
  void own_alert(const std::string& check, bool firing, const std::string& summary);
  void check_database(bool answered);
  void check_error_rate();

  Config config_;
  AnswerCounts answers_;
  std::string started_unix_;  // the rows before it are older than this process
  PgSession reader_;
  ClaimClient claims_;
  std::vector<std::unique_ptr<AlertTarget>> targets_;
  std::map<std::int64_t, Clock::time_point> handled_;  // alert ids seen, for lookback_s
  std::map<std::string, Clock::time_point> held_here_;   // keys this process sent, until their window ends
  std::map<std::string, std::string> own_since_;         // own checks firing, since when
  Clock::time_point db_down_since_{};
  bool db_down_ = false;
  std::pair<std::uint64_t, std::uint64_t> last_answers_{};
  Clock::time_point last_rate_check_{};
  mutable std::mutex stats_mu_;
  std::map<std::string, std::uint64_t> outcomes_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace inbox

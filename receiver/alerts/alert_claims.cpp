#include "alerts/alert_claims.h"

#include <chrono>

namespace inbox {
namespace {

const PgStatement kClaim = {"claim_alert",
                            "SELECT inbox.claim_alert($1::text, make_interval(secs => $2::float8))"};

}  // namespace

ClaimClient::ClaimClient(const DbSettings& db, int timeout_ms)
    : session_(db, {kClaim}), timeout_ms_(timeout_ms), thread_([this] { run(); }) {}

ClaimClient::~ClaimClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

ClaimResult ClaimClient::claim(const std::string& key, int window_s, std::string& why) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_) {
    why = "an earlier claim has not answered yet";
    return ClaimResult::failed_open;
  }
  busy_ = true;
  key_ = key;
  window_s_ = window_s;
  const std::uint64_t mine = ++seq_;
  cv_.notify_all();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  if (!cv_.wait_until(lock, deadline, [&] { return done_seq_ >= mine || stopping_; }) || done_seq_ < mine) {
    why = "no answer within " + std::to_string(timeout_ms_) + " ms";
    return ClaimResult::failed_open;
  }
  why = why_;
  return result_;
}

void ClaimClient::run() {
  std::unique_lock<std::mutex> lock(mu_);
  std::uint64_t handled = 0;
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || seq_ > handled; });
    if (stopping_) return;
    handled = seq_;
    std::string key = key_;
    std::string window = std::to_string(window_s_);
    lock.unlock();
    PgCall c = session_.exec_prepared(kClaim.name, {key.c_str(), window.c_str()});
    ClaimResult r = ClaimResult::failed_open;
    std::string why;
    if (c.ok && c.rows() == 1) {
      r = std::string(c.value(0, 0)) == "t" ? ClaimResult::won : ClaimResult::held_elsewhere;
    } else {
      why = c.connection_lost && !c.timed_out ? "database unreachable: " + c.message : "claim failed: " + c.message;
    }
    lock.lock();
    result_ = r;
    why_ = why;
    done_seq_ = handled;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace inbox

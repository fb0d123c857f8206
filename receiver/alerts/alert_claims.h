// The dedup claim: inbox.claim_alert(key, window) in the shared store, asked
// from a thread of its own so the sender never waits past claim_timeout_ms.
// Past it, or when the database is unreachable, the claim fails open: the
// caller sends anyway (and logs it). While an earlier claim still has not
// answered, new ones fail open at once instead of queueing behind it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/pg_session.h"

namespace inbox {

enum class ClaimResult { won, held_elsewhere, failed_open };

class ClaimClient {
 public:
  ClaimClient(const DbSettings& db, int timeout_ms);
  ~ClaimClient();
  ClaimClient(const ClaimClient&) = delete;
  ClaimClient& operator=(const ClaimClient&) = delete;

  // failed_open comes with the reason in `why`.
  ClaimResult claim(const std::string& key, int window_s, std::string& why);

 private:
  void run();

  PgSession session_;
  int timeout_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool busy_ = false;  // a claim is in flight (perhaps one the caller gave up on)
  std::uint64_t seq_ = 0;
  std::string key_;
  int window_s_ = 0;
  std::uint64_t done_seq_ = 0;
  ClaimResult result_ = ClaimResult::failed_open;
  std::string why_;
  std::thread thread_;
};

}  // namespace inbox

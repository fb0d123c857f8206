// The status document (inbox.status_report(), read as a login with only
// inbox_monitor rights), cached for [admin] cache_ms so that no number of
// page loads or scrapes can load the database: one read at a time, and
// everyone else gets the cached copy.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "common/pg_session.h"

namespace inbox {

struct StatusSnapshot {
  std::string json;   // the document; empty when never read
  bool fresh = false; // read within cache_ms (false: the database did not answer)
  std::string error;  // why the last read failed (for the page, never a secret)
  double age_s = 0;   // since it was read
};

class StatusSource {
 public:
  StatusSource(const DbSettings& db, int cache_ms);
  StatusSnapshot get();

 private:
  using Clock = std::chrono::steady_clock;
  PgSession session_;
  int cache_ms_;
  std::mutex fetch_mu_;  // one read at a time
  std::mutex mu_;
  std::string json_;
  Clock::time_point read_at_{};
  Clock::time_point tried_at_{};
  std::string error_;
};

}  // namespace inbox

#include "admin/status_source.h"

namespace inbox {
namespace {

const PgStatement kReport = {"status_report", "SELECT inbox.status_report()::text"};

}  // namespace

StatusSource::StatusSource(const DbSettings& db, int cache_ms) : session_(db, {kReport}), cache_ms_(cache_ms) {}

StatusSnapshot StatusSource::get() {
  auto snapshot = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    StatusSnapshot s;
    s.json = json_;
    s.error = error_;
    s.fresh = !json_.empty() && error_.empty();
    s.age_s = json_.empty() ? 0 : std::chrono::duration<double>(Clock::now() - read_at_).count();
    return s;
  };
  auto due = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return Clock::now() - tried_at_ >= std::chrono::milliseconds(cache_ms_) || tried_at_ == Clock::time_point{};
  };
  if (!due()) return snapshot();
  std::unique_lock<std::mutex> fetch(fetch_mu_, std::defer_lock);
  bool never_read = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    never_read = json_.empty();
  }
  if (never_read) fetch.lock();                       // nothing to show yet: wait for the read
  else if (!fetch.try_lock()) return snapshot();      // someone is reading it right now
  if (!due()) return snapshot();
  PgCall c = session_.exec_prepared(kReport.name, {});
  {
    std::lock_guard<std::mutex> lock(mu_);
    tried_at_ = Clock::now();
    if (c.ok && c.rows() == 1) {
      json_ = c.value(0, 0);
      read_at_ = tried_at_;
      error_.clear();
    } else {
      error_ = c.connection_lost ? "database unreachable" : "status_report failed (" + c.sqlstate + ")";
    }
  }
  return snapshot();
}

}  // namespace inbox

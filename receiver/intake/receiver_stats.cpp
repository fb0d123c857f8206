#include "intake/receiver_stats.h"

#include <ctime>

#include "common/json_util.h"
#include "common/log.h"

namespace inbox {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kCounterNames[kStatCounterCount] = {
    "requests_2xx", "requests_4xx", "requests_5xx", "signature_failures",
    "refused_bodies", "db_unavailable", "duplicates"};

// The database takes minutes of the last hour; older ones are dropped here
// with a margin, so a long outage cannot make every later report fail.
constexpr std::int64_t kOldestMinuteS = 55 * 60;

const PgStatement kStatements[] = {
    {"stats_report", "SELECT inbox.report_receiver_stats($1::jsonb), pg_current_xact_id()::text"},
    {"stats_settle", "SELECT pg_xact_status($1::xid8)"},
};

std::int64_t now_unix() { return static_cast<std::int64_t>(std::time(nullptr)); }

}  // namespace

ReceiverStats::ReceiverStats(const DbSettings& settings, int interval_ms)
    : interval_ms_(interval_ms),
      session_(settings, std::vector<PgStatement>(std::begin(kStatements), std::end(kStatements))) {}

ReceiverStats::~ReceiverStats() { stop(); }

void ReceiverStats::answered(const std::string& provider, int status, const std::string& outcome) {
  if (interval_ms_ <= 0 || provider.empty()) return;
  std::int64_t minute = now_unix() / 60 * 60;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_.find({provider, minute});
  if (it == current_.end()) {
    if (current_.size() >= kMaxBuckets) return;  // bounded: a stuck database cannot grow us
    it = current_.emplace(Key{provider, minute}, Counts{}).first;
  }
  Counts& c = it->second;
  if (status >= 200 && status < 300) ++c[kRequests2xx];
  if (status >= 400 && status < 500) ++c[kRequests4xx];
  if (status >= 500) ++c[kRequests5xx];
  if (outcome == "bad_signature") ++c[kSignatureFailures];
  if (status == 411 || status == 413 || status == 415) ++c[kRefusedBodies];
  if (status == 503 && outcome == "unavailable") ++c[kDbUnavailable];
  if (outcome == "duplicate") ++c[kDuplicates];
}

void ReceiverStats::merge_back(Buckets& from) {
  std::int64_t oldest = now_unix() - kOldestMinuteS;
  for (auto& [key, counts] : from) {
    if (key.second < oldest) continue;
    auto it = current_.find(key);
    if (it == current_.end()) {
      if (current_.size() >= kMaxBuckets) continue;
      current_.emplace(key, counts);
      continue;
    }
    for (std::size_t i = 0; i < kStatCounterCount; ++i) it->second[i] += counts[i];
  }
  from.clear();
}

std::string ReceiverStats::report_json(const Buckets& b) const {
  std::string out = "[";
  for (const auto& [key, counts] : b) {
    if (out.size() > 1) out.push_back(',');
    out += "{\"provider\":" + json_quote(key.first) + ",\"minute\":\"" + rfc3339_utc(key.second) + "\"";
    for (std::size_t i = 0; i < kStatCounterCount; ++i)
      if (counts[i]) out += ",\"" + std::string(kCounterNames[i]) + "\":" + std::to_string(counts[i]);
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

bool ReceiverStats::flush() {
  std::lock_guard<std::mutex> flushing(flush_mu_);
  auto deadline = [this] { return Clock::now() + std::chrono::milliseconds(session_.settings().query_deadline_ms); };
  if (unsettled_xid_) {
    // The last COMMIT went unanswered: did it happen? Never resend what it stored.
    const char* p[] = {unsettled_xid_->c_str()};
    PgCall c = session_.exec_prepared("stats_settle", {p[0]}, deadline());
    if (!c.ok || c.rows() != 1) return false;  // ask again next time
    std::string st = c.is_null(0, 0) ? "" : c.value(0, 0);
    if (st == "in progress") return false;
    if (st == "aborted") {
      std::lock_guard<std::mutex> lock(mu_);
      merge_back(in_flight_);
    } else {
      // committed, or too old to tell (NULL): counting twice is the worse error
      if (st != "committed") log_line("warn", "receiver stats dropped", {{"reason", "outcome unknown"}});
      in_flight_.clear();
    }
    unsettled_xid_.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.empty()) return true;
    std::int64_t oldest = now_unix() - kOldestMinuteS;
    for (auto it = current_.begin(); it != current_.end();)
      it = it->first.second < oldest ? current_.erase(it) : std::next(it);
    in_flight_.swap(current_);
  }
  if (in_flight_.empty()) return true;
  std::string json = report_json(in_flight_);
  auto fail = [this](const PgCall& c) {
    session_.reset();  // whatever was open is rolled back with the connection
    std::lock_guard<std::mutex> lock(mu_);
    merge_back(in_flight_);
    // Once per cause, and at most every minute while it lasts (an extension
    // still at 0.1.0 has no report function: every flush fails alike).
    auto now = Clock::now();
    if (c.message != last_error_ || now - last_logged_ > std::chrono::minutes(1)) {
      log_line("warn", "receiver stats not reported", {{"error", c.message}});
      last_error_ = c.message;
      last_logged_ = now;
    }
    return false;
  };
  PgCall begin = session_.exec("BEGIN", deadline());
  if (!begin.ok) return fail(begin);
  PgCall report = session_.exec_prepared("stats_report", {json.c_str()}, deadline());
  if (!report.ok || report.rows() != 1) return fail(report);
  std::string xid = report.value(0, 1);
  PgCall commit = session_.exec("COMMIT", deadline());
  if (commit.ok) {
    in_flight_.clear();
    last_error_.clear();
    return true;
  }
  if (!commit.connection_lost && !commit.sqlstate.empty()) return fail(commit);  // the server said no: rolled back
  unsettled_xid_ = xid;  // unanswered: settled by the next flush
  log_line("warn", "receiver stats commit unanswered", {{"error", commit.message}});
  return false;
}

void ReceiverStats::start() {
  if (interval_ms_ <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void ReceiverStats::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stopping_; });
    lock.unlock();
    flush();
    lock.lock();
  }
}

void ReceiverStats::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace inbox

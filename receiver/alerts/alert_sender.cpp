#include "alerts/alert_sender.h"

#include <cstdlib>
#include <chrono>

#include "common/log.h"

namespace inbox {
namespace {

const PgStatement kRecent = {
    "recent_alerts",
    "SELECT a.id, a.key, a.check_name, a.provider, a.state, a.severity, a.data_loss, "
    "to_json(a.since) #>> '{}', to_json(a.created_at) #>> '{}', a.value, a.range_lo, a.range_hi, a.summary, "
    "a.created_at < to_timestamp($2::float8) "
    "FROM inbox.recent_alerts(make_interval(secs => $1::float8), 1000) a"};

std::optional<double> optional_number(const PgCall& c, int row, int col) {
  if (c.is_null(row, col)) return std::nullopt;
  return std::strtod(c.value(row, col), nullptr);
}

// Now in unix seconds with milliseconds: a row written a moment before this
// process started must count as before it.
std::string unix_now_text() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch()).count();
  return std::to_string(ms / 1000) + "." + std::to_string(1000 + ms % 1000).substr(1);
}

DbSettings sender_db(const Config& config) {
  return db_settings_for(config, config.alerts.database_url.empty() ? config.database_url : config.alerts.database_url,
                         "inbox-receiver alerts");
}

}  // namespace

AlertSender::AlertSender(const Config& config, AnswerCounts answers)
    : config_(config),
      answers_(std::move(answers)),
      started_unix_(unix_now_text()),
      reader_(sender_db(config), {kRecent}),
      claims_(sender_db(config), config.alerts.claim_timeout_ms) {
  for (const AlertTargetConfig& t : config_.alert_targets)
    targets_.push_back(std::make_unique<AlertTarget>(t, config_.alerts));
}

AlertSender::~AlertSender() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AlertSender::start() {
  thread_ = std::thread([this] {
    log_line("info", "alert sender started",
             {num("targets", static_cast<long long>(targets_.size())),
              num("claim_timeout_ms", static_cast<long long>(config_.alerts.claim_timeout_ms))});
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      poll_once();
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(config_.alerts.poll_interval_ms), [&] { return stopping_; });
    }
  });
}

bool AlertSender::poll_once() {
  const auto now = Clock::now();
  const std::string lookback = std::to_string(config_.alerts.lookback_s);
  PgCall c = reader_.exec_prepared(kRecent.name, {lookback.c_str(), started_unix_.c_str()});
  check_database(c.ok);
  check_error_rate();
  if (!c.ok) return false;
  for (int r = 0; r < c.rows(); ++r) {
    std::int64_t id = std::strtoll(c.value(r, 0), nullptr, 10);
    if (!handled_.emplace(id, now).second) continue;
    Alert a;
    a.id = id;
    a.key = c.value(r, 1);
    a.check = c.value(r, 2);
    a.provider = c.value(r, 3);
    a.state = c.value(r, 4);
    a.severity = c.value(r, 5);
    a.data_loss = std::string(c.value(r, 6)) == "t";
    a.since = c.is_null(r, 7) ? "" : c.value(r, 7);
    a.at = c.value(r, 8);
    a.value = optional_number(c, r, 9);
    a.range_lo = optional_number(c, r, 10);
    a.range_hi = optional_number(c, r, 11);
    a.summary = c.value(r, 12);
    dispatch(a, std::string(c.value(r, 13)) == "t");
  }
  // Ids older than the lookback can no longer come back.
  const auto horizon = now - std::chrono::seconds(config_.alerts.lookback_s + 60);
  for (auto it = handled_.begin(); it != handled_.end();)
    it = it->second < horizon ? handled_.erase(it) : std::next(it);
  return true;
}

std::string AlertSender::dispatch(const Alert& a, bool before_start) {
  const int sev = severity_index(a.severity);
  // P0 raised while this process runs: sent by every replica. A P0 row from
  // before it started (a restart, a deploy) is deduplicated like a P1, so a
  // restart does not page again for what the running replicas already sent.
  const bool bypass = sev == 0 && !before_start;
  std::string outcome = "bypass";
  std::string why;
  const auto now = Clock::now();
  if (!bypass) {
    const int window = config_.alerts.window_s[sev <= 0 ? 1 : sev];
    auto held = held_here_.find(a.key);
    if (held != held_here_.end() && held->second > now) {
      outcome = "held_here";
    } else {
      switch (claims_.claim(a.key, window, why)) {
        case ClaimResult::won: outcome = "claimed"; break;
        case ClaimResult::held_elsewhere: outcome = "held_elsewhere"; break;
        case ClaimResult::failed_open: outcome = "failed_open"; break;
      }
      if (outcome != "held_elsewhere") held_here_[a.key] = now + std::chrono::seconds(window);
    }
    for (auto it = held_here_.begin(); it != held_here_.end();)
      it = it->second <= now ? held_here_.erase(it) : std::next(it);
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++outcomes_[outcome];
  }
  if (outcome == "held_here" || outcome == "held_elsewhere") {
    log_line("info", "alert deduplicated", {{"key", a.key}, {"by", outcome == "held_here" ? "this process" : "store"}});
    return outcome;
  }
  if (outcome == "failed_open")
    log_line("warn", "alert claim failed open: sending anyway", {{"key", a.key}, {"reason", why}});
  log_line("info", "alert sending", {{"key", a.key}, {"severity", a.severity}, {"dedup", outcome},
                                     num("targets", static_cast<long long>(targets_.size()))});
  for (auto& t : targets_) t->submit(a);
  // A P0 sent past the claim is still recorded in the store, so that a
  // replica started later sees it was sent.
  if (bypass) claims_.claim(a.key, config_.alerts.window_s[1], why);
  return outcome;
}

void AlertSender::own_alert(const std::string& check, bool firing, const std::string& summary) {
  Alert a;
  a.check = check;
  a.provider = "*";
  a.state = firing ? "firing" : "resolved";
  a.key = alert_key(a.check, a.provider, a.state);
  a.severity = config_.alerts.own_severity;
  a.at = rfc3339_now();
  if (firing) own_since_[check] = a.at;
  a.since = own_since_[check];
  if (!firing) own_since_.erase(check);
  a.summary = a.severity + " " + check + (firing ? " firing: " : " resolved: ") + summary;
  dispatch(a);
}

void AlertSender::check_database(bool answered) {
  const auto now = Clock::now();
  if (answered) {
    if (own_since_.count("receiver_database_unreachable"))
      own_alert("receiver_database_unreachable", false, "the database answers again");
    db_down_ = false;
    return;
  }
  if (!db_down_) {
    db_down_ = true;
    db_down_since_ = now;
  }
  if (!own_since_.count("receiver_database_unreachable") &&
      now - db_down_since_ >= std::chrono::seconds(config_.alerts.database_unreachable_s))
    own_alert("receiver_database_unreachable", true,
              "the database has not answered for " + std::to_string(config_.alerts.database_unreachable_s) +
                  " s or more");
}

void AlertSender::check_error_rate() {
  if (!answers_) return;
  const auto now = Clock::now();
  if (now - last_rate_check_ < std::chrono::seconds(60) && last_rate_check_ != Clock::time_point{}) return;
  auto counts = answers_();
  if (last_rate_check_ != Clock::time_point{}) {
    std::uint64_t total = counts.first - last_answers_.first;
    std::uint64_t errors = counts.second - last_answers_.second;
    bool high = total >= static_cast<std::uint64_t>(config_.alerts.error_rate_min_requests) &&
                static_cast<double>(errors) > config_.alerts.error_rate * static_cast<double>(total);
    bool firing = own_since_.count("receiver_5xx_rate") > 0;
    if (high && !firing)
      own_alert("receiver_5xx_rate", true,
                std::to_string(errors) + " of " + std::to_string(total) + " answers in the last minute were 5xx");
    else if (!high && firing)
      own_alert("receiver_5xx_rate", false, "5xx answers back under the threshold");
  }
  last_answers_ = counts;
  last_rate_check_ = now;
}

bool AlertSender::drain(int ms) const {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    bool idle = true;
    for (const auto& t : targets_) idle = idle && t->idle();
    if (idle) return true;
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string AlertSender::render_metrics() const {
  std::string out = "# HELP inbox_receiver_alerts_total Alerts handled by this sender, by dedup outcome.\n"
                    "# TYPE inbox_receiver_alerts_total counter\n";
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    for (const auto& [outcome, n] : outcomes_)
      out += "inbox_receiver_alerts_total{dedup=\"" + outcome + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP inbox_receiver_alert_deliveries_total Alert deliveries per target and result.\n"
         "# TYPE inbox_receiver_alert_deliveries_total counter\n";
  for (const auto& t : targets_) {
    AlertTarget::Counts c = t->counts();
    const std::string l = "{target=\"" + t->name() + "\",result=\"";
    out += "inbox_receiver_alert_deliveries_total" + l + "sent\"} " + std::to_string(c.sent) + "\n";
    out += "inbox_receiver_alert_deliveries_total" + l + "retried\"} " + std::to_string(c.retried) + "\n";
    out += "inbox_receiver_alert_deliveries_total" + l + "gave_up\"} " + std::to_string(c.gave_up) + "\n";
  }
  return out;
}

}  // namespace inbox

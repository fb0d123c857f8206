#include "alerts/alert_targets.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>

#include "common/api_url.h"
#include "common/log.h"

namespace inbox {
namespace {

constexpr std::size_t kMaxQueued = 1000;

std::string transport_error(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::Read: return "read failed or timed out";
    case httplib::Error::Write: return "write failed or timed out";
    default: return httplib::to_string(e);
  }
}

}  // namespace

AlertTarget::AlertTarget(AlertTargetConfig target, const AlertsConfig& alerts)
    : cfg_(std::move(target)), alerts_(alerts) {
  if (cfg_.kind == "log") return;
  BackfillUrl u = parse_api_url(cfg_.url, "url");
  path_ = u.path_template;
  client_ = std::make_unique<httplib::Client>(u.origin);
  const time_t sec = cfg_.timeout_ms / 1000;
  const time_t usec = (cfg_.timeout_ms % 1000) * 1000;
  client_->set_connection_timeout(sec, usec);
  client_->set_read_timeout(sec, usec);
  client_->set_write_timeout(sec, usec);
  client_->set_tcp_nodelay(true);
  client_->set_follow_location(false);
  thread_ = std::thread([this] { run(); });
}

AlertTarget::~AlertTarget() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const Job& j : queue_)
    log_line("warn", "alert not delivered: stopping", {{"target", cfg_.name}, {"key", j.alert.key}});
}

void AlertTarget::submit(const Alert& a) {
  if (severity_index(a.severity) > severity_index(cfg_.min_severity)) return;
  if (cfg_.kind == "log") {
    log_line(a.state == "firing" ? "warn" : "info", "alert",
             {{"target", cfg_.name}, {"key", a.key}, {"severity", a.severity}, {"state", a.state},
              {"check", a.check}, {"provider", a.provider}, {"summary", a.summary}});
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.sent;
    return;
  }
  Job job;
  job.alert = a;
  if (cfg_.kind == "slack") job.body = slack_payload(a);
  else if (cfg_.kind == "alertmanager")
    job.body = alertmanager_payload(a, alerts_.status_url, alerts_.window_s[1]);
  else job.body = webhook_payload(a);
  job.due = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      log_line("error", "alert dropped: target queue full", {{"target", cfg_.name}, {"key", queue_.front().alert.key}});
      queue_.pop_front();
      ++counts_.gave_up;
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

AlertTarget::Counts AlertTarget::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c = counts_;
  c.queued = queue_.size();
  return c;
}

bool AlertTarget::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !in_flight_;
}

std::chrono::milliseconds AlertTarget::backoff(int attempt) const {
  // base * 2^(attempt-1), capped, times 0.5..1 (equal jitter): replicas and
  // targets do not retry in step.
  double ms = alerts_.retry_base_ms * std::pow(2.0, std::min(attempt - 1, 30));
  ms = std::min(ms, static_cast<double>(alerts_.retry_max_ms));
  thread_local std::mt19937 rng(std::random_device{}());
  ms *= std::uniform_real_distribution<double>(0.5, 1.0)(rng);
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

bool AlertTarget::deliver(const Job& job, std::string& error, bool& retryable) {
  httplib::Headers headers;
  if (cfg_.kind == "webhook" && !cfg_.secret.empty()) {
    for (auto& [k, v] : standard_webhooks_headers(cfg_.secret, alert_message_id(job.alert),
                                                  static_cast<std::int64_t>(std::time(nullptr)), job.body))
      headers.emplace(k, v);
  }
  auto res = client_->Post(path_, headers, job.body, "application/json");
  if (!res) {
    error = transport_error(res.error());
    retryable = true;
    return false;
  }
  if (res->status >= 200 && res->status < 300) return true;
  error = "HTTP " + std::to_string(res->status);
  retryable = res->status >= 500 || res->status == 429 || res->status == 408;
  return false;
}

void AlertTarget::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto next = std::min_element(queue_.begin(), queue_.end(),
                                 [](const Job& a, const Job& b) { return a.due < b.due; });
    if (next->due > Clock::now()) {
      cv_.wait_until(lock, next->due);
      continue;
    }
    Job job = std::move(*next);
    queue_.erase(next);
    in_flight_ = true;
    lock.unlock();
    ++job.attempt;
    std::string error;
    bool retryable = false;
    bool ok = deliver(job, error, retryable);
    lock.lock();
    in_flight_ = false;
    if (ok) {
      ++counts_.sent;
      log_line("info", "alert delivered", {{"target", cfg_.name}, {"key", job.alert.key},
                                           num("attempt", static_cast<long long>(job.attempt))});
    } else if (retryable && job.attempt < alerts_.retry_attempts && !stopping_) {
      ++counts_.retried;
      job.due = Clock::now() + backoff(job.attempt);
      log_line("warn", "alert delivery failed, will retry",
               {{"target", cfg_.name}, {"key", job.alert.key}, {"error", error},
                num("attempt", static_cast<long long>(job.attempt))});
      queue_.push_back(std::move(job));
    } else {
      ++counts_.gave_up;
      log_line("error", "alert delivery gave up", {{"target", cfg_.name}, {"key", job.alert.key}, {"error", error},
                                                   num("attempts", static_cast<long long>(job.attempt))});
    }
  }
}

}  // namespace inbox

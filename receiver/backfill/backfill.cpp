#include "backfill/backfill.h"

#include <algorithm>
#include <set>

#include "common/log.h"

namespace inbox {

void StopSignal::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

bool StopSignal::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

bool StopSignal::wait_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [&] { return stopped_; });
}

DbSettings backfill_db_settings(const Config& config) {
  return db_settings_for(
      config, config.backfill.database_url.empty() ? config.database_url : config.backfill.database_url,
      "inbox-receiver backfill");
}

BackfillWorker::BackfillWorker(const Config& config, Metrics* metrics)
    : settings_(config.backfill), queue_(backfill_db_settings(config)), metrics_(metrics) {
  for (const ProviderConfig& p : config.providers) {
    if (!p.backfill) continue;
    fetchers_[p.name] = std::make_unique<BackfillFetcher>(*p.backfill);
    if (!p.backfill->list_url.empty()) listers_[p.name] = std::make_unique<BackfillLister>(p.name, *p.backfill);
    if (!p.backfill->list_after_url.empty())
      tail_listers_[p.name] = std::make_unique<TailLister>(p.name, *p.backfill);
  }
  if (fetchers_.empty()) throw ConfigError("no provider has a [provider.backfill] table: nothing to backfill");
}

bool BackfillWorker::drain(BackfillStats& stats, std::string& error, const StopSignal* stop) {
  for (auto& [provider, fetcher] : fetchers_) {
    // Requests of a claim are fetched one after another: claim no more than
    // fit in one lease at the provider's worst-case call time.
    const long long worst_ms = 2LL * fetcher->timeout_ms() + 1000;
    const int rows = static_cast<int>(
        std::max(1LL, std::min<long long>(settings_.batch_size, settings_.lease_s * 1000LL / worst_ms)));
    // A request retried with a short Retry-After may be due again within this
    // drain: handle each one once, so a drain always ends.
    std::set<std::int64_t> seen;
    bool again = true;
    while (again && !(stop && stop->stopped())) {
      auto claims = queue_.claim(rows, settings_.lease_s, provider, error);
      if (!claims) {
        if (metrics_) metrics_->backfill(provider, "db_error");
        return false;
      }
      if (claims->empty()) break;
      for (const BackfillClaim& c : *claims) {
        if (!seen.insert(c.request_id).second) again = false;
        if (!handle(c, *fetcher, stats, error)) return false;
      }
    }
  }
  return true;
}

bool BackfillWorker::list_due(BackfillStats& stats, std::string& error, const StopSignal* stop) {
  bool ok = true;
  auto stopped = [stop] { return stop && stop->stopped(); };
  for (auto& [provider, lister] : listers_) {
    if (stopped()) break;
    if (!lister->due(std::chrono::steady_clock::now())) continue;
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ListResult r = lister->list(queue_, now, stopped);
    stats.listed += r.added;
    if (r.outcome == ListResult::list_error || r.outcome == ListResult::db_error) ++stats.list_errors;
    if (metrics_ && r.outcome != ListResult::no_listed_source) metrics_->backfill(provider, outcome_name(r.outcome));
    if (r.outcome == ListResult::db_error) {
      error = r.error;
      ok = false;
    }
  }
  for (auto& [provider, lister] : tail_listers_) {
    if (stopped()) break;
    if (!lister->due(std::chrono::steady_clock::now())) continue;
    ListResult r = lister->list(queue_, stopped);
    if (r.outcome == ListResult::nothing_to_list) continue;
    stats.tail_raised += r.added;
    if (r.outcome == ListResult::list_error || r.outcome == ListResult::db_error) ++stats.list_errors;
    if (metrics_) metrics_->backfill(provider, tail_outcome_name(r.outcome));
    if (r.outcome == ListResult::db_error) {
      error = r.error;
      ok = false;
    }
  }
  return ok;
}

bool BackfillWorker::round(BackfillStats& stats, std::string& error, const StopSignal* stop) {
  std::string list_error;
  bool listed = list_due(stats, list_error, stop);
  bool drained = drain(stats, error, stop);
  if (!listed && drained) error = list_error;
  return listed && drained;
}

bool BackfillWorker::handle(const BackfillClaim& c, BackfillFetcher& fetcher, BackfillStats& stats,
                            std::string& error) {
  auto t0 = std::chrono::steady_clock::now();
  FetchResult f = fetcher.fetch(c.external_id);
  QueueCall report;
  std::string outcome;
  if (f.kind == FetchKind::found) {
    report = queue_.fetched(c, f.payload_json);
    if (report.ok) {
      outcome = report.value == "lost" ? "lost" : "fetched";
    } else if (!report.sqlstate.empty()) {
      // The database refused the payload (e.g. \u0000 in jsonb): a failure to
      // retry and, in the end, give up on; never a loop on one bad event.
      f.error = "HTTP 200 but the database refused the event: SQLSTATE " + report.sqlstate;
      f.kind = FetchKind::failed;
    }
  } else if (f.kind == FetchKind::not_found) {
    report = queue_.not_found(c, "HTTP " + std::to_string(f.http_status) + " from " + f.request);
    if (report.ok) outcome = report.value == "t" ? "not_found" : "lost";
  }
  if (f.kind == FetchKind::failed) {
    report = queue_.failed(c, f.error, f.retry_after_s, settings_.max_attempts);
    if (report.ok) outcome = report.value == "retry" ? "retry" : report.value == "gave_up" ? "gave_up" : "lost";
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<LogField> fields = {{"provider", c.provider},
                                  {"external_id", c.external_id},
                                  num("request_id", static_cast<long long>(c.request_id)),
                                  num("attempt", static_cast<long long>(c.attempt)),
                                  num("http_status", static_cast<long long>(f.http_status)),
                                  {"outcome", report.ok ? outcome : "db_error"},
                                  num("ms", ms)};
  if (!f.error.empty()) fields.push_back({"error", f.error});
  if (!report.ok) {
    fields.push_back({"db_error", report.sqlstate.empty() ? report.message : "SQLSTATE " + report.sqlstate});
    log_line("error", "backfill", fields);
    if (metrics_) metrics_->backfill(c.provider, "db_error");
    // The lease expires and the request is claimed again later.
    error = "database: " + report.message;
    return false;
  }
  log_line(outcome == "lost" ? "warn" : "info", "backfill", fields);
  if (metrics_) metrics_->backfill(c.provider, outcome);
  if (outcome == "fetched") ++stats.fetched;
  else if (outcome == "not_found") ++stats.not_found;
  else if (outcome == "retry") ++stats.retried;
  else if (outcome == "gave_up") ++stats.gave_up;
  else ++stats.lost;
  return true;
}

void BackfillWorker::run(StopSignal& stop) {
  log_line("info", "backfill worker started",
           {num("providers", static_cast<long long>(fetchers_.size())),
            num("listing", static_cast<long long>(listers_.size())),
            num("tail_listing", static_cast<long long>(tail_listers_.size())),
            num("poll_interval_ms", static_cast<long long>(settings_.poll_interval_ms))});
  std::string last_error;
  while (!stop.stopped()) {
    BackfillStats stats;
    std::string error;
    if (!round(stats, error, &stop)) {
      if (error != last_error) log_line("error", "backfill drain failed", {{"error", error}});
    }
    last_error = error;
    if (stop.wait_for(std::chrono::milliseconds(settings_.poll_interval_ms))) break;
  }
  log_line("info", "backfill worker stopped");
}

BackfillThread::BackfillThread(const Config& config, Metrics* metrics)
    : worker_(config, metrics), thread_([this] { worker_.run(stop_); }) {}

BackfillThread::~BackfillThread() {
  stop_.stop();
  thread_.join();
}

}  // namespace inbox

#include "common/metrics.h"

#include <cstdio>

namespace inbox {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  total_.fetch_add(1, std::memory_order_relaxed);
  sum_micro_.fetch_add(static_cast<std::uint64_t>(v * 1e6), std::memory_order_relaxed);
}

static std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void Histogram::render(std::string& out, const std::string& name) const {
  std::uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    out += name + "_bucket{le=\"" + (i < bounds_.size() ? fmt(bounds_[i]) : "+Inf") + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + fmt(static_cast<double>(sum_micro_.load()) / 1e6) + "\n";
  out += name + "_count " + std::to_string(total_.load()) + "\n";
}

Metrics::Metrics()
    : latency_({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      batch_sizes_({1, 2, 4, 8, 16, 32, 64, 128, 256, 1024}) {}

void Metrics::request(const std::string& provider, const std::string& outcome, int status,
                      double seconds) {
  latency_.observe(seconds);
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{provider, outcome, status}];
}

void Metrics::signature_failure(const std::string& provider) {
  std::lock_guard<std::mutex> lock(mu_);
  ++signature_failures_[provider];
}

void Metrics::batch(std::size_t events) { batch_sizes_.observe(static_cast<double>(events)); }

void Metrics::db_error(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  ++db_errors_[kind];
}

void Metrics::backfill(const std::string& provider, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  ++backfill_[{provider, outcome}];
}

std::pair<std::uint64_t, std::uint64_t> Metrics::answer_counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::pair<std::uint64_t, std::uint64_t> out{0, 0};
  for (const auto& [key, n] : requests_) {
    out.first += n;
    if (std::get<2>(key) >= 500) out.second += n;
  }
  return out;
}

std::string Metrics::render() const {
  std::string out;
  out += "# HELP inbox_receiver_requests_total HTTP requests by provider, outcome and status.\n";
  out += "# TYPE inbox_receiver_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      out += "inbox_receiver_requests_total{provider=\"" + std::get<0>(key) + "\",outcome=\"" +
             std::get<1>(key) + "\",code=\"" + std::to_string(std::get<2>(key)) + "\"} " +
             std::to_string(n) + "\n";
    out += "# HELP inbox_receiver_signature_failures_total Deliveries refused with 401.\n";
    out += "# TYPE inbox_receiver_signature_failures_total counter\n";
    for (const auto& [provider, n] : signature_failures_)
      out += "inbox_receiver_signature_failures_total{provider=\"" + provider + "\"} " +
             std::to_string(n) + "\n";
    out += "# HELP inbox_receiver_db_errors_total Database failures (connect, batch, event).\n";
    out += "# TYPE inbox_receiver_db_errors_total counter\n";
    for (const auto& [kind, n] : db_errors_)
      out += "inbox_receiver_db_errors_total{kind=\"" + kind + "\"} " + std::to_string(n) + "\n";
    out += "# HELP inbox_receiver_backfill_total Backfill requests handled and listings made, "
           "by provider and outcome.\n";
    out += "# TYPE inbox_receiver_backfill_total counter\n";
    for (const auto& [key, n] : backfill_)
      out += "inbox_receiver_backfill_total{provider=\"" + key.first + "\",outcome=\"" + key.second +
             "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP inbox_receiver_header_nul_bytes_total NUL bytes in header values, stored as \\u0000.\n";
  out += "# TYPE inbox_receiver_header_nul_bytes_total counter\n";
  out += "inbox_receiver_header_nul_bytes_total " + std::to_string(header_nul_bytes_.load()) + "\n";
  out += "# HELP inbox_receiver_request_duration_seconds Time from headers read to answer.\n";
  out += "# TYPE inbox_receiver_request_duration_seconds histogram\n";
  latency_.render(out, "inbox_receiver_request_duration_seconds");
  out += "# HELP inbox_receiver_batch_events Events per ingest transaction.\n";
  out += "# TYPE inbox_receiver_batch_events histogram\n";
  batch_sizes_.render(out, "inbox_receiver_batch_events");
  return out;
}

}  // namespace inbox

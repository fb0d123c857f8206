// Counters and histograms rendered in the Prometheus text format at /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace inbox {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> counts_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> sum_micro_{0};  // sum in millionths, to stay atomic
};

class Metrics {
 public:
  Metrics();
  // outcome: accepted, duplicate, bad_signature, bad_request, unknown_provider,
  // refused_body, unavailable, handshake, not_found.
  void request(const std::string& provider, const std::string& outcome, int status, double seconds);
  void signature_failure(const std::string& provider);
  void batch(std::size_t events);
  void db_error(const std::string& kind);  // connect, batch, event
  // NUL bytes found in header values (stored as the text \u0000).
  void header_nul_bytes(std::size_t n) { header_nul_bytes_ += n; }
  // outcome: fetched, not_found, retry, gave_up, lost, db_error (the backfill worker in serve);
  // and per listing: listed, list_truncated, list_error; per tail listing: tail_listed,
  // tail_list_truncated, tail_list_error.
  void backfill(const std::string& provider, const std::string& outcome);
  std::string render() const;
  // {answers, of which 5xx} since start (the alert sender's 5xx rate).
  std::pair<std::uint64_t, std::uint64_t> answer_counts() const;

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests_;
  std::map<std::string, std::uint64_t> signature_failures_;
  std::map<std::string, std::uint64_t> db_errors_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> backfill_;
  std::atomic<std::uint64_t> header_nul_bytes_{0};
  Histogram latency_;
  Histogram batch_sizes_;
};

}  // namespace inbox

#include "intake/http_server.h"

#include <chrono>
#include <ctime>
#include <thread>

#include "common/json_util.h"
#include "common/log.h"
#include "intake/signature.h"

namespace inbox {
namespace {

using Clock = std::chrono::steady_clock;

HttpResponse answer(int status, std::string json, std::string outcome) {
  HttpResponse res;
  res.status = status;
  res.body = std::move(json);
  res.outcome = std::move(outcome);
  return res;
}

// A refusal: the sender gets `message` (short, ours); the log gets `cause`.
HttpResponse refuse(int status, const std::string& outcome, const std::string& message,
                    const std::string& cause = {}) {
  HttpResponse res = answer(status, "{\"error\":" + json_quote(message) + "}", outcome);
  res.error = cause.empty() ? message : cause;
  return res;
}

// The path without its query.
std::string path_of(const std::string& target) { return target.substr(0, target.find('?')); }

}  // namespace

std::pair<std::string, int> split_listen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) throw ConfigError("listen must be host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    throw ConfigError("listen port is not a number: " + listen);
  }
  if (port < 0 || port > 65535) throw ConfigError("listen port out of range: " + listen);
  return {host, port};
}

Receiver::Receiver(Config config, UnixClock clock)
    : config_(std::move(config)),
      clock_(clock ? std::move(clock) : [] { return static_cast<std::int64_t>(std::time(nullptr)); }),
      // One connection more than flushers, so /readyz never waits behind them.
      pool_(db_settings_for(config_, config_.database_url, "inbox-receiver"),
            static_cast<std::size_t>(config_.pool_size) + 1) {
  for (const auto& p : config_.providers) providers_.emplace(p.name, make_provider(p));
  GroupCommitOptions gco;
  gco.flushers = config_.pool_size;
  gco.deadline = std::chrono::milliseconds(config_.deadline_ms);
  gco.max_queued_bytes = config_.max_queued_bytes;
  if (config_.batching) {
    gco.max_events = static_cast<std::size_t>(config_.batch_max_events);
    gco.max_wait = std::chrono::microseconds(config_.batch_max_wait_us);
  } else {
    gco.max_events = 1;  // the baseline: one transaction per request
    gco.max_wait = std::chrono::microseconds(0);
  }
  group_commit_ = std::make_unique<GroupCommit>(pool_, metrics_, gco);
  stats_ = std::make_unique<ReceiverStats>(
      db_settings_for(config_, config_.database_url, "inbox-receiver-stats"), config_.stats_interval_ms);

  auto [host, port] = split_listen(config_.listen);
  ListenerOptions lo;
  lo.host = host;
  lo.port = port;
  // Default: half the cores. The flushers, Postgres and often the load
  // balancer share them; on 2 cores one I/O thread served more than two
  // (fewer context switches per request, bench/receiver/README.md).
  lo.threads = config_.http_threads > 0 ? config_.http_threads
                                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  lo.backlog = config_.listen_backlog;
  lo.max_connections = static_cast<std::size_t>(config_.max_connections);
  lo.max_header_bytes = static_cast<std::size_t>(config_.max_header_bytes);
  lo.max_header_count = static_cast<std::size_t>(config_.max_header_count);
  lo.max_body_bytes = config_.max_body_bytes;
  lo.head_timeout_ms = config_.read_timeout_ms;
  lo.idle_timeout_ms = config_.keep_alive_timeout_s * 1000;
  lo.min_body_rate = static_cast<std::size_t>(config_.min_body_rate);
  lo.write_timeout_ms = config_.write_timeout_ms;
  lo.keep_alive_max_requests = config_.keep_alive_max_requests;
  listener_ = std::make_unique<HttpListener>(lo, *this);
  ready_thread_ = std::thread([this] { ready_loop(); });
}

Receiver::~Receiver() { stop(); }

int Receiver::bind() {
  if (port_ > 0) return port_;
  try {
    port_ = listener_->bind();
  } catch (const std::exception& e) {
    throw ConfigError("cannot listen on " + config_.listen + ": " + e.what());
  }
  return port_;
}

int Receiver::start() {
  bind();
  if (!started_) {
    listener_->start();
    stats_->start();
  }
  started_ = true;
  return port_;
}

void Receiver::stop() {
  if (stopped_) return;
  stopped_ = true;
  listener_->stop(config_.drain_ms);  // in-flight requests are answered first
  group_commit_->stop();
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    ready_stop_ = true;
  }
  ready_cv_.notify_all();
  if (ready_thread_.joinable()) ready_thread_.join();
  stats_->stop();  // after the last answers: their counts go in its last flush
}

void Receiver::handle(HttpRequest req, Respond respond, boost::asio::any_io_executor) {
  const std::string path = path_of(req.target);
  static const std::string kWebhooks = "/webhooks/";
  if (path.compare(0, kWebhooks.size(), kWebhooks) == 0 && path.size() > kWebhooks.size() &&
      path.find('/', kWebhooks.size()) == std::string::npos) {
    if (req.method != "POST") return respond(refuse(405, "not_found", "method not allowed"));
    return handle_webhook(path.substr(kWebhooks.size()), req, respond);
  }
  if (req.method == "GET" && path == "/healthz") return respond(answer(200, "{\"status\":\"ok\"}", "ops"));
  if (req.method == "GET" && path == "/readyz") return ready_async(std::move(respond));
  // Issue 9: with admin_listen set, /metrics is served there only (docs/alerts.md).
  if (req.method == "GET" && path == "/metrics" && config_.admin.listen.empty()) {
    HttpResponse res = answer(200, metrics_.render(), "ops");
    res.content_type = "text/plain; version=0.0.4";
    return respond(std::move(res));
  }
  respond(refuse(404, "not_found", "not found"));
}

void Receiver::handle_webhook(const std::string& name, HttpRequest& req, Respond& respond) {
  auto it = providers_.find(name);
  if (it == providers_.end()) return respond(refuse(404, "unknown_provider", "unknown provider"));
  const Provider& provider = *it->second;
  if (req.nul_bytes) metrics_.header_nul_bytes(req.nul_bytes);

  GroupCommit::Arrival arrival(*group_commit_);
  Delivery d{req.headers, req.body, clock_()};
  Check check = provider.verify(d);
  auto with_provider = [&](HttpResponse res) {
    res.provider = name;
    return res;
  };
  if (!check.ok()) {
    metrics_.signature_failure(name);
    return respond(with_provider(refuse(check.status, "bad_signature", check.message)));
  }
  Extracted x;
  check = provider.extract(d, x);
  if (!check.ok()) return respond(with_provider(refuse(check.status, "bad_request", check.message)));
  if (x.handshake_reply) return respond(with_provider(answer(200, *x.handshake_reply, "handshake")));

  std::string id = x.external_id;
  int retry_after = config_.retry_after_s;
  auto finish = [name, id, retry_after](EventResult r) {
    HttpResponse res;
    switch (r.outcome) {
      case Outcome::inserted:
      case Outcome::updated: res = answer(200, "{\"status\":\"accepted\"}", "accepted"); break;
      case Outcome::duplicate: res = answer(200, "{\"status\":\"duplicate\"}", "duplicate"); break;
      case Outcome::invalid: res = refuse(400, "bad_request", "event refused", r.detail); break;
      case Outcome::too_large:
        res = refuse(413, "too_large", "event too large to store", r.detail);
        break;
      case Outcome::unavailable:
        res = refuse(503, "unavailable", "temporarily unavailable", r.detail);
        res.headers.emplace_back("Retry-After", std::to_string(retry_after));
        break;
    }
    res.provider = name;
    res.external_id = id;
    return res;
  };
  // The deadline is group commit's: at it, whatever the database does, the
  // sender gets 503. The answer is written from the thread that has the
  // outcome (intake/http_listener: no hop back to an I/O thread first).
  group_commit_->submit_async(
      Event{name, std::move(x.external_id), std::move(x.payload_json), headers_json(req.headers),
            sha256(req.body), provider.config().scheme},
      arrival,
      [respond, finish](EventResult r) { respond(finish(std::move(r))); });
}

HttpResponse Receiver::ready() {
  // Not ready while ingest fails (database down, function missing, no
  // grant) or the database does not answer within a second.
  auto deadline = Clock::now() + std::chrono::seconds(1);
  std::string error = "ingest failing";
  if (!group_commit_->ingest_failing()) {
    auto lease = pool_.acquire(deadline);
    if (lease && (*lease)->probe(error, deadline)) return answer(200, "{\"status\":\"ready\"}", "ops");
    if (!lease) error = "no database connection free";
  }
  HttpResponse res = refuse(503, "ops", "not ready", error);
  res.body = "{\"status\":\"database unreachable\"}";
  res.headers.emplace_back("Retry-After", std::to_string(config_.retry_after_s));
  return res;
}

void Receiver::ready_async(Respond respond) {
  std::lock_guard<std::mutex> lock(ready_mu_);
  ready_waiters_.push_back(std::move(respond));
  ready_cv_.notify_one();
}

void Receiver::ready_loop() {
  std::unique_lock<std::mutex> lock(ready_mu_);
  for (;;) {
    ready_cv_.wait(lock, [&] { return ready_stop_ || !ready_waiters_.empty(); });
    if (ready_waiters_.empty()) return;  // stopping, and every request answered
    std::vector<Respond> waiters;
    waiters.swap(ready_waiters_);
    lock.unlock();
    HttpResponse res = ready();
    for (Respond& r : waiters) r(res);
    lock.lock();
  }
}

std::string Receiver::provider_of(const std::string& path, const HttpResponse& res) const {
  if (providers_.count(res.provider)) return res.provider;  // "-" before routing
  // Refused before routing (411, 413, 415...): the path names the provider.
  static const std::string kWebhooks = "/webhooks/";
  if (path.compare(0, kWebhooks.size(), kWebhooks) != 0) return {};
  std::string name = path.substr(kWebhooks.size());
  return providers_.count(name) ? name : std::string();
}

void Receiver::answered(const HttpRequest& req, const HttpResponse& res, double seconds) {
  const std::string path = path_of(req.target);
  if (path == "/metrics" || path == "/healthz" || path == "/readyz") {
    if (res.status >= 500 && request_logging())
      log_line("warn", "not ready", {{"path", path}, {"error", res.error}});
    return;
  }
  std::string outcome = res.outcome.empty() ? "error" : res.outcome;
  metrics_.request(res.provider, outcome, res.status, seconds);
  stats_->answered(provider_of(path, res), res.status, outcome);
  if (!request_logging()) return;
  std::vector<LogField> f = {{"method", req.method},
                             {"path", is_valid_utf8(path) ? path : "(not UTF-8)"},
                             {"provider", res.provider},
                             num("status", static_cast<long long>(res.status)),
                             {"outcome", outcome},
                             num("latency_ms", seconds * 1000.0),
                             {"remote", req.remote}};  // the socket peer, never a header
  if (!res.external_id.empty() && is_valid_utf8(res.external_id)) f.push_back({"external_id", res.external_id});
  if (!res.error.empty()) f.push_back({"error", res.error});
  log_line(res.status >= 500 ? "warn" : "info", "request", f);
}

}  // namespace inbox

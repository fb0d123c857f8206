#include "intake/http_server.h"

#include <cctype>
#include <chrono>
#include <ctime>

#include "common/json_util.h"
#include "common/log.h"
#include "intake/thread_pool.h"

namespace inbox {
namespace {

using Clock = std::chrono::steady_clock;

// What one request did, for the log line and metrics written after the
// answer. cpp-httplib runs a request start to finish on one thread.
struct RequestContext {
  Clock::time_point start;
  std::string provider = "-";
  std::string outcome;
  std::string external_id;
  std::string error;
};
thread_local RequestContext t_ctx;

void answer(httplib::Response& res, int status, const std::string& json) {
  res.status = status;
  res.set_content(json, "application/json");
}

void refuse(httplib::Response& res, int status, const std::string& outcome, const std::string& why) {
  t_ctx.outcome = outcome;
  t_ctx.error = why;
  answer(res, status, "{\"error\":" + json_quote(why) + "}");
}

// The body of a refused request is never read, so its bytes must not be
// parsed as the next request on this connection (a proxy that pools
// connections would then hand one client's answer to another).
// cpp-httplib 0.11.4 ignores "Connection: close" set by a handler, but it
// does close the connection when a content provider reports failure: write
// the whole answer, then report failure.
void close_after_answer(httplib::Response& res) {
  std::string body = res.body;
  std::string type = res.get_header_value("Content-Type");
  res.body.clear();
  res.headers.erase("Content-Type");  // set again by set_content_provider
  res.set_header("Connection", "close");
  res.set_content_provider(
      body.size(), type.c_str(),
      [body](size_t offset, size_t length, httplib::DataSink& sink) {
        sink.write(body.data() + offset, length);
        return false;  // all written; "failure" makes cpp-httplib close the socket
      });
}

std::string lower_trim(std::string s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

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
  if (config_.batching) {
    gco.max_events = static_cast<std::size_t>(config_.batch_max_events);
    gco.max_wait = std::chrono::microseconds(config_.batch_max_wait_us);
  } else {
    gco.max_events = 1;  // the baseline: one transaction per request
    gco.max_wait = std::chrono::microseconds(0);
  }
  group_commit_ = std::make_unique<GroupCommit>(pool_, metrics_, gco);
  install_routes();
}

Receiver::~Receiver() { stop(); }

void Receiver::install_routes() {
  const auto threads = static_cast<std::size_t>(config_.http_threads);
  const auto queued = static_cast<std::size_t>(config_.http_max_queued);
  // A fixed number of worker threads (a keep-alive connection holds one) and
  // a bounded queue of accepted connections waiting for a thread.
  server_.new_task_queue = [threads, queued] { return new BoundedThreadPool(threads, queued); };
  // Off by default in cpp-httplib: costs ~40 ms per keep-alive request.
  server_.set_tcp_nodelay(true);
  // cpp-httplib 0.11.4 listens with a backlog of 5: a burst of new
  // connections would see dropped SYNs and a 1 s retransmit. Keep the
  // listening socket so bind() can raise the backlog (listen() again).
  server_.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  server_.set_read_timeout(config_.read_timeout_ms / 1000, (config_.read_timeout_ms % 1000) * 1000);
  server_.set_write_timeout(config_.write_timeout_ms / 1000, (config_.write_timeout_ms % 1000) * 1000);
  server_.set_keep_alive_timeout(config_.keep_alive_timeout_s);
  server_.set_keep_alive_max_count(static_cast<size_t>(config_.keep_alive_max_requests));
  server_.set_payload_max_length(config_.max_body_bytes);

  server_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return pre_route(req, res); });
  server_.Post(R"(/webhooks/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    handle_webhook(req, res);
  });
  server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    answer(res, 200, "{\"status\":\"ok\"}");
  });
  server_.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) { handle_ready(res); });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  server_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ > 0) return;  // already answered
    if (t_ctx.outcome.empty()) t_ctx.outcome = res.status == 404 ? "not_found" : "error";
    answer(res, res.status, res.status == 404 ? "{\"error\":\"not found\"}" : "{\"error\":\"refused\"}");
  });
  server_.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { after_response(req, res); });
}

// Runs after the headers and before the body is read: refuse what cpp-httplib
// 0.11.4 would otherwise mishandle (chunked bodies bypass the size limit,
// gzip is inflated without a bound).
httplib::Server::HandlerResponse Receiver::pre_route(const httplib::Request& req,
                                                     httplib::Response& res) {
  t_ctx = RequestContext{};
  t_ctx.start = Clock::now();
  auto refuse_and_close = [&](int status, const std::string& why) {
    refuse(res, status, "refused_body", why);
    close_after_answer(res);
    return httplib::Server::HandlerResponse::Handled;
  };
  if (req.has_header("Transfer-Encoding"))
    return refuse_and_close(411, "Transfer-Encoding is not accepted; send Content-Length");
  if (req.has_header("Content-Encoding") &&
      lower_trim(req.get_header_value("Content-Encoding")) != "identity")
    return refuse_and_close(415, "Content-Encoding is not accepted; send the body uncompressed");
  if (req.has_header("Content-Length")) {
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
      return refuse_and_close(400, "bad Content-Length");
    if (std::stoull(v) > config_.max_body_bytes)
      return refuse_and_close(413, "body larger than " + std::to_string(config_.max_body_bytes) + " bytes");
  } else if (req.method == "POST") {
    return refuse_and_close(411, "Content-Length required");
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void Receiver::handle_webhook(const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  auto it = providers_.find(name);
  if (it == providers_.end()) return refuse(res, 404, "unknown_provider", "unknown provider");
  const Provider& provider = *it->second;
  t_ctx.provider = name;

  GroupCommit::Arrival arrival(*group_commit_);
  Delivery d{req.headers, req.body, clock_()};
  Check check = provider.verify(d);
  if (!check.ok()) {
    metrics_.signature_failure(name);
    return refuse(res, check.status, "bad_signature", check.message);
  }
  Extracted x;
  check = provider.extract(d, x);
  if (!check.ok()) return refuse(res, check.status, "bad_request", check.message);
  if (x.handshake_reply) {
    t_ctx.outcome = "handshake";
    return answer(res, 200, *x.handshake_reply);
  }
  t_ctx.external_id = x.external_id;

  EventResult r = group_commit_->submit(
      Event{name, std::move(x.external_id), std::move(x.payload_json), headers_json(req.headers)}, arrival);
  switch (r.outcome) {
    case Outcome::inserted:
    case Outcome::updated:
      t_ctx.outcome = "accepted";
      return answer(res, 200, "{\"status\":\"accepted\"}");
    case Outcome::duplicate:
      t_ctx.outcome = "duplicate";
      return answer(res, 200, "{\"status\":\"duplicate\"}");
    case Outcome::invalid:
      return refuse(res, 400, "bad_request", "event refused by the database: " + r.detail);
    case Outcome::unavailable:
      res.set_header("Retry-After", std::to_string(config_.retry_after_s));
      return refuse(res, 503, "unavailable", r.detail);
  }
}

void Receiver::handle_ready(httplib::Response& res) {
  t_ctx.outcome = "ops";
  auto deadline = Clock::now() + std::chrono::seconds(1);
  auto lease = pool_.acquire(deadline);
  std::string error;
  if (lease && (*lease)->ping(error, deadline)) return answer(res, 200, "{\"status\":\"ready\"}");
  res.set_header("Retry-After", std::to_string(config_.retry_after_s));
  answer(res, 503, "{\"status\":\"database unreachable\"}");
}

void Receiver::after_response(const httplib::Request& req, const httplib::Response& res) {
  if (req.path == "/metrics" || req.path == "/healthz" || req.path == "/readyz") return;
  double seconds = std::chrono::duration<double>(Clock::now() - t_ctx.start).count();
  std::string outcome = t_ctx.outcome.empty() ? "error" : t_ctx.outcome;
  metrics_.request(t_ctx.provider, outcome, res.status, seconds);
  if (!request_logging()) return;
  std::vector<LogField> f = {{"method", req.method},
                             {"path", req.path},
                             {"provider", t_ctx.provider},
                             num("status", static_cast<long long>(res.status)),
                             {"outcome", outcome},
                             num("latency_ms", seconds * 1000.0),
                             num("bytes", static_cast<long long>(req.body.size())),
                             {"remote", req.remote_addr}};  // the socket peer, never a header
  if (!t_ctx.external_id.empty()) f.push_back({"external_id", t_ctx.external_id});
  if (!t_ctx.error.empty()) f.push_back({"error", t_ctx.error});
  log_line(res.status >= 500 ? "warn" : "info", "request", f);
}

int Receiver::bind() {
  auto [host, port] = split_listen(config_.listen);
  port_ = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) throw ConfigError("cannot listen on " + config_.listen);
  if (listen_fd_ >= 0) ::listen(listen_fd_, config_.listen_backlog);
  return port_;
}

void Receiver::serve() { server_.listen_after_bind(); }

int Receiver::start() {
  int p = bind();
  serve_thread_ = std::thread([this] { serve(); });
  // stop() is a no-op until the accept loop runs (0.11.4 has no
  // wait_until_ready), so do not hand back control before it does.
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return p;
}

void Receiver::stop() {
  if (stopped_) return;
  stopped_ = true;
  server_.stop();  // closes the listener; workers finish their requests
  if (serve_thread_.joinable()) serve_thread_.join();
  group_commit_->stop();
}

}  // namespace inbox

#include "forward/forwarder.h"

#include <httplib.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "common/pg_session.h"
#include "forward/webhook_signer.h"

namespace inbox {

void ForwardStop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

bool ForwardStop::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

bool ForwardStop::wait_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [&] { return stopped_; });
}

void RateLimit::acquire() {
  if (rate_ <= 0) return;
  std::chrono::steady_clock::time_point slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot = std::max(std::chrono::steady_clock::now(), next_);
    next_ = slot + std::chrono::microseconds(static_cast<long long>(1e6 / rate_));
  }
  std::this_thread::sleep_until(slot);
}

namespace {

// Outbox routes use the outbox functions, provider routes the event queue's.
const std::vector<PgStatement> kStatements = {
    {"claim_outbox",
     "SELECT id, key, payload::text, headers::text, attempt, lease_token, topic, false FROM inbox.claim_outbox("
     "$1::text[], $2::int, $3::int * interval '1 second', $4::boolean, $5::text, $6::text)"},
    // The 2xx answers of one claim complete in one statement: one commit.
    {"complete_outbox",
     "SELECT inbox.complete_outbox(t.id, t.token, t.status) FROM unnest($1::bigint[], $2::uuid[], $3::int[]) "
     "WITH ORDINALITY AS t(id, token, status, n) ORDER BY t.n"},
    {"fail_outbox",
     "SELECT inbox.fail_outbox($1::bigint, $2::uuid, $3::text, $4::int * interval '1 second', $5::int, "
     "$6::int * interval '1 millisecond', $7::int * interval '1 second', $8::int)"},
    {"reject_outbox", "SELECT inbox.reject_outbox($1::bigint, $2::uuid, $3::text, $4::int)"},
    // is_replay: the event was processed before and runs again on purpose (inbox.replay).
    {"claim_events",
     "SELECT id, external_id, payload::text, NULL::text, attempts, lease_token, provider, is_replay FROM inbox.claim("
     "$1::int, $2::int * interval '1 second', $3::text)"},
    {"complete_event",
     "SELECT inbox.complete(t.id, t.token) FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS t(id, token, n) "
     "ORDER BY t.n"},
    {"fail_event", "SELECT inbox.fail($1::bigint, $2::uuid, $3::text, $4::int * interval '1 second')"},
};

struct Claimed {
  std::string id, key, payload, headers, attempt, token, topic;
  bool replay;  // x-inbox-replay: an event replayed by inbox.replay (never an outbox message)
};

// What the consumer's answer means for the message.
struct Answer {
  enum Kind { kDelivered, kRejected, kFailed } kind;
  int status = 0;          // 0: no HTTP answer
  std::string error;       // for the history; never the consumer's body
  std::string retry_after; // seconds, from Retry-After; empty: the backoff decides
};

std::string retry_after_seconds(const std::string& v) {
  if (v.empty() || v.size() > 6 || !std::all_of(v.begin(), v.end(), ::isdigit)) return {};
  return std::to_string(std::min(std::atoi(v.c_str()), 3600));
}

// Headers a message may add: string values, none of the signed or framing ones.
void add_message_headers(const std::string& json, httplib::Headers& out) {
  if (json.empty()) return;
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(json).get(obj) != simdjson::SUCCESS) return;
  for (auto field : obj) {
    std::string name(field.key);
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower.rfind("webhook-", 0) == 0 || lower.rfind("x-inbox-", 0) == 0 || lower == "content-type" ||
        lower == "content-length" || lower == "host" || lower == "transfer-encoding" || lower == "connection")
      continue;
    std::string_view value;
    if (field.value.get(value) != simdjson::SUCCESS) continue;
    if (value.find_first_of("\r\n") != std::string_view::npos) continue;
    out.emplace(name, std::string(value));
  }
}

struct Endpoint {
  std::string origin, path;
};

Endpoint split_url(const std::string& url) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme + 3);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

}  // namespace

Forwarder::Forwarder(const Config& config, ForwardConfig forward) : config_(config), forward_(std::move(forward)) {
  if (forward_.routes.empty()) throw ConfigError("no [[route]] in the config: nothing to forward");
  for (const RouteConfig& r : forward_.routes) {
    WebhookSigner check(r.secret);  // a bad secret is a config error now, not at the first message
    (void)check;
    limits_.push_back(std::make_unique<RateLimit>(r.rate_per_s));
  }
}

Forwarder::~Forwarder() { stop(); }

void Forwarder::start(bool once) {
  for (size_t i = 0; i < forward_.routes.size(); ++i)
    for (int t = 0; t < forward_.routes[i].concurrency; ++t) threads_.emplace_back([this, i, once] { run_route(i, once); });
}

void Forwarder::stop() {
  stop_.stop();
  join();
}

void Forwarder::join() {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Forwarder::run_route(size_t route_index, bool once) {
  const RouteConfig& route = forward_.routes[route_index];
  const bool outbox = !route.topics.empty();
  PgSession db(db_settings_for(config_, forward_.database_url, "inbox-receiver forward"), kStatements);
  WebhookSigner signer(route.secret);
  Endpoint endpoint = split_url(route.url);
  httplib::Client client(endpoint.origin);
  const time_t sec = route.timeout_ms / 1000, usec = (route.timeout_ms % 1000) * 1000;
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_follow_location(false);

  // A claim is sent one message after another: no more than fit in a lease,
  // counting the worst answer time and the wait for a rate slot.
  const long long rate_wait_ms = route.rate_per_s > 0 ? static_cast<long long>(route.concurrency * 1000 / route.rate_per_s) : 0;
  const long long worst_ms = route.timeout_ms + 1000 + rate_wait_ms;
  const int rows = static_cast<int>(std::max(1LL, std::min<long long>(route.batch_size, route.lease_s * 1000LL / worst_ms)));
  const std::string topics = pg_array_literal(route.topics, [](const std::string& s) { return s; });
  const std::string rows_s = std::to_string(rows), lease_s = std::to_string(route.lease_s);
  const std::string max_attempts = std::to_string(route.max_attempts);
  const std::string backoff_base = std::to_string(route.backoff_base_ms);
  const std::string backoff_max = std::to_string(route.backoff_max_s);
  auto or_null = [](const std::string& s, bool set) { return set ? s.c_str() : nullptr; };

  while (!stop_.stopped()) {
    PgCall claim = outbox ? db.exec_prepared("claim_outbox", {topics.c_str(), rows_s.c_str(), lease_s.c_str(),
                                                             route.ordered ? "true" : "false",
                                                             route.on_lease_expiry.c_str(), route.name.c_str()})
                          : db.exec_prepared("claim_events", {rows_s.c_str(), lease_s.c_str(), route.provider.c_str()});
    if (!claim.ok) {
      ++stats_.db_errors;
      log_line("warn", "forward claim failed", {{"route", route.name}, {"sqlstate", claim.sqlstate}});
      if (stop_.wait_for(std::chrono::milliseconds(forward_.poll_interval_ms))) break;
      continue;
    }
    if (claim.rows() == 0) {
      if (once) break;
      stop_.wait_for(std::chrono::milliseconds(forward_.poll_interval_ms));
      continue;
    }
    std::vector<Claimed> batch;
    for (int r = 0; r < claim.rows(); ++r)
      batch.push_back({claim.value(r, 0), claim.value(r, 1), claim.value(r, 2),
                       claim.is_null(r, 3) ? "" : claim.value(r, 3), claim.value(r, 4), claim.value(r, 5),
                       claim.value(r, 6), std::string(claim.value(r, 7)) == "t"});

    std::vector<const Claimed*> delivered;
    std::vector<int> delivered_status;
    for (const Claimed& m : batch) {
      Answer answer{Answer::kFailed, 0, "", ""};
      limits_[route_index]->acquire();
      {
        const std::string webhook_id = (outbox ? "msg_" : "evt_") + m.id;
        const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
        httplib::Headers headers;
        if (outbox) add_message_headers(m.headers, headers);
        headers.emplace("webhook-id", webhook_id);
        headers.emplace("webhook-timestamp", std::to_string(now));
        headers.emplace("webhook-signature", signer.sign(webhook_id, now, m.payload));
        headers.emplace("webhook-attempt", m.attempt);
        headers.emplace("x-inbox-replay", m.replay ? "true" : "false");
        headers.emplace(outbox ? "x-inbox-topic" : "x-inbox-provider", m.topic);
        auto res = client.Post(endpoint.path, headers, m.payload, "application/json");
        if (!res) {
          answer = {Answer::kFailed, 0, httplib::to_string(res.error()), ""};
        } else if (res->status >= 200 && res->status < 300) {
          answer = {Answer::kDelivered, res->status, "", ""};
        } else if (res->status == 410 && outbox) {
          answer = {Answer::kRejected, res->status, "HTTP 410", ""};
        } else {
          answer = {Answer::kFailed, res->status, "HTTP " + std::to_string(res->status),
                    retry_after_seconds(res->get_header_value("Retry-After"))};
        }
      }
      const std::string status = std::to_string(answer.status);
      if (answer.kind == Answer::kDelivered) {
        delivered.push_back(&m);
        delivered_status.push_back(answer.status);
        continue;
      }
      PgCall report;
      if (answer.kind == Answer::kRejected) {
        report = db.exec_prepared("reject_outbox", {m.id.c_str(), m.token.c_str(), answer.error.c_str(), status.c_str()});
      } else {
        const char* retry = or_null(answer.retry_after, !answer.retry_after.empty());
        report = outbox ? db.exec_prepared("fail_outbox", {m.id.c_str(), m.token.c_str(), answer.error.c_str(), retry,
                                                           or_null(max_attempts, route.max_attempts > 0),
                                                           or_null(backoff_base, route.backoff_base_ms > 0),
                                                           or_null(backoff_max, route.backoff_max_s > 0),
                                                           or_null(status, answer.status > 0)})
                        : db.exec_prepared("fail_event", {m.id.c_str(), m.token.c_str(), answer.error.c_str(), retry});
      }
      if (!report.ok || report.rows() != 1) {
        // The lease runs out and the message is delivered again (same webhook-id).
        ++stats_.db_errors;
        log_line("warn", "forward report failed", {{"route", route.name}, {"id", m.id}, {"sqlstate", report.sqlstate}});
        continue;
      }
      const std::string outcome = report.value(0, 0);
      if (outcome == "lost") {
        ++stats_.lost;
      } else if (outcome == "rejected") {
        ++stats_.rejected;
      } else if (outcome == "dead") {
        ++stats_.dead;
      } else {
        ++stats_.retried;
      }
      if (request_logging())
        log_line("info", "forward attempt failed", {{"route", route.name}, {"id", m.id}, {"attempt", m.attempt},
                                                     {"error", answer.error}, {"outcome", outcome}});
    }
    if (delivered.empty()) continue;
    // Until this commits, a crash sends these messages again (same webhook-id).
    const std::string ids = pg_array_literal(delivered, [](const Claimed* m) { return m->id; });
    const std::string tokens = pg_array_literal(delivered, [](const Claimed* m) { return m->token; });
    const std::string statuses = pg_array_literal(delivered_status, [](int s) { return std::to_string(s); });
    PgCall done = outbox ? db.exec_prepared("complete_outbox", {ids.c_str(), tokens.c_str(), statuses.c_str()})
                         : db.exec_prepared("complete_event", {ids.c_str(), tokens.c_str()});
    if (!done.ok || done.rows() != static_cast<int>(delivered.size())) {
      stats_.db_errors += 1;
      log_line("warn", "forward completion failed", {{"route", route.name}, {"sqlstate", done.sqlstate},
                                                     num("messages", static_cast<long long>(delivered.size()))});
      continue;
    }
    for (int r = 0; r < done.rows(); ++r) ++(std::string(done.value(r, 0)) == "t" ? stats_.delivered : stats_.lost);
  }
}

}  // namespace inbox

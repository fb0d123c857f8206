#include "common/pg_session.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>
#include <thread>

#include "common/log.h"

namespace inbox {
namespace {

using Clock = PgSession::Clock;

// Session settings, one round trip. synchronous_commit: a 2xx is sent only
// after the commit, so the commit must be durable even where the server's
// default is off (or local); stricter server settings (remote_*) are kept.
// client_connection_check_interval: a backend whose client gave up (we
// dropped a stuck connection) stops its query instead of finishing it.
std::string session_setup_sql(const DbSettings& s) {
  return "SET statement_timeout = " + std::to_string(s.statement_timeout_ms) +
         "; SET client_connection_check_interval = 1000"
         "; SELECT CASE WHEN current_setting('synchronous_commit') IN ('off', 'local')"
         " THEN set_config('synchronous_commit', 'on', false) END";
}

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Waits for `events` on the socket until the deadline; false on timeout.
bool wait_socket(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{sock, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let libpq report the socket's error
  }
}

// Cancel requests open a connection of their own and, in libpq 15, block
// until the server closes it: run them off the caller's thread, and only a
// few at a time (a black hole would hold each until TCP gives up).
std::atomic<int> g_cancels_in_flight{0};
constexpr int kMaxCancelsInFlight = 2;

void cancel_in_background(PGconn* conn) {
  if (g_cancels_in_flight.fetch_add(1) >= kMaxCancelsInFlight) {
    g_cancels_in_flight.fetch_sub(1);
    return;  // the server's statement_timeout and connection check end it
  }
  PGcancel* cancel = PQgetCancel(conn);
  if (!cancel) {
    g_cancels_in_flight.fetch_sub(1);
    return;
  }
  std::thread([cancel] {
    char err[256];
    PQcancel(cancel, err, sizeof err);
    PQfreeCancel(cancel);
    g_cancels_in_flight.fetch_sub(1);
  }).detach();
}

}  // namespace

DbSettings db_settings_for(const Config& config, const std::string& url, const std::string& application) {
  DbSettings s;
  s.url = url;
  s.connect_timeout_s = config.connect_timeout_s;
  s.statement_timeout_ms = config.statement_timeout_ms;
  // The client gives up a little after the server would have.
  s.query_deadline_ms = config.statement_timeout_ms + 1000;
  s.tcp_user_timeout_ms = config.statement_timeout_ms + 2000;
  s.application_name = application;
  return s;
}

bool PgSession::connect(Clock::time_point deadline, std::string& error) {
  std::string timeout = std::to_string(settings_.connect_timeout_s);
  std::string user_timeout = std::to_string(settings_.tcp_user_timeout_ms);
  // Defaults first: with expand_dbname the URI's own values override them.
  const char* keys[] = {"application_name", "connect_timeout", "keepalives", "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname",
                        nullptr};
  const char* values[] = {settings_.application_name.c_str(), timeout.c_str(), "1", "5", "2", "3",
                          user_timeout.c_str(), settings_.url.c_str(), nullptr};
  conn_.reset(PQconnectStartParams(keys, values, 1));
  if (!conn_) {
    error = "out of memory";
    return false;
  }
  if (PQstatus(conn_.get()) == CONNECTION_BAD) {
    error = trimmed(PQerrorMessage(conn_.get()));
    return false;
  }
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (st == PGRES_POLLING_FAILED) {
      error = trimmed(PQerrorMessage(conn_.get()));
      return false;
    }
    short events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    if (!wait_socket(PQsocket(conn_.get()), events, deadline)) {
      error = "timeout expired while connecting";
      return false;
    }
    st = PQconnectPoll(conn_.get());
  }
  // Non-blocking: sending a large batch to a stuck server must not block.
  if (PQsetnonblocking(conn_.get(), 1) != 0) {
    error = trimmed(PQerrorMessage(conn_.get()));
    return false;
  }
  return true;
}

bool PgSession::setup(Clock::time_point deadline, std::string& error) {
  std::string sql = session_setup_sql(settings_);
  if (!PQsendQuery(conn_.get(), sql.c_str())) {
    error = trimmed(PQerrorMessage(conn_.get()));
    return false;
  }
  PgCall c = wait_result(deadline);
  for (const PgStatement& s : statements_) {
    if (!c.ok) break;
    if (!PQsendPrepare(conn_.get(), s.name, s.sql, 0, nullptr)) {
      error = trimmed(PQerrorMessage(conn_.get()));
      return false;
    }
    c = wait_result(deadline);
  }
  if (!c.ok) error = c.message;
  return c.ok;
}

bool PgSession::ensure(std::string& error) {
  if (connected()) return true;
  conn_.reset();
  auto now = Clock::now();
  if (now - last_failure_ < std::chrono::milliseconds(200)) {
    error = last_error_;  // do not hammer a database that just refused us
    return false;
  }
  auto deadline = now + std::chrono::seconds(settings_.connect_timeout_s);
  if (connect(deadline, error) && setup(deadline, error)) return true;
  conn_.reset();
  last_failure_ = Clock::now();
  // Logged with its cause ("too many connections", "password authentication
  // failed", ...): once per change, and at most every 5 s while it lasts.
  if (error != last_error_ || last_failure_ - last_logged_ > std::chrono::seconds(5)) {
    log_line("warn", "database connect failed",
             {{"application", settings_.application_name}, {"error", error}});
    last_logged_ = last_failure_;
  }
  last_error_ = error;
  return false;
}

PgCall PgSession::client_failure(std::string why, bool timed_out) {
  PgCall c;
  c.message = std::move(why);
  c.connection_lost = true;
  c.timed_out = timed_out;
  if (timed_out && conn_) cancel_in_background(conn_.get());
  conn_.reset();
  return c;
}

// Flushes what is queued, then collects every result of the command: the
// first error wins, else the last result.
PgCall PgSession::wait_result(Clock::time_point deadline) {
  PGconn* conn = conn_.get();
  int sock = PQsocket(conn);
  for (;;) {
    int f = PQflush(conn);
    if (f < 0) return client_failure(trimmed(PQerrorMessage(conn)), false);
    if (f == 0) break;
    if (!wait_socket(sock, POLLIN | POLLOUT, deadline))
      return client_failure("query deadline passed while sending", true);
    if (!PQconsumeInput(conn)) return client_failure(trimmed(PQerrorMessage(conn)), false);
  }
  PgCall out;
  bool have_error = false;
  for (;;) {
    while (PQisBusy(conn)) {
      if (!wait_socket(sock, POLLIN, deadline)) return client_failure("query deadline passed", true);
      if (!PQconsumeInput(conn)) return client_failure(trimmed(PQerrorMessage(conn)), false);
    }
    PgResult r(PQgetResult(conn));
    if (!r) break;
    if (have_error) continue;
    ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
      out.ok = true;
      out.result = std::move(r);
      continue;
    }
    have_error = true;
    out.ok = false;
    if (const char* s = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE)) out.sqlstate = s;
    if (const char* m = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY)) out.message = m;
    if (out.message.empty()) out.message = trimmed(PQerrorMessage(conn));
    out.result = std::move(r);
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    out.ok = false;
    out.connection_lost = true;
    if (out.message.empty()) out.message = trimmed(PQerrorMessage(conn));
    conn_.reset();
  } else if (have_error && out.sqlstate.empty()) {
    out.connection_lost = true;  // no SQLSTATE: a client-side failure
    conn_.reset();
  }
  return out;
}

std::optional<PgCall> PgSession::unreachable() {
  std::string error;
  if (ensure(error)) return std::nullopt;
  PgCall c;
  c.message = error;
  c.connection_lost = true;
  return c;
}

PgCall PgSession::exec_prepared(const char* name, const std::vector<const char*>& params) {
  return exec_prepared(name, params, Clock::now() + std::chrono::milliseconds(settings_.query_deadline_ms));
}

PgCall PgSession::exec_prepared(const char* name, const std::vector<const char*>& params,
                                Clock::time_point deadline) {
  if (std::optional<PgCall> down = unreachable()) return std::move(*down);
  if (!PQsendQueryPrepared(conn_.get(), name, static_cast<int>(params.size()), params.data(), nullptr,
                           nullptr, 0))
    return client_failure(trimmed(PQerrorMessage(conn_.get())), false);
  return wait_result(deadline);
}

PgCall PgSession::exec(const char* sql, Clock::time_point deadline) {
  if (std::optional<PgCall> down = unreachable()) return std::move(*down);
  if (!PQsendQuery(conn_.get(), sql)) return client_failure(trimmed(PQerrorMessage(conn_.get())), false);
  return wait_result(deadline);
}

}  // namespace inbox

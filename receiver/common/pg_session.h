// The one libpq helper every wing uses: a connection with deadlines.
// A database that stops answering (black hole, stuck server) can never hold
// a caller longer than its deadline: connects and queries are asynchronous
// with poll(), TCP keepalives and tcp_user_timeout notice a dead peer, and a
// query past its deadline is cancelled and its connection dropped, to be
// made again on next use.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"

namespace inbox {

struct DbSettings {
  std::string url;  // libpq URI or key=value string; empty = PG* environment
  int connect_timeout_s = 3;
  int statement_timeout_ms = 3000;  // server side
  int query_deadline_ms = 4000;     // client side: cancel and drop past it
  int tcp_user_timeout_ms = 5000;   // unacknowledged data past this: the link is dead
  std::string application_name = "inbox-receiver";
};

// The session settings of a wing's connections, from the [database] keys.
DbSettings db_settings_for(const Config& config, const std::string& url, const std::string& application);

// A prepared statement: name and SQL (parameter types in the SQL's casts).
struct PgStatement {
  const char* name;
  const char* sql;
};

struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

// The result of one call: tuples, or what went wrong.
struct PgCall {
  bool ok = false;  // PGRES_TUPLES_OK or PGRES_COMMAND_OK
  PgResult result;
  std::string sqlstate;  // empty when the failure was client-side
  std::string message;   // for the log only, never for a webhook sender
  bool connection_lost = false;  // the connection was dropped (reconnect on next use)
  bool timed_out = false;        // the deadline passed (cancelled, connection dropped)

  int rows() const { return result ? PQntuples(result.get()) : 0; }
  const char* value(int row, int col) const { return PQgetvalue(result.get(), row, col); }
  bool is_null(int row, int col) const { return PQgetisnull(result.get(), row, col) != 0; }
};

class PgSession {
 public:
  using Clock = std::chrono::steady_clock;

  PgSession(const DbSettings& settings, std::vector<PgStatement> statements)
      : settings_(settings), statements_(std::move(statements)) {}
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  // Connects, sets the session up and prepares the statements if needed;
  // false (with the cause, also logged) if the database cannot be reached.
  // After a failure, retries at most every 200 ms.
  bool ensure(std::string& error);

  // Runs a prepared statement (connects first if needed). Never blocks past
  // the deadline: now + query_deadline_ms unless given.
  PgCall exec_prepared(const char* name, const std::vector<const char*>& params);
  PgCall exec_prepared(const char* name, const std::vector<const char*>& params,
                       Clock::time_point deadline);
  // A plain statement without parameters (SELECT 1 for /readyz).
  PgCall exec(const char* sql, Clock::time_point deadline);

  bool connected() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }
  // Drops the connection; the next call makes a new one.
  void reset() { conn_.reset(); }
  const DbSettings& settings() const { return settings_; }

 private:
  struct PgConnClose {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  bool connect(Clock::time_point deadline, std::string& error);
  bool setup(Clock::time_point deadline, std::string& error);
  PgCall wait_result(Clock::time_point deadline);
  PgCall client_failure(std::string why, bool timed_out);
  // Connects if needed; the failed call when the database cannot be reached.
  std::optional<PgCall> unreachable();

  DbSettings settings_;
  std::vector<PgStatement> statements_;
  std::unique_ptr<PGconn, PgConnClose> conn_;
  Clock::time_point last_failure_{};
  std::string last_error_;
  Clock::time_point last_logged_{};
};

// Postgres array literal: every element double-quoted, `"` and `\` escaped.
template <typename Range, typename Get>
std::string pg_array_literal(const Range& items, Get get) {
  std::string out = "{";
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('"');
    for (char c : get(item)) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

}  // namespace inbox

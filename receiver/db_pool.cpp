#include "db_pool.h"

#include <cstring>

namespace inbox {
namespace {

struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

const char* kIngestBatch = "inbox_ingest_batch";
const char* kIngestOne = "inbox_ingest";

// Postgres array literal: every element double-quoted, `"` and `\` escaped.
template <typename Get>
std::string array_literal(const std::vector<const Event*>& events, Get get) {
  std::size_t size = 2;
  for (const Event* e : events) size += get(*e).size() + 3;
  std::string out;
  out.reserve(size + size / 16);
  out.push_back('{');
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('"');
    for (char c : get(*events[i])) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

// Outcomes are plain words, so the text[] output needs no unquoting.
std::vector<std::string> parse_text_array(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s; *p; ++p) {
    if (*p == '{' || *p == '"') continue;
    if (*p == ',' || *p == '}') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(*p);
    }
  }
  return out;
}

}  // namespace

bool DbConnection::ensure(std::string& error) {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return true;
  conn_.reset();
  auto now = std::chrono::steady_clock::now();
  if (now - last_failure_ < std::chrono::milliseconds(200)) {
    error = last_error_;  // do not hammer a database that just refused us
    return false;
  }
  std::string timeout = std::to_string(settings_.connect_timeout_s);
  // Defaults first: with expand_dbname the URI's own values override them.
  const char* keys[] = {"application_name", "connect_timeout", "dbname", nullptr};
  const char* values[] = {"inbox-receiver", timeout.c_str(), settings_.url.c_str(), nullptr};
  conn_.reset(PQconnectdbParams(keys, values, 1));
  auto fail = [&](std::string why) {
    error = last_error_ = std::move(why);
    last_failure_ = std::chrono::steady_clock::now();
    conn_.reset();
    return false;
  };
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK)
    return fail(conn_ ? PQerrorMessage(conn_.get()) : "out of memory");
  std::string set = "SET statement_timeout = " + std::to_string(settings_.statement_timeout_ms);
  PgResult r(PQexec(conn_.get(), set.c_str()));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return fail(PQerrorMessage(conn_.get()));
  r.reset(PQprepare(conn_.get(), kIngestBatch,
                    "SELECT inbox.ingest_batch($1::text[], $2::text[], $3::jsonb[], $4::jsonb[])", 4,
                    nullptr));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return fail(PQerrorMessage(conn_.get()));
  r.reset(PQprepare(conn_.get(), kIngestOne, "SELECT inbox.ingest($1, $2, $3::jsonb, $4::jsonb)", 4,
                    nullptr));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return fail(PQerrorMessage(conn_.get()));
  return true;
}

DbCall DbConnection::finish(PGresult* raw) {
  PgResult res(raw);
  DbCall call;
  if (res && PQresultStatus(res.get()) == PGRES_TUPLES_OK && PQntuples(res.get()) == 1 &&
      !PQgetisnull(res.get(), 0, 0)) {
    call.ok = true;
    const char* v = PQgetvalue(res.get(), 0, 0);
    if (*v == '{') call.outcomes = parse_text_array(v);
    else call.outcomes.emplace_back(v);
    return call;
  }
  if (res) {
    if (const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE)) call.sqlstate = state;
    if (const char* msg = PQresultErrorField(res.get(), PG_DIAG_MESSAGE_PRIMARY)) call.message = msg;
  }
  if (call.message.empty()) call.message = PQerrorMessage(conn_.get());
  if (PQstatus(conn_.get()) != CONNECTION_OK || call.sqlstate.empty()) {
    call.connection_lost = true;
    conn_.reset();  // re-made (and re-prepared) on next use
  }
  return call;
}

DbCall DbConnection::ingest_batch(const std::vector<const Event*>& events) {
  std::string providers = array_literal(events, [](const Event& e) -> const std::string& { return e.provider; });
  std::string ids = array_literal(events, [](const Event& e) -> const std::string& { return e.external_id; });
  std::string payloads = array_literal(events, [](const Event& e) -> const std::string& { return e.payload_json; });
  std::string headers = array_literal(events, [](const Event& e) -> const std::string& { return e.headers_json; });
  const char* params[] = {providers.c_str(), ids.c_str(), payloads.c_str(), headers.c_str()};
  return finish(PQexecPrepared(conn_.get(), kIngestBatch, 4, params, nullptr, nullptr, 0));
}

DbCall DbConnection::ingest_one(const Event& e) {
  const char* params[] = {e.provider.c_str(), e.external_id.c_str(), e.payload_json.c_str(),
                          e.headers_json.c_str()};
  return finish(PQexecPrepared(conn_.get(), kIngestOne, 4, params, nullptr, nullptr, 0));
}

bool DbConnection::ping(std::string& error) {
  if (!ensure(error)) return false;
  PgResult r(PQexec(conn_.get(), "SELECT 1"));
  if (PQresultStatus(r.get()) == PGRES_TUPLES_OK) return true;
  error = PQerrorMessage(conn_.get());
  conn_.reset();
  return false;
}

DbPool::DbPool(DbSettings settings, std::size_t size) : settings_(std::move(settings)) {
  for (std::size_t i = 0; i < size; ++i) idle_.push_back(std::make_unique<DbConnection>(settings_));
}

std::optional<DbPool::Lease> DbPool::acquire(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return !idle_.empty(); })) return std::nullopt;
  auto c = std::move(idle_.back());
  idle_.pop_back();
  return std::optional<Lease>(std::in_place, *this, std::move(c));
}

void DbPool::release(std::unique_ptr<DbConnection> c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

}  // namespace inbox

#include "backfill_queue.h"

namespace inbox {
namespace {

struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

struct Statement {
  const char* name;
  const char* sql;
};

// Each runs alone in autocommit: one report, one transaction.
const Statement kClaim = {"inbox_claim_backfill",
                          "SELECT request_id, provider, external_id, attempt, lease_token "
                          "FROM inbox.claim_backfill($1::int, $2::int * interval '1 second', $3::text)"};
const Statement kFetched = {"inbox_backfill_fetched",
                            "SELECT inbox.backfill_fetched($1::bigint, $2::uuid, $3::jsonb)"};
const Statement kNotFound = {"inbox_backfill_not_found",
                             "SELECT inbox.backfill_not_found($1::bigint, $2::uuid, $3::text)"};
const Statement kFailed = {"inbox_backfill_failed",
                           "SELECT inbox.backfill_failed($1::bigint, $2::uuid, $3::text, "
                           "$4::int * interval '1 second', $5::int)"};

const Statement kAddListed = {"inbox_add_listed", "SELECT inbox.add_listed($1::text, $2::text[], now())"};

// ids as a text[] literal: every element quoted, '"' and '\\' escaped.
std::string array_literal(const std::vector<std::string>& ids) {
  std::string out = "{";
  for (const std::string& id : ids) {
    if (out.size() > 1) out.push_back(',');
    out.push_back('"');
    for (char c : id) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  return out + "}";
}

}  // namespace

bool BackfillQueue::ensure(std::string& error) {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return true;
  std::string timeout = std::to_string(settings_.connect_timeout_s);
  const char* keys[] = {"application_name", "connect_timeout", "dbname", nullptr};
  const char* values[] = {"inbox-receiver backfill", timeout.c_str(), settings_.url.c_str(), nullptr};
  conn_.reset(PQconnectdbParams(keys, values, 1));
  auto fail = [&] {
    error = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
    while (!error.empty() && error.back() == '\n') error.pop_back();
    conn_.reset();
    return false;
  };
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) return fail();
  std::string set = "SET statement_timeout = " + std::to_string(settings_.statement_timeout_ms);
  PgResult r(PQexec(conn_.get(), set.c_str()));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return fail();
  for (const Statement& s : {kClaim, kFetched, kNotFound, kFailed, kAddListed}) {
    r.reset(PQprepare(conn_.get(), s.name, s.sql, 0, nullptr));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return fail();
  }
  return true;
}

std::optional<std::vector<BackfillClaim>> BackfillQueue::claim(int max_rows, int lease_s,
                                                               const std::string& provider,
                                                               std::string& error) {
  if (!ensure(error)) return std::nullopt;
  std::string rows = std::to_string(max_rows), lease = std::to_string(lease_s);
  const char* params[] = {rows.c_str(), lease.c_str(), provider.c_str()};
  PgResult r(PQexecPrepared(conn_.get(), kClaim.name, 3, params, nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    error = PQresultErrorMessage(r.get());
    while (!error.empty() && error.back() == '\n') error.pop_back();
    if (PQstatus(conn_.get()) != CONNECTION_OK) conn_.reset();
    return std::nullopt;
  }
  std::vector<BackfillClaim> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    BackfillClaim c;
    c.request_id = std::stoll(PQgetvalue(r.get(), i, 0));
    c.provider = PQgetvalue(r.get(), i, 1);
    c.external_id = PQgetvalue(r.get(), i, 2);
    c.attempt = std::stoi(PQgetvalue(r.get(), i, 3));
    c.lease_token = PQgetvalue(r.get(), i, 4);
    out.push_back(std::move(c));
  }
  return out;
}

QueueCall BackfillQueue::call(const char* statement, const std::vector<std::string>& params) {
  QueueCall out;
  if (!ensure(out.message)) return out;
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.empty() ? nullptr : p.c_str());  // "" = NULL
  PgResult r(PQexecPrepared(conn_.get(), statement, static_cast<int>(values.size()), values.data(),
                            nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
    out.ok = true;
    out.value = PQgetvalue(r.get(), 0, 0);
    return out;
  }
  if (const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE)) out.sqlstate = state;
  if (const char* msg = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY)) out.message = msg;
  if (out.message.empty()) out.message = PQerrorMessage(conn_.get());
  if (PQstatus(conn_.get()) != CONNECTION_OK) conn_.reset();
  return out;
}

QueueCall BackfillQueue::fetched(const BackfillClaim& c, const std::string& payload_json) {
  return call(kFetched.name, {std::to_string(c.request_id), c.lease_token, payload_json});
}

QueueCall BackfillQueue::not_found(const BackfillClaim& c, const std::string& reason) {
  return call(kNotFound.name, {std::to_string(c.request_id), c.lease_token, reason});
}

QueueCall BackfillQueue::failed(const BackfillClaim& c, const std::string& error,
                                std::optional<int> retry_after_s, int max_attempts) {
  return call(kFailed.name, {std::to_string(c.request_id), c.lease_token, error.empty() ? "error" : error,
                             retry_after_s ? std::to_string(*retry_after_s) : std::string(),
                             std::to_string(max_attempts)});
}

QueueCall BackfillQueue::add_listed(const std::string& provider, const std::vector<std::string>& ids) {
  return call(kAddListed.name, {provider, array_literal(ids)});
}

}  // namespace inbox

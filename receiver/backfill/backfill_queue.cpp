#include "backfill/backfill_queue.h"

namespace inbox {
namespace {

// Each runs alone in autocommit: one report, one transaction.
const PgStatement kClaim = {"inbox_claim_backfill",
                          "SELECT request_id, provider, external_id, attempt, lease_token "
                          "FROM inbox.claim_backfill($1::int, $2::int * interval '1 second', $3::text)"};
const PgStatement kFetched = {"inbox_backfill_fetched",
                            "SELECT inbox.backfill_fetched($1::bigint, $2::uuid, $3::jsonb)"};
const PgStatement kNotFound = {"inbox_backfill_not_found",
                             "SELECT inbox.backfill_not_found($1::bigint, $2::uuid, $3::text)"};
const PgStatement kFailed = {"inbox_backfill_failed",
                           "SELECT inbox.backfill_failed($1::bigint, $2::uuid, $3::text, "
                           "$4::int * interval '1 second', $5::int)"};

const PgStatement kAddListed = {"inbox_add_listed", "SELECT inbox.add_listed($1::text, $2::text[], now())"};
const PgStatement kClaimListWindow = {"inbox_claim_list_window",
                                      "SELECT inbox.claim_list_window($1::text, $2::int * interval '1 second')"};
const PgStatement kClaimTail = {"inbox_claim_tail_listing",
                                "SELECT after_id, high_number "
                                "FROM inbox.claim_tail_listing($1::text, $2::int * interval '1 second')"};
const PgStatement kRaiseHigh = {"inbox_raise_sequence_high",
                                "SELECT high_number, ignored FROM inbox.raise_sequence_high($1::text, $2::text[])"};

// A text[] literal of external ids.
std::string ids_literal(const std::vector<std::string>& ids) {
  return pg_array_literal(ids, [](const std::string& id) -> const std::string& { return id; });
}

}  // namespace

BackfillQueue::BackfillQueue(DbSettings settings)
    : settings_(std::move(settings)),
      session_(settings_,
               {kClaim, kFetched, kNotFound, kFailed, kAddListed, kClaimListWindow, kClaimTail, kRaiseHigh}) {}

bool BackfillQueue::ensure(std::string& error) { return session_.ensure(error); }

std::optional<std::vector<BackfillClaim>> BackfillQueue::claim(int max_rows, int lease_s,
                                                               const std::string& provider,
                                                               std::string& error) {
  std::string rows = std::to_string(max_rows), lease = std::to_string(lease_s);
  PgCall r = session_.exec_prepared(kClaim.name, {rows.c_str(), lease.c_str(), provider.c_str()});
  if (!r.ok) {
    error = r.message;
    return std::nullopt;
  }
  std::vector<BackfillClaim> out;
  for (int i = 0; i < r.rows(); ++i) {
    BackfillClaim c;
    c.request_id = std::stoll(r.value(i, 0));
    c.provider = r.value(i, 1);
    c.external_id = r.value(i, 2);
    c.attempt = std::stoi(r.value(i, 3));
    c.lease_token = r.value(i, 4);
    out.push_back(std::move(c));
  }
  return out;
}

QueueCall BackfillQueue::call(const char* statement, const std::vector<std::string>& params, bool may_be_empty) {
  QueueCall out;
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.empty() ? nullptr : p.c_str());  // "" = NULL
  PgCall r = session_.exec_prepared(statement, values);
  if (r.ok && (r.rows() == 1 || (may_be_empty && r.rows() == 0))) {
    out.ok = true;
    if (r.rows() == 0) return out;
    for (int col = 0; col < PQnfields(r.result.get()); ++col) out.row.push_back(r.value(0, col));
    out.value = out.row[0];
    return out;
  }
  out.sqlstate = r.sqlstate;
  out.message = r.ok ? "unexpected result" : r.message;
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
  return call(kAddListed.name, {provider, ids_literal(ids)});
}

QueueCall BackfillQueue::claim_list_window(const std::string& provider, int every_s) {
  return call(kClaimListWindow.name, {provider, std::to_string(every_s)});
}

QueueCall BackfillQueue::claim_tail_listing(const std::string& provider, int every_s) {
  return call(kClaimTail.name, {provider, std::to_string(every_s)}, true);
}

QueueCall BackfillQueue::raise_sequence_high(const std::string& provider, const std::vector<std::string>& ids) {
  return call(kRaiseHigh.name, {provider, ids_literal(ids)});
}

}  // namespace inbox

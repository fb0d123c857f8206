// The database side of the backfill worker: the four functions of the
// worker contract (docs/reconciliation.md) and those of listing (add_listed,
// the listing windows, the tail of sequence sources), over one libpq
// connection. The login needs only the role inbox_worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/pg_session.h"

namespace inbox {

struct BackfillClaim {
  std::int64_t request_id = 0;
  std::string provider;
  std::string external_id;
  int attempt = 0;
  std::string lease_token;
};

// One call's result: the function's return value as text, or the error.
struct QueueCall {
  bool ok = false;
  std::string value;     // 'inserted' | 'updated' | 'duplicate' | 'lost' | 't' | 'f' | 'retry' | 'gave_up'
  std::vector<std::string> row;  // every column of the one row (value is the first); empty: no row
  std::string sqlstate;  // empty when the failure was client-side (connection)
  std::string message;
};

class BackfillQueue {
 public:
  explicit BackfillQueue(DbSettings settings);

  // Connects and prepares if needed; false (with a reason) otherwise.
  bool ensure(std::string& error);

  // inbox.claim_backfill(max_rows, lease, only_provider); nullopt on error.
  std::optional<std::vector<BackfillClaim>> claim(int max_rows, int lease_s, const std::string& provider,
                                                  std::string& error);
  QueueCall fetched(const BackfillClaim& c, const std::string& payload_json);
  QueueCall not_found(const BackfillClaim& c, const std::string& reason);
  // retry_after_s: the provider's Retry-After; nullopt lets the SQL back off.
  QueueCall failed(const BackfillClaim& c, const std::string& error, std::optional<int> retry_after_s,
                   int max_attempts);
  // inbox.add_listed(provider, ids, now()): value is how many were new. At
  // most 10000 ids; an empty list only checks the provider has a listed
  // source (SQLSTATE 42704 when it has not).
  QueueCall add_listed(const std::string& provider, const std::vector<std::string>& ids);
  // inbox.claim_list_window(provider, every): value 't' for the one replica
  // that may list this provider in the current window, 'f' for the others.
  QueueCall claim_list_window(const std::string& provider, int every_s);
  // inbox.claim_tail_listing(provider, every): row {after_id, high_number}
  // when this replica lists the provider's tail now; no row (ok, empty
  // value) when there is nothing to list or another replica lists it.
  QueueCall claim_tail_listing(const std::string& provider, int every_s);
  // inbox.raise_sequence_high(provider, ids): row {high_number, ignored}.
  // At most 10000 ids.
  QueueCall raise_sequence_high(const std::string& provider, const std::vector<std::string>& ids);

 private:
  // One row expected; with may_be_empty, none is fine too.
  QueueCall call(const char* statement, const std::vector<std::string>& params, bool may_be_empty = false);

  DbSettings settings_;
  PgSession session_;
};

}  // namespace inbox

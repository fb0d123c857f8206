// Listing for `listed` id sources: pages through a provider's "list events"
// API for a time window and loads the ids it reports with inbox.add_listed,
// so that inbox.scan_gaps can find the ones that never arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backfill/backfill_fetch.h"
#include "backfill/backfill_queue.h"
#include "common/config.h"

namespace inbox {

// add_listed takes at most this many ids per call.
constexpr std::size_t kListedChunk = 10000;

// A unix time as {from}/{to} want it: "1764511200" or "2025-11-30T14:00:00Z".
std::string format_list_time(std::int64_t unix_s, const std::string& format);

// The page's path and query: {from}, {to} and {cursor} filled (encoded). The
// first page has no cursor: the query parameter holding {cursor} is left out.
std::string list_page_path(const std::string& path_template, const std::string& from, const std::string& to,
                           const std::string& cursor);

// What one listing did.
struct ListResult {
  // claimed_elsewhere: another replica lists this provider in this window.
  // nothing_to_list (tail listings): the provider's tail check is not firing,
  // or another replica lists its tail in this window.
  enum Outcome {
    listed,
    truncated,
    list_error,
    db_error,
    no_listed_source,
    claimed_elsewhere,
    nothing_to_list
  } outcome = listed;
  int pages = 0;
  long long ids = 0;      // ids read from the pages (repeats included)
  long long added = 0;    // new rows in inbox.listed_ids; tail listings: how far the high mark rose
  long long skipped = 0;  // elements without a usable id; tail listings: also ids not of the pattern
  std::string error;      // safe to log: no query, body or secret
};
const char* outcome_name(ListResult::Outcome o);

// Loads a chunk of ids (at most kListedChunk) and clears it; false after a
// database error, which it records in the result.
using IdSink = std::function<bool(std::vector<std::string>&, ListResult&)>;

// Pages through a list API: GET path_of(cursor), the first page with an
// empty cursor, each later one with the cursor the page before gave, until
// the last page, list_max_pages or `stopped`. The usable ids go to `load` in
// chunks; ids read before a failing page are loaded too. Sets r.outcome
// (listed, truncated, list_error, or what `load` set) and counts in r.
void page_ids(ApiClient& client, const BackfillApiConfig& api, const std::function<std::string(const std::string&)>& path_of,
              const IdSink& load, const std::function<bool()>& stopped, ListResult& r);

// "database: SQLSTATE 42704" (or the client-side message): safe to log.
std::string db_reason(const QueueCall& c);

class BackfillLister {
 public:
  BackfillLister(std::string provider, const BackfillApiConfig& api);

  // True when list_interval_s has passed since the last listing (or none ran).
  bool due(std::chrono::steady_clock::time_point now) const { return now >= next_; }

  // Lists [now_unix - list_window_s, now_unix] and loads the ids; one JSON
  // log line. Stops between pages when `stopped` says so. Lists only when
  // this replica claims the provider's window of list_interval_s in the
  // database (inbox.claim_list_window): N replicas make one listing, not N.
  ListResult list(BackfillQueue& queue, std::int64_t now_unix, const std::function<bool()>& stopped);

 private:
  ListResult run(BackfillQueue& queue, std::int64_t now_unix, const std::function<bool()>& stopped);
  // Loads `ids` (at most kListedChunk) and clears them; false on a database error.
  bool load(BackfillQueue& queue, std::vector<std::string>& ids, ListResult& r);

  std::string provider_;
  BackfillApiConfig api_;
  BackfillUrl url_;
  ApiClient client_;
  std::chrono::steady_clock::time_point next_{};
  bool warned_no_source_ = false;  // that warning is logged once, not every round
};

}  // namespace inbox

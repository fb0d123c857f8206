// Tail listing for `sequence` id sources: gap detection cannot see events
// after the highest one received. While the provider's sequence_tail_silence
// check fires, the worker asks the provider's list API for the ids after the
// highest received (list_after_url) and raises the source's high mark with
// them (inbox.raise_sequence_high), so the next inbox.scan_gaps records the
// missing tail as gaps and the drain fetches them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "backfill/backfill_fetch.h"
#include "backfill/backfill_list.h"
#include "backfill/backfill_queue.h"
#include "common/config.h"

namespace inbox {

// list_after_url's path and query: {after}, {after_number} and {cursor}
// filled (encoded); the first page has no cursor parameter.
std::string tail_page_path(const std::string& path_template, const std::string& after_id,
                           const std::string& after_number, const std::string& cursor);

// The outcome as metrics and logs name tail listings: "tail_listed", ...
const char* tail_outcome_name(ListResult::Outcome o);

class TailLister {
 public:
  TailLister(std::string provider, const BackfillApiConfig& api);

  // True when list_interval_s has passed since the last look (or none ran).
  bool due(std::chrono::steady_clock::time_point now) const { return now >= next_; }

  // Asks the database whether to list (inbox.claim_tail_listing: the check
  // fires and this replica claims the provider's window of list_interval_s),
  // then pages through list_after_url and raises the high mark. One JSON log
  // line when it listed or failed; nothing_to_list is silent.
  ListResult list(BackfillQueue& queue, const std::function<bool()>& stopped);

 private:
  std::string provider_;
  BackfillApiConfig api_;
  BackfillUrl url_;
  ApiClient client_;
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace inbox

#include "backfill/backfill_tail.h"

#include "common/log.h"

namespace inbox {

std::string tail_page_path(const std::string& path_template, const std::string& after_id,
                           const std::string& after_number, const std::string& cursor) {
  // list_page_path drops the {cursor} parameter of the first page; there is
  // no {from} or {to} to fill.
  std::string t = list_page_path(path_template, "", "", cursor);
  t = fill_placeholder(t, "{after}", after_id);
  return fill_placeholder(t, "{after_number}", after_number);
}

const char* tail_outcome_name(ListResult::Outcome o) {
  switch (o) {
    case ListResult::listed: return "tail_listed";
    case ListResult::truncated: return "tail_list_truncated";
    case ListResult::list_error: return "tail_list_error";
    default: return outcome_name(o);
  }
}

TailLister::TailLister(std::string provider, const BackfillApiConfig& api)
    : provider_(std::move(provider)), api_(api), url_(parse_api_url(api.list_after_url, "list_after_url")),
      client_(url_.origin, api) {}

ListResult TailLister::list(BackfillQueue& queue, const std::function<bool()>& stopped) {
  const auto t0 = std::chrono::steady_clock::now();
  next_ = t0 + std::chrono::seconds(api_.list_interval_s);
  ListResult r;
  QueueCall claim = queue.claim_tail_listing(provider_, api_.list_interval_s);
  if (claim.ok && claim.row.empty()) {
    r.outcome = ListResult::nothing_to_list;
    return r;  // the usual case: the tail check is quiet
  }
  std::string after_id, after_number;
  long long high = -1;
  if (!claim.ok) {
    r.outcome = ListResult::db_error;
    r.error = "inbox.claim_tail_listing: " + db_reason(claim);
  } else {
    after_id = claim.row[0];
    after_number = claim.row[1];
    const long long before = std::stoll(after_number);
    high = before;
    // Each chunk raises the mark; a database error ends the listing.
    IdSink raise = [&](std::vector<std::string>& ids, ListResult& res) {
      QueueCall c = queue.raise_sequence_high(provider_, ids);
      ids.clear();
      if (!c.ok) {
        res.outcome = ListResult::db_error;
        res.error = db_reason(c);
        return false;
      }
      high = std::stoll(c.row[0]);
      res.added = high - before;
      res.skipped += std::stoll(c.row[1]);
      return true;
    };
    page_ids(
        client_, api_,
        [&](const std::string& cursor) { return tail_page_path(url_.path_template, after_id, after_number, cursor); },
        raise, stopped, r);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<LogField> fields = {{"provider", provider_},
                                  {"outcome", tail_outcome_name(r.outcome)},
                                  {"after", after_id},
                                  num("pages", static_cast<long long>(r.pages)),
                                  num("ids", r.ids),
                                  num("skipped", r.skipped),
                                  num("high", high),
                                  num("raised_by", r.added),
                                  num("ms", ms)};
  if (!r.error.empty()) fields.push_back({"error", r.error});
  const bool failed = r.outcome == ListResult::list_error || r.outcome == ListResult::db_error;
  log_line(failed ? "error" : r.outcome == ListResult::listed ? "info" : "warn", "backfill tail list", fields);
  return r;
}

}  // namespace inbox

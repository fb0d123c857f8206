#include "backfill/backfill_list.h"

#include "common/json_util.h"
#include "common/log.h"

namespace inbox {

std::string format_list_time(std::int64_t unix_s, const std::string& format) {
  return format == "rfc3339" ? rfc3339_utc(unix_s) : std::to_string(unix_s);
}

std::string list_page_path(const std::string& path_template, const std::string& from, const std::string& to,
                           const std::string& cursor) {
  std::string t = path_template;
  const size_t q = t.find('?');
  if (cursor.empty() && q != std::string::npos) {
    // Rebuild the query without the parameter(s) that hold {cursor}.
    std::string query;
    size_t at = q + 1;
    while (at <= t.size()) {
      size_t amp = t.find('&', at);
      if (amp == std::string::npos) amp = t.size();
      std::string param = t.substr(at, amp - at);
      if (!param.empty() && param.find("{cursor}") == std::string::npos) query += (query.empty() ? "" : "&") + param;
      at = amp + 1;
    }
    t = t.substr(0, q) + (query.empty() ? "" : "?" + query);
  }
  t = fill_placeholder(t, "{from}", from);
  t = fill_placeholder(t, "{to}", to);
  return fill_placeholder(t, "{cursor}", cursor);
}

const char* outcome_name(ListResult::Outcome o) {
  switch (o) {
    case ListResult::listed: return "listed";
    case ListResult::truncated: return "list_truncated";
    case ListResult::list_error: return "list_error";
    case ListResult::db_error: return "db_error";
    case ListResult::no_listed_source: return "no_listed_source";
    case ListResult::claimed_elsewhere: return "list_claimed_elsewhere";
    case ListResult::nothing_to_list: return "nothing_to_list";
  }
  return "?";
}

BackfillLister::BackfillLister(std::string provider, const BackfillApiConfig& api)
    : provider_(std::move(provider)), api_(api), url_(parse_api_url(api.list_url, "list_url")),
      client_(url_.origin, api) {}

namespace {

// What inbox.add_listed accepts (and libpq can pass: no NUL).
bool usable_id(const std::string& id) {
  return !id.empty() && id.size() <= 255 && id.find('\0') == std::string::npos;
}

}  // namespace

std::string db_reason(const QueueCall& c) {
  return "database: " + (c.sqlstate.empty() ? c.message : "SQLSTATE " + c.sqlstate);
}

bool BackfillLister::load(BackfillQueue& queue, std::vector<std::string>& ids, ListResult& r) {
  QueueCall c = queue.add_listed(provider_, ids);
  ids.clear();
  if (!c.ok) {
    r.outcome = ListResult::db_error;
    r.error = db_reason(c);
    return false;
  }
  r.added += std::stoll(c.value);
  return true;
}

void page_ids(ApiClient& client, const BackfillApiConfig& api, const std::function<std::string(const std::string&)>& path_of,
              const IdSink& load, const std::function<bool()>& stopped, ListResult& r) {
  const std::string& ids_at = api.list_ids_json_pointer;
  std::vector<std::string> ids, page;
  std::string cursor;
  while (true) {
    if (r.pages == api.list_max_pages || stopped()) {
      r.outcome = ListResult::truncated;
      r.error = r.pages == api.list_max_pages ? "stopped after list_max_pages pages" : "worker stopping";
      break;
    }
    const std::string path = path_of(cursor);
    const std::string where = " from GET " + path_for_humans(path) + " (page " + std::to_string(++r.pages) + ")";
    ApiAnswer a = client.get(path);
    r.outcome = ListResult::list_error;  // until the page is read
    if (a.status != 200) {
      r.error = (a.status == 0 ? a.error : "HTTP " + std::to_string(a.status)) + where;
      break;
    }
    page.clear();
    JsonListError e = json_ids_at(a.body, ids_at, api.list_id_json_pointer, page, r.skipped);
    if (e != JsonListError::none) {
      const std::string at = ids_at.empty() ? "the top" : ids_at;
      r.error = (e == JsonListError::not_json ? std::string("HTTP 200 with a body that is not JSON")
                 : e == JsonListError::missing ? "HTTP 200 without an array at " + at
                                                : "HTTP 200 but the value at " + at + " is not an array") +
                where;
      break;
    }
    r.outcome = ListResult::listed;
    for (std::string& id : page) {
      if (!usable_id(id)) {
        ++r.skipped;
        continue;
      }
      ++r.ids;
      ids.push_back(std::move(id));
      if (ids.size() == kListedChunk && !load(ids, r)) return;
    }
    if (api.list_cursor_json_pointer.empty()) break;
    std::string next;
    JsonIdError ce = json_id_at(a.body, api.list_cursor_json_pointer, next);
    if (ce == JsonIdError::missing || (ce == JsonIdError::none && next.empty())) break;  // the last page
    if (ce != JsonIdError::none || next == cursor) {
      r.outcome = ListResult::list_error;
      r.error = "the cursor at " + api.list_cursor_json_pointer +
                (ce != JsonIdError::none ? " is not a string or integer" : " did not change") + where;
      break;
    }
    cursor = std::move(next);
  }
  // Ids read before an error are real: they are loaded too.
  if (!ids.empty()) load(ids, r);
}

ListResult BackfillLister::run(BackfillQueue& queue, std::int64_t now_unix, const std::function<bool()>& stopped) {
  ListResult r;
  // A worker login cannot read inbox.gap_sources: an empty add_listed is how
  // it learns whether the provider's source is `listed`, before any page.
  QueueCall probe = queue.add_listed(provider_, {});
  if (!probe.ok) {
    r.outcome = probe.sqlstate == "42704" ? ListResult::no_listed_source : ListResult::db_error;
    r.error = probe.sqlstate == "42704" ? "no listed id source: SELECT inbox.set_id_source(provider, 'listed')"
                                        : db_reason(probe);
    return r;
  }
  const std::string from = format_list_time(now_unix - api_.list_window_s, api_.list_time_format);
  const std::string to = format_list_time(now_unix, api_.list_time_format);
  page_ids(
      client_, api_, [&](const std::string& cursor) { return list_page_path(url_.path_template, from, to, cursor); },
      [&](std::vector<std::string>& ids, ListResult& res) { return load(queue, ids, res); }, stopped, r);
  return r;
}

ListResult BackfillLister::list(BackfillQueue& queue, std::int64_t now_unix, const std::function<bool()>& stopped) {
  const auto t0 = std::chrono::steady_clock::now();
  next_ = t0 + std::chrono::seconds(api_.list_interval_s);
  ListResult r;
  QueueCall claim = queue.claim_list_window(provider_, api_.list_interval_s);
  if (!claim.ok) {
    r.outcome = ListResult::db_error;
    r.error = "inbox.claim_list_window: " + (claim.sqlstate.empty() ? "" : claim.sqlstate + " ") + claim.message;
  } else if (claim.value != "t") {
    r.outcome = ListResult::claimed_elsewhere;
    return r;  // not an event worth a log line: the other replica logs its listing
  } else {
    r = run(queue, now_unix, stopped);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r.outcome == ListResult::no_listed_source) {
    if (warned_no_source_) return r;
    warned_no_source_ = true;
  } else {
    warned_no_source_ = false;
  }
  std::vector<LogField> fields = {{"provider", provider_},
                                  {"outcome", outcome_name(r.outcome)},
                                  num("window_s", static_cast<long long>(api_.list_window_s)),
                                  num("pages", static_cast<long long>(r.pages)),
                                  num("ids", r.ids),
                                  num("added", r.added),
                                  num("skipped", r.skipped),
                                  num("ms", ms)};
  if (!r.error.empty()) fields.push_back({"error", r.error});
  const bool failed = r.outcome == ListResult::list_error || r.outcome == ListResult::db_error;
  log_line(failed ? "error" : r.outcome == ListResult::listed ? "info" : "warn", "backfill list", fields);
  return r;
}

}  // namespace inbox

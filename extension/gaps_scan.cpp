// inbox.scan_gaps: one scan of a provider's expected ids, in four steps:
// pick the window (where the stream has got to), record its new gaps, settle
// the open ones (close what arrived, request backfill past the grace
// period), and report what it did.
#include <cstdio>
#include <string>
#include <vector>

#include "boundary.hpp"
#include "gaps_marks.hpp"
#include "gaps_source.hpp"
#include "json_object.hpp"
#include "reconcile_locks.hpp"
#include "spi.hpp"

extern "C" {
#include "mb/pg_wchar.h"
}

namespace pg_inbox {
namespace {

constexpr int kInsertBatch = 10000;  // gaps inserted per statement
// Gaps turned into requests per scan: 10000, a literal in promote_plan.

KeptPlan scan_lock_plan = {
    "SELECT pg_try_advisory_xact_lock($1, hashtext($2))", 2, {INT4OID, TEXTOID}, nullptr};

// Numbers of the events that arrived since the last scan (by id, all
// providers): where the sequence has got to.
KeptPlan new_numbers_plan = {R"SQL(
WITH top AS (SELECT coalesce(max(id), 0) AS id FROM inbox.events)
SELECT top.id, min(n.number), max(n.number)
FROM top LEFT JOIN LATERAL (
    SELECT substr(e.external_id, $3)::bigint AS number
    FROM inbox.events e
    WHERE e.id > $2 AND e.id <= top.id AND e.provider = $1
      AND starts_with(e.external_id, $4) AND substr(e.external_id, $3) ~ $5
) n ON true
GROUP BY top.id
)SQL",
                             5,
                             {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID},
                             nullptr};

KeptPlan insert_gaps_plan = {R"SQL(
INSERT INTO inbox.gaps (provider, external_id)
SELECT $1, x FROM unnest($2::text[]) x
ON CONFLICT ON CONSTRAINT gaps_pkey DO NOTHING
)SQL",
                             2,
                             {TEXTOID, TEXTARRAYOID},
                             nullptr};

KeptPlan listed_scan_plan = {R"SQL(
WITH w AS (
    SELECT l.id, l.external_id FROM inbox.listed_ids l
    WHERE l.provider = $1 AND l.id > $2 ORDER BY l.id LIMIT 1000000  -- kMaxWindow
), added AS (
    INSERT INTO inbox.gaps (provider, external_id)
    SELECT $1, w.external_id FROM w
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = $1 AND e.external_id = w.external_id)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = $1 AND t.external_id = w.external_id)
    ON CONFLICT ON CONSTRAINT gaps_pkey DO NOTHING
    RETURNING 1
)
SELECT coalesce(max(w.id), $2), count(w.id), (SELECT count(*) FROM added) FROM w
)SQL",
                             2,
                             {TEXTOID, INT8OID},
                             nullptr};

// A late retry or a tombstone resolves a gap by itself; a pending request
// for it is closed too (a leased one is left to its worker).
KeptPlan close_plan = {R"SQL(
WITH closed AS (
    UPDATE inbox.gaps g
       SET status = 'resolved', resolved_at = now(),
           resolution = CASE WHEN EXISTS (SELECT 1 FROM inbox.events e
                                          WHERE e.provider = g.provider AND e.external_id = g.external_id)
                             THEN 'arrived' ELSE 'tombstoned' END
     WHERE g.provider = $1 AND g.status <> 'resolved'
       AND (EXISTS (SELECT 1 FROM inbox.events e
                    WHERE e.provider = g.provider AND e.external_id = g.external_id)
         OR EXISTS (SELECT 1 FROM inbox.tombstones t
                    WHERE t.provider = g.provider AND t.external_id = g.external_id))
    RETURNING g.external_id
), requests AS (
    UPDATE inbox.backfill_requests r
       SET status = 'arrived', finished_at = now()
      FROM closed
     WHERE r.provider = $1 AND r.external_id = closed.external_id AND r.status = 'pending'
)
SELECT count(*) FROM closed
)SQL",
                       1,
                       {TEXTOID},
                       nullptr};

KeptPlan promote_plan = {R"SQL(
WITH old AS (
    SELECT g.external_id FROM inbox.gaps g
    WHERE g.provider = $1 AND g.status = 'open' AND g.first_seen_at <= now() - $2
    ORDER BY g.first_seen_at LIMIT 10000  -- requests made per scan
    FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE inbox.gaps g SET status = 'requested', requested_at = now()
      FROM old WHERE g.provider = $1 AND g.external_id = old.external_id
    RETURNING g.external_id
), requested AS (
    INSERT INTO inbox.backfill_requests AS r (provider, external_id)
    SELECT $1, marked.external_id FROM marked
    ON CONFLICT ON CONSTRAINT backfill_requests_provider_external_id_key DO UPDATE
       SET status = 'pending', attempts = 0, next_attempt_at = now(), finished_at = NULL,
           last_error = NULL, lease_token = NULL, lease_expires_at = NULL
     WHERE r.status IN ('arrived', 'fetched')
)
SELECT count(*) FROM marked
)SQL",
                         2,
                         {TEXTOID, INTERVALOID},
                         nullptr};

KeptPlan open_counts_plan = {R"SQL(
SELECT count(*) FILTER (WHERE status = 'open'), count(*) FILTER (WHERE status = 'requested')
FROM inbox.gaps WHERE provider = $1 AND status <> 'resolved'
)SQL",
                             1,
                             {TEXTOID},
                             nullptr};

// The high mark only rises: inbox.raise_sequence_high may have raised it
// (from the provider's list API) since this scan read it.
KeptPlan save_state_plan = {R"SQL(
UPDATE inbox.gap_sources
   SET scanned_to = $2, high_number = greatest(high_number, $3), event_watermark = $4, listed_watermark = $5,
       last_scan_at = now()
 WHERE provider = $1
)SQL",
                            5,
                            {TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID},
                            nullptr};

// The window a scan covers, and what it found.
struct Progress {
  bool got_lock;
  bool has_window;
  int64 from;
  int64 to;
  int64 new_gaps;
  int64 listed_read;
};

// What settling the open gaps did.
struct Settled {
  int64 resolved;
  int64 requested;
  int64 open;
  int64 requested_total;
};

// Takes the provider's scan lock and, for a sequence source, reads where the
// stream has got to (updating source) and picks this scan's window. Call
// inside spi_call.
Progress pick_window(Datum name, const gaps::Pattern &pattern, bool sequence, Source *source) {
  Progress p{};
  Datum key[2] = {Int32GetDatum(kLockClassGapScan), name};
  execute_kept(scan_lock_plan, key, nullptr, false, 0);
  p.got_lock = result_bool(0, 1);
  if (!p.got_lock || !sequence) return p;

  // Numbers after the prefix: at least `width` digits, 18 at most.
  char number_regex[32];
  snprintf(number_regex, sizeof(number_regex), "^[0-9]{%d,%d}$", pattern.width, gaps::kMaxWidth);
  Datum args[5] = {
      name, Int64GetDatum(source->event_watermark),
      // substr() counts characters: a prefix may be multibyte.
      Int32GetDatum(pg_mbstrlen_with_len(pattern.prefix, static_cast<int>(pattern.prefix_len)) + 1),
      CStringGetTextDatum(pattern.prefix), CStringGetTextDatum(number_regex)};
  execute_kept(new_numbers_plan, args, nullptr, false, 0);
  bool isnull;
  source->event_watermark = result_int64(0, 1);
  int64 min_seen = result_int64(0, 2, &isnull);
  bool seen = !isnull;
  int64 max_seen = result_int64(0, 3);
  if (seen && (!source->has_high || max_seen > source->high_number)) {
    source->high_number = max_seen;
    source->has_high = true;
  }
  int64 from = 0;
  bool has_from = true;
  if (source->has_scanned_to)
    from = source->scanned_to + 1;
  else if (source->has_start_at)
    from = source->start_at;
  else if (seen)
    from = min_seen;
  else
    has_from = false;
  if (has_from && source->has_high && from <= source->high_number) {
    p.has_window = true;
    p.from = from;
    p.to = source->high_number - from + 1 > gaps::kMaxWindow ? from + gaps::kMaxWindow - 1
                                                             : source->high_number;
  }
  return p;
}

// Inserts the ids of the window not marked in `present`, in batches; the scan
// is the only writer of new gap rows for this provider while it holds the
// scan lock. Returns how many. Call inside spi_call.
int64 insert_window_gaps(Datum name, const gaps::Pattern &pattern, const Progress &window,
                         const uint64_t *present) {
  auto *batch = static_cast<Datum *>(palloc(sizeof(Datum) * kInsertBatch));
  int64 count = 0;
  int n = 0;
  for (int64 number = window.from; number <= window.to; ++number) {
    bool last = number == window.to;
    if (!gaps::is_present(present, number - window.from)) {
      batch[n++] = id_text(pattern, number);
      ++count;
    }
    if (n > 0 && (n == kInsertBatch || last)) {
      Datum args[2] = {
          name, PointerGetDatum(construct_array(batch, n, TEXTOID, -1, false, TYPALIGN_INT))};
      execute_kept(insert_gaps_plan, args, nullptr, false, 0);
      for (int i = 0; i < n; ++i) pfree(DatumGetPointer(batch[i]));
      n = 0;
    }
  }
  return count;
}

// Closes resolved gaps, requests backfill of those past the grace period,
// counts what is open and saves the source's progress. Call inside spi_call.
Settled settle(Datum name, const Source &source) {
  Settled o{};
  execute_kept(close_plan, &name, nullptr, false, 0);
  o.resolved = result_int64(0, 1);

  Datum promote[2] = {name, source.grace};
  execute_kept(promote_plan, promote, nullptr, false, 0);
  o.requested = result_int64(0, 1);

  execute_kept(open_counts_plan, &name, nullptr, false, 0);
  o.open = result_int64(0, 1);
  o.requested_total = result_int64(0, 2);

  Datum state[5] = {name, Int64GetDatum(source.scanned_to), Int64GetDatum(source.high_number),
                    Int64GetDatum(source.event_watermark), Int64GetDatum(source.listed_watermark)};
  char nulls[5] = {' ', source.has_scanned_to ? ' ' : 'n', source.has_high ? ' ' : 'n', ' ', ' '};
  execute_kept(save_state_plan, state, nulls, false, 0);
  return o;
}

std::string report(const std::string &provider, bool sequence, const Source &source,
                   const Progress &progress, const Settled &settled) {
  JsonObject json;
  json.string("provider", provider).string("kind", sequence ? "sequence" : "listed");
  if (sequence) {
    if (progress.has_window)
      json.number("from", progress.from).number("to", progress.to);
    else
      json.null("from").null("to");
    if (source.has_high)
      json.number("high", source.high_number);
    else
      json.null("high");
    json.boolean(
        "more", source.has_high && source.has_scanned_to && source.scanned_to < source.high_number);
  } else {
    json.number("listed_read", progress.listed_read);
  }
  json.number("new_gaps", progress.new_gaps)
      .number("resolved", settled.resolved)
      .number("requested", settled.requested)
      .number("open", settled.open)
      .number("awaiting_backfill", settled.requested_total);
  return json.text();
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

INBOX_SQL_FUNCTION(inbox_scan_gaps) {
  std::string provider = provider_arg(fcinfo);
  Source source = fetch_source(provider);
  bool sequence = source.kind == SourceKind::kSequence;
  gaps::Pattern pattern{};
  if (sequence) pattern = source_pattern(source, provider);

  Progress progress = spi_call([&] {
    return pick_window(CStringGetTextDatum(provider.c_str()), pattern, sequence, &source);
  });
  if (!progress.got_lock) {
    JsonObject json;
    json.string("provider", provider).string("skipped", "busy");
    return jsonb_from_text(json.text());
  }

  std::vector<uint64_t> present;
  if (progress.has_window)
    present.assign(static_cast<size_t>((progress.to - progress.from) / 64 + 1), 0);
  uint64_t *bits = present.data();

  Settled settled = spi_call([&] {
    Datum name = CStringGetTextDatum(provider.c_str());
    if (progress.has_window) {
      mark_window(name, pattern, progress.from, progress.to, bits);
      progress.new_gaps = insert_window_gaps(name, pattern, progress, bits);
      source.scanned_to = progress.to;
      source.has_scanned_to = true;
    }
    if (!sequence) {
      Datum args[2] = {name, Int64GetDatum(source.listed_watermark)};
      execute_kept(listed_scan_plan, args, nullptr, false, 0);
      source.listed_watermark = result_int64(0, 1);
      progress.listed_read = result_int64(0, 2);
      progress.new_gaps = result_int64(0, 3);
    }
    return settle(name, source);
  });
  return jsonb_from_text(report(provider, sequence, source, progress, settled));
}

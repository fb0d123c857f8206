// inbox.find_gaps and inbox.scan_gaps: expected ids that are neither events
// nor tombstones.
//
// For a sequence source the window's expected ids are never materialised as
// rows: the (provider, external_id) index is read in key order over the
// window's range only, and each key sets one bit of a bitmap of the window
// (gaps_sequence.hpp). Cost: the window's bitmap plus the index entries in its
// range, independent of the table size. The SQL anti-join instead probes the
// index once per expected id.
#include <string>
#include <vector>

#include "boundary.hpp"
#include "gaps_sequence.hpp"
#include "reconcile_locks.hpp"
#include "spi.hpp"

extern "C" {
#include "mb/pg_wchar.h"
#include "nodes/params.h"
#include "tcop/dest.h"
}

namespace pg_inbox {
namespace {

using gaps::Block;
using gaps::Pattern;
using gaps::Step;

constexpr int64 kUnionBudget = 3;         // keys per id a one-read of several lengths may read
constexpr int64 kUnionSlack = 128;        // ...plus these
constexpr int kSeekAfter = 64;            // longer ids read through before jumping
constexpr int kProbeAfterJumps = 16;      // jumps in a block before probing may take over
constexpr int64 kIdsPerJump = 32;         // ...when there is a jump per fewer ids than this
constexpr int kInsertBatch = 10000;       // gaps inserted per statement
constexpr int64 kMaxListedWindowDays = 31;
// Gaps turned into requests per scan: 10000, a literal in promote_plan.

// Key-ordered reads of one index range, streamed to a KeyReader, which stops
// the read itself when it has seen enough.
KeptPlan events_range = {R"SQL(
SELECT external_id FROM inbox.events
WHERE provider = $1 AND external_id >= $2 AND external_id <= $3
ORDER BY external_id
)SQL",
                         3, {TEXTOID, TEXTOID, TEXTOID}, nullptr, 0};
KeptPlan tombstones_range = {R"SQL(
SELECT external_id FROM inbox.tombstones
WHERE provider = $1 AND external_id >= $2 AND external_id <= $3
ORDER BY external_id
)SQL",
                             3, {TEXTOID, TEXTOID, TEXTOID}, nullptr, 0};

// Per-id probes of the rest of a block, for a stretch where longer ids
// interleave so densely that range reads would keep jumping: a jump costs a
// statement, a probe inside one statement an index descent.
KeptPlan events_probe = {R"SQL(
SELECT n FROM generate_series($2::bigint, $3::bigint) n
WHERE EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = $1
              AND e.external_id = $4 || CASE WHEN $5 > 0 THEN lpad(n::text, $5, '0') ELSE n::text END)
)SQL",
                         5, {TEXTOID, INT8OID, INT8OID, TEXTOID, INT4OID}, nullptr};
KeptPlan tombstones_probe = {R"SQL(
SELECT n FROM generate_series($2::bigint, $3::bigint) n
WHERE EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = $1
              AND t.external_id = $4 || CASE WHEN $5 > 0 THEN lpad(n::text, $5, '0') ELSE n::text END)
)SQL",
                             5, {TEXTOID, INT8OID, INT8OID, TEXTOID, INT4OID}, nullptr};

KeptPlan source_plan = {R"SQL(
SELECT s.kind, s.pattern, s.start_at, s.grace, s.scanned_to, s.high_number,
       s.event_watermark, s.listed_watermark, p.name IS NOT NULL
FROM (SELECT $1::text AS name) q
LEFT JOIN inbox.providers p ON p.name = q.name
LEFT JOIN inbox.gap_sources s ON s.provider = q.name
)SQL",
                        1, {TEXTOID}, nullptr};

KeptPlan listed_gaps_plan = {R"SQL(
SELECT l.external_id FROM inbox.listed_ids l
WHERE l.provider = $1 AND l.listed_at >= $2 AND l.listed_at < $3
  AND NOT EXISTS (SELECT 1 FROM inbox.events e
                  WHERE e.provider = l.provider AND e.external_id = l.external_id)
  AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t
                  WHERE t.provider = l.provider AND t.external_id = l.external_id)
ORDER BY l.external_id
)SQL",
                             3, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, nullptr};

KeptPlan scan_lock_plan = {"SELECT pg_try_advisory_xact_lock($1, hashtext($2))", 2,
                           {INT4OID, TEXTOID}, nullptr};

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
                             5, {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID}, nullptr};

KeptPlan insert_gaps_plan = {R"SQL(
INSERT INTO inbox.gaps (provider, external_id)
SELECT $1, x FROM unnest($2::text[]) x
ON CONFLICT ON CONSTRAINT gaps_pkey DO NOTHING
)SQL",
                             2, {TEXTOID, TEXTARRAYOID}, nullptr};

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
                             2, {TEXTOID, INT8OID}, nullptr};

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
                       1, {TEXTOID}, nullptr};

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
                         2, {TEXTOID, INTERVALOID}, nullptr};

KeptPlan open_counts_plan = {R"SQL(
SELECT count(*) FILTER (WHERE status = 'open'), count(*) FILTER (WHERE status = 'requested')
FROM inbox.gaps WHERE provider = $1 AND status <> 'resolved'
)SQL",
                             1, {TEXTOID}, nullptr};

KeptPlan save_state_plan = {R"SQL(
UPDATE inbox.gap_sources
   SET scanned_to = $2, high_number = $3, event_watermark = $4, listed_watermark = $5,
       last_scan_at = now()
 WHERE provider = $1
)SQL",
                            5, {TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID}, nullptr};

enum class Kind { kNone, kSequence, kListed };

// A provider's source as stored; fixed-size so it can cross pg_call.
struct Source {
  bool provider_known;
  Kind kind;
  char pattern[256];
  bool has_start_at;
  int64 start_at;
  Datum grace;  // Interval *, in the caller's context
  bool has_scanned_to;
  int64 scanned_to;
  bool has_high;
  int64 high_number;
  int64 event_watermark;
  int64 listed_watermark;
};

int64 int64_at(uint64 row, int column, bool *isnull) {
  Datum value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
  return *isnull ? 0 : DatumGetInt64(value);
}

// Call inside pg_call, SPI connected.
void load_source(Datum provider, Source *source) {
  execute_kept(source_plan, &provider, nullptr, false, 0);
  bool isnull;
  *source = Source{};
  source->provider_known =
      DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 9, &isnull));
  Datum kind = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  if (isnull) return;
  source->kind = strcmp(TextDatumGetCString(kind), "sequence") == 0 ? Kind::kSequence : Kind::kListed;
  Datum pattern = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
  if (!isnull) strlcpy(source->pattern, TextDatumGetCString(pattern), sizeof(source->pattern));
  source->start_at = int64_at(0, 3, &isnull);
  source->has_start_at = !isnull;
  source->grace = result_value(0, 4, &isnull);
  source->scanned_to = int64_at(0, 5, &isnull);
  source->has_scanned_to = !isnull;
  source->high_number = int64_at(0, 6, &isnull);
  source->has_high = !isnull;
  source->event_watermark = int64_at(0, 7, &isnull);
  source->listed_watermark = int64_at(0, 8, &isnull);
}

// Sets the bits of the numbers lo..hi of `block` present in the probed table.
void probe_block(KeptPlan &probe, Datum provider, const Pattern &pattern, const Block &block,
                 int64 lo, int64 window_from, uint64_t *present) {
  int pad = block.length == pattern.width ? pattern.width : 0;
  Datum args[5] = {provider, Int64GetDatum(lo), Int64GetDatum(block.hi),
                   CStringGetTextDatum(pattern.prefix), Int32GetDatum(pad)};
  execute_kept(probe, args, nullptr, false, 0);
  for (uint64 i = 0; i < SPI_processed; ++i) {
    bool isnull;
    int64 bit = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)) -
                window_from;
    present[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
  SPI_freetuptable(SPI_tuptable);
}

// Receives the keys of a range read one by one, straight from the executor:
// no row is materialised for SPI. Returning false stops the read early.
struct KeyReader {
  DestReceiver receiver;  // first: Postgres sees a DestReceiver *
  const Pattern *pattern;
  int64 from;
  int64 to;
  uint64_t *present;
  const Block *block;  // null: a one-read of several lengths (visit_any)
  int64 budget;        // one-read: keys left before giving up
  int longer_run;      // block: consecutive longer ids
  // What stopped the read, if anything.
  bool over_budget;
  bool done;
  bool jump;
  int64 jump_to;
};

bool read_key(TupleTableSlot *slot, DestReceiver *self) {
  auto *reader = reinterpret_cast<KeyReader *>(self);
  bool isnull;
  Datum key = slot_getattr(slot, 1, &isnull);
  if (isnull) return true;
  varlena *text = pg_detoast_datum_packed(reinterpret_cast<varlena *>(DatumGetPointer(key)));
  const char *bytes = VARDATA_ANY(text);
  size_t len = VARSIZE_ANY_EXHDR(text);
  if (reader->block == nullptr) {
    gaps::visit_any(*reader->pattern, reader->from, reader->to, bytes, len, reader->present);
    if (--reader->budget > 0) return true;
    reader->over_budget = true;
    return false;
  }
  int64 seek_to = 0;
  Step step = gaps::visit_key(*reader->pattern, *reader->block, reader->from, bytes, len,
                              reader->present, &seek_to);
  if (step == Step::kDone) {
    reader->done = true;
    return false;
  }
  if (step == Step::kNext) {
    reader->longer_run = 0;
    return true;
  }
  // A short run of longer ids is cheaper to read through than to jump over.
  if (++reader->longer_run < kSeekAfter) return true;
  reader->jump = true;
  reader->jump_to = seek_to;
  return false;
}

void reader_startup(DestReceiver *, int, TupleDesc) {}
void reader_shutdown(DestReceiver *) {}
void reader_destroy(DestReceiver *) {}

// Reads provider's keys in [lower, upper], in index order, into reader.
void read_range(KeptPlan &plan, Datum provider, const char *lower, const char *upper,
                KeyReader *reader) {
  ParamListInfo params = makeParamList(3);
  Datum values[3] = {provider, CStringGetTextDatum(lower), CStringGetTextDatum(upper)};
  for (int i = 0; i < 3; ++i) {
    params->params[i].value = values[i];
    params->params[i].isnull = false;
    params->params[i].pflags = PARAM_FLAG_CONST;
    params->params[i].ptype = plan.argtypes[i];
  }
  reader->receiver.receiveSlot = read_key;
  reader->receiver.rStartup = reader_startup;
  reader->receiver.rShutdown = reader_shutdown;
  reader->receiver.rDestroy = reader_destroy;
  reader->receiver.mydest = DestNone;
  reader->over_budget = reader->done = reader->jump = false;
  reader->longer_run = 0;
  SPIExecuteOptions options{};
  options.params = params;
  options.dest = &reader->receiver;
  int rc = SPI_execute_plan_extended(kept_plan(plan), &options);
  if (rc < 0) elog(ERROR, "pg_inbox: statement failed: %s", SPI_result_code_string(rc));
}

// Sets the bit of every id of [from, to] present in one table (events or
// tombstones). Call inside pg_call, SPI connected.
void mark_present(KeptPlan &range, KeptPlan &probe, Datum provider,
                  const Pattern &pattern, int64 from, int64 to, uint64_t *present) {
  Block blocks[gaps::kMaxBlocks];
  int nblocks = gaps::split_blocks(pattern, from, to, blocks);
  char lower[gaps::kMaxPrefixBytes + 64];
  char upper[gaps::kMaxPrefixBytes + 64];
  KeyReader reader{};
  reader.pattern = &pattern;
  reader.from = from;
  reader.to = to;
  reader.present = present;

  // Several lengths: first one read of the key range from the smallest first
  // id to the largest last one, each key classified by its own length. It
  // gives up after kUnionBudget keys per id (longer ids dominate the range);
  // what it marked stays marked, and the per-length reads below follow.
  if (nblocks > 1) {
    char candidate[gaps::kMaxPrefixBytes + 64];
    gaps::format_id(pattern, blocks[0].lo, blocks[0].length, lower);
    gaps::format_id(pattern, blocks[0].hi, blocks[0].length, upper);
    for (int b = 1; b < nblocks; ++b) {
      gaps::format_id(pattern, blocks[b].lo, blocks[b].length, candidate);
      if (strcmp(candidate, lower) < 0) strlcpy(lower, candidate, sizeof(lower));
      gaps::format_id(pattern, blocks[b].hi, blocks[b].length, candidate);
      if (strcmp(candidate, upper) > 0) strlcpy(upper, candidate, sizeof(upper));
    }
    reader.block = nullptr;
    reader.budget = kUnionBudget * (to - from + 1) + kUnionSlack;
    read_range(range, provider, lower, upper, &reader);
    if (!reader.over_budget) return;
  }

  // One range per digit length: ids of one length sort as their numbers.
  for (int b = 0; b < nblocks; ++b) {
    const Block &block = blocks[b];
    reader.block = &block;
    gaps::format_id(pattern, block.lo, block.length, lower);
    gaps::format_id(pattern, block.hi, block.length, upper);
    int jumps = 0;
    for (;;) {
      read_range(range, provider, lower, upper, &reader);
      if (!reader.jump) break;  // the range is done
      // Everything below jump_to is settled. Jumping often: probe the rest.
      if (++jumps > kProbeAfterJumps && jumps * kIdsPerJump > reader.jump_to - block.lo) {
        probe_block(probe, provider, pattern, block, reader.jump_to, from, present);
        break;
      }
      gaps::format_id(pattern, reader.jump_to, block.length, lower);
    }
  }
}

// Marks events and tombstones of [from, to]. Call inside pg_call, SPI connected.
void mark_window(Datum provider, const Pattern &pattern, int64 from, int64 to, uint64_t *present) {
  mark_present(events_range, events_probe, provider, pattern, from, to, present);
  mark_present(tombstones_range, tombstones_probe, provider, pattern, from, to, present);
}

// The text of expected id `number`, palloc'd.
Datum id_text(const Pattern &pattern, int64 number) {
  char id[gaps::kMaxPrefixBytes + 64];
  int length = gaps::digit_count(number) > pattern.width ? gaps::digit_count(number) : pattern.width;
  size_t len = gaps::format_id(pattern, number, length, id);
  return PointerGetDatum(cstring_to_text_with_len(id, static_cast<int>(len)));
}

std::string provider_arg(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0)) throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "provider must not be null");
  std::string provider = pg_call([&] { return (const char *)text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  if (provider.empty()) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "provider must not be empty");
  return provider;
}

Source fetch_source(const std::string &provider) {
  Source source = pg_call([&] {
    Source s;
    SPI_connect();
    load_source(CStringGetTextDatum(provider.c_str()), &s);
    SPI_finish();
    return s;
  });
  if (!source.provider_known)
    throw InboxError(ERRCODE_UNDEFINED_OBJECT, "unknown provider \"" + provider + "\"");
  if (source.kind == Kind::kNone)
    throw InboxError(ERRCODE_UNDEFINED_OBJECT, "provider \"" + provider + "\" has no id source",
                     "Configure one: SELECT inbox.set_id_source('" + provider +
                         "', 'sequence', 'evt_{n}'); or 'listed'.");
  return source;
}

Pattern parse_source_pattern(const Source &source, const std::string &provider) {
  Pattern pattern;
  const char *why = nullptr;
  if (!gaps::parse_pattern(source.pattern, strlen(source.pattern), &pattern, &why))
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "malformed id pattern of provider \"" + provider + "\"", why);
  return pattern;
}

void check_window(int64 from, int64 to) {
  if (from < 0) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from must not be negative");
  if (to > gaps::kMaxNumber)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "to must be at most 999999999999999999");
  if (from > to)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "from (" + std::to_string(from) + ") is after to (" + std::to_string(to) + ")");
  if (to - from + 1 > gaps::kMaxWindow)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                     "window of " + std::to_string(to - from + 1) + " ids is over the maximum of " +
                         std::to_string(gaps::kMaxWindow),
                     "Split it into windows of at most 1000000 ids.");
}

std::string json_number(bool present, int64 value) {
  return present ? std::to_string(value) : std::string("null");
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

INBOX_SQL_FUNCTION(inbox_find_gaps_sequence) {
  std::string provider = provider_arg(fcinfo);
  if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "from and to must not be null");
  int64 from = PG_GETARG_INT64(1);
  int64 to = PG_GETARG_INT64(2);
  check_window(from, to);
  Source source = fetch_source(provider);
  if (source.kind != Kind::kSequence)
    throw InboxError(ERRCODE_WRONG_OBJECT_TYPE,
                     "provider \"" + provider + "\" has a listed id source: pass timestamps",
                     "inbox.find_gaps(provider, from timestamptz, to timestamptz)");
  Pattern pattern = parse_source_pattern(source, provider);

  std::vector<uint64_t> present(static_cast<size_t>((to - from) / 64 + 1), 0);
  uint64_t *bits = present.data();
  pg_call([&] {
    InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
    auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    SPI_connect();
    mark_window(CStringGetTextDatum(provider.c_str()), pattern, from, to, bits);
    SPI_finish();
    bool isnull = false;
    for (int64 number = from; number <= to; ++number) {
      if (gaps::is_present(bits, number - from)) continue;
      Datum id = id_text(pattern, number);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &id, &isnull);
      pfree(DatumGetPointer(id));
    }
  });
  return (Datum)0;
}

INBOX_SQL_FUNCTION(inbox_find_gaps_listed) {
  std::string provider = provider_arg(fcinfo);
  if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "from and to must not be null");
  TimestampTz from = PG_GETARG_TIMESTAMPTZ(1);
  TimestampTz to = PG_GETARG_TIMESTAMPTZ(2);
  if (TIMESTAMP_NOT_FINITE(from) || TIMESTAMP_NOT_FINITE(to))
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from and to must be finite");
  if (from > to) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from is after to");
  if (to - from > kMaxListedWindowDays * USECS_PER_DAY)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                     "window is over the maximum of " + std::to_string(kMaxListedWindowDays) + " days");
  Source source = fetch_source(provider);
  if (source.kind != Kind::kListed)
    throw InboxError(ERRCODE_WRONG_OBJECT_TYPE,
                     "provider \"" + provider + "\" has a sequence id source: pass numbers",
                     "inbox.find_gaps(provider, from bigint, to bigint)");

  pg_call([&] {
    InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
    auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    SPI_connect();
    Datum args[3] = {CStringGetTextDatum(provider.c_str()), TimestampTzGetDatum(from),
                     TimestampTzGetDatum(to)};
    execute_kept(listed_gaps_plan, args, nullptr, false, 0);
    for (uint64 i = 0; i < SPI_processed; ++i) {
      bool isnull;
      Datum id = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &id, &isnull);
    }
    SPI_finish();
  });
  return (Datum)0;
}

INBOX_SQL_FUNCTION(inbox_scan_gaps) {
  std::string provider = provider_arg(fcinfo);
  Source source = fetch_source(provider);
  bool sequence = source.kind == Kind::kSequence;
  Pattern pattern{};
  if (sequence) pattern = parse_source_pattern(source, provider);

  // Numbers after the prefix: at least `width` digits, 18 at most.
  std::string number_regex =
      "^[0-9]{" + std::to_string(sequence ? pattern.width : 1) + "," + std::to_string(gaps::kMaxWidth) + "}$";

  struct Progress {
    bool got_lock;
    bool has_window;
    int64 from;
    int64 to;
    int64 new_gaps;
    int64 listed_read;
  };
  // Reads where the stream has got to and picks this scan's window.
  Progress progress = pg_call([&] {
    Progress p{};
    SPI_connect();
    Datum name = CStringGetTextDatum(provider.c_str());
    Datum key[2] = {Int32GetDatum(kLockClassGapScan), name};
    execute_kept(scan_lock_plan, key, nullptr, false, 0);
    bool isnull;
    p.got_lock = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    if (p.got_lock && sequence) {
      Datum args[5] = {name, Int64GetDatum(source.event_watermark),
                       // substr() counts characters: a prefix may be multibyte.
                       Int32GetDatum(pg_mbstrlen_with_len(pattern.prefix,
                                                          static_cast<int>(pattern.prefix_len)) + 1),
                       CStringGetTextDatum(pattern.prefix), CStringGetTextDatum(number_regex.c_str())};
      execute_kept(new_numbers_plan, args, nullptr, false, 0);
      source.event_watermark = int64_at(0, 1, &isnull);
      int64 min_seen = int64_at(0, 2, &isnull);
      bool seen = !isnull;
      int64 max_seen = int64_at(0, 3, &isnull);
      if (seen && (!source.has_high || max_seen > source.high_number)) {
        source.high_number = max_seen;
        source.has_high = true;
      }
      int64 from = 0;
      bool has_from = true;
      if (source.has_scanned_to)
        from = source.scanned_to + 1;
      else if (source.has_start_at)
        from = source.start_at;
      else if (seen)
        from = min_seen;
      else
        has_from = false;
      if (has_from && source.has_high && from <= source.high_number) {
        p.has_window = true;
        p.from = from;
        p.to = source.high_number - from + 1 > gaps::kMaxWindow ? from + gaps::kMaxWindow - 1
                                                                 : source.high_number;
      }
    }
    SPI_finish();
    return p;
  });
  if (!progress.got_lock) {
    std::string json = "{\"provider\": \"" + provider + "\", \"skipped\": \"busy\"}";
    return pg_call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str())); });
  }

  std::vector<uint64_t> present;
  if (progress.has_window)
    present.assign(static_cast<size_t>((progress.to - progress.from) / 64 + 1), 0);
  uint64_t *bits = present.data();

  struct Outcome {
    int64 resolved;
    int64 requested;
    int64 open;
    int64 requested_total;
  };
  Outcome outcome = pg_call([&] {
    Outcome o{};
    SPI_connect();
    Datum name = CStringGetTextDatum(provider.c_str());
    bool isnull;
    if (progress.has_window) {
      mark_window(name, pattern, progress.from, progress.to, bits);
      // Insert the window's gaps in batches; scan_gaps is the only writer of
      // new gap rows for this provider while it holds the scan lock.
      auto *batch = static_cast<Datum *>(palloc(sizeof(Datum) * kInsertBatch));
      int n = 0;
      for (int64 number = progress.from; number <= progress.to; ++number) {
        if (gaps::is_present(bits, number - progress.from)) continue;
        batch[n++] = id_text(pattern, number);
        progress.new_gaps++;
        if (n == kInsertBatch || number == progress.to) {
          Datum args[2] = {name, PointerGetDatum(construct_array(batch, n, TEXTOID, -1, false, TYPALIGN_INT))};
          execute_kept(insert_gaps_plan, args, nullptr, false, 0);
          for (int i = 0; i < n; ++i) pfree(DatumGetPointer(batch[i]));
          n = 0;
        }
      }
      if (n > 0) {
        Datum args[2] = {name, PointerGetDatum(construct_array(batch, n, TEXTOID, -1, false, TYPALIGN_INT))};
        execute_kept(insert_gaps_plan, args, nullptr, false, 0);
      }
      source.scanned_to = progress.to;
      source.has_scanned_to = true;
    }
    if (!sequence) {
      Datum args[2] = {name, Int64GetDatum(source.listed_watermark)};
      execute_kept(listed_scan_plan, args, nullptr, false, 0);
      source.listed_watermark = int64_at(0, 1, &isnull);
      progress.listed_read = int64_at(0, 2, &isnull);
      progress.new_gaps = int64_at(0, 3, &isnull);
    }

    execute_kept(close_plan, &name, nullptr, false, 0);
    o.resolved = int64_at(0, 1, &isnull);

    Datum promote[2] = {name, source.grace};
    execute_kept(promote_plan, promote, nullptr, false, 0);
    o.requested = int64_at(0, 1, &isnull);

    execute_kept(open_counts_plan, &name, nullptr, false, 0);
    o.open = int64_at(0, 1, &isnull);
    o.requested_total = int64_at(0, 2, &isnull);

    Datum state[5] = {name, Int64GetDatum(source.scanned_to), Int64GetDatum(source.high_number),
                      Int64GetDatum(source.event_watermark), Int64GetDatum(source.listed_watermark)};
    char nulls[5] = {' ', source.has_scanned_to ? ' ' : 'n', source.has_high ? ' ' : 'n', ' ', ' '};
    execute_kept(save_state_plan, state, nulls, false, 0);
    SPI_finish();
    return o;
  });

  std::string json = "{\"provider\": \"" + provider + "\", ";  // names are [a-z0-9_-]
  json += std::string("\"kind\": \"") + (sequence ? "sequence" : "listed") + "\", ";
  if (sequence) {
    json += "\"from\": " + json_number(progress.has_window, progress.from) + ", ";
    json += "\"to\": " + json_number(progress.has_window, progress.to) + ", ";
    json += "\"high\": " + json_number(source.has_high, source.high_number) + ", ";
    json += std::string("\"more\": ") +
            (source.has_high && source.has_scanned_to && source.scanned_to < source.high_number
                 ? "true"
                 : "false") +
            ", ";
  } else {
    json += "\"listed_read\": " + std::to_string(progress.listed_read) + ", ";
  }
  json += "\"new_gaps\": " + std::to_string(progress.new_gaps) + ", ";
  json += "\"resolved\": " + std::to_string(outcome.resolved) + ", ";
  json += "\"requested\": " + std::to_string(outcome.requested) + ", ";
  json += "\"open\": " + std::to_string(outcome.open) + ", ";
  json += "\"awaiting_backfill\": " + std::to_string(outcome.requested_total) + "}";
  return pg_call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str())); });
}

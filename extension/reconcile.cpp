// inbox.reconcile: one bounded pass over the queue. It never waits: the pass
// lock is a try-lock and every row it changes is taken with SKIP LOCKED, so
// ingest and workers never queue behind it. Each category is capped per pass;
// "more": true says the caller may run another pass at once.
#include <string>
#include <vector>

#include "boundary.hpp"
#include "json_object.hpp"
#include "reconcile_locks.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

constexpr int64 kBatchRows = 1000;   // per category, per pass
constexpr int64 kVerifyRows = 1000;  // done events verified per provider, per pass
constexpr int kMaxReopens = 3;       // verify mismatches before reconcile stops reopening
constexpr int kMaxTriggerBytes = 63;
constexpr int64 kDeadCountReuse = 5 * 60 * USECS_PER_SEC;
constexpr int64 kDeadChunkIds = 100000;  // ids counted per statement
// The pass sleeps this many times as long as it has just worked, after every
// step: it uses at most a fifth of one core, so ingest and workers keep the
// rest (on two cores a pass at full speed cost ingest half its rate).
// Longer passes (and snapshots) are the price.
constexpr double kThrottle = 4.0;

KeptPlan try_lock_plan = {
    "SELECT pg_try_advisory_xact_lock($1, $2)", 2, {INT4OID, INT4OID}, nullptr};

KeptPlan insert_run_plan = {R"SQL(
INSERT INTO inbox.reconcile_runs (trigger, started_at, finished_at, skipped, counts)
VALUES ($1, clock_timestamp(), CASE WHEN $2 THEN clock_timestamp() END, $2,
        CASE WHEN $2 THEN '{"skipped":"busy"}'::jsonb ELSE '{}' END)
RETURNING id
)SQL",
                            2,
                            {TEXTOID, BOOLOID},
                            nullptr};

KeptPlan finish_run_plan = {R"SQL(
UPDATE inbox.reconcile_runs SET finished_at = clock_timestamp(), counts = $2::jsonb
 WHERE id = $1
RETURNING counts || jsonb_build_object('elapsed_ms',
                       round(extract(epoch FROM finished_at - started_at) * 1000, 1))
)SQL",
                            2,
                            {INT8OID, TEXTOID},
                            nullptr};

// Everything about open events, from one read of the open set (the partial
// index events_open_idx keeps it to open rows, however large the table):
//  - expired leases of 'reclaim' providers go back to pending, taken with
//    SKIP LOCKED and rechecked under the lock; the old token stays on the
//    row, so the late worker's complete/fail says 'lost';
//  - expired leases of 'hold' providers are recorded once per attempt and
//    left alone;
//  - stuck events (and held leases) are counted.
// The history CTE reads the rows before the update (one snapshot).
KeptPlan open_set_plan = {R"SQL(
WITH open AS MATERIALIZED (
    SELECT e.id, e.first_received_at, p.stuck_after,
           e.status = 'processing' AND e.lease_expires_at <= now() AS expired,
           p.on_lease_expiry AS policy
    FROM inbox.events e JOIN inbox.providers p ON p.name = e.provider
    WHERE e.processed_at IS NULL
), due AS (
    SELECT e.id FROM inbox.events e
    WHERE e.id IN (SELECT o.id FROM open o WHERE o.expired AND o.policy = 'reclaim'
                   ORDER BY o.id LIMIT 1000)  -- kBatchRows; a literal, seen by generic plans
      AND e.status = 'processing' AND e.lease_expires_at <= now()
    FOR UPDATE SKIP LOCKED
), reclaim_history AS (
    INSERT INTO inbox.event_history (event_id, run_id, reason, status, attempts, lease_token,
                                     lease_expires_at, processed_at, last_error)
    SELECT e.id, $1, 'lease_reclaimed', e.status, e.attempts, e.lease_token,
           e.lease_expires_at, e.processed_at, e.last_error
    FROM inbox.events e JOIN due USING (id)
), reclaimed AS (
    UPDATE inbox.events e
       SET status = 'pending', next_attempt_at = now(), lease_expires_at = NULL
      FROM due WHERE e.id = due.id
    RETURNING 1
), held AS (
    INSERT INTO inbox.event_history (event_id, run_id, reason, status, attempts, lease_token,
                                     lease_expires_at, processed_at, last_error)
    SELECT e.id, $1, 'lease_held', e.status, e.attempts, e.lease_token, e.lease_expires_at,
           e.processed_at, e.last_error
    FROM inbox.events e
    WHERE e.id IN (SELECT o.id FROM open o WHERE o.expired AND o.policy = 'hold')
      AND NOT EXISTS (SELECT 1 FROM inbox.event_history h
                      WHERE h.event_id = e.id AND h.reason = 'lease_held'
                        AND h.attempts = e.attempts)
    LIMIT 1000  -- kBatchRows
    RETURNING 1
)
SELECT (SELECT count(*) FROM reclaimed),
       (SELECT count(*) FROM held),
       count(*) FILTER (WHERE s.stuck),
       count(*) FILTER (WHERE s.held),
       min(s.first_received_at) FILTER (WHERE s.stuck)::text
FROM (SELECT o.first_received_at,
             o.expired AND o.policy = 'hold' AS held,
             o.first_received_at < now() - coalesce(o.stuck_after, interval '1 hour')
               OR (o.expired AND o.policy = 'hold') AS stuck
      FROM open o) s
)SQL",
                          1,
                          {INT8OID},
                          nullptr};

// Providers with a verify function; a dropped function shows as missing.
KeptPlan verifiers_plan = {R"SQL(
SELECT p.name, pr.oid IS NULL, coalesce(s.verify_cursor, 0),
       CASE WHEN pr.oid IS NOT NULL THEN p.verify_function::regproc::text END
FROM inbox.providers p
LEFT JOIN pg_catalog.pg_proc pr ON pr.oid = p.verify_function
LEFT JOIN inbox.reconcile_state s ON s.provider = p.name
WHERE p.verify_function IS NOT NULL
ORDER BY p.name
)SQL",
                           0,
                           {},
                           nullptr};

// The verify call is part of the statement, so a simple SQL function is
// inlined into it instead of being called through fmgr row by row. The name
// comes from regproc output: quoted and schema-qualified, safe to splice.
// The second %s skips purged events (payload gone: nothing to reopen) where
// the schema has purged_at (0.2.0).
constexpr const char *kVerifyBatchSql =
    "SELECT e.id, %s(e) FROM inbox.events e WHERE e.provider = $1 AND e.status = 'done'%s "
    "AND e.id > $2 ORDER BY e.id LIMIT $3";

KeptPlan save_cursor_plan = {R"SQL(
INSERT INTO inbox.reconcile_state (provider, verify_cursor) VALUES ($1, $2)
ON CONFLICT (provider) DO UPDATE SET verify_cursor = EXCLUDED.verify_cursor
)SQL",
                             2,
                             {TEXTOID, INT8OID},
                             nullptr};

// A mismatch becomes a new attempt: the done row is copied into history
// (payload included) and reopened as pending. After kMaxReopens mismatches
// the event stays done and is reported instead of looping forever.
KeptPlan reopen_plan = {R"SQL(
WITH target AS (
    SELECT e.id FROM inbox.events e
    WHERE e.id = ANY($1) AND e.status = 'done'
      AND (SELECT count(*) FROM inbox.event_history h
           WHERE h.event_id = e.id AND h.reason = 'verify_mismatch') < $3
    FOR UPDATE SKIP LOCKED
), history AS (
    INSERT INTO inbox.event_history (event_id, run_id, reason, status, attempts, lease_token,
                                     lease_expires_at, processed_at, last_error, payload)
    SELECT e.id, $2, 'verify_mismatch', e.status, e.attempts, e.lease_token,
           e.lease_expires_at, e.processed_at, e.last_error, e.payload
    FROM inbox.events e JOIN target USING (id)
), reopened AS (
    UPDATE inbox.events e
       SET status = 'pending', processed_at = NULL, next_attempt_at = now(),
           lease_expires_at = NULL,
           last_error = 'reopened by inbox.reconcile: the verify function reported a mismatch'
      FROM target WHERE e.id = target.id
    RETURNING 1
)
SELECT count(*) FROM reopened
)SQL",
                        3,
                        {INT8ARRAYOID, INT8OID, INT4OID},
                        nullptr};

// The one full read of the pass: terminal rows have no index of their own
// (one would cost every claim its HOT update). Scheduled and anomaly-triggered
// passes reuse a count younger than kDeadCountReuse (at 10M events a recount
// took 26 s of a check run); any other trigger counts afresh.
KeptPlan id_range_plan = {R"SQL(
SELECT coalesce(min(id), 0), coalesce(max(id), -1), to_json(now()) #>> '{}' FROM inbox.events
)SQL",
                          0,
                          {},
                          nullptr};

KeptPlan dead_chunk_plan = {R"SQL(
SELECT count(*) FROM inbox.events e WHERE e.id >= $1 AND e.id < $2 AND e.status = 'dead'
)SQL",
                            2,
                            {INT8OID, INT8OID},
                            nullptr};

// Growth is measured against the previous pass's count, not timestamps: a
// fail() that committed late would slip between two passes' clocks.
KeptPlan previous_dead_plan = {R"SQL(
SELECT (r.counts ->> 'dead')::bigint, r.counts ->> 'dead_counted_at',
       (r.counts ->> 'dead_counted_at')::timestamptz > now() - $2
FROM inbox.reconcile_runs r
WHERE NOT r.skipped AND r.id <> $1 AND r.counts ? 'dead_counted_at'
ORDER BY r.id DESC LIMIT 1
)SQL",
                               2,
                               {INT8OID, INTERVALOID},
                               nullptr};

struct Counts {
  int64 stuck = 0;
  int64 leases_reclaimed = 0;
  int64 leases_held = 0;
  int64 held_recorded = 0;
  int64 verified = 0;
  int64 mismatches = 0;
  int64 reopened = 0;
  int64 verify_null = 0;
  int64 verify_missing = 0;
  char verify_failed[2048] = {0};  // provider names, each followed by '\n'
  int64 dead = 0;
  int64 dead_new = 0;
  bool more = false;
  bool dead_reused = false;
  int64 paused_us = 0;
  TimestampTz since = 0;  // start of the work not yet paid for by a pause
  char oldest_stuck[64] = {0};
  char dead_counted_at[64] = {0};
};

// Sleeps kThrottle times the work done since counts->since, in slices that
// answer cancels. Call inside spi_call.
void throttle(Counts *counts) {
  TimestampTz now = GetCurrentTimestamp();
  int64 sleep_us = static_cast<int64>(static_cast<double>(now - counts->since) * kThrottle);
  counts->paused_us += sleep_us > 0 ? sleep_us : 0;
  while (sleep_us > 0) {
    CHECK_FOR_INTERRUPTS();
    long slice = sleep_us > 10000 ? 10000 : static_cast<long>(sleep_us);
    pg_usleep(slice);
    sleep_us -= slice;
  }
  counts->since = GetCurrentTimestamp();
}

// Runs one provider's verify sweep. Call inside spi_call.
void verify_provider(Datum provider, const char *function, int64 cursor, int64 run_id,
                     Counts *counts) {
  Datum args[3] = {provider, Int64GetDatum(cursor), Int64GetDatum(kVerifyRows)};
  Oid types[3] = {TEXTOID, INT8OID, INT8OID};
  int rc = SPI_execute_with_args(
      psprintf(kVerifyBatchSql, function,
               events_has_column("purged_at") ? " AND e.purged_at IS NULL" : ""),
      3, types, args, nullptr, false, 0);
  if (rc != SPI_OK_SELECT)
    elog(ERROR, "pg_inbox: verify batch failed: %s", SPI_result_code_string(rc));
  uint64 processed = SPI_processed;

  auto *mismatched = static_cast<Datum *>(palloc(sizeof(Datum) * (processed + 1)));
  int nmismatched = 0;
  int64 last_id = cursor;
  for (uint64 i = 0; i < processed; ++i) {
    bool isnull;
    int64 id = result_int64(i, 1);
    bool ok = result_bool(i, 2, &isnull);
    counts->verified++;
    if (isnull)
      counts->verify_null++;
    else if (!ok)
      mismatched[nmismatched++] = Int64GetDatum(id);
    last_id = id;
  }
  // A short batch means the sweep reached the end: start over next pass.
  if (static_cast<int64>(processed) < kVerifyRows)
    last_id = 0;
  else
    counts->more = true;
  Datum save[2] = {provider, Int64GetDatum(last_id)};
  execute_kept(save_cursor_plan, save, nullptr, false, 0);

  counts->mismatches += nmismatched;
  throttle(counts);
  if (nmismatched > 0) {
    Datum reopen[3] = {PointerGetDatum(construct_array(mismatched, nmismatched, INT8OID, 8, true,
                                                       TYPALIGN_DOUBLE)),
                       Int64GetDatum(run_id), Int32GetDatum(kMaxReopens)};
    execute_kept(reopen_plan, reopen, nullptr, false, 0);
    counts->reopened += result_int64(0, 1);
  }
}

// Runs verify_provider in a subtransaction: a verify function that raises
// loses only its own batch (reported, with a WARNING), never the whole pass
// and its lease repairs. Call inside spi_call.
void verify_provider_guarded(Datum provider, const char *function, int64 cursor, int64 run_id,
                             Counts *counts) {
  Counts before = *counts;
  ErrorData *edata =
      in_subtransaction([&] { verify_provider(provider, function, cursor, run_id, counts); });
  if (edata == nullptr) return;
  *counts = before;
  const char *name = TextDatumGetCString(provider);
  size_t used = strlen(counts->verify_failed);
  // Whole names only; the WARNING names every one.
  if (used + strlen(name) + 2 < sizeof(counts->verify_failed))
    snprintf(counts->verify_failed + used, sizeof(counts->verify_failed) - used, "%s\n", name);
  ereport(WARNING, (errcode(edata->sqlerrcode),
                    errmsg("pg_inbox: the verify function of provider \"%s\" failed: %s", name,
                           edata->message),
                    errhint("inbox.reconcile() skipped its verify batch; return NULL for "
                            "\"cannot tell\" instead of raising.")));
  FreeErrorData(edata);
}

// The pass itself. Call inside spi_call.
void run_pass(int64 run_id, bool may_reuse_dead_count, Counts *counts) {
  Datum batch[1] = {Int64GetDatum(run_id)};
  counts->since = GetCurrentTimestamp();

  execute_kept(open_set_plan, batch, nullptr, false, 0);
  counts->leases_reclaimed = result_int64(0, 1);
  if (counts->leases_reclaimed >= kBatchRows) counts->more = true;
  counts->held_recorded = result_int64(0, 2);
  counts->stuck = result_int64(0, 3);
  counts->leases_held = result_int64(0, 4);
  bool isnull;
  const char *oldest = result_text(0, 5);
  if (oldest) strlcpy(counts->oldest_stuck, oldest, sizeof(counts->oldest_stuck));
  throttle(counts);

  // Read out first: each verify batch runs statements of its own.
  execute_kept(verifiers_plan, nullptr, nullptr, false, 0);
  uint64 nverifiers = SPI_processed;
  struct Verifier {
    Datum name;
    bool missing;
    int64 cursor;
    const char *function;
  };
  auto *verifiers = static_cast<Verifier *>(palloc(sizeof(Verifier) * (nverifiers + 1)));
  for (uint64 i = 0; i < nverifiers; ++i)
    verifiers[i] = Verifier{result_value(i, 1, &isnull), result_bool(i, 2), result_int64(i, 3),
                            result_text(i, 4)};
  for (uint64 i = 0; i < nverifiers; ++i) {
    if (verifiers[i].missing) {
      counts->verify_missing++;
      continue;
    }
    verify_provider_guarded(verifiers[i].name, verifiers[i].function, verifiers[i].cursor, run_id,
                            counts);
  }

  Datum previous[2] = {Int64GetDatum(run_id), interval_from_usecs(kDeadCountReuse)};
  execute_kept(previous_dead_plan, previous, nullptr, false, 0);
  bool has_previous = SPI_processed == 1;
  int64 previous_dead = has_previous ? result_int64(0, 1) : 0;
  bool fresh = has_previous && result_bool(0, 3);
  if (may_reuse_dead_count && fresh) {
    counts->dead = previous_dead;
    counts->dead_reused = true;
    strlcpy(counts->dead_counted_at, result_text(0, 2), sizeof(counts->dead_counted_at));
    return;
  }
  // In id ranges, with a pause after each: the full read never takes a core.
  execute_kept(id_range_plan, nullptr, nullptr, false, 0);
  int64 low = result_int64(0, 1);
  int64 high = result_int64(0, 2);
  strlcpy(counts->dead_counted_at, result_text(0, 3), sizeof(counts->dead_counted_at));
  counts->dead = 0;
  for (int64 start = low; start <= high; start += kDeadChunkIds) {
    Datum range[2] = {Int64GetDatum(start), Int64GetDatum(start + kDeadChunkIds)};
    execute_kept(dead_chunk_plan, range, nullptr, false, 0);
    counts->dead += result_int64(0, 1);
    throttle(counts);
  }
  counts->dead_new = counts->dead > previous_dead ? counts->dead - previous_dead : 0;
}

std::string counts_json(const std::string &trigger, int64 run_id, const Counts &c) {
  std::vector<std::string> verify_failed;
  std::string names = c.verify_failed;
  for (size_t start = 0, end; (end = names.find('\n', start)) != std::string::npos; start = end + 1)
    verify_failed.push_back(names.substr(start, end - start));
  JsonObject json;
  json.number("run_id", run_id)
      .string("trigger", trigger)
      .number("stuck", c.stuck)
      .number("leases_reclaimed", c.leases_reclaimed)
      .number("leases_held", c.leases_held)
      .number("held_recorded", c.held_recorded)
      .number("verified", c.verified)
      .number("mismatches", c.mismatches)
      .number("reopened", c.reopened)
      .number("verify_gave_up", c.mismatches - c.reopened)
      .number("verify_null", c.verify_null)
      .number("verify_missing", c.verify_missing)
      .strings("verify_failed", verify_failed)
      .number("dead", c.dead)
      .number("dead_new", c.dead_new)
      .string("dead_counted_at", c.dead_counted_at)
      .boolean("dead_reused", c.dead_reused)
      .number("paused_ms", c.paused_us / 1000);
  if (c.oldest_stuck[0])
    json.string("oldest_stuck", c.oldest_stuck);
  else
    json.null("oldest_stuck");
  json.boolean("more", c.more);
  return json.text();
}

// Trigger names are short identifiers: they label runs.
void check_trigger(const std::string &trigger) {
  if (trigger.empty())
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "trigger must not be empty");
  if (trigger.size() > kMaxTriggerBytes)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "trigger is " + std::to_string(trigger.size()) + " bytes, over the limit of " +
                         std::to_string(kMaxTriggerBytes));
  for (char ch : trigger) {
    bool ok =
        (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == ':';
    if (!ok)
      throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "invalid trigger \"" + trigger + "\"",
                       "Use a-z, 0-9, \"_\", \"-\" and \":\" (for example 'manual', 'schedule').");
  }
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

INBOX_SQL_FUNCTION(inbox_reconcile) {
  if (PG_ARGISNULL(0)) throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "trigger must not be null");
  std::string trigger =
      pg_call([&] { return (const char *)text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  check_trigger(trigger);

  struct Start {
    bool got_lock;
    int64 run_id;
  };
  // Transaction-scoped lock: released by commit or abort, never leaked by an
  // error half-way through the pass.
  Start start = spi_call([&] {
    Datum key[2] = {Int32GetDatum(kLockClassReconcile), Int32GetDatum(kLockReconcilePass)};
    execute_kept(try_lock_plan, key, nullptr, false, 0);
    Start s{};
    s.got_lock = result_bool(0, 1);
    Datum run[2] = {CStringGetTextDatum(trigger.c_str()), BoolGetDatum(!s.got_lock)};
    execute_kept(insert_run_plan, run, nullptr, false, 0);
    s.run_id = result_int64(0, 1);
    return s;
  });
  if (!start.got_lock) {
    JsonObject json;
    json.string("skipped", "busy").number("run_id", start.run_id).string("trigger", trigger);
    return jsonb_from_text(json.text());
  }

  // Passes that run often, or on a check's alarm, may reuse a recent dead count.
  bool may_reuse_dead_count = trigger == "schedule" || trigger.rfind("anomaly:", 0) == 0;
  Counts counts;
  spi_call([&] { run_pass(start.run_id, may_reuse_dead_count, &counts); });
  std::string json = counts_json(trigger, start.run_id, counts);
  return spi_call([&] {
    Datum args[2] = {Int64GetDatum(start.run_id), CStringGetTextDatum(json.c_str())};
    execute_kept(finish_run_plan, args, nullptr, false, 0);
    bool isnull;
    return result_value(0, 1, &isnull);
  });
}

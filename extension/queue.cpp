// inbox.claim, inbox.complete, inbox.fail: leased processing, fenced by a
// per-attempt lease token so a late worker can never finish a reclaimed event.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "boundary.hpp"
#include "gucs.hpp"
#include "lease.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

constexpr int kMaxClaimRows = 10000;

// SKIP LOCKED: concurrent workers take disjoint sets without waiting. ORDER BY
// id is a preference (oldest first), not an ordering promise across workers.
// Touches no indexed column, so a claim is a HOT update. With LIMIT $1
// unknown a generic plan made with sorts allowed sorts the whole backlog
// (the claim plans below say how each is made).
// Robust to statistics that believe the table empty (see claim()): the due
// scan walks events_open_idx in id order, and the update finds its rows by
// the due ids (`id = ANY`), never by a scan (joined to due, a plain claim
// believing the table empty looped over all of it).
// The due events, shared by both claim statements (a raw string cannot
// span the lines of a macro).
#define INBOX_CLAIM_DUE                                                                       \
  "WITH due AS (\n"                                                                           \
  "    SELECT e.id, e.provider FROM inbox.events e\n"                                         \
  "    WHERE e.processed_at IS NULL\n"                                                        \
  "      AND ($3::text IS NULL OR e.provider = $3)\n"                                         \
  "      AND ((e.status = 'pending' AND e.next_attempt_at <= now())\n"                        \
  "        OR (e.status = 'processing' AND e.lease_expires_at <= now()\n"                     \
  "            AND NOT EXISTS (SELECT 1 FROM inbox.providers p\n"                             \
  "                            WHERE p.name = e.provider AND p.on_lease_expiry = 'hold')))\n" \
  "    ORDER BY e.id\n"                                                                       \
  "    LIMIT $1\n"                                                                            \
  "    FOR UPDATE SKIP LOCKED\n"                                                              \
  ")\n"

// Version checks (27_ordering.sql): for providers with ordering pointers the
// entity and version are read from the payload being handed out; with
// transition rules, an event advance would refuse is held, not handed out:
// held_reason set and a lease that never expires, so neither claim nor
// reconcile takes it back (a person resolves it). Run only when a provider
// claimed from has pointers (ordering_plan); otherwise the plain statement.
constexpr const char *kClaimOrderingSql = INBOX_CLAIM_DUE R"SQL(
UPDATE inbox.events e
   SET status = 'processing',
       attempts = e.attempts + 1,
       lease_token = inbox._lease_token(e.id, e.attempts + 1, e.first_received_at),
       lease_expires_at = CASE WHEN o.transitions IS NOT NULL AND inbox._held_transition(e, o) IS NOT NULL
                               THEN 'infinity' ELSE now() + $2 END,
       entity_key = CASE WHEN o.provider IS NULL THEN e.entity_key ELSE
           inbox._pointer_scalar(coalesce(e.payload #> o.entity_path, e.headers -> o.entity_header)) END,
       version = CASE WHEN o.provider IS NULL THEN e.version ELSE
           inbox._version_of(coalesce(e.payload #> o.version_path, e.headers -> o.version_header)) END,
       held_reason = CASE WHEN o.transitions IS NOT NULL THEN inbox._held_transition(e, o) END
  FROM due LEFT JOIN inbox.provider_ordering o ON o.provider = due.provider
 WHERE e.id = ANY (ARRAY(SELECT id FROM due)) AND e.id = due.id
RETURNING e.*
)SQL";

// Without ordering pointers: the claim of 0.2.0 when no provider claimed
// from has any, and the claim of 0.1.0, which its install script binds
// (symbol inbox_claim) until ALTER EXTENSION UPDATE (its tables lack the
// columns the ordering claim sets).
constexpr const char *kClaimPlainSql = INBOX_CLAIM_DUE R"SQL(
UPDATE inbox.events e
   SET status = 'processing',
       attempts = e.attempts + 1,
       lease_token = inbox._lease_token(e.id, e.attempts + 1, e.first_received_at),
       lease_expires_at = now() + $2
 WHERE e.id = ANY (ARRAY(SELECT id FROM due))
RETURNING e.*
)SQL";
#undef INBOX_CLAIM_DUE

// Each claim statement in two plans. From every provider: one generic plan,
// made and run with sorts off (claim()), which leaves the walk of
// events_open_idx in id order whatever LIMIT $1 turns out to be; planning
// per call was 16% of a claim of 100. Naming a provider: planned per call,
// so that the planner sees the provider and the limit.
// $1 max_rows, $2 lease, $3 provider (NULL: every provider).
#define INBOX_CLAIM_ARGS 3, {INT4OID, INTERVALOID, TEXTOID}, nullptr
KeptPlan claim_ordering_plan = {kClaimOrderingSql, INBOX_CLAIM_ARGS};
KeptPlan claim_plain_plan = {kClaimPlainSql, INBOX_CLAIM_ARGS};
KeptPlan claim_ordering_provider_plan = {kClaimOrderingSql, INBOX_CLAIM_ARGS,
                                         CURSOR_OPT_CUSTOM_PLAN};
KeptPlan claim_plain_provider_plan = {kClaimPlainSql, INBOX_CLAIM_ARGS, CURSOR_OPT_CUSTOM_PLAN};
#undef INBOX_CLAIM_ARGS

// Whether the claim must read ordering pointers.
KeptPlan ordering_plan = {
    "SELECT 1 FROM inbox.provider_ordering WHERE $1::text IS NULL OR provider = $1 LIMIT 1",
    1,
    {TEXTOID},
    nullptr};

KeptPlan provider_exists_plan = {
    "SELECT 1 FROM inbox.providers WHERE name = $1", 1, {TEXTOID}, nullptr};

// An expired but not yet reclaimed lease still completes: nobody else has it.
KeptPlan complete_plan = {R"SQL(
UPDATE inbox.events
   SET status = 'done', processed_at = now(), lease_expires_at = NULL
 WHERE id = $1 AND lease_token = $2 AND status = 'processing'
RETURNING 1
)SQL",
                          2,
                          {INT8OID, UUIDOID},
                          nullptr};

// Exponential backoff with equal jitter, capped; an explicit retry_after wins.
// The event is looked up by id alone (OFFSET 0): joined to providers, a plan
// made on an analyzed empty table walked the whole (provider, external_id)
// index for it.
// {attempts} is the count max_attempts is compared with: the attempts since
// the latest replay (0.2.0), or all of them on a 0.1.0 schema, which has no
// attempts_at_replay until ALTER EXTENSION UPDATE.
std::string fail_sql(const std::string &attempts) {
  std::string sql = R"SQL(
WITH policy AS (
    SELECT coalesce(p.max_attempts, $5) AS max_attempts,
           coalesce(p.backoff_base, $6) AS backoff_base,
           coalesce(p.backoff_max, $7) AS backoff_max
    FROM (SELECT ev.provider FROM inbox.events ev WHERE ev.id = $1 OFFSET 0) ev
    LEFT JOIN inbox.providers p ON p.name = ev.provider
)
UPDATE inbox.events e
   SET status = CASE WHEN {attempts} >= policy.max_attempts THEN 'dead' ELSE 'pending' END,
       processed_at = CASE WHEN {attempts} >= policy.max_attempts THEN now() END,
       next_attempt_at = now() + coalesce($4,
           least(policy.backoff_max,
                 policy.backoff_base * power(2, least({attempts} - 1, 40)))
           * (0.5 + random() / 2)),
       lease_expires_at = NULL,
       last_error = left($3, 4096)
  FROM policy
 WHERE e.id = $1 AND e.lease_token = $2 AND e.status = 'processing'
RETURNING e.status = 'dead'
)SQL";
  for (size_t at; (at = sql.find("{attempts}")) != std::string::npos;)
    sql.replace(at, 10, attempts);
  return sql;
}
const std::string kFailSql = fail_sql("(e.attempts - e.attempts_at_replay)");
const std::string kFailSqlBeforeReplay = fail_sql("e.attempts");

KeptPlan fail_plan = {kFailSql.c_str(),
                      7,
                      {INT8OID, UUIDOID, TEXTOID, INTERVALOID, INT4OID, INTERVALOID, INTERVALOID},
                      nullptr};
KeptPlan fail_plan_before_replay = {
    kFailSqlBeforeReplay.c_str(),
    7,
    {INT8OID, UUIDOID, TEXTOID, INTERVALOID, INT4OID, INTERVALOID, INTERVALOID},
    nullptr};

// Why complete/fail changed nothing: which tokens this event ever had.
KeptPlan lease_state_plan = {R"SQL(
SELECT e.status = 'done' AND e.lease_token = $2,
       inbox._lease_token_issued(e.id, e.attempts, e.first_received_at, $2)
FROM inbox.events e WHERE e.id = $1
)SQL",
                             2,
                             {INT8OID, UUIDOID},
                             nullptr};

// complete_batch: the batch's UPDATE alone; complete_batch() matches what it
// returned to the input in C. Robust to statistics that believe the table
// empty, and kept from a near-empty table: the update finds its rows by the
// ids (`id = ANY`, with enable_seqscan off an index condition) and joins
// them to their tokens by hash (complete_batch()).
KeptPlan complete_batch_plan = {R"SQL(
UPDATE inbox.events e
   SET status = 'done', processed_at = now(), lease_expires_at = NULL
  FROM unnest($1, $2) AS i(id, token)
 WHERE e.id = ANY ($1) AND e.id = i.id AND e.lease_token = i.token AND e.status = 'processing'
RETURNING e.id, e.lease_token
)SQL",
                                2,
                                {INT8ARRAYOID, UUIDARRAYOID},
                                nullptr};

// For the elements the UPDATE did not complete, in input order: the facts
// lease_state() reads (event exists, done with this token, token issued).
// Read after the UPDATE, which only touched rows it completed; an element
// naming an event the UPDATE completed under another element's token reads
// it done with that token, as after an earlier complete. One index probe per
// element (LATERAL, OFFSET 0).
KeptPlan complete_batch_states_plan = {R"SQL(
SELECT s.id IS NOT NULL, s.done_with_token, s.issued
  FROM unnest($1, $2) WITH ORDINALITY AS i(id, token, ord)
  LEFT JOIN LATERAL (
    SELECT e.id, e.status = 'done' AND e.lease_token = i.token AS done_with_token,
           inbox._lease_token_issued(e.id, e.attempts, e.first_received_at, i.token) AS issued
      FROM inbox.events e
     WHERE e.id = i.id
    OFFSET 0) s ON true
 ORDER BY i.ord
)SQL",
                                       2,
                                       {INT8ARRAYOID, UUIDARRAYOID},
                                       nullptr};

// An element of complete_batch's input, or a row its UPDATE completed.
struct Lease {
  int64 id;
  pg_uuid_t token;
  bool operator<(const Lease &other) const {
    if (id != other.id) return id < other.id;
    return std::memcmp(token.data, other.token.data, UUID_LEN) < 0;
  }
};

// The (id, token) pairs of complete_batch's arguments (checked: not NULL,
// one dimension, the same length).
std::vector<Lease> batch_leases(FunctionCallInfo fcinfo) {
  Datum *id_values, *token_values;
  int count;
  pg_call([&] {
    deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
                      &id_values, nullptr, &count);
    deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), UUIDOID, UUID_LEN, false, TYPALIGN_CHAR,
                      &token_values, nullptr, &count);
  });
  std::vector<Lease> leases(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i)
    leases[i] = {DatumGetInt64(id_values[i]), *DatumGetUUIDP(token_values[i])};
  return leases;
}

}  // namespace

// Why a token did not (or no longer does) complete its event.
LeaseState classify_lease(bool exists, bool done_with_token, bool issued) {
  if (!exists) return LeaseState::kMissingEvent;
  if (done_with_token) return LeaseState::kAlreadyDone;
  return issued ? LeaseState::kLost : LeaseState::kNeverIssued;
}

LeaseState lease_state(Datum *args) {
  execute_kept(lease_state_plan, args, nullptr, true, 1);
  if (SPI_processed == 0) return classify_lease(false, false, false);
  return classify_lease(true, result_bool(0, 1), result_bool(0, 2));
}

void throw_if_bad_lease(LeaseState state, int64 id) {
  if (state == LeaseState::kMissingEvent)
    throw InboxError(ERRCODE_NO_DATA_FOUND, "event " + std::to_string(id) + " does not exist");
  if (state == LeaseState::kNeverIssued)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "lease token was never issued for event " + std::to_string(id),
                     "Pass the lease_token that inbox.claim() returned with the event.");
}

void require_arg(FunctionCallInfo fcinfo, int arg, const char *name) {
  if (PG_ARGISNULL(arg))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, std::string(name) + " must not be null");
}

}  // namespace pg_inbox

using namespace pg_inbox;

namespace {

// inbox.claim; ordering: the installed version has ordering pointers.
Datum claim(FunctionCallInfo fcinfo, bool ordering) {
  require_arg(fcinfo, 0, "max_rows");
  int32 max_rows = PG_GETARG_INT32(0);
  if (max_rows < 1 || max_rows > kMaxClaimRows)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "max_rows must be between 1 and " +
                                                          std::to_string(kMaxClaimRows) + ", not " +
                                                          std::to_string(max_rows));
  int64 lease_usecs = static_cast<int64>(guc_default_lease_s) * USECS_PER_SEC;
  if (!PG_ARGISNULL(1)) {
    lease_usecs = interval_usecs(pg_call([&] { return PG_GETARG_INTERVAL_P(1); }));
    if (lease_usecs <= 0)
      throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "lease must be positive");
  }
  const char *provider = nullptr;
  if (!PG_ARGISNULL(2)) {
    provider = pg_call([&] { return (const char *)text_to_cstring(PG_GETARG_TEXT_PP(2)); });
    if (provider[0] == '\0')
      throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "provider must not be empty",
                       "Pass NULL to claim from every provider.");
  }

  pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
  spi_call([&] {
    if (provider != nullptr) {
      Datum name = CStringGetTextDatum(provider);
      execute_kept(provider_exists_plan, &name, nullptr, true, 1);
      if (SPI_processed == 0) raise_unknown_provider(name);
    }
    Datum args[3] = {Int32GetDatum(max_rows), interval_from_usecs(lease_usecs),
                     provider ? CStringGetTextDatum(provider) : (Datum)0};
    char nulls[3] = {' ', ' ', provider ? ' ' : 'n'};
    if (ordering) {
      execute_kept(ordering_plan, &args[2], &nulls[2], true, 1);
      ordering = SPI_processed > 0;
    }
    KeptPlan &claim_plan =
        provider == nullptr ? (ordering ? claim_ordering_plan : claim_plain_plan)
                            : (ordering ? claim_ordering_provider_plan : claim_plain_provider_plan);
    auto run_claim = [&] { execute_kept(claim_plan, args, nulls, false, 0); };
    // Until autoanalyze has seen the backlog (a fresh install, or a table
    // emptied and refilled) the planner expects about one due event, and
    // sorted every open event for each claim. A walk of events_open_idx in
    // id order reads no more rows than that sort and stops at max_rows, so
    // across all providers it is the only plan. A named provider's few
    // events among many may be found faster through the provider's keys:
    // its claim walks only while the planner's statistics were not taken
    // from rows. Across all providers the plan is generic, made once, maybe
    // on a near-empty table: seqscans off too, so that its update finds the
    // due rows by their ids, as the ingest and complete plans probe. (The
    // settings hold for functions the statement calls too: the ordering
    // claim's _held_transition plans its join under them.)
    if (provider == nullptr)
      with_settings({{"enable_sort", "off"}, {"enable_seqscan", "off"}, {"jit", "off"}}, run_claim);
    else if (!events_statistics_from_rows())
      with_settings({{"enable_sort", "off"}, {"jit", "off"}}, run_claim);
    else
      run_claim();

    // RETURNING e.* skips dropped columns; the result type still has them.
    // Each row is deformed once: column by column, every column after the
    // first NULL or text was found by walking the row from its start.
    auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    TupleDesc out = rsinfo->setDesc;
    TupleDesc returned = SPI_tuptable->tupdesc;
    auto *values = static_cast<Datum *>(palloc(out->natts * sizeof(Datum)));
    auto *isnull = static_cast<bool *>(palloc(out->natts * sizeof(bool)));
    auto *row_values = static_cast<Datum *>(palloc(returned->natts * sizeof(Datum)));
    auto *row_nulls = static_cast<bool *>(palloc(returned->natts * sizeof(bool)));
    // Events the claim held (transition rules) are not handed out.
    int held = ordering ? SPI_fnumber(returned, "held_reason") : 0;
    for (uint64 row = 0; row < SPI_processed; ++row) {
      heap_deform_tuple(SPI_tuptable->vals[row], returned, row_values, row_nulls);
      if (held > 0 && !row_nulls[held - 1]) continue;
      int column = 0;
      for (int a = 0; a < out->natts; ++a) {
        if (TupleDescAttr(out, a)->attisdropped) {
          values[a] = (Datum)0;
          isnull[a] = true;
          continue;
        }
        values[a] = row_values[column];
        isnull[a] = row_nulls[column++];
      }
      tuplestore_putvalues(rsinfo->setResult, out, values, isnull);
    }
  });
  return (Datum)0;
}

}  // namespace

INBOX_SQL_FUNCTION(inbox_claim) { return claim(fcinfo, false); }

INBOX_SQL_FUNCTION(inbox_claim_0_2) { return claim(fcinfo, true); }

INBOX_SQL_FUNCTION(inbox_complete) {
  require_arg(fcinfo, 0, "id");
  require_arg(fcinfo, 1, "lease_token");
  Datum args[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};

  LeaseState state = spi_call([&] {
    execute_kept(complete_plan, args, nullptr, false, 0);
    bool completed = SPI_processed == 1;
    return completed ? LeaseState::kAlreadyDone : lease_state(args);
  });
  throw_if_bad_lease(state, PG_GETARG_INT64(0));
  return BoolGetDatum(state == LeaseState::kAlreadyDone);
}

INBOX_SQL_FUNCTION(inbox_complete_batch) {
  require_arg(fcinfo, 0, "ids");
  require_arg(fcinfo, 1, "lease_tokens");
  struct Lengths {
    int ids, tokens, dimensions;
    bool nulls;
  };
  Lengths lengths = pg_call([&] {
    ArrayType *ids = PG_GETARG_ARRAYTYPE_P(0);
    ArrayType *tokens = PG_GETARG_ARRAYTYPE_P(1);
    return Lengths{ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids)),
                   ArrayGetNItems(ARR_NDIM(tokens), ARR_DIMS(tokens)),
                   Max(ARR_NDIM(ids), ARR_NDIM(tokens)),
                   array_contains_nulls(ids) || array_contains_nulls(tokens)};
  });
  if (lengths.nulls)
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "ids and lease_tokens must not contain nulls");
  if (lengths.dimensions > 1)
    throw InboxError(ERRCODE_ARRAY_SUBSCRIPT_ERROR, "ids and lease_tokens must be one-dimensional");
  if (lengths.ids != lengths.tokens)
    throw InboxError(
        ERRCODE_ARRAY_SUBSCRIPT_ERROR, "ids and lease_tokens must have the same length",
        "Lengths: " + std::to_string(lengths.ids) + ", " + std::to_string(lengths.tokens) + ".");
  if (lengths.ids > kMaxClaimRows)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                     "a batch holds at most " + std::to_string(kMaxClaimRows) + " events, got " +
                         std::to_string(lengths.ids));

  std::vector<Lease> leases = batch_leases(fcinfo);

  // One state per element; the first bad one (missing, never issued) wins.
  struct Result {
    Datum *outcomes;  // SPI_palloc'd: in the caller's context
    bool bad;
    LeaseState bad_state;
    int64 bad_id;
  };
  // The lambda holds only palloc'd arrays: an error in it jumps out of it.
  const Lease *input = leases.data();
  size_t count = leases.size();
  Result result = spi_call([&] {
    Datum args[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
    // Believing the table empty, the planner looped over the batch for
    // every event.
    with_settings({{"enable_nestloop", "off"}, {"jit", "off"}},
                  [&] { execute_kept(complete_batch_plan, args, nullptr, false, 0); });
    size_t slots = std::max<size_t>(count, 1);
    uint64 done_count = SPI_processed;
    auto *done = static_cast<Lease *>(palloc(std::max<uint64>(done_count, 1) * sizeof(Lease)));
    for (uint64 row = 0; row < done_count; ++row)
      done[row] = {result_int64(row, 1), result_uuid(row, 2)};
    std::sort(done, done + done_count);

    Result r{static_cast<Datum *>(SPI_palloc(slots * sizeof(Datum))), false, LeaseState::kLost, 0};
    // The elements not completed, in input order, and their arguments.
    auto *missed = static_cast<size_t *>(palloc(slots * sizeof(size_t)));
    auto *missed_ids = static_cast<Datum *>(palloc(slots * sizeof(Datum)));
    auto *missed_tokens = static_cast<Datum *>(palloc(slots * sizeof(Datum)));
    int missed_count = 0;
    for (size_t i = 0; i < count; ++i) {
      bool completed = std::binary_search(done, done + done_count, input[i]);
      r.outcomes[i] = BoolGetDatum(completed);
      if (completed) continue;
      missed[missed_count] = i;
      missed_ids[missed_count] = Int64GetDatum(input[i].id);
      missed_tokens[missed_count] = UUIDPGetDatum(&input[i].token);
      ++missed_count;
    }
    if (missed_count == 0) return r;

    Datum state_args[2] = {PointerGetDatum(construct_array(missed_ids, missed_count, INT8OID, 8,
                                                           FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
                           PointerGetDatum(construct_array(missed_tokens, missed_count, UUIDOID,
                                                           UUID_LEN, false, TYPALIGN_CHAR))};
    execute_kept(complete_batch_states_plan, state_args, nullptr, false, 0);
    for (uint64 row = 0; row < SPI_processed; ++row) {
      LeaseState state =
          classify_lease(result_bool(row, 1), result_bool(row, 2), result_bool(row, 3));
      size_t element = missed[row];
      if ((state == LeaseState::kMissingEvent || state == LeaseState::kNeverIssued) && !r.bad) {
        r.bad = true;
        r.bad_state = state;
        r.bad_id = input[element].id;
      }
      r.outcomes[element] = BoolGetDatum(state == LeaseState::kAlreadyDone);
    }
    return r;
  });
  // The batch is all or nothing, like ingest_batch: the error rolls it back.
  if (result.bad) throw_if_bad_lease(result.bad_state, result.bad_id);
  return pg_call([&] {
    return PointerGetDatum(construct_array(result.outcomes, static_cast<int>(leases.size()),
                                           BOOLOID, 1, true, TYPALIGN_CHAR));
  });
}

INBOX_SQL_FUNCTION(inbox_fail) {
  require_arg(fcinfo, 0, "id");
  require_arg(fcinfo, 1, "lease_token");
  require_arg(fcinfo, 2, "error");
  if (!PG_ARGISNULL(3) && interval_usecs(pg_call([&] { return PG_GETARG_INTERVAL_P(3); })) < 0)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "retry_after must not be negative");

  struct Outcome {
    bool updated;
    bool dead;
    LeaseState state;
  };
  Outcome outcome = spi_call([&] {
    Datum args[7] = {PG_GETARG_DATUM(0),
                     PG_GETARG_DATUM(1),
                     PG_GETARG_DATUM(2),
                     PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3),
                     Int32GetDatum(guc_max_attempts),
                     interval_from_usecs(static_cast<int64>(guc_backoff_base_ms) * 1000),
                     interval_from_usecs(static_cast<int64>(guc_backoff_max_s) * USECS_PER_SEC)};
    char nulls[7] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', ' ', ' ', ' '};
    execute_kept(events_has_column("attempts_at_replay") ? fail_plan : fail_plan_before_replay,
                 args, nulls, false, 0);
    Outcome o{SPI_processed == 1, false, LeaseState::kLost};
    if (o.updated)
      o.dead = result_bool(0, 1);
    else
      o.state = lease_state(args);
    return o;
  });
  if (outcome.updated)
    return pg_call([&] { return CStringGetTextDatum(outcome.dead ? "dead" : "retry"); });
  throw_if_bad_lease(outcome.state, PG_GETARG_INT64(0));
  return pg_call([] { return CStringGetTextDatum("lost"); });
}

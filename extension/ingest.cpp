// inbox.ingest and inbox.ingest_batch: one atomic upsert keyed by
// (provider, external_id), shared by both (ingest is a batch of one).
#include <string>

#include "boundary.hpp"
#include "gucs.hpp"
#include "limits.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

constexpr int kMaxBatchEvents = 10000;

// One statement, so it is atomic against concurrent writers of the same id:
//  - the last copy of an id within the batch carries the payload, so ON
//    CONFLICT never meets the same row twice;
//  - an event already processed (terminal) is answered 'duplicate' without a
//    write: no row lock, no xid, no WAL flush for a duplicate storm. The
//    check is a scalar subquery, so it runs per event as an index probe
//    (never an anti-join a small table's statistics could turn into a scan
//    of the whole table), and the functions run with enable_seqscan off;
//  - one that is still open gets its payload refreshed ('updated').
//  - rows are written in key order, so two batches never deadlock.
// xmax = 0 on the returned row tells an insert from an update.
KeptPlan upsert_plan = {R"SQL(
WITH input AS (
    SELECT t.provider, t.external_id, t.payload, t.headers, t.ord,
           row_number() OVER same_event AS nth,
           count(*) OVER same_event AS copies,
           t.provider IN (SELECT p.name FROM inbox.providers p) AS known
    FROM unnest($1, $2, $3, $4) WITH ORDINALITY AS t(provider, external_id, payload, headers, ord)
    WINDOW same_event AS (PARTITION BY t.provider, t.external_id ORDER BY t.ord
                          ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
), upserted AS (
    INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source, delivery_count)
    SELECT i.provider, i.external_id, i.payload, i.headers, $5, i.copies
    FROM input i
    WHERE i.nth = i.copies AND i.known
      AND (SELECT d.processed_at FROM inbox.events d
           WHERE d.provider = i.provider AND d.external_id = i.external_id) IS NULL
    ORDER BY i.provider, i.external_id
    ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
       SET payload = EXCLUDED.payload, headers = EXCLUDED.headers,
           delivery_count = e.delivery_count + EXCLUDED.delivery_count,
           received_at = now()
     WHERE e.processed_at IS NULL
    RETURNING e.provider, e.external_id, (e.xmax = 0) AS inserted
)
SELECT array_agg(CASE WHEN u.provider IS NULL THEN 'duplicate'
                      WHEN i.nth > 1 OR NOT u.inserted THEN 'updated'
                      ELSE 'inserted' END ORDER BY i.ord),
       min(i.provider) FILTER (WHERE NOT i.known)
FROM input i LEFT JOIN upserted u USING (provider, external_id)
)SQL",
                        5,
                        {TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, TEXTOID},
                        nullptr};

// The duplicate-storm fast path of ingest(): an index probe instead of the
// upsert, which costs several times more even when it writes nothing.
KeptPlan processed_plan = {
    "SELECT 1 FROM inbox.events WHERE provider = $1 AND external_id = $2 AND processed_at IS NOT "
    "NULL",
    2,
    {TEXTOID, TEXTOID},
    nullptr};

// One event's fields as the checks see them; pointers into Postgres memory.
struct EventFields {
  const varlena *provider;     // null when SQL NULL
  const varlena *external_id;  // null when SQL NULL
  bool payload_null;
  Size payload_bytes;
};

// A batch's arrays, deconstructed.
struct BatchArrays {
  int count;
  int lengths[4];
  Datum *providers, *external_ids, *payloads;
  bool *provider_nulls, *external_id_nulls, *payload_nulls;
};

const varlena *as_varlena(Datum datum) {
  return reinterpret_cast<const varlena *>(DatumGetPointer(datum));
}

std::string where(int element) {
  return element == 0 ? std::string() : "event " + std::to_string(element) + " of the batch";
}

void require_not_null(bool isnull, const char *what) {
  if (isnull)
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, std::string(what) + " must not be null");
}

// Checks one event; element is its 1-based place in a batch, 0 for ingest().
void check_event(const EventFields &event, int element) {
  if (event.provider == nullptr)
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "provider must not be null", where(element));
  if (VARSIZE_ANY_EXHDR(event.provider) == 0)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "provider must not be empty", where(element));
  if (event.external_id == nullptr)
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "external_id must not be null",
                     where(element));
  Size id_bytes = VARSIZE_ANY_EXHDR(event.external_id);
  if (id_bytes == 0)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "external_id must not be empty",
                     where(element));
  if (id_bytes > kMaxExternalIdBytes)
    throw InboxError(ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
                     "external_id is " + std::to_string(id_bytes) + " bytes, over the limit of " +
                         std::to_string(kMaxExternalIdBytes),
                     where(element));
  if (event.payload_null)
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "payload must not be null", where(element));
  Size limit = static_cast<Size>(guc_max_payload_kb) * 1024;
  if (event.payload_bytes > limit)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                     "payload is " + std::to_string(event.payload_bytes) +
                         " bytes, over pg_inbox.max_payload_size (" +
                         std::to_string(guc_max_payload_kb) + " kB)",
                     where(element));
}

void check_source(FunctionCallInfo fcinfo) {
  require_not_null(PG_ARGISNULL(4), "source");
  const varlena *source = pg_call([&] { return (const varlena *)PG_GETARG_TEXT_PP(4); });
  if (VARSIZE_ANY_EXHDR(source) == 0)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "source must not be empty");
}

// Runs the upsert. Returns the text[] of outcomes in the caller's context.
Datum run_upsert(Datum *args, const char *nulls) {
  Datum outcomes = spi_call([&] {
    execute_kept(upsert_plan, args, nulls, false, 0);
    bool isnull;
    Datum unknown = result_value(0, 2, &isnull);
    // The rows already written roll back with the error: nothing half-written.
    if (!isnull) raise_unknown_provider(unknown);
    Datum outcomes = result_value(0, 1, &isnull);
    return isnull ? (Datum)0 : outcomes;
  });
  if (outcomes == (Datum)0)
    return pg_call([] { return PointerGetDatum(construct_empty_array(TEXTOID)); });
  return outcomes;
}

BatchArrays deconstruct_batch(FunctionCallInfo fcinfo) {
  return pg_call([&] {
    BatchArrays b{};
    const char *names[] = {"providers", "external_ids", "payloads", "headers"};
    for (int arg = 0; arg < 4; ++arg) {
      b.lengths[arg] = -1;
      if (PG_ARGISNULL(arg)) continue;
      ArrayType *array = PG_GETARG_ARRAYTYPE_P(arg);
      b.lengths[arg] = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
      if (ARR_NDIM(array) > 1)
        ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                        errmsg("%s must be a one-dimensional array", names[arg])));
      if (arg == 3) continue;
      Oid type = arg == 2 ? JSONBOID : TEXTOID;
      Datum **elements = arg == 0 ? &b.providers : arg == 1 ? &b.external_ids : &b.payloads;
      bool **element_nulls = arg == 0   ? &b.provider_nulls
                             : arg == 1 ? &b.external_id_nulls
                                        : &b.payload_nulls;
      int count = 0;
      deconstruct_array(array, type, -1, false, TYPALIGN_INT, elements, element_nulls, &count);
    }
    return b;
  });
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

// inbox._external_id_limit(): kMaxExternalIdBytes, for the tables' CHECKs.
INBOX_SQL_FUNCTION(inbox_external_id_limit) {
  return Int32GetDatum(static_cast<int32>(kMaxExternalIdBytes));
}

INBOX_SQL_FUNCTION(inbox_ingest) {
  EventFields event = pg_call([&] {
    EventFields e{};
    e.provider = PG_ARGISNULL(0) ? nullptr : PG_GETARG_TEXT_PP(0);
    e.external_id = PG_ARGISNULL(1) ? nullptr : PG_GETARG_TEXT_PP(1);
    e.payload_null = PG_ARGISNULL(2);
    e.payload_bytes = e.payload_null ? 0 : toast_raw_datum_size(PG_GETARG_DATUM(2));
    return e;
  });
  check_event(event, 0);
  check_source(fcinfo);

  bool processed = spi_call([&] {
    Datum key[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
    execute_kept(processed_plan, key, nullptr, true, 1);
    return SPI_processed == 1;
  });
  if (processed) return pg_call([] { return CStringGetTextDatum("duplicate"); });

  Datum args[5];
  char nulls[5] = {' ', ' ', ' ', ' ', ' '};
  pg_call([&] {
    for (int arg = 0; arg < 4; ++arg) {
      if (PG_ARGISNULL(arg)) {
        args[arg] = (Datum)0;
        nulls[arg] = 'n';
        continue;
      }
      Datum element = PG_GETARG_DATUM(arg);
      Oid type = arg >= 2 ? JSONBOID : TEXTOID;
      args[arg] = PointerGetDatum(construct_array(&element, 1, type, -1, false, TYPALIGN_INT));
    }
    args[4] = PG_GETARG_DATUM(4);
  });
  Datum outcomes = run_upsert(args, nulls);
  return pg_call([&] {
    Datum *elements;
    bool *element_nulls;
    int count;
    deconstruct_array(DatumGetArrayTypeP(outcomes), TEXTOID, -1, false, TYPALIGN_INT, &elements,
                      &element_nulls, &count);
    return elements[0];
  });
}

INBOX_SQL_FUNCTION(inbox_ingest_batch) {
  require_not_null(PG_ARGISNULL(0), "providers");
  require_not_null(PG_ARGISNULL(1), "external_ids");
  require_not_null(PG_ARGISNULL(2), "payloads");
  check_source(fcinfo);
  BatchArrays batch = deconstruct_batch(fcinfo);

  int count = batch.lengths[0];
  bool same_length = batch.lengths[1] == count && batch.lengths[2] == count &&
                     (batch.lengths[3] == -1 || batch.lengths[3] == count);
  if (!same_length) {
    std::string got = std::to_string(batch.lengths[0]) + ", " + std::to_string(batch.lengths[1]) +
                      ", " + std::to_string(batch.lengths[2]);
    if (batch.lengths[3] != -1) got += ", " + std::to_string(batch.lengths[3]);
    throw InboxError(ERRCODE_ARRAY_SUBSCRIPT_ERROR,
                     "providers, external_ids, payloads and headers must have the same length",
                     "Lengths: " + got + ".");
  }
  if (count > kMaxBatchEvents)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "a batch holds at most " +
                                                         std::to_string(kMaxBatchEvents) +
                                                         " events, got " + std::to_string(count));
  if (count == 0) return pg_call([] { return PointerGetDatum(construct_empty_array(TEXTOID)); });

  for (int i = 0; i < count; ++i) {
    EventFields event{};
    event.provider = batch.provider_nulls[i] ? nullptr : as_varlena(batch.providers[i]);
    event.external_id = batch.external_id_nulls[i] ? nullptr : as_varlena(batch.external_ids[i]);
    event.payload_null = batch.payload_nulls[i];
    event.payload_bytes = event.payload_null ? 0 : VARSIZE_ANY(DatumGetPointer(batch.payloads[i]));
    check_event(event, i + 1);
  }

  Datum args[5] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                   PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
  char nulls[5] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', ' '};
  return run_upsert(args, nulls);
}

// inbox.ingest and inbox.ingest_batch: upserts keyed by (provider,
// external_id). ingest runs one statement; ingest_batch groups its events in
// C++ and writes them in at most two.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boundary.hpp"
#include "gucs.hpp"
#include "limits.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

constexpr int kMaxBatchEvents = 10000;

// ingest_batch in two statements. They receive each id of the batch once
// (the C++ side groups the copies of an id: the last copy carries the
// payload, `copies` counts them), in the bytes' order, so two batches write
// in the same order and never deadlock; no join or sort may reorder them.
//  0. unknown_provider_plan checks the batch's providers (each once: the ids
//     are grouped by provider); an unknown one fails the call before any write.
//  1. insert_batch_plan inserts the ids that are new. ON CONFLICT DO NOTHING
//     neither locks nor writes an existing row, and waits for a concurrent
//     insert of the same id to commit or roll back (then inserts).
//  2. Only when some id was not inserted, upsert_batch_plan for those: an
//     event already processed is not written (no row lock, no xid, no WAL
//     flush for a duplicate storm); one still open gets its payload, headers
//     and deliveries refreshed; one gone meanwhile is inserted.
// Every lookup of inbox.events is a scalar subquery or the conflict arbiter:
// a per-event index probe, and the function runs with enable_seqscan off, so
// a plan kept from an empty table cannot turn into a scan of the grown one.
// Each returns the ids it wrote; xmax = 0 tells an insert from an update.
KeptPlan insert_batch_plan = {
    R"SQL(
INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source, delivery_count)
SELECT t.provider, t.external_id, t.payload, t.headers, $5, t.copies
FROM unnest($1, $2, $3, $4, $6) AS t(provider, external_id, payload, headers, copies)
ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO NOTHING
RETURNING e.provider, e.external_id, true
)SQL",
    6,
    {TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, TEXTOID, INT4ARRAYOID},
    nullptr};

KeptPlan upsert_batch_plan = {
    R"SQL(
INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source, delivery_count)
SELECT t.provider, t.external_id, t.payload, t.headers, $5, t.copies
FROM unnest($1, $2, $3, $4, $6) AS t(provider, external_id, payload, headers, copies)
WHERE (SELECT d.processed_at FROM inbox.events d
       WHERE d.provider = t.provider AND d.external_id = t.external_id) IS NULL
ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
   SET payload = EXCLUDED.payload, headers = EXCLUDED.headers,
       delivery_count = e.delivery_count + EXCLUDED.delivery_count, received_at = now()
 WHERE e.processed_at IS NULL
RETURNING e.provider, e.external_id, e.xmax = 0
)SQL",
    6,
    {TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, TEXTOID, INT4ARRAYOID},
    nullptr};

// The first of the batch's (distinct) providers that is not registered, or NULL.
KeptPlan unknown_provider_plan = {R"SQL(
SELECT min(x.name) FROM unnest($1) AS x(name)
WHERE NOT EXISTS (SELECT 1 FROM inbox.providers p WHERE p.name = x.name)
)SQL",
                                  1,
                                  {TEXTARRAYOID},
                                  nullptr};

// ingest(): the same upsert for one event, without the batch's machinery
// (arrays, ordinality, copies). Column 1: the provider is registered; column
// 2: true inserted, false updated, NULL duplicate (processed: not written).
KeptPlan upsert_one_plan = {R"SQL(
WITH known AS (
    SELECT EXISTS (SELECT 1 FROM inbox.providers p WHERE p.name = $1) AS known
), upserted AS (
    INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source)
    SELECT $1, $2, $3, $4, $5 FROM known
    WHERE known.known
      AND (SELECT d.processed_at FROM inbox.events d
           WHERE d.provider = $1 AND d.external_id = $2) IS NULL
    ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
       SET payload = EXCLUDED.payload, headers = EXCLUDED.headers,
           delivery_count = e.delivery_count + 1, received_at = now()
     WHERE e.processed_at IS NULL
    RETURNING (e.xmax = 0) AS inserted
)
SELECT known.known, (SELECT u.inserted FROM upserted u) FROM known
)SQL",
                            5,
                            {TEXTOID, TEXTOID, JSONBOID, JSONBOID, TEXTOID},
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
  int lengths[4];
  Datum *providers, *external_ids, *payloads, *headers;
  bool *provider_nulls, *external_id_nulls, *payload_nulls, *header_nulls;
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

std::string_view bytes_of(Datum datum) {
  const varlena *text = as_varlena(datum);
  return std::string_view(VARDATA_ANY(text), VARSIZE_ANY_EXHDR(text));
}

// The batch as the statements take it: each id once, in key order.
struct Grouped {
  std::vector<int> first;   // per id: the element of its first copy
  std::vector<int> last;    // per id: the element of its last copy (its payload)
  std::vector<int> copies;  // per id: how many copies the batch holds
  std::vector<int> group;   // per element: its id's place in first/last

  using Key = std::pair<std::string_view, std::string_view>;
  static Key key(const BatchArrays &batch, int element) {
    return {bytes_of(batch.providers[element]), bytes_of(batch.external_ids[element])};
  }
};

// Groups the copies of each (provider, external_id) and orders the ids by
// their bytes: every batch writes in the same order, so two never deadlock.
Grouped group_batch(const BatchArrays &batch, int count) {
  std::vector<int> order(count);
  for (int i = 0; i < count; ++i) order[i] = i;
  auto key = [&](int i) { return Grouped::key(batch, i); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  Grouped g;
  g.group.resize(count);
  for (int n = 0; n < count; ++n) {
    int i = order[n];
    if (n == 0 || key(order[n - 1]) != key(i)) {
      g.first.push_back(i);
      g.last.push_back(i);
      g.copies.push_back(0);
    }
    g.last.back() = i;
    g.copies.back()++;
    g.group[i] = static_cast<int>(g.first.size()) - 1;
  }
  return g;
}

// The statements' arguments for the ids still in state n (not written):
// arrays in key order, palloc'd, and the source.
void id_arrays(FunctionCallInfo fcinfo, const BatchArrays &batch, const Grouped &g,
               const char *states, Datum *args) {
  int ids = static_cast<int>(g.last.size());
  auto *providers = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *external_ids = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *payloads = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *headers = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *header_nulls = static_cast<bool *>(palloc(sizeof(bool) * ids));
  auto *copies = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  int n = 0;
  for (int k = 0; k < ids; ++k) {
    if (states[k] != 'n') continue;
    int last = g.last[k];
    providers[n] = batch.providers[last];
    external_ids[n] = batch.external_ids[last];
    payloads[n] = batch.payloads[last];
    header_nulls[n] = batch.headers == nullptr || batch.header_nulls[last];
    headers[n] = header_nulls[n] ? (Datum)0 : batch.headers[last];
    copies[n] = Int32GetDatum(g.copies[k]);
    ++n;
  }
  int dims[1] = {n};
  int lbs[1] = {1};
  args[0] = PointerGetDatum(construct_array(providers, n, TEXTOID, -1, false, TYPALIGN_INT));
  args[1] = PointerGetDatum(construct_array(external_ids, n, TEXTOID, -1, false, TYPALIGN_INT));
  args[2] = PointerGetDatum(construct_array(payloads, n, JSONBOID, -1, false, TYPALIGN_INT));
  args[3] = PointerGetDatum(
      construct_md_array(headers, header_nulls, 1, dims, lbs, JSONBOID, -1, false, TYPALIGN_INT));
  args[4] = PG_GETARG_DATUM(4);
  args[5] = PointerGetDatum(construct_array(copies, n, INT4OID, 4, true, TYPALIGN_INT));
}

// Marks every id the last statement returned (provider, external_id,
// inserted) and still in state n: i inserted, u updated. Ids are in key
// order: binary search.
void mark_returned(const BatchArrays &batch, const Grouped &g, char *states) {
  for (uint64 row = 0; row < SPI_processed; ++row) {
    bool isnull;
    auto key = std::make_pair(
        bytes_of(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull)),
        bytes_of(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 2, &isnull)));
    int lo = 0, hi = static_cast<int>(g.last.size());
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (g.key(batch, g.last[mid]) < key)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < static_cast<int>(g.last.size()) && states[lo] == 'n' &&
        g.key(batch, g.last[lo]) == key)
      states[lo] = result_bool(row, 3) ? 'i' : 'u';
  }
}

// Runs the two statements of the grouped batch; returns the text[] of
// outcomes, one per element in input order, in the caller's context.
Datum run_upsert(FunctionCallInfo fcinfo, const BatchArrays &batch, const Grouped &g) {
  int ids = static_cast<int>(g.last.size());
  // Per id: i inserted, u updated, n not written (processed: duplicate).
  char *states = spi_call([&] {
    // Ids are in key order, so equal providers are adjacent.
    auto *names = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
    int nnames = 0;
    for (int k = 0; k < ids; ++k) {
      Datum name = batch.providers[g.last[k]];
      if (nnames == 0 || bytes_of(names[nnames - 1]) != bytes_of(name)) names[nnames++] = name;
    }
    Datum providers =
        PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
    execute_kept(unknown_provider_plan, &providers, nullptr, true, 1);
    bool isnull;
    Datum unknown = result_value(0, 1, &isnull);
    if (!isnull) raise_unknown_provider(unknown);

    auto *s = static_cast<char *>(SPI_palloc(ids));
    memset(s, 'n', ids);
    Datum args[6];
    id_arrays(fcinfo, batch, g, s, args);
    execute_kept(insert_batch_plan, args, nullptr, false, 0);
    mark_returned(batch, g, s);
    if (SPI_processed == static_cast<uint64>(ids)) return s;

    id_arrays(fcinfo, batch, g, s, args);
    execute_kept(upsert_batch_plan, args, nullptr, false, 0);
    mark_returned(batch, g, s);
    return s;
  });
  int count = static_cast<int>(g.group.size());
  return pg_call([&] {
    auto *outcomes = static_cast<Datum *>(palloc(sizeof(Datum) * count));
    for (int i = 0; i < count; ++i) {
      char state = states[g.group[i]];
      // All copies of an id share its fate; only the first is the insert.
      const char *outcome = state == 'n'                               ? "duplicate"
                            : state == 'i' && g.first[g.group[i]] == i ? "inserted"
                                                                       : "updated";
      outcomes[i] = CStringGetTextDatum(outcome);
    }
    return PointerGetDatum(construct_array(outcomes, count, TEXTOID, -1, false, TYPALIGN_INT));
  });
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
      Oid type = arg >= 2 ? JSONBOID : TEXTOID;
      Datum **elements = arg == 0   ? &b.providers
                         : arg == 1 ? &b.external_ids
                         : arg == 2 ? &b.payloads
                                    : &b.headers;
      bool **element_nulls = arg == 0   ? &b.provider_nulls
                             : arg == 1 ? &b.external_id_nulls
                             : arg == 2 ? &b.payload_nulls
                                        : &b.header_nulls;
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

  const char *outcome = spi_call([&] {
    Datum args[5] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                     PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
    char nulls[5] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', ' '};
    execute_kept(upsert_one_plan, args, nulls, false, 0);
    if (!result_bool(0, 1)) raise_unknown_provider(args[0]);
    bool duplicate;
    bool inserted = result_bool(0, 2, &duplicate);
    return duplicate ? "duplicate" : inserted ? "inserted" : "updated";
  });
  return pg_call([&] { return CStringGetTextDatum(outcome); });
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

  return run_upsert(fcinfo, batch, group_batch(batch, count));
}

// inbox.ingest and inbox.ingest_batch: upserts keyed by (provider,
// external_id). ingest runs one statement, two when its first try (chosen
// from the connection's recent ids) wrote nothing; ingest_batch groups its
// events in C++ and writes them in at most two.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boundary.hpp"
#include "delivery_log.hpp"
#include "gucs.hpp"
#include "limits.hpp"
#include "spi.hpp"

extern "C" {
#include "storage/proc.h"
}

namespace pg_inbox {
namespace {

constexpr int kMaxBatchEvents = 10000;
constexpr Size kMaxSchemeBytes = 64;

// ingest_batch in one statement or two. They receive each id of the batch once
// (the C++ side groups the copies of an id: the last copy carries the
// payload, `copies` counts them), in the bytes' order, so two batches write
// in the same order and never deadlock; no join or sort may reorder them.
//  0. unknown_provider_plan checks the batch's providers (each once: the ids
//     are grouped by provider); an unknown one fails the call before any write.
//  a. When this backend's last four batches were new ids only (and the
//     transaction has subtransaction xids to spare), insert_new_batch_plan:
//     a plain INSERT of every id, in a subtransaction. It skips what
//     ON CONFLICT costs each row (a probe of the key before the insert, a
//     speculative-insertion lock, a WAL record confirming the row): batches
//     of new ids went in 1.13x faster (bench/README.md). An id already there
//     (or inserted by a concurrent call that commits) raises a unique
//     violation: the subtransaction takes back what the INSERT wrote and the
//     batch runs 1 and 2, as do the batches after it until four in a row
//     were all new.
//  1. insert_batch_plan inserts the ids that are new. ON CONFLICT DO NOTHING
//     neither locks nor writes an existing row, and waits for a concurrent
//     insert of the same id to commit or roll back (then inserts). It forms
//     every id's row before the conflict check, so each takes a sequence
//     value, and PostgreSQL's WAL record of a sequence (every 32nd value)
//     takes its transaction an xid: a batch of duplicates may write that.
//  2. Only when some id was not inserted, upsert_batch_plan for those: an
//     event already processed is not written; one still open gets its
//     deliveries counted, and its payload and headers refreshed unless a
//     worker is processing it (issue 12: the worker's payload is never
//     changed under it); one gone meanwhile is inserted.
// Every lookup of inbox.events is a scalar subquery or the conflict arbiter:
// a per-event index probe, and the function runs with enable_seqscan off, so
// a plan kept from an empty table cannot turn into a scan of the grown one.
// Each returns the ids it wrote; xmax = 0 tells an insert from an update;
// then the event's id, its delivery count and, when it is processing, the
// payload it kept (the log records whether the delivered one differs).
// The three statements receive the same arguments (id_arrays) and form the
// same rows from them; the two inserts return the same columns, and differ
// only in the conflict clause (a raw string cannot span a macro's lines).
#define INBOX_BATCH_ROWS                                                             \
  "INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source, " \
  "delivery_count)\n"                                                                \
  "SELECT t.provider, t.external_id, t.payload, t.headers, $5, t.copies\n"           \
  "FROM unnest($1, $2, $3, $4, $6) AS t(provider, external_id, payload, headers, copies)\n"
#define INBOX_BATCH_ARGS \
  6, { TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, TEXTOID, INT4ARRAYOID }
#define INBOX_INSERTED \
  "RETURNING e.provider, e.external_id, true, e.id, e.delivery_count, NULL::jsonb\n"

KeptPlan insert_batch_plan = {
    INBOX_BATCH_ROWS
    "ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO NOTHING\n" INBOX_INSERTED,
    INBOX_BATCH_ARGS, nullptr};

KeptPlan insert_new_batch_plan = {INBOX_BATCH_ROWS INBOX_INSERTED, INBOX_BATCH_ARGS, nullptr};

KeptPlan upsert_batch_plan = {INBOX_BATCH_ROWS
                              R"SQL(WHERE (SELECT d.processed_at FROM inbox.events d
       WHERE d.provider = t.provider AND d.external_id = t.external_id) IS NULL
ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
   SET payload = CASE WHEN e.status = 'processing' THEN e.payload ELSE EXCLUDED.payload END,
       headers = CASE WHEN e.status = 'processing' THEN e.headers ELSE EXCLUDED.headers END,
       delivery_count = e.delivery_count + EXCLUDED.delivery_count, received_at = now()
 WHERE e.processed_at IS NULL
RETURNING e.provider, e.external_id, e.xmax = 0, e.id, e.delivery_count,
          CASE WHEN e.status = 'processing' THEN e.payload END
)SQL",
                              INBOX_BATCH_ARGS, nullptr};
#undef INBOX_BATCH_ROWS
#undef INBOX_BATCH_ARGS
#undef INBOX_INSERTED

// How many of this backend's last batches in a row were new ids only (up
// to kNewBatchesToTryPlain). At kNewBatchesToTryPlain the next batch tries
// insert_new_batch_plan first. A failed try costs what the INSERT wrote
// before it met the id already there: four new batches in a row keep tries
// rare where batches often hold a re-delivery (a retry storm), and cost a
// stream of new batches four ON CONFLICT batches after each one that did.
// A backend starts hopeful.
constexpr int kNewBatchesToTryPlain = 4;
int new_batches_in_a_row = kNewBatchesToTryPlain;

// The plain INSERT's subtransaction keeps its xid in this backend's cache
// of PGPROC_MAX_CACHED_SUBXIDS (64) until the transaction ends; past that,
// every snapshot in the cluster reads pg_subtrans. A transaction that has
// used half of it (many batches in one transaction) takes the ON CONFLICT
// statements.
bool subxids_to_spare() {
  return !MyProc->subxidStatus.overflowed &&
         MyProc->subxidStatus.count < PGPROC_MAX_CACHED_SUBXIDS / 2;
}

// The first of the batch's (distinct) providers that is not registered, or NULL.
KeptPlan unknown_provider_plan = {R"SQL(
SELECT min(x.name) FROM unnest($1) AS x(name)
WHERE NOT EXISTS (SELECT 1 FROM inbox.providers p WHERE p.name = x.name)
)SQL",
                                  1,
                                  {TEXTARRAYOID},
                                  nullptr};

// ingest()'s first try while most recent ids were open events (a provider's
// retry storm while the backlog is long): upsert_one_plan's update alone,
// one probe, by the key in a scalar subquery (a WHERE on the key and
// processed_at, planned on an empty table, scanned all of events_open_idx).
// Nothing when the id is new, processed, or not in this statement's
// snapshot yet (a concurrent insert): then upsert_one_plan, whose arbiter
// waits for that insert. Its columns are upsert_one_plan's.
KeptPlan update_one_plan = {R"SQL(
UPDATE inbox.events AS e
   SET payload = CASE WHEN e.status = 'processing' THEN e.payload ELSE $3 END,
       headers = CASE WHEN e.status = 'processing' THEN e.headers ELSE $4 END,
       delivery_count = e.delivery_count + 1, received_at = now()
 WHERE e.id = (SELECT d.id FROM inbox.events d WHERE d.provider = $1 AND d.external_id = $2)
   AND e.processed_at IS NULL AND EXISTS (SELECT FROM inbox.providers p WHERE p.name = $1)
RETURNING true, false, e.id, e.delivery_count::bigint,
          CASE WHEN e.status = 'processing' THEN e.payload END
)SQL",
                            4,
                            {TEXTOID, TEXTOID, JSONBOID, JSONBOID},
                            nullptr};

// ingest()'s first try otherwise, unless most recent ids were duplicates:
// upsert_one_plan's upsert alone, its two probes (the provider registered,
// no processed row) in its WHERE instead of CTEs joined to its result, which
// cost four times the executor start of a plain upsert. Nothing when the
// provider is unknown or the event processed (also when it became processed
// after the probe: the arbiter's row fails the update's WHERE); then
// upsert_one_plan tells which and answers the duplicate. Its columns are
// upsert_one_plan's.
KeptPlan upsert_unprocessed_plan = {R"SQL(
INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source)
SELECT $1, $2, $3, $4, $5
WHERE EXISTS (SELECT FROM inbox.providers p WHERE p.name = $1)
  AND (SELECT d.processed_at FROM inbox.events d WHERE d.provider = $1 AND d.external_id = $2) IS NULL
ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
   SET payload = CASE WHEN e.status = 'processing' THEN e.payload ELSE EXCLUDED.payload END,
       headers = CASE WHEN e.status = 'processing' THEN e.headers ELSE EXCLUDED.headers END,
       delivery_count = e.delivery_count + 1, received_at = now()
 WHERE e.processed_at IS NULL
RETURNING true, e.xmax = 0, e.id, e.delivery_count::bigint,
          CASE WHEN e.status = 'processing' THEN e.payload END
)SQL",
                                    5,
                                    {TEXTOID, TEXTOID, JSONBOID, JSONBOID, TEXTOID},
                                    nullptr};

// Which plan ingest() runs first, from what this connection's recent ids
// turned out to be: update_one_plan while most were open events (a retry
// storm), upsert_one_plan while most were duplicates (a storm of processed
// ids), upsert_unprocessed_plan otherwise. A wrong guess costs one statement
// that changes nothing; the outcome is upsert_one_plan's either way. (An
// insert first for new ids, tried too, saved nothing once it had to probe
// for the row first: without the probe it waited for a purge deleting the
// row, where the upsert counts a duplicate at once, purge_vs_redelivery.spec.)
class RecentIds {
 public:
  bool mostly_open() const { return open_share_ >= 0.5; }
  bool mostly_duplicates() const { return duplicate_share_ >= 0.5; }
  void saw(bool updated, bool duplicate) {
    open_share_ += ((updated ? 1.0 : 0.0) - open_share_) / 8;
    duplicate_share_ += ((duplicate ? 1.0 : 0.0) - duplicate_share_) / 8;
  }

 private:
  // Moving averages over about the last 8 calls.
  double open_share_ = 0.0;
  double duplicate_share_ = 0.0;
};
RecentIds recent_ids;

// ingest(): the same upsert for one event, without the batch's machinery
// (arrays, ordinality, copies). Column 1: the provider is registered; column
// 2: true inserted, false updated, NULL duplicate (processed: not written);
// 3-5 as the batch's 4-6, for a duplicate the processed row's id and count
// as the probe saw them (NULL when it saw the row still open: processed
// since). The probe asks for the row by its key alone (OFFSET 0 keeps
// processed_at out of its scan): with processed_at in the scan, a plan made
// on an empty table used events_processed_idx, every processed event of the
// provider, and kept using it as they grew.
KeptPlan upsert_one_plan = {R"SQL(
WITH known AS (
    SELECT EXISTS (SELECT 1 FROM inbox.providers p WHERE p.name = $1) AS known
), processed AS (
    SELECT k.id, k.delivery_count
    FROM (SELECT d.id, d.delivery_count, d.processed_at FROM inbox.events d
          WHERE d.provider = $1 AND d.external_id = $2 OFFSET 0) k
    WHERE k.processed_at IS NOT NULL
), upserted AS (
    INSERT INTO inbox.events AS e (provider, external_id, payload, headers, source)
    SELECT $1, $2, $3, $4, $5 FROM known
    WHERE known.known AND NOT EXISTS (SELECT FROM processed)
    ON CONFLICT ON CONSTRAINT events_provider_external_id_key DO UPDATE
       SET payload = CASE WHEN e.status = 'processing' THEN e.payload ELSE EXCLUDED.payload END,
           headers = CASE WHEN e.status = 'processing' THEN e.headers ELSE EXCLUDED.headers END,
           delivery_count = e.delivery_count + 1, received_at = now()
     WHERE e.processed_at IS NULL
    RETURNING (e.xmax = 0) AS inserted, e.id, e.delivery_count,
              CASE WHEN e.status = 'processing' THEN e.payload END AS kept
)
SELECT known.known, u.inserted, coalesce(u.id, p.id), coalesce(u.delivery_count, p.delivery_count)::bigint,
       u.kept
FROM known LEFT JOIN upserted u ON true LEFT JOIN processed p ON true
)SQL",
                            5,
                            {TEXTOID, TEXTOID, JSONBOID, JSONBOID, TEXTOID},
                            nullptr};

// The deliveries of processed events (duplicates), for the log: per id,
// the event's id (NULL when its row is gone) and the last delivery number
// it had before this call's copies: its count plus its duplicates so far,
// which the upsert of inbox.delivery_duplicates adds the copies to (a row
// per event, not an index entry per delivery; in key order, so concurrent
// calls lock those rows in one order). The lookup is a probe per id (OFFSET
// 0 keeps it a nested subquery): pulled up into a join, a plan made on an
// analyzed empty table hashed every row of inbox.events for it.
KeptPlan duplicate_plan = {R"SQL(
WITH x AS (
    SELECT t.n, t.copies, e.id, e.delivery_count
    FROM unnest($1, $2, $3) WITH ORDINALITY AS t(provider, external_id, copies, n)
    LEFT JOIN LATERAL (SELECT e.id, e.delivery_count FROM inbox.events e
                       WHERE e.provider = t.provider AND e.external_id = t.external_id
                       OFFSET 0) e ON true
), counted AS (
    INSERT INTO inbox.delivery_duplicates AS c (event_id, duplicates)
    SELECT x.id, x.copies FROM x WHERE x.id IS NOT NULL ORDER BY x.n
    ON CONFLICT (event_id) DO UPDATE SET duplicates = c.duplicates + EXCLUDED.duplicates
    RETURNING c.event_id, c.duplicates
)
SELECT x.id, (x.delivery_count + c.duplicates - x.copies)::bigint
FROM x LEFT JOIN counted c ON c.event_id = x.id
ORDER BY x.n
)SQL",
                           3,
                           {TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID},
                           nullptr};

// A duplicate of one event whose row ingest's probe saw: its duplicates so
// far, this one included (duplicate_plan without the arrays and the lookup).
KeptPlan duplicate_one_plan = {R"SQL(
INSERT INTO inbox.delivery_duplicates AS c (event_id, duplicates) VALUES ($1, 1)
ON CONFLICT (event_id) DO UPDATE SET duplicates = c.duplicates + 1
RETURNING c.duplicates::bigint
)SQL",
                               1,
                               {INT8OID},
                               nullptr};

// One event's fields as the checks see them; pointers into Postgres memory.
struct EventFields {
  const varlena *provider;     // null when SQL NULL
  const varlena *external_id;  // null when SQL NULL
  bool payload_null;
  Size payload_bytes;
};

// A batch's arrays, deconstructed (digests and schemes: null unless given).
struct BatchArrays {
  int lengths[6];
  Datum *providers, *external_ids, *payloads, *headers, *digests, *schemes;
  bool *provider_nulls, *external_id_nulls, *payload_nulls, *header_nulls, *digest_nulls,
      *scheme_nulls;
};

// Per id of a batch, what the statement that wrote it returned.
struct Written {
  int64 id;
  int32 deliveries;    // the event's delivery_count after this batch
  bool kept;           // it was processing: payload and headers kept
  Datum kept_payload;  // then, the payload kept (valid until SPI_finish)
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

// The optional raw-body digest: a SHA-256, 32 bytes.
void check_digest(const varlena *digest, int element) {
  if (digest != nullptr && VARSIZE_ANY_EXHDR(digest) != 32)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "body_sha256 must be a SHA-256 digest of 32 bytes, not " +
                         std::to_string(VARSIZE_ANY_EXHDR(digest)),
                     where(element));
}

// The optional signature scheme: a short name (github, stripe, ...).
void check_scheme(const varlena *scheme, int element) {
  if (scheme == nullptr) return;
  Size bytes = VARSIZE_ANY_EXHDR(scheme);
  if (bytes == 0)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "signature_scheme must not be empty",
                     where(element));
  if (bytes > kMaxSchemeBytes)
    throw InboxError(ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
                     "signature_scheme is " + std::to_string(bytes) + " bytes, over the limit of " +
                         std::to_string(kMaxSchemeBytes),
                     where(element));
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
// inserted, id, delivery_count, kept payload) and still in state n:
// i inserted, u updated. Ids are in key order: binary search.
void mark_returned(const BatchArrays &batch, const Grouped &g, char *states, Written *written) {
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
        g.key(batch, g.last[lo]) == key) {
      states[lo] = result_bool(row, 3) ? 'i' : 'u';
      Written &w = written[lo];
      w.id = result_int64(row, 4);
      w.deliveries =
          DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 5, &isnull));
      w.kept_payload = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 6, &isnull);
      w.kept = !isnull;
    }
  }
}

// Whether a delivered body differs from the payload a worker holds.
bool differs(Datum delivered, Datum kept) {
  return !DatumGetBool(DirectFunctionCall2(jsonb_eq, delivered, kept));
}

// The ids of a batch still in state n (duplicates): their events' ids and
// last delivery numbers (duplicate_plan), in key order. Call inside spi_call.
void find_duplicates(const BatchArrays &batch, const Grouped &g, const char *states,
                     Written *written) {
  int ids = static_cast<int>(g.last.size());
  auto *providers = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *external_ids = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *copies = static_cast<Datum *>(palloc(sizeof(Datum) * ids));
  auto *places = static_cast<int *>(palloc(sizeof(int) * ids));
  int n = 0;
  for (int k = 0; k < ids; ++k) {
    if (states[k] != 'n') continue;
    providers[n] = batch.providers[g.last[k]];
    external_ids[n] = batch.external_ids[g.last[k]];
    copies[n] = Int32GetDatum(g.copies[k]);
    places[n++] = k;
  }
  if (n == 0) return;
  Datum args[3] = {
      PointerGetDatum(construct_array(providers, n, TEXTOID, -1, false, TYPALIGN_INT)),
      PointerGetDatum(construct_array(external_ids, n, TEXTOID, -1, false, TYPALIGN_INT)),
      PointerGetDatum(construct_array(copies, n, INT4OID, 4, true, TYPALIGN_INT))};
  execute_kept(duplicate_plan, args, nullptr, false, 0);
  for (int row = 0; row < n; ++row) {
    bool id_null, count_null;
    Written &w = written[places[row]];
    w.id = result_int64(row, 1, &id_null);
    w.deliveries = static_cast<int32>(result_int64(row, 2, &count_null));
    if (id_null) w.id = -1;  // the event's row is gone: no id, no number
  }
}

// The deliveries of a grouped batch, one per element in input order, and
// their append to the log. Call inside spi_call.
void log_batch(FunctionCallInfo fcinfo, int stripe, const BatchArrays &batch, const Grouped &g,
               const char *states, Written *written) {
  find_duplicates(batch, g, states, written);
  int count = static_cast<int>(g.group.size());
  auto *rows = static_cast<Delivery *>(palloc0(sizeof(Delivery) * count));
  auto *seen = static_cast<int *>(palloc0(sizeof(int) * g.last.size()));
  for (int i = 0; i < count; ++i) {
    int k = g.group[i];
    int copy = ++seen[k];  // this element is the copy-th copy of its id
    const Written &w = written[k];
    Delivery &d = rows[i];
    char state = states[k];
    d.outcome = state == 'n'                      ? "duplicate"
                : state == 'i' && g.first[k] == i ? "inserted"
                                                  : "updated";
    d.event_null = state == 'n' && w.id < 0;
    d.event_id = d.event_null ? 0 : w.id;
    d.delivery_null = d.event_null;
    // Open: the copies took the last copies-numbers of the count. Processed:
    // numbered on from the last number the event had.
    d.delivery = state == 'n' ? w.deliveries + copy : w.deliveries - g.copies[k] + copy;
    d.kept = state == 'u' && w.kept;
    d.differs = d.kept && differs(batch.payloads[i], w.kept_payload);
    d.provider = batch.providers[i];
    d.external_id = batch.external_ids[i];
    d.payload = batch.payloads[i];
    d.headers_null = batch.headers == nullptr || batch.header_nulls[i];
    d.headers = d.headers_null ? (Datum)0 : batch.headers[i];
    d.raw_null = batch.digests == nullptr || batch.digest_nulls[i];
    d.raw_sha256 = d.raw_null ? (Datum)0 : batch.digests[i];
    d.scheme_null = batch.schemes == nullptr || batch.scheme_nulls[i];
    d.scheme = d.scheme_null ? (Datum)0 : batch.schemes[i];
  }
  append_deliveries(stripe, PG_GETARG_DATUM(4), rows, count);
}

// Whether insert_new_batch_plan inserted every id of args (then its rows
// are the last SPI result). False when one was there already: a unique
// violation of the key, whose subtransaction took back what the statement
// had written. Any other error is raised. Call inside spi_call.
bool inserted_all_new(Datum *args) {
  ErrorData *edata =
      in_subtransaction([&] { execute_kept(insert_new_batch_plan, args, nullptr, false, 0); });
  if (edata == nullptr) return true;
  bool id_taken = edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION &&
                  edata->constraint_name != nullptr &&
                  strcmp(edata->constraint_name, "events_provider_external_id_key") == 0;
  if (!id_taken) ReThrowError(edata);
  FreeErrorData(edata);
  return false;
}

// Runs the statements of the grouped batch (and, with the log on, its
// append); returns the text[] of outcomes, one per element in input order,
// in the caller's context.
Datum run_upsert(FunctionCallInfo fcinfo, const BatchArrays &batch, const Grouped &g) {
  int ids = static_cast<int>(g.last.size());
  bool log = delivery_log_on(PG_NARGS());
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

    int stripe = log ? take_stripe() : -1;
    auto *s = static_cast<char *>(SPI_palloc(ids));
    memset(s, 'n', ids);
    auto *written = static_cast<Written *>(palloc0(sizeof(Written) * ids));
    Datum args[6];
    id_arrays(fcinfo, batch, g, s, args);
    bool try_plain = new_batches_in_a_row == kNewBatchesToTryPlain && subxids_to_spare();
    if (!(try_plain && inserted_all_new(args)))
      execute_kept(insert_batch_plan, args, nullptr, false, 0);
    mark_returned(batch, g, s, written);
    bool all_new = SPI_processed == static_cast<uint64>(ids);
    new_batches_in_a_row = all_new ? std::min(new_batches_in_a_row + 1, kNewBatchesToTryPlain) : 0;
    if (!all_new) {
      id_arrays(fcinfo, batch, g, s, args);
      execute_kept(upsert_batch_plan, args, nullptr, false, 0);
      mark_returned(batch, g, s, written);
    }
    if (log) log_batch(fcinfo, stripe, batch, g, s, written);
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
    const char *names[] = {"providers", "external_ids", "payloads",         "headers",
                           nullptr,     "body_sha256s", "signature_schemes"};
    for (int arg : {0, 1, 2, 3, 5, 6}) {
      int slot = arg < 4 ? arg : arg - 1;
      b.lengths[slot] = -1;
      if (arg >= PG_NARGS() || PG_ARGISNULL(arg)) continue;
      ArrayType *array = PG_GETARG_ARRAYTYPE_P(arg);
      b.lengths[slot] = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
      if (ARR_NDIM(array) > 1)
        ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                        errmsg("%s must be a one-dimensional array", names[arg])));
      Oid type = arg == 2 || arg == 3 ? JSONBOID : arg == 5 ? BYTEAOID : TEXTOID;
      Datum **elements = arg == 0   ? &b.providers
                         : arg == 1 ? &b.external_ids
                         : arg == 2 ? &b.payloads
                         : arg == 3 ? &b.headers
                         : arg == 5 ? &b.digests
                                    : &b.schemes;
      bool **element_nulls = arg == 0   ? &b.provider_nulls
                             : arg == 1 ? &b.external_id_nulls
                             : arg == 2 ? &b.payload_nulls
                             : arg == 3 ? &b.header_nulls
                             : arg == 5 ? &b.digest_nulls
                                        : &b.scheme_nulls;
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

// inbox.ingest(provider, external_id, payload, headers, source[, body_sha256,
// signature_scheme]): the 0.1.0 definition passes five arguments.
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
  bool has_digest = PG_NARGS() > 5 && !PG_ARGISNULL(5);
  bool has_scheme = PG_NARGS() > 6 && !PG_ARGISNULL(6);
  check_digest(
      has_digest ? pg_call([&] { return (const varlena *)PG_GETARG_BYTEA_PP(5); }) : nullptr, 0);
  check_scheme(
      has_scheme ? pg_call([&] { return (const varlena *)PG_GETARG_TEXT_PP(6); }) : nullptr, 0);
  bool log = delivery_log_on(PG_NARGS());

  const char *outcome = spi_call([&] {
    int stripe = log ? take_stripe() : -1;
    Datum args[5] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                     PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
    char nulls[5] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', ' '};
    KeptPlan &first = recent_ids.mostly_open()         ? update_one_plan
                      : recent_ids.mostly_duplicates() ? upsert_one_plan
                                                       : upsert_unprocessed_plan;
    execute_kept(first, args, nulls, false, 0);
    if (&first != &upsert_one_plan && SPI_processed == 0)
      execute_kept(upsert_one_plan, args, nulls, false, 0);
    if (!result_bool(0, 1)) raise_unknown_provider(args[0]);
    bool duplicate;
    bool inserted = result_bool(0, 2, &duplicate);
    recent_ids.saw(!duplicate && !inserted, duplicate);
    const char *result = duplicate ? "duplicate" : inserted ? "inserted" : "updated";
    if (!log) return result;

    Delivery d{};
    d.outcome = result;
    bool id_null;
    d.event_id = result_int64(0, 3, &id_null);
    d.delivery = static_cast<int32>(result_int64(0, 4));
    bool kept_null;
    Datum kept = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &kept_null);
    d.kept = !duplicate && !kept_null;
    d.differs = d.kept && differs(args[2], kept);
    if (duplicate && !id_null) {
      Datum id = Int64GetDatum(d.event_id);
      execute_kept(duplicate_one_plan, &id, nullptr, false, 0);
      d.delivery += static_cast<int32>(result_int64(0, 1));
    } else if (duplicate) {
      Datum one = Int32GetDatum(1);
      Datum keys[3] = {
          PointerGetDatum(construct_array(&args[0], 1, TEXTOID, -1, false, TYPALIGN_INT)),
          PointerGetDatum(construct_array(&args[1], 1, TEXTOID, -1, false, TYPALIGN_INT)),
          PointerGetDatum(construct_array(&one, 1, INT4OID, 4, true, TYPALIGN_INT))};
      execute_kept(duplicate_plan, keys, nullptr, false, 0);
      d.event_id = result_int64(0, 1, &d.event_null);
      d.delivery = static_cast<int32>(result_int64(0, 2, &d.delivery_null)) + 1;
    }
    d.provider = args[0];
    d.external_id = args[1];
    d.payload = args[2];
    d.headers = args[3];
    d.headers_null = PG_ARGISNULL(3);
    d.raw_null = !has_digest;
    d.raw_sha256 = has_digest ? PG_GETARG_DATUM(5) : (Datum)0;
    d.scheme_null = !has_scheme;
    d.scheme = has_scheme ? PG_GETARG_DATUM(6) : (Datum)0;
    append_deliveries(stripe, args[4], &d, 1);
    return result;
  });
  return pg_call([&] { return CStringGetTextDatum(outcome); });
}

// inbox.ingest_batch(providers, external_ids, payloads, headers, source[,
// body_sha256s, signature_schemes]): the 0.1.0 definition passes five.
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
  for (int optional : {4, 5})
    if (batch.lengths[optional] != -1 && batch.lengths[optional] != count)
      throw InboxError(ERRCODE_ARRAY_SUBSCRIPT_ERROR,
                       std::string(optional == 4 ? "body_sha256s" : "signature_schemes") +
                           " must have as many elements as providers",
                       "Lengths: " + std::to_string(batch.lengths[optional]) + " and " +
                           std::to_string(count) + ".");
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
    if (batch.digests != nullptr && !batch.digest_nulls[i])
      check_digest(as_varlena(batch.digests[i]), i + 1);
    if (batch.schemes != nullptr && !batch.scheme_nulls[i])
      check_scheme(as_varlena(batch.schemes[i]), i + 1);
  }

  return run_upsert(fcinfo, batch, group_batch(batch, count));
}

// Appending to the delivery log's stripes: the stripe lock, the chain's
// hash (computed here, in C++, one per call) and one row per call.
#include "delivery_log.hpp"

#include <array>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <string_view>

#include "boundary.hpp"
#include "digests.hpp"
#include "direct_insert.hpp"
#include "gucs.hpp"
#include "jsonb_text.hpp"
#include "log_chain.hpp"
#include "spi.hpp"

extern "C" {
#include "access/genam.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "storage/proc.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
}

namespace pg_inbox {
namespace {

// A row's columns, in the order of append_deliveries' values, and the
// statement that inserts them when the row cannot go in without one
// (direct_insert.hpp); received_at, the transaction's start, comes last in
// both.
constexpr int kLogValues = 16;
constexpr const char *kLogColumns[kLogValues] = {
    "stripe",       "seq",          "source",          "event_ids",         "deliveries",
    "outcomes",     "payload_kept", "payload_differs", "differing",         "providers",
    "external_ids", "body_sha256",  "body_hashed",     "signature_schemes", "headers_sha256",
    "hash"};

std::string append_sql() {
  std::string columns, values;
  for (int i = 0; i < kLogValues; ++i) {
    columns += std::string(kLogColumns[i]) + ", ";
    values += "$" + std::to_string(i + 1) + ", ";
  }
  return "INSERT INTO inbox.delivery_batches (" + columns + "received_at) VALUES (" + values +
         "now())";
}
const std::string kAppendSql = append_sql();

// The call's deliveries as one row of parallel arrays.
KeptPlan append_plan = {kAppendSql.c_str(),
                        kLogValues,
                        {INT2OID, INT8OID, TEXTOID, INT8ARRAYOID, INT4ARRAYOID, TEXTARRAYOID,
                         BOOLARRAYOID, BOOLARRAYOID, INT4OID, TEXTARRAYOID, TEXTARRAYOID,
                         BYTEAARRAYOID, TEXTARRAYOID, TEXTARRAYOID, BYTEAARRAYOID, BYTEAOID},
                        nullptr};

// The stripe's head: its last seq and hash (0 and zeros when empty).
struct Head {
  int64 seq;
  unsigned char hash[32];
};

// The log's table and its primary key, looked up at each call (a few
// syscache hits): nothing to invalidate when the extension is recreated.
struct LogTable {
  Oid table;
  Oid pkey;
};

LogTable find_log_table() {
  return pg_call([] {
    Oid schema = get_namespace_oid("inbox", false);
    LogTable log{get_relname_relid("delivery_batches", schema),
                 get_relname_relid("delivery_batches_pkey", schema)};
    if (!OidIsValid(log.table) || !OidIsValid(log.pkey))
      ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                      errmsg("pg_inbox: inbox.delivery_batches or its primary key is missing")));
    return log;
  });
}

// Per stripe, a seq this backend knows the stripe reached: the last head it
// read or row it wrote there. A backward scan reads its whole leaf page
// before it returns the first row (PostgreSQL 15 checks every item of the
// page against the keys: 7% of a single logged ingest's CPU), so the
// scan starts no lower than the hint and reads only the rows appended
// since. Rows leave the log only when their transaction aborts, so a hint
// can be past the head (this backend's rolled-back append): then nothing is
// found above it and the scan runs again without it.
std::array<int64, kLogStripes> seq_hints{};

// The stripe's head: its last row, the first the primary key (stripe, seq)
// gives backwards. Read after the stripe's lock is held, with the latest
// snapshot: it sees the previous holder's committed rows whatever the
// isolation level (a REPEATABLE READ snapshot taken before that holder
// committed would not). An index scan of its own, not SQL: at every ingest
// call, an executor's start-up cost more than the probe.
Head read_head(const LogTable &log, int stripe) {
  return pg_call([&] {
    AttrNumber stripe_attno = get_attnum(log.table, "stripe");
    AttrNumber seq_attno = get_attnum(log.table, "seq");
    AttrNumber hash_attno = get_attnum(log.table, "hash");
    Relation table = table_open(log.table, AccessShareLock);
    Relation index = index_open(log.pkey, AccessShareLock);
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    int64 &hint = seq_hints[stripe];
    Head h{};
    for (bool from_hint : {hint > 0, false}) {
      ScanKeyData keys[2];
      ScanKeyInit(&keys[0], stripe_attno, BTEqualStrategyNumber, F_INT2EQ,
                  Int16GetDatum(static_cast<int16>(stripe)));
      ScanKeyInit(&keys[1], seq_attno, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(hint));
      SysScanDesc scan =
          systable_beginscan_ordered(table, index, snapshot, from_hint ? 2 : 1, keys);
      HeapTuple row = systable_getnext_ordered(scan, BackwardScanDirection);
      bool found = HeapTupleIsValid(row);
      if (found) {
        bool seq_null, hash_null;
        TupleDesc desc = RelationGetDescr(table);
        Datum seq = heap_getattr(row, seq_attno, desc, &seq_null);
        Datum hash_datum = heap_getattr(row, hash_attno, desc, &hash_null);
        // Detoasted only once known not NULL: a NULL Datum is no pointer.
        bytea *hash = hash_null ? nullptr : DatumGetByteaPP(hash_datum);
        if (seq_null || hash == nullptr || VARSIZE_ANY_EXHDR(hash) != sizeof(h.hash))
          ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                          errmsg("delivery log stripe %d: its last row has no seq or a hash "
                                 "that is not 32 bytes",
                                 stripe)));
        h.seq = DatumGetInt64(seq);
        std::memcpy(h.hash, VARDATA_ANY(hash), sizeof(h.hash));
      }
      systable_endscan_ordered(scan);
      if (found || !from_hint) break;
    }
    hint = h.seq;
    UnregisterSnapshot(snapshot);
    index_close(index, AccessShareLock);
    table_close(table, AccessShareLock);
    return h;
  });
}

std::string_view text_bytes(Datum datum) {
  auto *text = reinterpret_cast<const varlena *>(DatumGetPointer(datum));
  return std::string_view(VARDATA_ANY(text), VARSIZE_ANY_EXHDR(text));
}

// SHA-256 through OpenSSL, the algorithm looked up once per backend
// (digests.hpp): one context per append, reset for each digest.
class Hasher {
 public:
  Hasher() : context_(EVP_MD_CTX_new()), text_(pg_call([] { return makeStringInfo(); })) {
    if (context_ == nullptr) throw std::bad_alloc();
  }

  // The digest of the concatenated parts.
  Sha256 digest(std::initializer_list<std::string_view> parts) {
    Sha256 out;
    if (!digest_parts(context_.get(), sha256_algorithm(), parts, out.data(), out.size()))
      throw InboxError(ERRCODE_INTERNAL_ERROR, "could not compute a SHA-256 digest");
    return out;
  }

  // The digest of a jsonb value's text form (a body when the caller passed
  // no raw digest; headers always).
  Sha256 jsonb_text(Datum jsonb) {
    pg_call([&] {
      resetStringInfo(text_);
      append_jsonb_text(text_, DatumGetJsonbP(jsonb));
    });
    return digest({std::string_view(text_->data, static_cast<size_t>(text_->len))});
  }

 private:
  DigestContext context_;
  StringInfo text_;  // one buffer for every jsonb's text (palloc'd: freed with the call's memory)
};

Datum bytea_of(const Sha256 &digest) {
  return pg_call([&] {
    auto *out = static_cast<bytea *>(palloc(VARHDRSZ + digest.size()));
    SET_VARSIZE(out, VARHDRSZ + digest.size());
    std::memcpy(VARDATA(out), digest.data(), digest.size());
    return PointerGetDatum(out);
  });
}

// Unix microseconds of now(): the transaction's start, what received_at holds.
int64 received_unix_us() {
  return GetCurrentTransactionStartTimestamp() +
         (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

}  // namespace

bool delivery_log_on(int nargs) { return nargs > 5 && guc_delivery_log; }

int take_stripe() {
  // The stripe this transaction took, by its local id: a second ingest in
  // the same transaction appends to the same stripe instead of taking
  // another (after a rolled-back savepoint the lock may be gone: retaken).
  static LocalTransactionId held_lxid = InvalidLocalTransactionId;
  static int held = 0;
  return pg_call([&] {
    auto try_lock = [](int object) {
      return DatumGetBool(DirectFunctionCall2(pg_try_advisory_xact_lock_int4,
                                              Int32GetDatum(kLockClassLog), Int32GetDatum(object)));
    };
    auto wait_lock = [](int object) {
      DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(kLockClassLog),
                          Int32GetDatum(object));
    };
    auto first_free = [&](int from, int to) {
      for (int stripe = from; stripe < to; ++stripe)
        if (try_lock(stripe)) return stripe;
      return -1;
    };
    LocalTransactionId lxid = MyProc->lxid;
    if (lxid == held_lxid) {
      if (!try_lock(held)) wait_lock(held);
      return held;
    }
    int got = first_free(0, kLogBaseStripes);
    // Every base stripe busy: one transaction (the holder of the waiting
    // slot, to its end) waits for stripe 0; while it does, the others take
    // an overflow stripe rather than queue behind it. A queue on one stripe
    // was a convoy: ingest stopped at kLogBaseStripes transactions in flight.
    if (got < 0 && !try_lock(kLogWaitingSlot)) got = first_free(kLogBaseStripes, kLogStripes);
    if (got < 0) {
      wait_lock(0);
      got = 0;
    }
    held_lxid = lxid;
    held = got;
    return held;
  });
}

void append_deliveries(int stripe, Datum source, const Delivery *rows, int count) {
  if (count == 0) return;
  LogTable log = find_log_table();
  Head head = read_head(log, stripe);

  struct Columns {
    Datum *event_ids, *deliveries, *outcomes, *kept, *differs, *providers, *external_ids;
    Datum *body_sha256, *body_hashed, *schemes, *headers_sha256;
    bool *event_nulls, *delivery_nulls, *scheme_nulls, *header_nulls;
  };
  Columns c = pg_call([&] {
    Columns k{};
    for (Datum **column :
         {&k.event_ids, &k.deliveries, &k.outcomes, &k.kept, &k.differs, &k.providers,
          &k.external_ids, &k.body_sha256, &k.body_hashed, &k.schemes, &k.headers_sha256})
      *column = static_cast<Datum *>(palloc(sizeof(Datum) * count));
    for (bool **column : {&k.event_nulls, &k.delivery_nulls, &k.scheme_nulls, &k.header_nulls})
      *column = static_cast<bool *>(palloc0(sizeof(bool) * count));
    return k;
  });

  Hasher hasher;
  int64 received = received_unix_us();
  // One line per delivery, hashed once after the previous row's hash.
  std::string message;
  message.reserve(static_cast<size_t>(count) * 320);
  int differing = 0;
  for (int i = 0; i < count; ++i) {
    const Delivery &d = rows[i];
    ChainFields f;
    f.stripe = stripe;
    f.seq = head.seq + 1;
    f.item = i + 1;
    if (!d.event_null) f.event_id = d.event_id;
    if (!d.delivery_null) f.delivery = d.delivery;
    f.received_unix_us = received;
    f.provider = text_bytes(d.provider);
    f.external_id = text_bytes(d.external_id);
    f.source = text_bytes(source);
    f.outcome = d.outcome;
    f.payload_kept = d.kept;
    f.payload_differs = d.differs;
    if (d.raw_null) {
      f.body_sha256 = hasher.jsonb_text(d.payload);
      f.body_hashed = "jsonb";
    } else {
      std::string_view raw = text_bytes(d.raw_sha256);  // checked: 32 bytes
      std::memcpy(f.body_sha256.data(), raw.data(), f.body_sha256.size());
      f.body_hashed = "raw";
    }
    if (!d.scheme_null) f.signature_scheme = text_bytes(d.scheme);
    if (!d.headers_null) f.headers_sha256 = hasher.jsonb_text(d.headers);

    if (i > 0) message += '\n';
    message += chain_message(f);
    differing += d.differs ? 1 : 0;

    c.event_ids[i] = Int64GetDatum(d.event_id);
    c.event_nulls[i] = d.event_null;
    c.deliveries[i] = Int32GetDatum(d.delivery);
    c.delivery_nulls[i] = d.delivery_null;
    c.kept[i] = BoolGetDatum(d.kept);
    c.differs[i] = BoolGetDatum(d.differs);
    c.providers[i] = d.provider;
    c.external_ids[i] = d.external_id;
    c.schemes[i] = d.scheme;
    c.scheme_nulls[i] = d.scheme_null;
    c.body_sha256[i] = bytea_of(f.body_sha256);
    c.headers_sha256[i] = f.headers_sha256 ? bytea_of(*f.headers_sha256) : (Datum)0;
    c.header_nulls[i] = !f.headers_sha256;
    const char *outcome = d.outcome;
    const char *hashed = d.raw_null ? "jsonb" : "raw";
    c.outcomes[i] = pg_call([&] { return CStringGetTextDatum(outcome); });
    c.body_hashed[i] = pg_call([&] { return CStringGetTextDatum(hashed); });
  }

  Sha256 hash = hasher.digest(
      {std::string_view(reinterpret_cast<const char *>(head.hash), sizeof(head.hash)), message});
  Datum hash_datum = bytea_of(hash);

  pg_call([&] {
    int dims[1] = {count};
    int lbs[1] = {1};
    auto array = [&](Datum *values, bool *nulls, Oid type, int len, bool byval, char align) {
      return PointerGetDatum(
          construct_md_array(values, nulls, 1, dims, lbs, type, len, byval, align));
    };
    Datum args[kLogValues] = {
        Int16GetDatum(static_cast<int16>(stripe)),
        Int64GetDatum(head.seq + 1),
        source,
        array(c.event_ids, c.event_nulls, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE),
        array(c.deliveries, c.delivery_nulls, INT4OID, 4, true, TYPALIGN_INT),
        array(c.outcomes, nullptr, TEXTOID, -1, false, TYPALIGN_INT),
        array(c.kept, nullptr, BOOLOID, 1, true, TYPALIGN_CHAR),
        array(c.differs, nullptr, BOOLOID, 1, true, TYPALIGN_CHAR),
        Int32GetDatum(differing),
        array(c.providers, nullptr, TEXTOID, -1, false, TYPALIGN_INT),
        array(c.external_ids, nullptr, TEXTOID, -1, false, TYPALIGN_INT),
        array(c.body_sha256, nullptr, BYTEAOID, -1, false, TYPALIGN_INT),
        array(c.body_hashed, nullptr, TEXTOID, -1, false, TYPALIGN_INT),
        array(c.schemes, c.scheme_nulls, TEXTOID, -1, false, TYPALIGN_INT),
        array(c.headers_sha256, c.header_nulls, BYTEAOID, -1, false, TYPALIGN_INT),
        hash_datum};
    // The row as the statement would insert it, without its executor
    // start-up (half the log's cost of a single-event call); the statement
    // when the table has grown what only the executor handles.
    ColumnValue row[kLogValues + 1];
    for (int i = 0; i < kLogValues; ++i) row[i] = {kLogColumns[i], args[i], false};
    row[kLogValues] = {"received_at", TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()),
                       false};
    if (insert_without_executor(log.table, row, kLogValues + 1)) return;
    execute_kept(append_plan, args, nullptr, false, 0);
  });
}

}  // namespace pg_inbox

using namespace pg_inbox;

// inbox._log_stripes(): kLogStripes, for the SQL side of the log.
INBOX_SQL_FUNCTION(inbox_log_stripes) { return Int32GetDatum(kLogStripes); }

// inbox._log_arrays_aligned(...): delivery_batches' CHECK (why in C:
// sql/src/15_delivery_log.sql).
INBOX_SQL_FUNCTION(inbox_log_arrays_aligned) {
  return pg_call([&] {
    int first = -1;
    for (int arg = 0; arg < PG_NARGS(); ++arg) {
      if (PG_ARGISNULL(arg)) return BoolGetDatum(false);
      ArrayType *array = PG_GETARG_ARRAYTYPE_P(arg);
      if (ARR_NDIM(array) != 1) return BoolGetDatum(false);
      int count = ARR_DIMS(array)[0];
      if (first < 0) first = count;
      if (count != first || count == 0) return BoolGetDatum(false);
    }
    return BoolGetDatum(first > 0);
  });
}

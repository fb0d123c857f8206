// The delivery log (issue 12): ingest's side. A call's deliveries are one
// row of inbox.delivery_batches, appended to one of kLogStripes hash
// chains; sql/src/15_delivery_log.sql holds the table, the seals and
// inbox.verify_log.
#pragma once

#include "postgres.hpp"

namespace pg_inbox {

// Every chain: seals and inbox.verify_log cover all of them.
constexpr int kLogStripes = 64;
// The stripes tried first; the others open only while a transaction waits
// because these are all busy (take_stripe).
constexpr int kLogBaseStripes = 16;
// Advisory lock class of the stripes, (class, stripe); "pinl", next to the
// jobs' classes (reconcile_locks.hpp). inbox.seal_log takes (class, -1);
// the one transaction waiting for a base stripe holds (class, -2).
constexpr int kLockClassLog = 0x70696e6c;
constexpr int kLogWaitingSlot = -2;

// One delivery to record. Trivially copyable: Datums in Postgres memory that
// outlive append_deliveries.
struct Delivery {
  int64 event_id;
  bool event_null;  // the event's row was gone (a purged duplicate)
  int32 delivery;
  bool delivery_null;
  const char *outcome;          // "inserted", "updated", "duplicate"
  bool kept;                    // the event was processing: payload and headers unchanged
  bool differs;                 // ... and this body differs from the one kept
  Datum provider, external_id;  // text
  Datum payload;                // jsonb, hashed as text when no raw digest came
  Datum headers;                // jsonb
  bool headers_null;
  Datum raw_sha256;  // bytea of 32 bytes: SHA-256 of the raw body
  bool raw_null;
  Datum scheme;  // text: the signature scheme the receiver verified
  bool scheme_null;
};

// Whether ingest records deliveries: pg_inbox.delivery_log, and the SQL
// definition is 0.2.0's (nargs > 5; 0.1.0's has no log tables yet).
bool delivery_log_on(int nargs);

// Takes this transaction's stripe (a transaction-level advisory lock): the
// one it already holds, else the first free base stripe, else it waits for
// stripe 0 (the first to find them busy) or takes a free overflow stripe.
// Call before the statement that locks event rows, so a transaction never
// waits for a stripe while holding rows another stripe holder wants.
int take_stripe();

// Appends one row holding the deliveries, in order, after the last row of
// stripe. Call inside spi_call; Postgres errors come out as PostgresError.
void append_deliveries(int stripe, Datum source, const Delivery *rows, int count);

}  // namespace pg_inbox

// The CHECK constraints of the tables every event and message writes, in C:
// PostgreSQL parses and plans a table's CHECK expressions again at every
// statement that writes it, and in SQL these were a fifth to a third of the
// CPU of an ingest or a publish (bench/README.md). One call per row checks
// what several SQL CHECKs did; a NULL passes, as in SQL's CHECK (the
// columns' NOT NULL refuses it first).
#include <string_view>

#include "boundary.hpp"
#include "limits.hpp"

namespace {

std::string_view text_arg(FunctionCallInfo fcinfo, int arg) {
  const text *value = PG_GETARG_TEXT_PP(arg);
  return {VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value)};
}

}  // namespace

using namespace pg_inbox;

// inbox._event_row_valid(status, processed_at, external_id): inbox.events'
// events_row_check. The status is pending, processing, done or dead;
// processed_at is set exactly when it is done or dead; the external_id is 1
// to kMaxExternalIdBytes bytes.
INBOX_SQL_FUNCTION(inbox_event_row_valid) {
  return pg_call([&] {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(2)) return BoolGetDatum(true);
    std::string_view status = text_arg(fcinfo, 0);
    bool terminal = status == "done" || status == "dead";
    if (!terminal && status != "pending" && status != "processing") return BoolGetDatum(false);
    if (terminal == PG_ARGISNULL(1)) return BoolGetDatum(false);
    // Stored size, as octet_length: an id is never detoasted to be measured.
    std::size_t id_bytes = toast_raw_datum_size(PG_GETARG_DATUM(2)) - VARHDRSZ;
    return BoolGetDatum(id_bytes >= 1 && id_bytes <= kMaxExternalIdBytes);
  });
}

// inbox._outbox_row_valid(status, processed_at): inbox.outbox_delivery's
// outbox_delivery_row_check. The status is pending, processing, done,
// rejected or dead; processed_at is set exactly when it is one of the last
// three.
INBOX_SQL_FUNCTION(inbox_outbox_row_valid) {
  return pg_call([&] {
    if (PG_ARGISNULL(0)) return BoolGetDatum(true);
    std::string_view status = text_arg(fcinfo, 0);
    bool terminal = status == "done" || status == "rejected" || status == "dead";
    if (!terminal && status != "pending" && status != "processing") return BoolGetDatum(false);
    return BoolGetDatum(terminal != PG_ARGISNULL(1));
  });
}

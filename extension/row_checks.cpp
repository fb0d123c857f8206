// The CHECK constraints of the tables every event and message writes, in C:
// PostgreSQL parses and plans a table's CHECK expressions again at every
// statement that writes it, and in SQL these were a fifth to a third of the
// CPU of an ingest or a publish (bench/README.md). One call per row checks
// what several SQL CHECKs did. A row that breaks a rule is refused with the
// rule in the message (23514), not with PostgreSQL's "failing row contains",
// which would put the payload in the server's log. A NULL passes, as in
// SQL's CHECK: the columns' NOT NULL refuses it first.
#include <initializer_list>
#include <string>
#include <string_view>

#include "boundary.hpp"
#include "limits.hpp"

namespace {

using pg_inbox::InboxError;

// A text argument, read inside pg_call (detoasting may raise).
std::string_view text_arg(FunctionCallInfo fcinfo, int arg) {
  return pg_inbox::pg_call([&] {
    const text *value = PG_GETARG_TEXT_PP(arg);
    return std::string_view(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
  });
}

[[noreturn]] void refuse(const char *constraint, const std::string &rule) {
  throw InboxError(ERRCODE_CHECK_VIOLATION, std::string(constraint) + ": " + rule);
}

// A status as the message shows it: quoted, cut at 40 bytes.
std::string shown(std::string_view status) {
  return "'" + std::string(status.substr(0, 40)) + (status.size() > 40 ? "...'" : "'");
}

// Refuses a status in neither `open` nor `terminal` (`listed` names them
// all, for the message), or processed_at set when the status is open or
// missing when it is terminal.
void check_status(const char *constraint, std::string_view status, bool processed,
                  std::initializer_list<std::string_view> open,
                  std::initializer_list<std::string_view> terminal, const char *listed) {
  bool is_terminal = false, known = false;
  for (std::string_view s : open) known = known || status == s;
  for (std::string_view s : terminal) is_terminal = is_terminal || status == s;
  if (!known && !is_terminal) refuse(constraint, "status " + shown(status) + " is not " + listed);
  if (is_terminal && !processed)
    refuse(constraint, "status " + shown(status) + " needs processed_at");
  if (!is_terminal && processed)
    refuse(constraint, "status " + shown(status) + " must not have processed_at");
}

}  // namespace

using namespace pg_inbox;

// inbox._event_row_valid(status, processed_at, external_id): inbox.events'
// events_row_check. The status is pending, processing, done or dead;
// processed_at is set exactly when it is done or dead; the external_id is 1
// to kMaxExternalIdBytes bytes.
INBOX_SQL_FUNCTION(inbox_event_row_valid) {
  if (PG_ARGISNULL(0) || PG_ARGISNULL(2)) return BoolGetDatum(true);
  std::string_view status = text_arg(fcinfo, 0);
  check_status("events_row_check", status, !PG_ARGISNULL(1), {"pending", "processing"},
               {"done", "dead"}, "pending, processing, done or dead");
  // Stored size, as octet_length: an id is never detoasted to be measured.
  std::size_t id_bytes =
      pg_call([&] { return toast_raw_datum_size(PG_GETARG_DATUM(2)); }) - VARHDRSZ;
  if (id_bytes < 1 || id_bytes > kMaxExternalIdBytes)
    refuse("events_row_check", "external_id is " + std::to_string(id_bytes) + " bytes, not 1 to " +
                                   std::to_string(kMaxExternalIdBytes));
  return BoolGetDatum(true);
}

// inbox._outbox_row_valid(status, processed_at): inbox.outbox_delivery's
// outbox_delivery_row_check. The status is pending, processing, done,
// rejected or dead; processed_at is set exactly when it is one of the last
// three.
INBOX_SQL_FUNCTION(inbox_outbox_row_valid) {
  if (PG_ARGISNULL(0)) return BoolGetDatum(true);
  check_status("outbox_delivery_row_check", text_arg(fcinfo, 0), !PG_ARGISNULL(1),
               {"pending", "processing"}, {"done", "rejected", "dead"},
               "pending, processing, done, rejected or dead");
  return BoolGetDatum(true);
}

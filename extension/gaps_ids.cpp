// The ids of a sequence pattern for SQL: the tail listing
// (sql/src/74_tail_listing.sql) writes and reads them with the one grammar
// of patterns, gaps::parse_pattern, as the scans do.
#include <cstdint>

#include "boundary.hpp"
#include "gaps_marks.hpp"
#include "gaps_sequence.hpp"

namespace pg_inbox {
namespace {

struct Bytes {
  const char *data;
  size_t len;
};

Bytes text_arg(FunctionCallInfo fcinfo, int n) {
  return pg_call([&] {
    text *arg = PG_GETARG_TEXT_PP(n);
    return Bytes{VARDATA_ANY(arg), VARSIZE_ANY_EXHDR(arg)};
  });
}

// Argument 0, a pattern set_id_source accepted; raises for any other.
gaps::Pattern pattern_arg(FunctionCallInfo fcinfo) {
  Bytes bytes = text_arg(fcinfo, 0);
  gaps::Pattern pattern;
  const char *why = nullptr;
  if (!gaps::parse_pattern(bytes.data, bytes.len, &pattern, &why))
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "malformed id pattern", why);
  return pattern;
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

// inbox._sequence_id(pattern, number): the id of `number` ('evt_{n}', 10:
// 'evt_10'; 'ord-{n:8}', 10: 'ord-00000010'). STRICT.
INBOX_SQL_FUNCTION(inbox_sequence_id) {
  gaps::Pattern pattern = pattern_arg(fcinfo);
  int64_t number = PG_GETARG_INT64(1);
  if (number < 0 || number > gaps::kMaxNumber)
    throw InboxError(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                     "a sequence number is between 0 and 18 nines");
  return pg_call([&] { return id_text(pattern, number); });
}

// inbox._sequence_number(pattern, external_id): the number of an id of the
// pattern, or NULL for any other id. STRICT.
INBOX_SQL_FUNCTION(inbox_sequence_number) {
  gaps::Pattern pattern = pattern_arg(fcinfo);
  Bytes id = text_arg(fcinfo, 1);
  int64_t number = 0;
  if (!gaps::parse_number(pattern, id.data, id.len, &number)) {
    fcinfo->isnull = true;
    return (Datum)0;
  }
  return Int64GetDatum(number);
}

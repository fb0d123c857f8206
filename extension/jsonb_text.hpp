// The text form of a jsonb value, as jsonb_out prints it, for hashing.
#pragma once

#include "postgres.hpp"

namespace pg_inbox {

// Appends to `out` the bytes jsonb_out prints for `value` (PostgreSQL's
// JsonbToCString without indentation: ", " and ": " between items, strings
// escaped as escape_json does, numbers as numeric_out), copying each run of
// bytes that needs no escape at once. The delivery log hashes a body's text
// when no raw digest came; jsonb_out's escaping, one appended character at
// a time, was most of that. Call inside pg_call.
void append_jsonb_text(StringInfo out, Jsonb *value);

}  // namespace pg_inbox

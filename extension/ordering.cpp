// Version checks (issue 12, docs/ordering.md): inbox.advance, the
// compare-and-set a worker makes in its own transaction before applying an
// event, and the two readers claim uses to fill entity_key and version.
#include <cstring>
#include <optional>
#include <string>

#include "boundary.hpp"
#include "lease.hpp"
#include "spi.hpp"
#include "version_text.hpp"

namespace pg_inbox {
namespace {

constexpr int kMaxScalarBytes = 255;  // entity keys and states: index-sized

// The event, locked, if token holds it (an expired lease nobody reclaimed
// still does, as for complete). Its entity and version as claim stored them,
// read from the payload when they are missing (pointers configured after the
// claim), its state and its provider's transition rules.
KeptPlan advance_event_plan = {R"SQL(
SELECT e.provider,
       coalesce(e.entity_key,
                inbox._pointer_scalar(coalesce(e.payload #> o.entity_path, e.headers -> o.entity_header))),
       coalesce(e.version,
                inbox._version_of(coalesce(e.payload #> o.version_path, e.headers -> o.version_header))),
       e.entity_key IS NULL OR e.version IS NULL,
       inbox._pointer_scalar(coalesce(e.payload #> o.state_path, e.headers -> o.state_header)),
       o.transitions
FROM inbox.events e LEFT JOIN inbox.provider_ordering o ON o.provider = e.provider
WHERE e.id = $1 AND e.lease_token = $2 AND e.status = 'processing'
FOR NO KEY UPDATE OF e
)SQL",
                               2,
                               {INT8OID, UUIDOID},
                               nullptr};

KeptPlan fill_event_plan = {"UPDATE inbox.events SET entity_key = $2, version = $3 WHERE id = $1",
                            3,
                            {INT8OID, TEXTOID, NUMERICOID},
                            nullptr};

// The compare-and-set. A concurrent advance for the same entity waits on the
// row (or on its uncommitted insert) and then compares with what committed.
// ON CONFLICT locks the row even when the WHERE refuses the update.
KeptPlan advance_cas_plan = {R"SQL(
INSERT INTO inbox.entity_versions AS v (provider, entity_key, version, event_id, state)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT ON CONSTRAINT entity_versions_pkey DO UPDATE
   SET version = EXCLUDED.version, event_id = EXCLUDED.event_id, state = EXCLUDED.state,
       applied_at = now()
 WHERE (v.version < EXCLUDED.version OR (v.version = EXCLUDED.version AND v.event_id = EXCLUDED.event_id))
   AND inbox._transition_allowed($6, v.state, EXCLUDED.state)
RETURNING 1
)SQL",
                             6,
                             {TEXTOID, TEXTOID, NUMERICOID, INT8OID, TEXTOID, JSONBOID},
                             nullptr};

// Why the compare-and-set refused (the row is locked by it): newer than what
// was applied means the transition was refused.
KeptPlan advance_refused_plan = {R"SQL(
SELECT v.version < $3 OR (v.version = $3 AND v.event_id = $4), v.state
FROM inbox.entity_versions v WHERE v.provider = $1 AND v.entity_key = $2
)SQL",
                                 4,
                                 {TEXTOID, TEXTOID, NUMERICOID, INT8OID},
                                 nullptr};

enum class Verdict { kApply, kStale, kLost, kBadTransition };

struct Advance {
  Verdict verdict;
  LeaseState lease;
  const char *from_state;  // kBadTransition: in the caller's context, or null
  Datum to_state;          // kBadTransition: text in the caller's context, or 0
};

// advance's statements. Call inside spi_call.
Advance decide(Datum id, Datum token) {
  Datum event_args[2] = {id, token};
  execute_kept(advance_event_plan, event_args, nullptr, false, 1);
  if (SPI_processed == 0) return {Verdict::kLost, lease_state(event_args), nullptr, 0};

  bool provider_null, key_null, version_null, state_null, rules_null;
  Datum provider = result_value(0, 1, &provider_null);
  Datum key = result_value(0, 2, &key_null);
  Datum version = result_value(0, 3, &version_null);
  bool fill = result_bool(0, 4);
  Datum state = result_value(0, 5, &state_null);
  Datum rules = result_value(0, 6, &rules_null);
  // Without an entity or a version nothing can be ordered: never stale.
  if (key_null || version_null) return {Verdict::kApply, LeaseState::kAlreadyDone, nullptr, 0};
  if (fill) {
    Datum fill_args[3] = {id, key, version};
    execute_kept(fill_event_plan, fill_args, nullptr, false, 0);
  }

  Datum cas_args[6] = {provider, key, version, id, state, rules};
  char cas_nulls[6] = {' ', ' ', ' ', ' ', state_null ? 'n' : ' ', rules_null ? 'n' : ' '};
  execute_kept(advance_cas_plan, cas_args, cas_nulls, false, 0);
  if (SPI_processed == 1) return {Verdict::kApply, LeaseState::kAlreadyDone, nullptr, 0};

  execute_kept(advance_refused_plan, cas_args, nullptr, false, 1);
  if (SPI_processed == 1 && result_bool(0, 1))
    return {Verdict::kBadTransition, LeaseState::kAlreadyDone, result_text(0, 2),
            state_null ? (Datum)0 : state};
  return {Verdict::kStale, LeaseState::kAlreadyDone, nullptr, 0};
}

std::string quoted(const char *state) {
  return state ? "'" + std::string(state) + "'" : std::string("NULL");
}

// The scalar a pointer found, if it is a string or a number. Call in pg_call.
struct Scalar {
  enum Kind { kNone, kString, kNumber } kind;
  const char *string;  // kString: not terminated
  int length;
  Numeric number;  // kNumber: inside the jsonb
};

Scalar scalar_of(FunctionCallInfo fcinfo) {
  Jsonb *jb = PG_GETARG_JSONB_P(0);
  JsonbValue v;
  if (!JsonbExtractScalar(&jb->root, &v)) return {Scalar::kNone, nullptr, 0, nullptr};
  if (v.type == jbvString) return {Scalar::kString, v.val.string.val, v.val.string.len, nullptr};
  if (v.type == jbvNumeric) return {Scalar::kNumber, nullptr, 0, v.val.numeric};
  return {Scalar::kNone, nullptr, 0, nullptr};
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

INBOX_SQL_FUNCTION(inbox_pointer_scalar) {
  Datum text = pg_call([&] {
    Scalar s = scalar_of(fcinfo);
    if (s.kind == Scalar::kString && s.length <= kMaxScalarBytes)
      return PointerGetDatum(cstring_to_text_with_len(s.string, s.length));
    if (s.kind == Scalar::kNumber) {
      char *digits = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(s.number)));
      if (std::strlen(digits) <= kMaxScalarBytes) return CStringGetTextDatum(digits);
    }
    return (Datum)0;
  });
  if (text == (Datum)0) PG_RETURN_NULL();
  return text;
}

INBOX_SQL_FUNCTION(inbox_version_of) {
  struct Found {
    Datum number;      // a JSON number, copied out of the jsonb
    const char *text;  // a string, palloc'd and terminated
  };
  Found found = pg_call([&] {
    Scalar s = scalar_of(fcinfo);
    if (s.kind == Scalar::kNumber) {
      auto *copy = static_cast<Numeric>(palloc(VARSIZE(s.number)));
      std::memcpy(copy, s.number, VARSIZE(s.number));
      return Found{NumericGetDatum(copy), nullptr};
    }
    if (s.kind == Scalar::kString && s.length <= static_cast<int>(kMaxVersionTextBytes))
      return Found{(Datum)0, pnstrdup(s.string, s.length)};
    return Found{(Datum)0, nullptr};
  });
  if (found.number != (Datum)0) return found.number;
  if (found.text == nullptr) PG_RETURN_NULL();
  std::optional<std::string> decimal = version_from_text(found.text);
  if (!decimal) PG_RETURN_NULL();
  const char *digits = decimal->c_str();
  return pg_call([&] {
    return DirectFunctionCall3(numeric_in, CStringGetDatum(digits), ObjectIdGetDatum(InvalidOid),
                               Int32GetDatum(-1));
  });
}

INBOX_SQL_FUNCTION(inbox_advance) {
  require_arg(fcinfo, 0, "id");
  require_arg(fcinfo, 1, "lease_token");
  Datum id = PG_GETARG_DATUM(0), token = PG_GETARG_DATUM(1);
  Advance a = spi_call([&] { return decide(id, token); });
  switch (a.verdict) {
    case Verdict::kApply:
      return pg_call([] { return CStringGetTextDatum("apply"); });
    case Verdict::kStale:
      return pg_call([] { return CStringGetTextDatum("stale"); });
    case Verdict::kLost:
      throw_if_bad_lease(a.lease, PG_GETARG_INT64(0));
      return pg_call([] { return CStringGetTextDatum("lost"); });
    case Verdict::kBadTransition:
      break;
  }
  const char *to_state =
      a.to_state ? pg_call([&] { return (const char *)TextDatumGetCString(a.to_state); }) : nullptr;
  throw InboxError(ERRCODE_CHECK_VIOLATION,
                   "invalid transition from " + quoted(a.from_state) + " to " + quoted(to_state) +
                       " for event " + std::to_string(PG_GETARG_INT64(0)),
                   "The event is not applied. Roll back and report it with inbox.fail: the next "
                   "claim holds it for a person (docs/ordering.md).");
}

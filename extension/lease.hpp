// Leases of events (queue.cpp): why a token does not (or no longer does)
// hold its event, shared by complete, complete_batch, fail and advance.
#pragma once

#include "postgres.hpp"

namespace pg_inbox {

enum class LeaseState { kMissingEvent, kNeverIssued, kLost, kAlreadyDone };

LeaseState classify_lease(bool exists, bool done_with_token, bool issued);

// The state of token args[1] for event args[0]. Call inside spi_call.
LeaseState lease_state(Datum *args);

// Raises for a missing event or a token never issued; the other states are
// answers, not errors.
void throw_if_bad_lease(LeaseState state, int64 id);

// Raises when argument arg (named name in the message) is NULL.
void require_arg(FunctionCallInfo fcinfo, int arg, const char *name);

}  // namespace pg_inbox

// Statements prepared once per backend and kept for its lifetime.
// Everything here calls Postgres: use it only inside pg_call().
#pragma once

#include "postgres.hpp"

namespace pg_inbox {

struct KeptPlan {
  const char *sql;
  int nargs;
  Oid argtypes[8];
  SPIPlanPtr plan;  // null until first use
  // Generic by default: our statements' best plan rarely depends on the
  // values, and re-planning costs more than running them (~330 vs ~50 us per
  // ingest). Custom where it does: a generic plan cannot see LIMIT $1.
  int cursor_options = CURSOR_OPT_GENERIC_PLAN;
};

// The prepared statement, prepared and kept on first use.
SPIPlanPtr kept_plan(KeptPlan &plan);

// Prepares plan on first use, then executes it. Returns the SPI result code.
int execute_kept(KeptPlan &plan, Datum *values, const char *nulls, bool read_only,
                 long max_rows);

// Column `column` (1-based) of row `row` of the last SPI result, copied into
// the caller's (pre-SPI_connect) memory context. Sets *isnull.
Datum result_value(uint64 row, int column, bool *isnull);

// An Interval of whole microseconds, palloc'd.
Datum interval_from_usecs(int64 usecs);

// Total length of an interval in microseconds (a month counts 30 days).
int64 interval_usecs(const Interval *interval);

}  // namespace pg_inbox

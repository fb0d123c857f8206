#include "spi.hpp"

namespace pg_inbox {

SPIPlanPtr kept_plan(KeptPlan &plan) {
  if (plan.plan == nullptr) {
    SPIPlanPtr prepared =
        SPI_prepare_cursor(plan.sql, plan.nargs, plan.argtypes, plan.cursor_options);
    if (prepared == nullptr)
      elog(ERROR, "pg_inbox: could not prepare statement: %s",
           SPI_result_code_string(SPI_result));
    if (SPI_keepplan(prepared) != 0) elog(ERROR, "pg_inbox: could not keep statement");
    plan.plan = prepared;
  }
  return plan.plan;
}

int execute_kept(KeptPlan &plan, Datum *values, const char *nulls, bool read_only,
                 long max_rows) {
  int rc = SPI_execute_plan(kept_plan(plan), values, nulls, read_only, max_rows);
  if (rc < 0) elog(ERROR, "pg_inbox: statement failed: %s", SPI_result_code_string(rc));
  return rc;
}

Datum result_value(uint64 row, int column, bool *isnull) {
  Datum value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
  if (*isnull) return (Datum)0;
  Form_pg_attribute attr = TupleDescAttr(SPI_tuptable->tupdesc, column - 1);
  return SPI_datumTransfer(value, attr->attbyval, attr->attlen);
}

Datum interval_from_usecs(int64 usecs) {
  auto *interval = static_cast<Interval *>(palloc0(sizeof(Interval)));
  interval->time = usecs;
  return PointerGetDatum(interval);
}

int64 interval_usecs(const Interval *interval) {
  // In double first: a month field of millions of years must not overflow.
  double usecs = static_cast<double>(interval->time) +
                 static_cast<double>(interval->day) * USECS_PER_DAY +
                 static_cast<double>(interval->month) * DAYS_PER_MONTH * USECS_PER_DAY;
  constexpr double limit = static_cast<double>(PG_INT64_MAX / 2);
  if (usecs > limit) return PG_INT64_MAX / 2;
  if (usecs < -limit) return -(PG_INT64_MAX / 2);
  return static_cast<int64>(usecs);
}

}  // namespace pg_inbox

#include "spi.hpp"

#include <cstring>

extern "C" {
#include "catalog/pg_class.h"
#include "utils/syscache.h"
}

namespace pg_inbox {

SPIPlanPtr kept_plan(KeptPlan &plan) {
  if (plan.plan == nullptr) {
    SPIPlanPtr prepared =
        SPI_prepare_cursor(plan.sql, plan.nargs, plan.argtypes, plan.cursor_options);
    if (prepared == nullptr)
      elog(ERROR, "pg_inbox: could not prepare statement: %s", SPI_result_code_string(SPI_result));
    if (SPI_keepplan(prepared) != 0) elog(ERROR, "pg_inbox: could not keep statement");
    plan.plan = prepared;
  }
  return plan.plan;
}

int execute_kept(KeptPlan &plan, Datum *values, const char *nulls, bool read_only, long max_rows) {
  int rc = SPI_execute_plan(kept_plan(plan), values, nulls, read_only, max_rows);
  if (rc < 0) elog(ERROR, "pg_inbox: statement failed: %s", SPI_result_code_string(rc));
  return rc;
}

namespace {

Oid events_table() {
  Oid schema = get_namespace_oid("inbox", true);
  return OidIsValid(schema) ? get_relname_relid("events", schema) : InvalidOid;
}

}  // namespace

bool events_has_column(const char *column) {
  Oid events = events_table();
  return OidIsValid(events) && get_attnum(events, column) != InvalidAttrNumber;
}

bool events_statistics_from_rows() {
  Oid events = events_table();
  AttrNumber processed_at = OidIsValid(events) ? get_attnum(events, "processed_at") : 0;
  if (processed_at <= 0 || !SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(events),
                                                  Int16GetDatum(processed_at), BoolGetDatum(false)))
    return false;
  HeapTuple row = SearchSysCache1(RELOID, ObjectIdGetDatum(events));
  if (!HeapTupleIsValid(row)) return false;
  bool counted_rows = reinterpret_cast<Form_pg_class>(GETSTRUCT(row))->reltuples > 0;
  ReleaseSysCache(row);
  return counted_rows;
}

namespace {

// The column as SPI holds it, in SPI's memory.
Datum column_at(uint64 row, int column, bool *isnull) {
  return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
}

}  // namespace

Datum result_value(uint64 row, int column, bool *isnull) {
  Datum value = column_at(row, column, isnull);
  if (*isnull) return (Datum)0;
  Form_pg_attribute attr = TupleDescAttr(SPI_tuptable->tupdesc, column - 1);
  return SPI_datumTransfer(value, attr->attbyval, attr->attlen);
}

int64 result_int64(uint64 row, int column, bool *isnull) {
  bool null;
  Datum value = column_at(row, column, &null);
  if (isnull) *isnull = null;
  return null ? 0 : DatumGetInt64(value);
}

bool result_bool(uint64 row, int column, bool *isnull) {
  bool null;
  Datum value = column_at(row, column, &null);
  if (isnull) *isnull = null;
  return !null && DatumGetBool(value);
}

pg_uuid_t result_uuid(uint64 row, int column) {
  bool null;
  Datum value = column_at(row, column, &null);
  pg_uuid_t uuid{};
  if (!null) uuid = *DatumGetUUIDP(value);
  return uuid;
}

char *result_text(uint64 row, int column) {
  bool null;
  Datum value = column_at(row, column, &null);
  if (null) return nullptr;
  char *string = TextDatumGetCString(value);
  size_t size = std::strlen(string) + 1;
  auto *copy = static_cast<char *>(SPI_palloc(size));
  std::memcpy(copy, string, size);
  return copy;
}

void raise_unknown_provider(Datum name) {
  static KeptPlan require_plan = {"SELECT inbox._require_provider($1)", 1, {TEXTOID}, nullptr};
  execute_kept(require_plan, &name, nullptr, true, 1);
  // Registered in the meantime: the statement that missed it still failed.
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                  errmsg("provider \"%s\" was not registered when the statement ran",
                         TextDatumGetCString(name))));
}

Datum jsonb_from_text(const std::string &json) {
  return pg_call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str())); });
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

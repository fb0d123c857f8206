// SQL entry points of the check evaluator: inbox.run_checks (sql/src/71_checks.sql)
// computes each check's value from the rollups and calls these for the band,
// the hysteresis step and latency percentiles. The math is checks_math.cpp;
// here only arrays cross the boundary, in palloc'd (trivially destructible)
// buffers, every Postgres call under pg_call.
#include "boundary.hpp"
#include "checks_math.hpp"

#include <cmath>

namespace {

using namespace pg_inbox;

constexpr int kMaxSamples = 100000;  // a week of minutes is 10080

// The elements of a one-dimensional array argument. NULL elements come out
// with their null flag set.
struct Elements {
  Datum *values;
  bool *nulls;
  int count;
};

Elements array_arg(FunctionCallInfo fcinfo, int arg, Oid type, int typlen, bool byval, char align) {
  return pg_call([&] {
    Elements e{nullptr, nullptr, 0};
    ArrayType *array = PG_GETARG_ARRAYTYPE_P(arg);
    if (ARR_NDIM(array) > 1)
      ereport(ERROR,
              (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR), errmsg("array must be one-dimensional")));
    deconstruct_array(array, type, typlen, byval, align, &e.values, &e.nulls, &e.count);
    return e;
  });
}

}  // namespace

// inbox._check_band(samples float8[], k float8, min_samples int) -> {lo, hi, median}
INBOX_SQL_FUNCTION(inbox_check_band) {
  Elements e = array_arg(fcinfo, 0, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
  double k = PG_GETARG_FLOAT8(1);
  int32 min_samples = PG_GETARG_INT32(2);
  if (e.count > kMaxSamples)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "at most 100000 samples per band");
  if (min_samples < 1)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "min_samples must be at least 1");
  double *samples =
      pg_call([&] { return static_cast<double *>(palloc0(sizeof(double) * (e.count + 1))); });
  for (int i = 0; i < e.count; ++i)
    samples[i] = e.nulls[i] ? std::nan("") : DatumGetFloat8(e.values[i]);
  checks::Band band{};
  if (!checks::learned_band(samples, static_cast<size_t>(e.count), k,
                            static_cast<size_t>(min_samples), &band))
    PG_RETURN_NULL();
  return pg_call([&] {
    Datum out[3] = {Float8GetDatum(band.lo), Float8GetDatum(band.hi), Float8GetDatum(band.median)};
    return PointerGetDatum(construct_array(out, 3, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
  });
}

// inbox._check_step(was_firing, recent bool[], ok_streak, fire_after, resolve_after)
//   -> {firing, ok_streak, started, resolved} (0/1 flags)
INBOX_SQL_FUNCTION(inbox_check_step) {
  bool was_firing = PG_GETARG_BOOL(0);
  Elements e = array_arg(fcinfo, 1, BOOLOID, 1, true, TYPALIGN_CHAR);
  int32 ok_streak = PG_GETARG_INT32(2);
  int32 fire_after = PG_GETARG_INT32(3);
  int32 resolve_after = PG_GETARG_INT32(4);
  if (e.count > 64)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "at most 64 recent evaluations");
  if (fire_after < 1 || resolve_after < 1)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "fire_after and resolve_after must be at least 1");
  bool recent[64] = {false};
  for (int i = 0; i < e.count; ++i) recent[i] = !e.nulls[i] && DatumGetBool(e.values[i]);
  checks::Transition t = checks::step(was_firing, recent, static_cast<size_t>(e.count),
                                      ok_streak < 0 ? 0 : ok_streak, fire_after, resolve_after);
  return pg_call([&] {
    Datum out[4] = {Int32GetDatum(t.firing ? 1 : 0), Int32GetDatum(t.ok_streak),
                    Int32GetDatum(t.started ? 1 : 0), Int32GetDatum(t.resolved ? 1 : 0)};
    return PointerGetDatum(construct_array(out, 4, INT4OID, 4, true, TYPALIGN_INT));
  });
}

// inbox._hist_percentile(hist int[], q float8) -> seconds, NULL when empty
INBOX_SQL_FUNCTION(inbox_hist_percentile) {
  Elements e = array_arg(fcinfo, 0, INT4OID, 4, true, TYPALIGN_INT);
  double q = PG_GETARG_FLOAT8(1);
  if (!(q > 0) || q > 1) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "q must be in (0, 1]");
  if (e.count > checks::kHistBuckets)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "a latency histogram has at most 120 buckets");
  int32_t counts[checks::kHistBuckets] = {0};
  for (int i = 0; i < e.count; ++i) counts[i] = e.nulls[i] ? 0 : DatumGetInt32(e.values[i]);
  double seconds = checks::hist_percentile(counts, static_cast<size_t>(e.count), q);
  if (seconds < 0) PG_RETURN_NULL();
  PG_RETURN_FLOAT8(seconds);
}

// inbox._hist_bucket(seconds float8) -> 1..120
INBOX_SQL_FUNCTION(inbox_hist_bucket) { PG_RETURN_INT32(checks::hist_bucket(PG_GETARG_FLOAT8(0))); }

// inbox._hist_add(a int[], b int[]) -> bucket-wise sum; a NULL side is empty.
// The rollups add a histogram per minute and the checks sum windows of
// them: in SQL this was the largest cost of an evaluation.
INBOX_SQL_FUNCTION(inbox_hist_add) {
  bool a_null = PG_ARGISNULL(0), b_null = PG_ARGISNULL(1);
  if (a_null && b_null) PG_RETURN_NULL();
  if (a_null) return PG_GETARG_DATUM(1);
  if (b_null) return PG_GETARG_DATUM(0);
  Elements a = array_arg(fcinfo, 0, INT4OID, 4, true, TYPALIGN_INT);
  Elements b = array_arg(fcinfo, 1, INT4OID, 4, true, TYPALIGN_INT);
  int n = a.count > b.count ? a.count : b.count;
  if (n > checks::kHistBuckets)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "a latency histogram has at most 120 buckets");
  Datum sum[checks::kHistBuckets];
  for (int i = 0; i < n; ++i) {
    int64 x = static_cast<int64>(i < a.count && !a.nulls[i] ? DatumGetInt32(a.values[i]) : 0) +
              static_cast<int64>(i < b.count && !b.nulls[i] ? DatumGetInt32(b.values[i]) : 0);
    if (x > PG_INT32_MAX || x < PG_INT32_MIN)
      throw InboxError(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, "histogram bucket out of range");
    sum[i] = Int32GetDatum(static_cast<int32>(x));
  }
  return pg_call(
      [&] { return PointerGetDatum(construct_array(sum, n, INT4OID, 4, true, TYPALIGN_INT)); });
}

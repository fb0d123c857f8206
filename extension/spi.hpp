// SPI for the extension: one scope helper (spi_call) that opens and closes
// the connection, statements prepared once per backend and kept, and one
// reader for the columns of the last result.
#pragma once

#include <exception>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "boundary.hpp"
#include "postgres.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/resowner.h"
}

namespace pg_inbox {

// Runs fn under pg_call with an SPI connection open around it: the one
// place SPI_connect and SPI_finish are written. When fn raises, the
// connection is left to the (sub)transaction's abort, which closes it.
// fn runs in SPI's memory: what it returns must be a plain value or live in
// the caller's context (result_value, result_text, SPI_palloc).
template <typename Fn>
auto spi_call(Fn &&fn) -> decltype(fn()) {
  return pg_call([&] {
    SPI_connect();
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      SPI_finish();
    } else {
      auto result = fn();
      SPI_finish();
      return result;
    }
  });
}

struct KeptPlan {
  const char *sql;
  int nargs;
  Oid argtypes[16];
  SPIPlanPtr plan;  // null until first use
  // Generic by default: our statements' best plan rarely depends on the
  // values, and re-planning costs more than running them (~330 vs ~50 us per
  // ingest). Custom where it does: a generic plan cannot see LIMIT $1.
  int cursor_options = CURSOR_OPT_GENERIC_PLAN;
};

// The prepared statement, prepared and kept on first use.
SPIPlanPtr kept_plan(KeptPlan &plan);

// Prepares plan on first use, then executes it. Returns the SPI result code.
int execute_kept(KeptPlan &plan, Datum *values, const char *nulls, bool read_only, long max_rows);

struct Setting {
  const char *name;
  const char *value;
};

// Runs fn with settings changed for fn's statements only, as a function's
// SET clause does. An error raised in fn leaves them to the
// (sub)transaction's abort, which restores them.
template <typename Fn>
void with_settings(std::initializer_list<Setting> settings, Fn &&fn) {
  int nest_level = NewGUCNestLevel();
  for (const Setting &setting : settings)
    set_config_option(setting.name, setting.value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                      true, 0, false);
  fn();
  AtEOXact_GUC(true, nest_level);
}

// Runs fn in a subtransaction, as a PL/pgSQL block with an EXCEPTION clause
// does. Returns nullptr when fn finished (its work stays); when fn raised,
// its work is rolled back and its error comes back, copied into the
// caller's memory context, for the caller to handle or raise again. fn
// calls Postgres and holds no non-trivial C++ object (it may be jumped out
// of); a C++ exception it throws rolls the subtransaction back and is
// rethrown. Call inside spi_call: the connection outlives the subtransaction.
template <typename Fn>
ErrorData *in_subtransaction(Fn &&fn) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  auto leave = [&](bool commit) {
    pg_call([&] {
      commit ? ReleaseCurrentSubTransaction() : RollbackAndReleaseCurrentSubTransaction();
    });
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
  };
  pg_call([] { BeginInternalSubTransaction(nullptr); });
  MemoryContextSwitchTo(context);
  // pg_call copies a Postgres error into `context` and flushes it; the
  // rollback comes after, as in PL/pgSQL's exception blocks.
  ErrorData *edata = nullptr;
  std::exception_ptr thrown;
  try {
    pg_call(fn);
  } catch (const PostgresError &e) {
    edata = e.edata();
  } catch (...) {
    thrown = std::current_exception();
  }
  leave(edata == nullptr && !thrown);
  if (thrown) std::rethrow_exception(thrown);
  return edata;
}

// Column `column` (1-based) of row `row` of the last SPI result. Call inside
// spi_call. result_value and result_text copy into the caller's (pre-SPI)
// memory context; the others return plain values, 0 or false for NULL.
Datum result_value(uint64 row, int column, bool *isnull);
int64 result_int64(uint64 row, int column, bool *isnull = nullptr);
bool result_bool(uint64 row, int column, bool *isnull = nullptr);
char *result_text(uint64 row, int column);      // nullptr for NULL
pg_uuid_t result_uuid(uint64 row, int column);  // zeros for NULL

// Raises the error of inbox._require_provider (the one definition of
// "unknown provider") for a name the caller found missing. Call inside
// spi_call.
[[noreturn]] void raise_unknown_provider(Datum name);

// Whether inbox.events has the column. The library of a release is loaded
// before ALTER EXTENSION UPDATE adds its columns, and must keep serving the
// older schema until then. A syscache lookup: cheap enough per call, and
// never stale. Call inside pg_call (or spi_call).
bool events_has_column(const char *column);

// Whether the planner's statistics of inbox.events were taken from rows:
// pg_statistic holds its processed_at, and pg_class counted rows (0 after
// the table was emptied, whatever its size since). Otherwise the planner
// guesses, or believes the table empty. Call inside pg_call (or spi_call).
bool events_statistics_from_rows();

// The jsonb of a JSON text (from JsonObject), palloc'd. Calls pg_call itself.
Datum jsonb_from_text(const std::string &json);

// An Interval of whole microseconds, palloc'd.
Datum interval_from_usecs(int64 usecs);

// Total length of an interval in microseconds (a month counts 30 days).
int64 interval_usecs(const Interval *interval);

}  // namespace pg_inbox

// The C++/Postgres boundary, used by every SQL-callable function.
//
// Two rules make C++ safe inside a backend:
//   1. No C++ exception may escape into Postgres (it would abort the backend).
//   2. No ereport(ERROR) may longjmp over a live C++ object (its destructor
//      would never run).
// sql_function() enforces rule 1 at the edge; pg_call() enforces rule 2 by
// turning a Postgres error into a C++ exception, so C++ frames unwind
// normally, and the error is raised again only once they are all gone.
#pragma once

#include "postgres.hpp"

#include <exception>
#include <string>
#include <type_traits>
#include <utility>

namespace pg_inbox {

// A Postgres error caught by pg_call(), travelling through C++ frames.
class PostgresError : public std::exception {
 public:
  explicit PostgresError(ErrorData *edata) : edata_(edata) {}
  ErrorData *edata() const noexcept { return edata_; }
  const char *what() const noexcept override {
    return edata_ && edata_->message ? edata_->message : "postgres error";
  }

 private:
  ErrorData *edata_;  // palloc'd in the caller's memory context
};

// An error pg_inbox raises itself: bad input, a refused state change.
class InboxError : public std::exception {
 public:
  InboxError(int sqlstate, std::string message, std::string detail = {})
      : sqlstate_(sqlstate), message_(std::move(message)), detail_(std::move(detail)) {}
  int sqlstate() const noexcept { return sqlstate_; }
  const char *what() const noexcept override { return message_.c_str(); }
  const std::string &detail() const noexcept { return detail_; }

 private:
  int sqlstate_;
  std::string message_;
  std::string detail_;
};

// What sql_function() raises once the C++ scopes have closed. Trivially
// destructible on purpose: it is alive when ereport longjmps.
struct PendingError {
  ErrorData *edata = nullptr;
  int sqlstate = 0;
  char message[512] = {0};
  char detail[512] = {0};
};
static_assert(std::is_trivially_destructible_v<PendingError>);

[[noreturn]] void raise_pending(const PendingError &pending);
void copy_message(char (&to)[512], const char *from) noexcept;

// Runs fn, which calls Postgres and holds no non-trivial C++ object itself,
// under PG_TRY. A Postgres error comes out as PostgresError. A C++ exception
// fn throws is caught inside PG_TRY and rethrown after PG_END_TRY: unwinding
// straight through PG_TRY would leave PG_exception_stack pointing at this
// dead frame, and the next Postgres error would jump into it.
template <typename Fn>
auto pg_call(Fn &&fn) -> decltype(fn()) {
  using Result = decltype(fn());
  if constexpr (std::is_void_v<Result>) {
    pg_call([&] {
      fn();
      return true;
    });
  } else {
    static_assert(std::is_trivially_copyable_v<Result>, "pg_call returns plain values");
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData *volatile edata = nullptr;
    Result result{};
    Result *volatile out = &result;  // in memory, so longjmp cannot clobber it
    std::exception_ptr thrown;
    std::exception_ptr *volatile thrown_at = &thrown;
    PG_TRY();
    {
      try {
        *out = fn();
      } catch (...) {
        *thrown_at = std::current_exception();
      }
    }
    PG_CATCH();
    {
      MemoryContextSwitchTo(caller_context);
      edata = CopyErrorData();
      FlushErrorState();
    }
    PG_END_TRY();
    if (edata) throw PostgresError(edata);
    if (thrown) std::rethrow_exception(thrown);
    return result;
  }
}

// The edge of every SQL-callable function: runs body and turns whatever it
// throws into a Postgres error raised after body's frames are gone.
template <typename Body>
Datum sql_function(Body &&body) noexcept {
  PendingError pending;
  try {
    return body();
  } catch (const PostgresError &e) {
    pending.edata = e.edata();
  } catch (const InboxError &e) {
    pending.sqlstate = e.sqlstate();
    copy_message(pending.message, e.what());
    copy_message(pending.detail, e.detail().c_str());
  } catch (const std::bad_alloc &) {
    pending.sqlstate = ERRCODE_OUT_OF_MEMORY;
    copy_message(pending.message, "out of memory in pg_inbox");
  } catch (const std::exception &e) {
    pending.sqlstate = ERRCODE_INTERNAL_ERROR;
    copy_message(pending.message, e.what());
  } catch (...) {
    pending.sqlstate = ERRCODE_INTERNAL_ERROR;
    copy_message(pending.message, "unknown C++ exception in pg_inbox");
  }
  raise_pending(pending);
}

}  // namespace pg_inbox

// Declares an SQL-callable C function whose body runs inside sql_function().
#define INBOX_SQL_FUNCTION(name)                                             \
  static Datum name##_impl(FunctionCallInfo fcinfo);                         \
  extern "C" {                                                               \
  PG_FUNCTION_INFO_V1(name);                                                 \
  Datum name(PG_FUNCTION_ARGS) {                                             \
    return pg_inbox::sql_function([fcinfo] { return name##_impl(fcinfo); }); \
  }                                                                          \
  }                                                                          \
  static Datum name##_impl(FunctionCallInfo fcinfo)

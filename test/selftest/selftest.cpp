// C entry points for the boundary test (test/pgtap/81_boundary.sql), built
// as their own test-only module (pg_inbox_selftest.so, see the Makefile
// here): the production library carries no test code.
#include <stdexcept>

#include "boundary.hpp"
#include "spi.hpp"

extern "C" {
PG_MODULE_MAGIC;
}

namespace {

int unwound_guards = 0;

// Counts its own destruction, to show C++ scopes unwind when Postgres errors.
struct UnwindProbe {
  ~UnwindProbe() { ++unwound_guards; }
};

}  // namespace

using namespace pg_inbox;

// SPI raises (division by zero) under pg_call while a C++ object is alive.
INBOX_SQL_FUNCTION(inbox_selftest_spi_error) {
  UnwindProbe probe;
  spi_call([] { SPI_execute("SELECT 1 / 0", true, 1); });
  return (Datum)0;
}

// A plain C++ exception, as a library would throw it.
INBOX_SQL_FUNCTION(inbox_selftest_cpp_exception) {
  UnwindProbe probe;
  throw std::runtime_error("selftest: exception from C++");
}

// A C++ exception thrown inside pg_call, under PG_TRY: pg_call must leave
// Postgres' error stack as it found it, or the next error jumps into a dead
// frame and takes the backend down.
INBOX_SQL_FUNCTION(inbox_selftest_throw_in_pg_call) {
  UnwindProbe probe;
  pg_call([] { throw std::runtime_error("selftest: exception under PG_TRY"); });
  return (Datum)0;
}

INBOX_SQL_FUNCTION(inbox_selftest_unwound_guards) { return Int32GetDatum(unwound_guards); }

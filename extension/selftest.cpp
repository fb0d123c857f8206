// C entry points for the boundary test (test/pgtap/81_boundary.sql). Not in
// the install script: the test binds them to pg_temp functions itself.
#include <stdexcept>

#include "boundary.hpp"
#include "spi.hpp"

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
  pg_call([] {
    SPI_connect();
    SPI_execute("SELECT 1 / 0", true, 1);
    SPI_finish();
  });
  return (Datum)0;
}

// A plain C++ exception, as a library would throw it.
INBOX_SQL_FUNCTION(inbox_selftest_cpp_exception) {
  UnwindProbe probe;
  throw std::runtime_error("selftest: exception from C++");
}

INBOX_SQL_FUNCTION(inbox_selftest_unwound_guards) { return Int32GetDatum(unwound_guards); }

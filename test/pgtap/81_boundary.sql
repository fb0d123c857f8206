-- The C++ boundary: a Postgres error raised under C++ frames, and a C++
-- exception, both become clean SQL errors; the backend survives and the C++
-- destructors ran. A C++ exception thrown inside pg_call (under PG_TRY)
-- leaves Postgres' error stack intact, so the next error is clean too.
-- The entry points live in the test-only module pg_inbox_selftest
-- (test/selftest/), which scripts/test.sh installs.
BEGIN;
SELECT plan(10);

CREATE FUNCTION pg_temp.spi_error() RETURNS void
  AS 'pg_inbox_selftest', 'inbox_selftest_spi_error' LANGUAGE C;
CREATE FUNCTION pg_temp.cpp_exception() RETURNS void
  AS 'pg_inbox_selftest', 'inbox_selftest_cpp_exception' LANGUAGE C;
CREATE FUNCTION pg_temp.unwound_guards() RETURNS int
  AS 'pg_inbox_selftest', 'inbox_selftest_unwound_guards' LANGUAGE C;
CREATE FUNCTION pg_temp.throw_in_pg_call() RETURNS void
  AS 'pg_inbox_selftest', 'inbox_selftest_throw_in_pg_call' LANGUAGE C;
CREATE TEMP TABLE backend AS SELECT pg_backend_pid() AS pid, pg_temp.unwound_guards() AS guards;

SELECT throws_ok('SELECT pg_temp.spi_error()', '22012', 'division by zero',
  'an SPI error inside C++ keeps its SQLSTATE and message');
SELECT is(pg_temp.unwound_guards(), (SELECT guards + 1 FROM backend),
  'the C++ object alive when SPI raised was destroyed');
SELECT throws_ok('SELECT pg_temp.cpp_exception()', 'XX000', 'selftest: exception from C++',
  'a C++ exception becomes an internal_error');
SELECT is(pg_temp.unwound_guards(), (SELECT guards + 2 FROM backend), 'and its scope unwound too');
SELECT is(pg_backend_pid(), (SELECT pid FROM backend), 'the same backend is still serving');

SELECT throws_ok('SELECT pg_temp.throw_in_pg_call()', 'XX000', 'selftest: exception under PG_TRY',
  'a C++ exception thrown inside pg_call becomes an internal_error');
SELECT throws_ok('SELECT pg_temp.spi_error()', '22012', 'division by zero',
  'the next Postgres error after it is raised cleanly (the error stack was restored)');
SELECT is(pg_backend_pid(), (SELECT pid FROM backend), 'and the backend survived both');

-- Caught by PL/pgSQL: the subtransaction cleans up SPI and work goes on.
DO $$
BEGIN
  PERFORM pg_temp.spi_error();
EXCEPTION WHEN division_by_zero THEN
  PERFORM inbox.register_provider('after_error');
END
$$;
SELECT ok(EXISTS (SELECT 1 FROM inbox.providers WHERE name = 'after_error'),
  'a caught error leaves the session usable for SPI again');
SELECT is(inbox.ingest('after_error', 'x', '{}'), 'inserted', 'and the kept plans still work');

SELECT * FROM finish();
ROLLBACK;

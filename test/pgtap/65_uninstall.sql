-- DROP EXTENSION pg_inbox (or DROP SCHEMA inbox CASCADE) removes the pg_cron
-- jobs inbox.schedule() installed; other drops, and drops that fail, do not.
BEGIN;
SELECT plan(9);

CREATE FUNCTION pg_temp.inbox_jobs() RETURNS int LANGUAGE sql AS
  $$ SELECT count(*)::int FROM cron.job WHERE jobname LIKE 'pg\_inbox:%' $$;

SELECT has_function('inbox', '_unschedule_on_drop', ARRAY[]::text[], 'the drop guard exists');
SELECT throws_ok($$SELECT inbox._unschedule_on_drop()$$, '39P01',
                 'inbox._unschedule_on_drop() runs only as an event trigger',
                 'the drop guard cannot be called as a function');
SELECT is((SELECT evtevent || ' ' || array_to_string(evttags, ',') FROM pg_event_trigger
            WHERE evtname = 'pg_inbox_unschedule_on_drop'),
          'ddl_command_start DROP EXTENSION,DROP SCHEMA', 'it runs before DROP EXTENSION and DROP SCHEMA');

SELECT inbox.schedule();
CREATE EXTENSION citext;
DROP EXTENSION citext;
SELECT is(pg_temp.inbox_jobs(), 6, 'dropping another extension keeps the jobs');
CREATE SCHEMA inbox_not_ours;
DROP SCHEMA inbox_not_ours;
SELECT is(pg_temp.inbox_jobs(), 6, 'dropping another schema keeps the jobs');

-- A drop that fails (an object of the user's depends on the extension) rolls back with it.
CREATE VIEW public.my_open_events AS SELECT id FROM inbox.events;
SELECT throws_ok($$DROP EXTENSION pg_inbox$$, '2BP01', NULL, 'a dependent view stops the drop');
SELECT is(pg_temp.inbox_jobs(), 6, 'a failed drop keeps the jobs');
DROP VIEW public.my_open_events;

SAVEPOINT before_drop;
DROP EXTENSION IF EXISTS no_such_extension, pg_inbox;
SELECT is(pg_temp.inbox_jobs(), 0, 'DROP EXTENSION pg_inbox, among others, removes the jobs');
ROLLBACK TO before_drop;

DROP SCHEMA inbox CASCADE;
SELECT is(pg_temp.inbox_jobs(), 0, 'DROP SCHEMA inbox CASCADE removes the jobs');

SELECT * FROM finish();
ROLLBACK;

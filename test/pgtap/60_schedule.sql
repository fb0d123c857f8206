-- Scheduling: pg_cron jobs installed idempotently, each job at most once per
-- window, and a clear error when pg_cron is missing.
BEGIN;
SELECT plan(34);

SELECT has_function('inbox', 'schedule', ARRAY['interval', 'interval', 'interval', 'interval', 'interval', 'interval'], 'inbox.schedule exists');
SELECT has_function('inbox', 'unschedule', ARRAY[]::text[], 'inbox.unschedule exists');
SELECT has_function('inbox', 'run_job', ARRAY['text', 'interval'], 'inbox.run_job exists');

-- Schedules as cron expressions.
SELECT is(inbox._cron_expression('1 minute'), '* * * * *', 'every minute');
SELECT is(inbox._cron_expression('5 minutes'), '*/5 * * * *', 'every 5 minutes');
SELECT is(inbox._cron_expression('2 hours'), '0 */2 * * *', 'every 2 hours');
SELECT is(inbox._cron_expression('1 day'), '0 0 * * *', 'every day');
SELECT throws_ok($$SELECT inbox.schedule('7 minutes')$$, '22023',
                 'interval 00:07:00 does not divide an hour or a day evenly', 'schedule: 7 minutes');
SELECT throws_ok($$SELECT inbox.schedule('90 seconds')$$, '22023',
                 'interval 00:01:30 is not a whole number of minutes', 'schedule: 90 seconds');
SELECT throws_ok($$SELECT inbox.schedule(NULL)$$, '22004', NULL, 'schedule: NULL interval');
SELECT throws_ok($$SELECT inbox.schedule('often')$$, '22007', NULL, 'schedule: not an interval');
SELECT throws_ok($$SELECT inbox.schedule(purge_every => '7 minutes')$$, '22023',
                 'interval 00:07:00 does not divide an hour or a day evenly', 'schedule: purge_every checked too');

-- Installing twice leaves one job per name, with the latest schedule.
SELECT is(jsonb_array_length(inbox.schedule()), 6, 'schedule installs six jobs');
SELECT lives_ok($$SELECT inbox.schedule('2 minutes', '10 minutes')$$, 'and runs again');
SELECT is(ARRAY(SELECT jobname || ' ' || schedule FROM cron.job WHERE jobname LIKE 'pg\_inbox:%' ORDER BY 1),
          ARRAY['pg_inbox:checks * * * * *', 'pg_inbox:purge */5 * * * *', 'pg_inbox:reconcile */2 * * * *',
                'pg_inbox:refresh * * * * *', 'pg_inbox:scan_gaps */10 * * * *', 'pg_inbox:seal_log */5 * * * *'],
          'one job each, latest schedule');
SELECT is((SELECT command FROM cron.job WHERE jobname = 'pg_inbox:reconcile'),
          'SELECT inbox.run_job(''reconcile'', ''00:02:00'')', 'the job calls run_job with its window');
SELECT is((SELECT command FROM cron.job WHERE jobname = 'pg_inbox:purge'),
          'CALL inbox.purge_all(max_duration => ''00:04:00'')',
          'the purge job drains in short transactions for 4/5 of its interval');
SELECT is(inbox.unschedule(), 6, 'unschedule removes all six');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname LIKE 'pg\_inbox:%')::int, 0, 'no job left');
SELECT is(inbox.unschedule(), 0, 'unschedule again removes nothing');

-- run_job: bad input, then once per window.
SELECT throws_ok($$SELECT inbox.run_job('vacuum', '1 minute')$$, '22023', 'unknown job ''vacuum''', 'run_job: unknown job');
SELECT throws_ok($$SELECT inbox.run_job(NULL, '1 minute')$$, '22023', 'unknown job NULL', 'run_job: NULL job');
SELECT throws_ok($$SELECT inbox.run_job('reconcile', '0 seconds')$$, '22023',
                 'every must be between 1 second and 7 days', 'run_job: zero window');
SELECT throws_ok($$SELECT inbox.run_job('reconcile', '8 days')$$, '22023', NULL, 'run_job: window over 7 days');
SELECT ok((SELECT inbox.run_job('reconcile', '1 hour') -> 'result' ? 'run_id'), 'first run in the window runs');
SELECT is((SELECT inbox.run_job('reconcile', '1 hour') ->> 'skipped'), 'window already claimed',
          'a second run in the same window is skipped');
SELECT is((SELECT count(*) FROM inbox.reconcile_runs WHERE trigger = 'schedule')::int, 1, 'one scheduled pass');
SELECT ok((SELECT inbox.run_job('scan_gaps', '1 hour') -> 'result' ? 'providers'), 'scan_gaps job runs');
SELECT inbox.register_provider('sealed');
CREATE TEMP TABLE sealed AS SELECT inbox.ingest('sealed', 'evt_1', '{}'),
                                   inbox.run_job('seal_log', '1 hour') -> 'result' ->> 'seal' AS seal;
SELECT is((SELECT seal::bigint FROM sealed), (SELECT max(id) FROM inbox.log_seals),
          'seal_log job seals the delivery log');
SELECT is((SELECT inbox.run_job('seal_log', '1 hour') ->> 'skipped'), 'window already claimed',
          'seal_log runs once per window');
SELECT ok((SELECT inbox.run_job('purge', '1 hour') -> 'result' ? 'rows_deleted'), 'purge job runs one batch');

-- Without pg_cron: a clear error; everything else still works by hand.
DROP EXTENSION pg_cron;
SELECT throws_ok($$SELECT inbox.schedule()$$, '55000',
                 'inbox.schedule() needs pg_cron: pg_cron is loaded but not created in this database: run CREATE EXTENSION pg_cron',
                 'schedule without pg_cron says what is missing');
SET LOCAL client_min_messages = warning;
SELECT is(inbox.unschedule(), 0, 'unschedule without pg_cron removes nothing');
SELECT ok((SELECT inbox.run_job('reconcile', '1 minute') ? 'job'), 'run_job works without pg_cron');

SELECT * FROM finish();
ROLLBACK;

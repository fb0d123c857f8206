-- Hysteresis in run_checks: with the defaults (fire after 2 of the last 3
-- evaluations out of range, resolve after 3 in range) a single noisy bucket
-- neither fires nor flaps; an anomaly row covers the episode; the check that
-- starts firing runs reconcile('anomaly:<check>') once.
BEGIN;
SELECT plan(22);

SELECT inbox.register_provider('h');
-- The backlog gauge, minute by minute: one noisy minute, then a real rise.
INSERT INTO inbox.stats_minute (provider, minute, backlog)
SELECT 'h', timestamptz '2026-01-05 12:00:00+00' + i * interval '1 minute', b
  FROM unnest(ARRAY[5, 20000, 5, 5, 20000, 30000, 25000, 5, 5, 5, 5]) WITH ORDINALITY x(b, i);

CREATE FUNCTION pg_temp.at_minute(i int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT inbox.run_checks(timestamptz '2026-01-05 12:00:00+00' + i * interval '1 minute')
$$;
CREATE FUNCTION pg_temp.backlog_state() RETURNS text LANGUAGE sql AS $$
    SELECT state FROM inbox.check_state WHERE check_name = 'backlog_size' AND provider = 'h'
$$;

SELECT pg_temp.at_minute(1);
SELECT is(pg_temp.backlog_state(), 'ok', '5 waiting: ok');
SELECT pg_temp.at_minute(2);
SELECT is(pg_temp.backlog_state(), 'ok', 'one noisy bucket does not fire');
SELECT pg_temp.at_minute(3);
SELECT pg_temp.at_minute(4);
SELECT is(pg_temp.backlog_state(), 'ok', 'and leaves no trace');
SELECT is((SELECT count(*)::int FROM inbox.anomalies), 0, 'no anomaly');
SELECT is(pg_temp.at_minute(5) -> 'started', '[]', 'first bucket of the rise: not yet');
SELECT is(pg_temp.at_minute(6) -> 'started', '["backlog_size"]', 'second bucket out of range: it starts firing');
SELECT is(pg_temp.backlog_state(), 'firing', 'firing');
SELECT is((SELECT trigger FROM inbox.reconcile_runs ORDER BY id DESC LIMIT 1), 'anomaly:backlog_size',
          'a reconciliation pass ran with the check as its trigger');
SELECT is((SELECT reconcile_run_id FROM inbox.anomalies), (SELECT max(id) FROM inbox.reconcile_runs),
          'the anomaly records the pass it triggered');
SELECT is((SELECT first_value FROM inbox.anomalies), 30000::float8, 'the anomaly has the value it fired on');
SELECT is((SELECT range_hi FROM inbox.anomalies), 10000::float8, 'and the range at the time');
SELECT is(pg_temp.at_minute(7) -> 'started', '[]', 'still firing: no second start, no second pass');
SELECT is((SELECT count(*)::int FROM inbox.reconcile_runs), 1, 'one pass in all');
SELECT pg_temp.at_minute(8);
SELECT pg_temp.at_minute(9);
SELECT is(pg_temp.backlog_state(), 'firing', 'two buckets back in range: still firing (K=3)');
SELECT is(pg_temp.at_minute(10) -> 'resolved', '["backlog_size"]', 'the third resolves it');
SELECT is(pg_temp.backlog_state(), 'ok', 'ok again');
SELECT is((SELECT resolved_at FROM inbox.anomalies), timestamptz '2026-01-05 12:10:00+00', 'the anomaly is resolved');
SELECT is((SELECT worst_value FROM inbox.anomalies), 30000::float8, 'with its worst value');
SELECT is((SELECT last_seen_at FROM inbox.anomalies), timestamptz '2026-01-05 12:10:00+00', 'and last seen');
SELECT is((SELECT count(*)::int FROM inbox.check_results WHERE check_name = 'backlog_size' AND provider = 'h'), 10,
          'every evaluation is in the history');

-- Per-provider M/N/K: fire at once.
SELECT inbox.configure_check('backlog_size', 'h', fire_after => 1, window_size => 1);
UPDATE inbox.stats_minute SET backlog = 20000 WHERE provider = 'h' AND minute = '2026-01-05 12:11:00+00';
SELECT is(pg_temp.at_minute(11) -> 'started', '["backlog_size"]', 'fire_after 1 fires on the first bucket');
SELECT is((SELECT count(*)::int FROM inbox.anomalies), 2, 'a second episode, a second anomaly');

SELECT * FROM finish();
ROLLBACK;

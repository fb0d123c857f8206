-- inbox.health: one row per provider, ok / degraded / losing, with the
-- reasons; health_summary() as one JSON document; inbox_monitor reads these
-- and nothing else; the scheduled jobs refresh and checks.
BEGIN;
SELECT plan(31);

SELECT inbox.register_provider(p) FROM unnest(ARRAY['calm', 'slow', 'gappy', 'deadly', 'holding', 'lossy']) p;
-- Fresh statistics: every provider healthy but for its own trouble.
INSERT INTO inbox.stats_state VALUES (true, now(), 0, 0);
INSERT INTO inbox.stats_minute (provider, minute, backlog, held, open_gaps, gaps_past_grace, oldest_gap_s, oldest_pending_s, dead)
SELECT p, date_trunc('minute', now()), 3,
       (p = 'holding')::int, CASE WHEN p = 'gappy' THEN 2 ELSE 0 END, (p = 'gappy')::int,
       CASE WHEN p = 'gappy' THEN 7200 END, 12, (p = 'deadly')::int
  FROM unnest(ARRAY['calm', 'slow', 'gappy', 'deadly', 'holding', 'lossy']) p;
INSERT INTO inbox.anomalies (check_name, provider, severity, data_loss, first_seen_at, last_seen_at, last_value)
VALUES ('latency_p95', 'slow', 'P2', false, now() - interval '5 minutes', now(), 400),
       ('orphan_references', 'lossy', 'P1', true, now() - interval '5 minutes', now(), 3),
       ('latency_p95', 'calm', 'P2', false, now() - interval '2 hours', now() - interval '1 hour', 400);
UPDATE inbox.anomalies SET resolved_at = now() - interval '1 hour' WHERE provider = 'calm';

CREATE FUNCTION pg_temp.verdict(p text) RETURNS text LANGUAGE sql AS $$
    SELECT verdict FROM inbox.health WHERE provider = p
$$;
SELECT is(pg_temp.verdict('calm'), 'ok', 'calm: ok (a resolved anomaly is history)');
SELECT is(pg_temp.verdict('slow'), 'degraded', 'a slowness check firing: degraded');
SELECT is(pg_temp.verdict('gappy'), 'losing', 'a gap past its grace period: losing');
SELECT is(pg_temp.verdict('deadly'), 'losing', 'a dead event: losing');
SELECT is(pg_temp.verdict('holding'), 'losing', 'an event held for a person: losing');
SELECT is(pg_temp.verdict('lossy'), 'losing', 'a data-loss check firing: losing');
SELECT is((SELECT reasons FROM inbox.health WHERE provider = 'gappy'), ARRAY['1 gaps past their grace period'], 'the reason');
SELECT is((SELECT firing_checks FROM inbox.health WHERE provider = 'slow'), ARRAY['latency_p95'], 'the firing checks');
SELECT is((SELECT oldest_gap_age FROM inbox.health WHERE provider = 'gappy'), interval '2 hours', 'the oldest gap');
SELECT is((SELECT backlog FROM inbox.health WHERE provider = 'calm'), 3, 'the backlog');
SELECT is((SELECT count(*)::int FROM inbox.health), 6, 'one row per provider');

-- A global check firing degrades every provider; stale statistics too.
INSERT INTO inbox.anomalies (check_name, provider, severity, data_loss, first_seen_at, last_seen_at)
VALUES ('reconcile_stale', '*', 'P2', false, now(), now());
SELECT is(pg_temp.verdict('calm'), 'degraded', 'a global check firing degrades every provider');
SELECT is((SELECT firing_checks FROM inbox.health WHERE provider = 'calm'), ARRAY['reconcile_stale'], 'and shows there');
DELETE FROM inbox.anomalies WHERE provider = '*';
UPDATE inbox.stats_state SET refreshed_at = now() - interval '10 minutes';
SELECT is(pg_temp.verdict('calm'), 'degraded', 'statistics older than 3 minutes: degraded');
SELECT is((SELECT reasons FROM inbox.health WHERE provider = 'calm'), ARRAY['statistics are stale'], 'so it says');
UPDATE inbox.stats_state SET refreshed_at = now();

-- The summary.
SELECT is(inbox.health_summary() ->> 'verdict', 'losing', 'the summary verdict is the worst');
SELECT is(jsonb_array_length(inbox.health_summary() -> 'providers'), 6, 'the summary has every provider');
SELECT is(inbox.health_summary() #>> '{firing,0,check}', 'orphan_references', 'the firing checks, most severe first');
SELECT is(inbox.health_summary() #>> '{firing,0,data_loss}', 'true', 'with their data-loss flag');

-- inbox_monitor: the verdict and nothing else.
SELECT has_role('inbox_monitor');
SET LOCAL ROLE inbox_monitor;
SELECT is((SELECT count(*)::int FROM inbox.health), 6, 'monitor reads inbox.health');
SELECT is(inbox.health_summary() ->> 'verdict', 'losing', 'monitor calls health_summary');
SELECT throws_ok($$SELECT * FROM inbox.events$$, '42501', NULL, 'monitor cannot read events');
SELECT throws_ok($$SELECT * FROM inbox.anomalies$$, '42501', NULL, 'monitor cannot read the tables behind the view');
SELECT throws_ok($$SELECT inbox.run_checks()$$, '42501', NULL, 'monitor cannot run the checks');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', enabled => false)$$, '42501', NULL, 'monitor cannot change a check');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[]')$$, '42501', NULL, 'monitor cannot report counters');
RESET ROLE;
SET LOCAL ROLE inbox_receiver;
SELECT is(inbox.report_receiver_stats('[{"provider": "calm", "requests_2xx": 1}]'), 1, 'the receiver reports its counters');
SELECT throws_ok($$SELECT * FROM inbox.health$$, '42501', NULL, 'the receiver cannot read the verdict');
RESET ROLE;

-- The scheduled jobs.
SELECT ok(inbox.run_job('refresh', '1 hour') -> 'result' ? 'candidates', 'run_job refresh runs a refresh');
SELECT ok(inbox.run_job('checks', '1 hour') -> 'result' ? 'evaluated', 'run_job checks runs the checks');

SELECT * FROM finish();
ROLLBACK;

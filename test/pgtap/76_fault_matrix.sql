-- The fault matrix. A synthetic steady week of rollups (diurnal swing and
-- noise, timestamps in the past) for eight providers and the watcher; every
-- check evaluated with its default settings. No check may fire on the steady
-- week. Then each fault, on its own provider (or the watcher), must fire its
-- expected checks and only those within two evaluations, and every anomaly
-- must resolve once the fault is over. The rollups stand in for the traffic
-- (74_rollups.sql proves the events -> rollups step).
BEGIN;
SELECT plan(18);

SELECT setseed(0.8);
SELECT inbox.register_provider(p)
  FROM unnest(ARRAY['control', 'stalled', 'silent', 'dropped', 'storm', 'deadly', 'replayed', 'held']) p;
SELECT inbox.set_id_source('dropped', 'sequence', 'evt_{n}');

-- T is the end of the steady week; the data runs on 3 hours past it.
CREATE TEMP TABLE clock AS SELECT timestamptz '2026-01-12 00:00:00+00' AS t;
CREATE FUNCTION pg_temp.t(minutes int) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT t + minutes * interval '1 minute' FROM clock
$$;

INSERT INTO inbox.stats_minute (provider, minute, arrivals, redeliveries, claims, first_claims, processed,
                                max_seq, skew_max_s, latency_hist, claim_hist, backlog, due_unclaimed,
                                oldest_pending_s, leases_overdue, held, open_gaps, gaps_past_grace, high_seq)
SELECT p.p, m.m, a.n, (random() < 0.05)::int, a.n + (random() < 0.2)::int, a.n, a.n,
       CASE WHEN p.p = 'dropped' THEN 1000000 + extract(epoch FROM m.m - pg_temp.t(-10080))::bigint / 6 END,
       1 + 4 * random(),
       array_fill(0, ARRAY[37 + (random() * 2)::int]) || ARRAY[a.n - 2, 1, 1],
       ARRAY[a.n], (random() * 8)::int, 0, 30 * random(), 0, 0, 0, 0,
       CASE WHEN p.p = 'dropped' THEN 1000000 + extract(epoch FROM m.m - pg_temp.t(-10080))::bigint / 6 END
  FROM unnest(ARRAY['control', 'stalled', 'silent', 'dropped', 'storm', 'deadly', 'replayed', 'held']) p(p),
       generate_series(pg_temp.t(-10080), pg_temp.t(180), interval '1 minute') m(m),
       -- 10 a minute, a 10% swing over the day, and noise
       LATERAL (SELECT greatest(3, round(10 + sin(extract(epoch FROM m.m) / 86400 * 2 * pi())
                                         + (random() * 6 - 3)))::int AS n) a;
INSERT INTO inbox.receiver_stats (provider, minute, requests_2xx, duplicates)
SELECT s.provider, s.minute, s.arrivals + s.redeliveries, (random() < 0.05)::int FROM inbox.stats_minute s;
INSERT INTO inbox.stats_global (minute, refreshed_at, refresh_ms, last_reconcile_at, last_gap_scan_at,
                                cron_failures, dead_tuple_ratio, dead_tuples, vacuum_age_s, xid_age)
SELECT m, m + interval '5 seconds', 20, m, m - interval '2 minutes', 0, 0.05, 20000, 600, 5000000
  FROM generate_series(pg_temp.t(-10080), pg_temp.t(180), interval '1 minute') m;

CREATE FUNCTION pg_temp.evaluate(minutes int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT inbox.run_checks(pg_temp.t(minutes))
$$;
CREATE FUNCTION pg_temp.firing() RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(provider || ' ' || check_name ORDER BY provider, check_name), '{}')
      FROM inbox.check_state WHERE state = 'firing'
$$;

-- The steady week: the last day hour by hour, then the last minutes minute by minute.
SELECT pg_temp.evaluate(m) FROM generate_series(-1440, -60, 60) m;
SELECT pg_temp.evaluate(m) FROM generate_series(-5, 0) m;
SELECT is((SELECT count(*)::int FROM inbox.anomalies), 0, 'the steady week: no check ever fired (false positives: 0)');
SELECT is((SELECT count(*)::int FROM inbox.check_state WHERE state = 'ok'),
          (SELECT count(*)::int FROM inbox.check_state WHERE state <> 'no_data'), 'every check with data is ok');
SELECT ok((SELECT count(*) FROM inbox.check_state WHERE state = 'ok' AND check_name IN
           ('arrivals_low', 'arrivals_spike', 'latency_p95', 'retry_ratio', 'provider_silent')) >= 5 * 8,
          'the learned and latency checks had data to judge');

-- The faults, from T to T + 25 minutes, each on its own provider.
UPDATE inbox.stats_minute s SET processed = 0, claims = 0, first_claims = 0, latency_hist = NULL, claim_hist = NULL,
       backlog = 5 + 10 * k, due_unclaimed = greatest(0, 10 * (k - 5)), oldest_pending_s = 60 * k
  FROM (SELECT pg_temp.t(k) AS minute, k FROM generate_series(1, 25) k) f
 WHERE s.provider = 'stalled' AND s.minute = f.minute;                                       -- workers stalled
UPDATE inbox.stats_minute SET arrivals = 0, redeliveries = 0, processed = 0, claims = 0, first_claims = 0,
       latency_hist = NULL, claim_hist = NULL, backlog = 0
 WHERE provider = 'silent' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);             -- provider silent
UPDATE inbox.receiver_stats SET requests_2xx = 0, duplicates = 0
 WHERE provider = 'silent' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);
UPDATE inbox.stats_minute SET arrivals = round(arrivals * 0.95), open_gaps = 5, gaps_past_grace = 2, oldest_gap_s = 4000
 WHERE provider = 'dropped' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);            -- 5% dropped
UPDATE inbox.stats_minute SET redeliveries = 2 * arrivals
 WHERE provider = 'storm' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);              -- retry storm
UPDATE inbox.receiver_stats SET requests_5xx = 2 * requests_2xx
 WHERE provider = 'storm' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);
UPDATE inbox.stats_minute SET dead = 3, processed = arrivals - 3
 WHERE provider = 'deadly' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);             -- dead spike
UPDATE inbox.stats_minute SET replay_suspects = 2
 WHERE provider = 'replayed' AND minute = pg_temp.t(10);                                     -- replayed body
UPDATE inbox.stats_minute SET held = 2
 WHERE provider = 'held' AND minute > pg_temp.t(0) AND minute <= pg_temp.t(25);               -- held events
UPDATE inbox.stats_global SET cron_failures = 1 WHERE minute = pg_temp.t(10);                -- cron job failing

SELECT is(pg_temp.evaluate(20) -> 'started', '[]', 'first evaluation in the faults: nothing fires on one bucket');
SELECT pg_temp.evaluate(21);
SELECT is(pg_temp.firing(), ARRAY[
    '* cron_failing',
    'deadly dead_new', 'deadly dead_ratio',
    'dropped gaps_past_grace',
    'held held_events',
    'replayed replay_suspect',
    'silent arrivals_low', 'silent provider_silent',
    'stalled backlog_growing', 'stalled claim_starvation', 'stalled processing_rate_drop',
    'storm deliveries_per_event'],
    'second evaluation: each fault fires its expected checks, and only those');
SELECT is((SELECT count(*)::int FROM inbox.reconcile_runs WHERE trigger LIKE 'anomaly:%'), 1,
          'one reconciliation pass for the run in which they started');
SELECT is((SELECT trigger FROM inbox.reconcile_runs WHERE trigger LIKE 'anomaly:%'), 'anomaly:cron_failing',
          'triggered by the most severe (P1, first by name)');
SELECT is((SELECT verdict FROM inbox.health WHERE provider = 'deadly'), 'losing', 'health: dead events are losing');
SELECT is((SELECT verdict FROM inbox.health WHERE provider = 'dropped'), 'losing', 'health: a gap past grace is losing');
SELECT is((SELECT verdict FROM inbox.health WHERE provider = 'held'), 'losing', 'health: held events are losing');
SELECT is((SELECT verdict FROM inbox.health WHERE provider = 'stalled'), 'degraded', 'health: stalled workers are degraded');
SELECT is((SELECT verdict FROM inbox.health WHERE provider = 'control'), 'degraded',
          'health: the failing cron job degrades every provider');

-- The faults are over; the 60-minute windows clear by T + 86.
SELECT pg_temp.evaluate(m) FROM generate_series(100, 103) m;
SELECT is(pg_temp.firing(), '{}', 'every fault resolved');
SELECT is((SELECT count(*)::int FROM inbox.anomalies WHERE resolved_at IS NULL), 0, 'every anomaly is closed');
SELECT is((SELECT count(*)::int FROM inbox.anomalies), 12, 'one anomaly per firing episode');

-- The stale matview: the refresh stops for 20 minutes. Nothing is rolled up
-- meanwhile; when it runs again it counts the missed minutes' events into
-- their minutes, but their gauges were never sampled.
CREATE TEMP TABLE missed AS
SELECT * FROM inbox.stats_minute WHERE minute > pg_temp.t(120) AND minute <= pg_temp.t(140);
DELETE FROM inbox.stats_minute WHERE minute > pg_temp.t(120) AND minute <= pg_temp.t(140);
DELETE FROM inbox.stats_global WHERE minute > pg_temp.t(120) AND minute <= pg_temp.t(140);
SELECT pg_temp.evaluate(m) FROM generate_series(135, 136) m;
SELECT is(pg_temp.firing(), ARRAY['* stats_stale'], 'stale statistics fire stats_stale and nothing else');
UPDATE missed SET backlog = NULL, due_unclaimed = NULL, oldest_pending_s = NULL, leases_overdue = NULL,
       held = NULL, open_gaps = NULL, gaps_past_grace = NULL, oldest_gap_s = NULL, high_seq = NULL;
INSERT INTO inbox.stats_minute SELECT * FROM missed;
SELECT pg_temp.evaluate(m) FROM generate_series(145, 147) m;
SELECT is(pg_temp.firing(), '{}', 'and it resolves when the refresh runs again');
SELECT is((SELECT count(*)::int FROM inbox.anomalies WHERE resolved_at IS NULL), 0, 'nothing left open');

SELECT * FROM finish();
ROLLBACK;

-- Every fixed-range check in both directions. Each check gets two providers
-- with the same steady hour of rollups: f-<check> with the fault that must
-- make it fire, q-<check> with data that must keep it quiet. Hysteresis is
-- set to fire and resolve at once here (71_hysteresis.sql tests M/N/K), and
-- the evaluation is at a fixed past time: checks read the rollups only.
BEGIN;
SELECT plan(96);

CREATE FUNCTION pg_temp.hist(bucket int, n int) RETURNS int[] LANGUAGE sql AS $$
    SELECT array_fill(0, ARRAY[bucket - 1]) || n
$$;

-- An hour of healthy traffic ending at t: 10 events a minute, processed in
-- about a second, a backlog of 2, the receiver answering 2xx.
CREATE FUNCTION pg_temp.steady(p text, t timestamptz) RETURNS void LANGUAGE sql AS $$
    SELECT inbox.register_provider(p);
    INSERT INTO inbox.stats_minute (provider, minute, arrivals, claims, first_claims, processed, max_seq,
                                    skew_max_s, latency_hist, claim_hist, backlog, due_unclaimed,
                                    oldest_pending_s, leases_overdue, held, open_gaps, gaps_past_grace,
                                    high_seq, backfill_fetched)
    SELECT p, t - m * interval '1 minute', 10, 10, 10, 10, 100000 + (60 - m) * 10, 1,
           pg_temp.hist(40, 10), pg_temp.hist(1, 10), 2, 0, 1, 0, 0, 0, 0, 100000 + (60 - m) * 10,
           CASE WHEN m % 6 = 0 THEN 1 ELSE 0 END
      FROM generate_series(0, 60) m;
    INSERT INTO inbox.receiver_stats (provider, minute, requests_2xx)
    SELECT p, t - m * interval '1 minute', 10 FROM generate_series(0, 60) m;
$$;

CREATE TABLE pg_temp.effects (event_id text);

-- %1$L is the provider, %2$L the evaluation time. quiet runs on q-<check>.
CREATE TEMP TABLE cases (check_name text PRIMARY KEY, fire text NOT NULL, quiet text);
INSERT INTO cases VALUES
('latency_p50', $$UPDATE inbox.stats_minute SET latency_hist = pg_temp.hist(70, 10)
                   WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$,
                $$UPDATE inbox.stats_minute SET latency_hist = pg_temp.hist(60, 10)
                   WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$),
('latency_p95', $$UPDATE inbox.stats_minute SET latency_hist = pg_temp.hist(40, 9) || pg_temp.hist(35, 1)
                   WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$, NULL),
('latency_p99', $$UPDATE inbox.stats_minute SET latency_hist = pg_temp.hist(80, 10)
                   WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '3 minutes'$$, NULL),
('latency_widening', $$UPDATE inbox.stats_minute
                        SET latency_hist = pg_temp.hist(40 + 2 * floor(extract(epoch FROM minute - (%2$L::timestamptz - interval '30 minutes')) / 300)::int, 10)
                      WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '30 minutes'$$,
                     $$UPDATE inbox.stats_minute SET latency_hist = pg_temp.hist(40 + mod(extract(minute FROM minute)::int, 2), 10)
                      WHERE provider = %1$L$$),
('first_claim_delay', $$UPDATE inbox.stats_minute SET claim_hist = pg_temp.hist(75, 10)
                         WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$, NULL),
('oldest_pending_age', $$UPDATE inbox.stats_minute SET oldest_pending_s = 4000
                          WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '5 minutes'$$,
                       $$UPDATE inbox.stats_minute SET oldest_pending_s = 1700 WHERE provider = %1$L$$),
('leases_overdue', $$UPDATE inbox.stats_minute SET leases_overdue = 3 WHERE provider = %1$L AND minute = %2$L$$, NULL),
('backlog_size', $$UPDATE inbox.stats_minute SET backlog = 20000 WHERE provider = %1$L AND minute = %2$L$$,
                 $$UPDATE inbox.stats_minute SET backlog = 9000 WHERE provider = %1$L$$),
('backlog_growing', $$UPDATE inbox.stats_minute SET backlog = 1000 - 10 * extract(epoch FROM %2$L::timestamptz - minute)::int / 60
                       WHERE provider = %1$L$$,
                    $$UPDATE inbox.stats_minute SET backlog = 40 - extract(epoch FROM %2$L::timestamptz - minute)::int / 60
                       WHERE provider = %1$L AND minute > %2$L::timestamptz - interval '30 minutes'$$),
('claim_starvation', $$UPDATE inbox.stats_minute SET due_unclaimed = 5 WHERE provider = %1$L AND minute = %2$L$$, NULL),
('provider_silent', $$UPDATE inbox.stats_minute SET arrivals = 0
                       WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '45 minutes'$$,
                    $$UPDATE inbox.stats_minute SET arrivals = 0
                       WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '5 minutes'$$),
('deliveries_per_event', $$UPDATE inbox.stats_minute SET redeliveries = 10 WHERE provider = %1$L$$,
                         $$UPDATE inbox.stats_minute SET redeliveries = 2 WHERE provider = %1$L$$),
('redeliveries_processed', $$UPDATE inbox.receiver_stats SET duplicates = 50 WHERE provider = %1$L$$,
                           $$UPDATE inbox.receiver_stats SET duplicates = 1 WHERE provider = %1$L$$),
('intake_unavailable', $$UPDATE inbox.receiver_stats SET db_unavailable = 5 WHERE provider = %1$L$$, NULL),
('refused_bodies', $$UPDATE inbox.receiver_stats SET refused_bodies = 5 WHERE provider = %1$L$$,
                   $$UPDATE inbox.receiver_stats SET refused_bodies = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '2 minutes'$$),
('retry_ratio', $$UPDATE inbox.stats_minute SET claims = 20 WHERE provider = %1$L$$,
                -- many retries, but too few claims to mean anything
                $$UPDATE inbox.stats_minute SET claims = CASE WHEN minute = %2$L::timestamptz - interval '1 minute' THEN 3 ELSE 0 END,
                         first_claims = CASE WHEN minute = %2$L::timestamptz - interval '1 minute' THEN 1 ELSE 0 END
                   WHERE provider = %1$L$$),
('dead_new', $$UPDATE inbox.stats_minute SET dead = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '3 minutes'$$,
             $$UPDATE inbox.stats_minute SET dead = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '20 minutes'$$),
('dead_ratio', $$UPDATE inbox.stats_minute SET dead = 1 WHERE provider = %1$L$$, NULL),
('new_error_class', $$INSERT INTO inbox.stats_minute (provider, minute) VALUES (%1$L, %2$L::timestamptz - interval '2 days');
                      INSERT INTO inbox.error_classes VALUES (%1$L, 'timeout after Ns', %2$L::timestamptz - interval '2 days', %2$L, 5),
                                                             (%1$L, 'HTTP N from downstream', %2$L::timestamptz - interval '10 minutes', %2$L, 1)$$,
                    -- the class is new, but the provider has no day of history yet
                    $$INSERT INTO inbox.error_classes VALUES (%1$L, 'HTTP N from downstream', %2$L::timestamptz - interval '10 minutes', %2$L, 1)$$),
('lease_expiry_rate', $$UPDATE inbox.stats_minute SET lease_expiries = 2 WHERE provider = %1$L$$, NULL),
('held_events', $$UPDATE inbox.stats_minute SET held = 1 WHERE provider = %1$L AND minute = %2$L$$, NULL),
('gaps_past_grace', $$UPDATE inbox.stats_minute SET gaps_past_grace = 2, open_gaps = 2 WHERE provider = %1$L AND minute = %2$L$$,
                    $$UPDATE inbox.stats_minute SET open_gaps = 2, oldest_gap_s = 60 WHERE provider = %1$L AND minute = %2$L$$),
('oldest_gap_age', $$UPDATE inbox.stats_minute SET open_gaps = 1, oldest_gap_s = 30000 WHERE provider = %1$L AND minute = %2$L$$, NULL),
('backfill_failures', $$UPDATE inbox.stats_minute SET backfill_gave_up = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '5 minutes'$$, NULL),
('backfill_not_found_ratio', $$UPDATE inbox.stats_minute SET backfill_not_found = 1 WHERE provider = %1$L$$,
                             $$UPDATE inbox.stats_minute SET backfill_not_found = 1 WHERE provider = %1$L AND minute = %2$L$$),
('sequence_regression', $$SELECT inbox.set_id_source(%1$L, 'sequence', 'evt_{n}');
                          UPDATE inbox.stats_minute SET max_seq = 500 WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$,
                        $$SELECT inbox.set_id_source(%1$L, 'sequence', 'evt_{n}');
                          UPDATE inbox.stats_minute SET max_seq = max_seq - 300 WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '15 minutes'$$),
('sequence_tail_silence', $$SELECT inbox.set_id_source(%1$L, 'sequence', 'evt_{n}');
                            UPDATE inbox.stats_minute SET max_seq = 100000 WHERE provider = %1$L AND minute >= %2$L::timestamptz - interval '45 minutes'$$,
                          $$SELECT inbox.set_id_source(%1$L, 'sequence', 'evt_{n}')$$),
('orphan_references', $$SELECT inbox.register_reference(%1$L, 'pg_temp.effects', 'event_id');
                        UPDATE inbox.stats_minute SET orphans = 3 WHERE provider = %1$L AND minute = %2$L$$,
                      $$SELECT inbox.register_reference(%1$L, 'pg_temp.effects', 'event_id');
                        UPDATE inbox.stats_minute SET orphans = 0 WHERE provider = %1$L AND minute = %2$L$$),
('missing_effects', $$SELECT inbox.register_reference(%1$L, 'pg_temp.effects', 'event_id', 'effect');
                      UPDATE inbox.stats_minute SET missing_effects = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '5 minutes'$$,
                    $$SELECT inbox.register_reference(%1$L, 'pg_temp.effects', 'event_id', 'effect')$$),
('verify_mismatch', $$UPDATE inbox.stats_minute SET verify_mismatches = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '30 minutes'$$, NULL),
('payload_changed_processing', $$UPDATE inbox.stats_minute SET payload_changed = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '30 minutes'$$, NULL),
('replay_suspect', $$UPDATE inbox.stats_minute SET replay_suspects = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '30 minutes'$$,
                   $$UPDATE inbox.stats_minute SET replay_suspects = 1 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '90 minutes'$$),
('signature_failure_rate', $$UPDATE inbox.receiver_stats SET signature_failures = 5 WHERE provider = %1$L$$, NULL),
('timestamp_skew', $$UPDATE inbox.stats_minute SET skew_max_s = 1000 WHERE provider = %1$L AND minute = %2$L::timestamptz - interval '4 minutes'$$,
                   $$UPDATE inbox.stats_minute SET skew_max_s = 200 WHERE provider = %1$L$$);

-- Fire and resolve at once, so one evaluation shows the range decision.
SELECT inbox.configure_check(name, fire_after => 1, window_size => 1, resolve_after => 1) FROM inbox.checks;

DO $$
DECLARE
    c record;
    t constant timestamptz := '2026-01-05 12:00:00+00';
BEGIN
    FOR c IN SELECT * FROM cases LOOP
        PERFORM pg_temp.steady('f-' || c.check_name, t);
        EXECUTE format(c.fire, 'f-' || c.check_name, t);
        PERFORM pg_temp.steady('q-' || c.check_name, t);
        IF c.quiet IS NOT NULL THEN
            EXECUTE format(c.quiet, 'q-' || c.check_name, t);
        END IF;
    END LOOP;
END
$$;

-- The global checks: a healthy watcher, then a day later a broken one.
INSERT INTO inbox.stats_global VALUES
  ('2026-01-05 11:59:00+00', '2026-01-05 11:59:30+00', 5, '2026-01-05 11:59:00+00', '2026-01-05 11:58:00+00',
   0, 0.01, 50000, 60, 1000),
  ('2026-01-06 11:59:00+00', '2026-01-06 11:59:30+00', 5, '2026-01-06 11:00:00+00', '2026-01-06 10:00:00+00',
   2, 0.5, 50000, 7200, 1500000000),
  ('2026-01-07 11:50:00+00', '2026-01-07 11:50:00+00', 5, '2026-01-07 11:50:00+00', '2026-01-07 11:50:00+00',
   0, 0.01, 50000, 60, 1000);

SELECT is((SELECT count(*)::int FROM inbox.checks WHERE scope = 'provider'), (SELECT count(*)::int + 3 FROM cases),
          'every provider check has a case here (the 3 learned ones: 72_learned.sql)');
SELECT ok((inbox.run_checks('2026-01-05 12:00:00+00') ->> 'evaluated')::int > 0, 'the checks run');

SELECT is((SELECT state FROM inbox.check_state s WHERE s.check_name = c.check_name AND s.provider = 'f-' || c.check_name),
          'firing', c.check_name || ' fires on its fault')
  FROM cases c ORDER BY c.check_name;
SELECT is((SELECT state FROM inbox.check_state s WHERE s.check_name = c.check_name AND s.provider = 'q-' || c.check_name),
          'ok', c.check_name || ' stays quiet on steady traffic')
  FROM cases c ORDER BY c.check_name;

SELECT is(ARRAY(SELECT check_name || ' ' || state FROM inbox.check_state WHERE provider = '*' ORDER BY 1),
          ARRAY['autovacuum_lag ok', 'cron_failing ok', 'events_dead_tuples ok', 'gap_scan_stale ok',
                'outbox_dead_new ok', 'reconcile_stale ok', 'stats_stale ok', 'xid_age ok'],
          'the global checks stay quiet on a healthy watcher');
SELECT ok((inbox.run_checks('2026-01-06 12:00:00+00') ->> 'firing')::int >= 6, 'the checks run a day later');
SELECT is(ARRAY(SELECT check_name || ' ' || state FROM inbox.check_state WHERE provider = '*' ORDER BY 1),
          ARRAY['autovacuum_lag firing', 'cron_failing firing', 'events_dead_tuples firing', 'gap_scan_stale firing',
                'outbox_dead_new ok', 'reconcile_stale firing', 'stats_stale ok', 'xid_age firing'],
          'each watcher check fires on a broken watcher (and no outbox message went dead)');
SELECT inbox.run_checks('2026-01-07 12:00:00+00');
SELECT is(ARRAY(SELECT check_name || ' ' || state FROM inbox.check_state WHERE provider = '*' ORDER BY 1),
          ARRAY['autovacuum_lag no_data', 'cron_failing no_data', 'events_dead_tuples no_data', 'gap_scan_stale no_data',
                'outbox_dead_new no_data', 'reconcile_stale no_data', 'stats_stale firing', 'xid_age no_data'],
          'statistics 10 minutes old: stats_stale fires, and nothing else reads them');
SELECT is((SELECT count(*)::int FROM inbox.check_state WHERE provider <> '*' AND state <> 'no_data'), 0,
          '... not even the provider checks');

-- Settings: disabled, overridden per provider, overridden for all.
SELECT inbox.configure_check('dead_new', 'f-dead_new', enabled => false);
SELECT inbox.configure_check('latency_p50', 'f-latency_p50', max_value => 300);
SELECT inbox.configure_check('backlog_size', max_value => 5000);
DELETE FROM inbox.check_state;
DELETE FROM inbox.anomalies;
SELECT inbox.run_checks('2026-01-05 12:00:00+00');
SELECT is((SELECT count(*)::int FROM inbox.check_state WHERE check_name = 'dead_new' AND provider = 'f-dead_new'), 0,
          'a check disabled for a provider is not evaluated for it');
SELECT is((SELECT state FROM inbox.check_state WHERE check_name = 'dead_new' AND provider = 'f-dead_new'), NULL,
          '... and has no state');
SELECT is((SELECT state FROM inbox.check_state WHERE check_name = 'dead_new' AND provider = 'f-dead_ratio'), 'firing',
          '... while it still fires for the others');
SELECT is((SELECT state FROM inbox.check_state WHERE check_name = 'latency_p50' AND provider = 'f-latency_p50'), 'ok',
          'a per-provider max keeps the check quiet for that provider');
SELECT is((SELECT range_hi FROM inbox.check_state WHERE check_name = 'latency_p50' AND provider = 'f-latency_p50'), 300::float8,
          '... and is the range recorded');
SELECT is((SELECT state FROM inbox.check_state WHERE check_name = 'backlog_size' AND provider = 'q-backlog_size'), 'firing',
          'a lower max for every provider makes 9000 waiting events fire');
SELECT is((SELECT severity FROM inbox.checks WHERE name = 'backlog_size'), 'P2', 'severity unchanged');
SELECT is(inbox.configure_check('backlog_size', severity => 'P0') ->> 'severity', 'P0', 'severity can change');
SELECT is(inbox.configure_check('backlog_size', reset => true) ->> 'max_value', '10000', 'reset restores the built-in range');

-- Bad input.
SELECT throws_ok($$SELECT inbox.configure_check(NULL)$$, '22004', 'check name must not be null', 'configure_check: NULL name');
SELECT throws_ok($$SELECT inbox.configure_check('nope')$$, '42704', 'unknown check ''nope''', 'configure_check: unknown check');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', 'ghost')$$, '42704', 'unknown provider "ghost"',
                 'configure_check: unknown provider');
SELECT throws_ok($$SELECT inbox.configure_check('xid_age', 'f-dead_new')$$, '22023', 'check xid_age is global: it takes no provider',
                 'configure_check: provider for a global check');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', severity => 'P9')$$, '22023', NULL, 'configure_check: bad severity');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', mode => 'learned')$$, '22023', 'check dead_new has no learned mode',
                 'configure_check: learned mode of a fixed-only check');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', fire_after => 5, window_size => 3)$$, '22023',
                 'fire_after (5) must not exceed window_size (3)', 'configure_check: M > N');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', fire_after => 65)$$, '22023', NULL, 'configure_check: N over 64');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', k => 0)$$, '22023', 'k must be in (0, 100]', 'configure_check: k 0');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', min_value => 'NaN')$$, '22023', 'settings must not be NaN',
                 'configure_check: NaN');
SELECT throws_ok($$SELECT inbox.configure_check('dead_new', min_value => 5, max_value => 1)$$, '22023', NULL,
                 'configure_check: min over max');
SELECT throws_ok($$SELECT inbox.configure_check(repeat('x', 100000))$$, '42704', NULL, 'configure_check: oversized name');

SELECT * FROM finish();
ROLLBACK;

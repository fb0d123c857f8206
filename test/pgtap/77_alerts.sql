-- Alerts: a check that starts firing or resolves writes an alert row in the
-- same transaction; claim_alert is set-if-absent-with-expiry with each
-- entry's own window, and its cleanup deletes only expired entries;
-- recent_alerts and status_report for the sidecar; the roles.
BEGIN;
SELECT plan(52);

-- alert_key: the one definition of "the same alert".
SELECT is(inbox.alert_key('dead_new', 'stripe', 'firing'), 'dead_new/stripe/firing', 'alert_key');
SELECT is(inbox.alert_key('stats_stale', '*', 'resolved'), 'stats_stale/*/resolved', 'alert_key of a global check');
SELECT is(inbox.alert_key(NULL, 'stripe', 'firing'), NULL, 'alert_key of NULL is NULL');

-- claim_alert: absent -> true, held -> false, expired -> true again.
SELECT is(inbox.claim_alert('k1', '1 hour'), true, 'an absent key is claimed');
SELECT is(inbox.claim_alert('k1', '1 hour'), false, 'a held key is not claimed again');
SELECT is(inbox.claim_alert('k1', '1 second'), false, 'a shorter window does not shorten a held claim');
SELECT is((SELECT expires_at FROM inbox.alert_claims WHERE key = 'k1'), now() + interval '1 hour',
          'a refused claim leaves the entry as it was');
SELECT is(inbox.claim_alert('k2', '1 hour'), true, 'another key is claimed on its own');
UPDATE inbox.alert_claims SET expires_at = now() - interval '1 second' WHERE key = 'k1';
SELECT is(inbox.claim_alert('k1', '2 hours'), true, 'an expired key is claimed again');
SELECT is((SELECT expires_at FROM inbox.alert_claims WHERE key = 'k1'), now() + interval '2 hours',
          'with the new window');
UPDATE inbox.alert_claims SET expires_at = now() WHERE key = 'k1';
SELECT is(inbox.claim_alert('k1', '1 hour'), true, 'a claim expiring now has expired (expires_at <= now())');

-- Each entry keeps its own window; cleanup deletes only expired entries.
DELETE FROM inbox.alert_claims;
SELECT inbox.claim_alert('long', '24 hours');
INSERT INTO inbox.alert_claims (key, claimed_at, expires_at)
SELECT 'short-' || i, now() - interval '2 hours', now() - interval '1 hour' FROM generate_series(1, 150) i;
INSERT INTO inbox.alert_claims (key, claimed_at, expires_at)
SELECT 'live-' || i, now(), now() + interval '10 minutes' FROM generate_series(1, 5) i;
SELECT inbox.claim_alert('new-1', '1 hour');
SELECT is((SELECT count(*)::int FROM inbox.alert_claims WHERE key LIKE 'short-%'), 50,
          'a claim deletes at most 100 expired entries');
SELECT inbox.claim_alert('new-2', '1 hour');
SELECT is((SELECT count(*)::int FROM inbox.alert_claims WHERE key LIKE 'short-%'), 0, 'the next claim the rest');
SELECT is((SELECT count(*)::int FROM inbox.alert_claims WHERE key LIKE 'live-%'), 5, 'entries not expired stay');
SELECT is((SELECT expires_at FROM inbox.alert_claims WHERE key = 'long'), now() + interval '24 hours',
          'the 24-hour entry stays, untouched');
SELECT is(inbox.claim_alert('long', '1 hour'), false, 'and still refuses its key');

-- Bad input.
SELECT throws_ok($$SELECT inbox.claim_alert(NULL, '1 hour')$$, '22004', 'key and window must not be null', 'NULL key');
SELECT throws_ok($$SELECT inbox.claim_alert('k', NULL)$$, '22004', 'key and window must not be null', 'NULL window');
SELECT throws_ok($$SELECT inbox.claim_alert('', '1 hour')$$, '22023', 'key must not be empty', 'empty key');
SELECT throws_ok($$SELECT inbox.claim_alert(repeat('x', 501), '1 hour')$$, '22001',
                 'key is 501 bytes, over the limit of 500', 'oversized key');
SELECT throws_ok($$SELECT inbox.claim_alert('k', '0')$$, '22023', 'window must be positive and at most 30 days', 'zero window');
SELECT throws_ok($$SELECT inbox.claim_alert('k', '-1 hour')$$, '22023', NULL, 'negative window');
SELECT throws_ok($$SELECT inbox.claim_alert('k', '31 days')$$, '22023', NULL, 'window over 30 days');
SELECT is((SELECT count(*)::int FROM inbox.alert_claims WHERE key = 'k'), 0, 'a refused call wrote nothing');

-- A check that starts firing writes one alert row, in the run's transaction.
-- Statistics last refreshed an hour ago: stats_stale fires at once.
INSERT INTO inbox.stats_global (minute, refreshed_at)
VALUES (date_trunc('minute', now() - interval '1 hour'), now() - interval '1 hour');
SAVEPOINT before_run;
SELECT inbox.run_checks();
SELECT is((SELECT count(*)::int FROM inbox.alerts), 1, 'stale statistics: one alert');
ROLLBACK TO SAVEPOINT before_run;
SELECT is((SELECT count(*)::int FROM inbox.alerts), 0, 'rolled back with the run: no alert without its anomaly');
SELECT inbox.run_checks();
SELECT results_eq($$SELECT key, check_name, provider, state, severity, data_loss, anomaly_id
                      FROM inbox.alerts ORDER BY id$$,
                  $$SELECT 'stats_stale/*/firing'::text, 'stats_stale'::text, '*'::text, 'firing'::text, 'P1'::text,
                           false, (SELECT id FROM inbox.anomalies WHERE check_name = 'stats_stale')$$,
                  'the alert names the check, the scope, the state and its anomaly');
SELECT matches((SELECT summary FROM inbox.alerts), '^P1 stats_stale firing: 3600 s \(allowed \.\.180\): time since',
               'a summary a person can read');
SELECT is((SELECT since FROM inbox.alerts), now(), 'since: when the episode started');
SELECT inbox.run_checks();
SELECT is((SELECT count(*)::int FROM inbox.alerts), 1, 'still firing: no second alert');
-- Fresh statistics: resolves after two evaluations in range.
INSERT INTO inbox.stats_global (minute, refreshed_at) VALUES (date_trunc('minute', now()), now());
SELECT inbox.run_checks();
SELECT inbox.run_checks();
SELECT is((SELECT array_agg(state ORDER BY id) FROM inbox.alerts), ARRAY['firing', 'resolved'],
          'resolved: a second alert');
SELECT is((SELECT key FROM inbox.alerts WHERE state = 'resolved'), 'stats_stale/*/resolved', 'with its own key');
-- A P0: the severity a check was configured with.
SELECT inbox.configure_check('stats_stale', severity => 'P0');
UPDATE inbox.stats_global SET refreshed_at = now() - interval '1 hour';
SELECT inbox.run_checks();
SELECT is((SELECT severity FROM inbox.alerts ORDER BY id DESC LIMIT 1), 'P0', 'the configured severity');

-- recent_alerts: newest rows of the window, oldest first.
SELECT is((SELECT array_agg(state ORDER BY id) FROM inbox.recent_alerts()), ARRAY['firing', 'resolved', 'firing'],
          'recent_alerts: all three, oldest first');
SELECT is((SELECT array_agg(state) FROM inbox.recent_alerts('1 hour', 1)), ARRAY['firing'], 'max_rows keeps the newest');
UPDATE inbox.alerts SET created_at = now() - interval '2 hours' WHERE state = 'resolved';
SELECT is((SELECT count(*)::int FROM inbox.recent_alerts('1 hour')), 2, 'older than since: left out');
SELECT throws_ok($$SELECT * FROM inbox.recent_alerts(NULL)$$, '22004', NULL, 'NULL since');
SELECT throws_ok($$SELECT * FROM inbox.recent_alerts('0')$$, '22023', NULL, 'since under a second');
SELECT throws_ok($$SELECT * FROM inbox.recent_alerts('8 days')$$, '22023', NULL, 'since over 7 days');
SELECT throws_ok($$SELECT * FROM inbox.recent_alerts('1 hour', 0)$$, '22023', NULL, 'max_rows 0');
SELECT throws_ok($$SELECT * FROM inbox.recent_alerts('1 hour', 10001)$$, '22023', NULL, 'max_rows over 10000');

-- status_report: the health summary plus 24 hours of 15-minute buckets.
SELECT inbox.register_provider('rep');
INSERT INTO inbox.stats_minute (provider, minute, arrivals, processed, latency_hist)
VALUES ('rep', date_trunc('minute', now()), 7, 5, array_fill(0, ARRAY[39]) || 5);
SELECT is(jsonb_array_length(inbox.status_report() -> 'series' -> 'arrivals'), 96, '96 buckets of arrivals');
SELECT is((inbox.status_report() -> 'series' -> 'arrivals' ->> 95)::int, 7, 'the last bucket holds this minute');
SELECT is((inbox.status_report() -> 'series' -> 'processed' ->> 95)::int, 5, 'processed');
SELECT ok((inbox.status_report() -> 'series' -> 'p95_seconds' ->> 95)::float8 BETWEEN 0.5 AND 1.5, 'p95 from the histograms');
SELECT is(inbox.status_report() -> 'providers' -> 0 ->> 'provider', 'rep', 'the health summary is in it');

-- Roles: the alerter reads alerts and claims keys, nothing else; the monitor
-- reads the status report and cannot claim.
SET LOCAL ROLE inbox_alerter;
SELECT is((SELECT count(*)::int FROM inbox.recent_alerts()), 2, 'inbox_alerter calls recent_alerts');
SELECT is(inbox.claim_alert('by-alerter', '1 minute'), true, 'inbox_alerter claims');
SELECT throws_ok($$SELECT * FROM inbox.alerts$$, '42501', NULL, 'inbox_alerter cannot read the table');
SELECT throws_ok($$SELECT inbox.status_report()$$, '42501', NULL, 'inbox_alerter cannot read the status report');
RESET ROLE;
SET LOCAL ROLE inbox_monitor;
SELECT is(inbox.status_report() ->> 'verdict', 'degraded', 'inbox_monitor reads the status report');
SELECT throws_ok($$SELECT inbox.claim_alert('x', '1 minute')$$, '42501', NULL, 'inbox_monitor cannot claim');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

-- Issue 11: a dead outbox message "is dead and visible to the checks (it
-- counts as a new dead event there)". inbox.refresh_stats counts it as
-- provider 'outbox:<topic>', the global check outbox_dead_new fires on it
-- and inbox.health shows the topic losing; a delivered message does none of that.
BEGIN;
SELECT plan(14);

SELECT inbox.register_provider('calm');

-- A delivered message: nothing fires.
SELECT inbox.publish('receipts', NULL, '{"n": 1}');
SELECT inbox.complete_outbox(id, lease_token) FROM inbox.claim_outbox('{receipts}', 10, '1 hour');
SELECT lives_ok($$ SELECT inbox.refresh_stats() $$, 'refresh with a delivered message');
SELECT is((SELECT count(*)::int FROM inbox.stats_minute WHERE provider LIKE 'outbox:%'), 0,
          'a delivered message is no dead event');
SELECT inbox.run_checks(now() + interval '1 minute');
SELECT is((SELECT state || ' ' || value FROM inbox.check_results
            WHERE check_name = 'outbox_dead_new' AND provider = '*'), 'ok 0', 'outbox_dead_new: ok at 0');
SELECT is((SELECT count(*)::int FROM inbox.anomalies WHERE check_name = 'outbox_dead_new'), 0, 'no anomaly');
SELECT is((SELECT count(*)::int FROM inbox.health WHERE provider LIKE 'outbox:%'), 0, 'no outbox row in health');

-- A message that goes dead: counted once, however often the refresh runs.
SELECT inbox.publish('orders', 'o1', '{"n": 2}');
SELECT inbox.fail_outbox(id, lease_token, 'HTTP 500', NULL, 1) FROM inbox.claim_outbox('{orders}', 10, '1 hour');
SELECT is((SELECT status FROM inbox.outbox_delivery d JOIN inbox.outbox m ON m.id = d.message_id
            WHERE m.key = 'o1'), 'dead', 'the message is dead');
SELECT inbox.refresh_stats();
SELECT inbox.refresh_stats();
SELECT is((SELECT sum(dead)::int FROM inbox.stats_minute WHERE provider = 'outbox:orders'), 1,
          'counted once as outbox:orders, over two refreshes');
SELECT is((SELECT count(*)::int FROM inbox.stats_minute WHERE provider = 'outbox:receipts'), 0,
          'the delivered topic has no row');
SELECT inbox.run_checks(now() + interval '2 minutes');
SELECT is((SELECT state || ' ' || value FROM inbox.check_results
            WHERE check_name = 'outbox_dead_new' AND provider = '*'
            ORDER BY evaluated_at DESC LIMIT 1), 'firing 1', 'outbox_dead_new fires on one dead message');
SELECT is((SELECT severity || ' ' || data_loss FROM inbox.anomalies
            WHERE check_name = 'outbox_dead_new' AND provider = '*' AND resolved_at IS NULL), 'P1 true',
          'an open data-loss anomaly');
SELECT is((SELECT verdict || ' ' || dead_24h FROM inbox.health WHERE provider = 'outbox:orders'), 'losing 1',
          'inbox.health: the topic is losing, one dead in 24 hours');
SELECT ok((SELECT 'outbox_dead_new' = ANY (firing_checks) FROM inbox.health WHERE provider = 'calm'),
          'the global check shows on every provider');
SELECT is((SELECT count(*)::int FROM inbox.health WHERE provider = 'outbox:receipts'), 0,
          'the delivered topic has no row in health');

-- Counted by the minute it went dead: the partial index serves the refresh.
SELECT ok((SELECT indexdef LIKE '%WHERE (status = ''dead''::text)%' FROM pg_indexes
            WHERE indexname = 'outbox_delivery_dead_idx'), 'dead messages have a partial index');

SELECT * FROM finish();
ROLLBACK;

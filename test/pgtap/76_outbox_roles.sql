-- Outbox roles: inbox_publisher and inbox_worker may publish; inbox_forwarder
-- may only claim, complete, fail and reject deliveries.
BEGIN;
SELECT plan(18);

SELECT has_role('inbox_publisher');
SELECT has_role('inbox_forwarder');
SELECT ok(NOT rolcanlogin, rolname || ' is a group role (NOLOGIN)')
  FROM pg_roles WHERE rolname IN ('inbox_publisher', 'inbox_forwarder') ORDER BY rolname;

SET LOCAL ROLE inbox_publisher;
SELECT ok(inbox.publish('receipts', 'p1', '{}') > 0, 'publisher can publish');
SELECT is((SELECT count(*)::int FROM inbox.outbox_attempts), 0, 'publisher can read the history');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}') $$, '42501', NULL, 'publisher cannot claim');
SELECT throws_ok($$ INSERT INTO inbox.outbox (topic, payload) VALUES ('receipts', '{}') $$, '42501', NULL,
                 'publisher cannot write the outbox directly');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x', '{}') $$, '42501', NULL, 'publisher cannot ingest');
RESET ROLE;

SET LOCAL ROLE inbox_worker;
SELECT ok(inbox.publish('receipts', 'w1', '{}') > 0, 'worker can publish (a receipt beside its complete)');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}') $$, '42501', NULL, 'worker cannot claim the outbox');
RESET ROLE;

SET LOCAL ROLE inbox_forwarder;
CREATE TEMP TABLE claimed AS SELECT id, lease_token FROM inbox.claim_outbox('{receipts}', 10, '1 hour');
SELECT is((SELECT count(*)::int FROM claimed), 2, 'forwarder can claim');
SELECT ok(inbox.complete_outbox(id, lease_token), 'forwarder can complete') FROM claimed ORDER BY id LIMIT 1;
SELECT is(inbox.fail_outbox(id, lease_token, 'x'), 'retry', 'forwarder can fail') FROM claimed ORDER BY id DESC LIMIT 1;
SELECT throws_ok($$ SELECT inbox.publish('receipts', 'f', '{}') $$, '42501', NULL, 'forwarder cannot publish');
SELECT throws_ok($$ SELECT * FROM inbox.outbox $$, '42501', NULL, 'forwarder cannot read the outbox directly');
SELECT throws_ok($$ UPDATE inbox.outbox_delivery SET status = 'done' $$, '42501', NULL,
                 'forwarder cannot update delivery state directly');
SELECT throws_ok($$ SELECT * FROM inbox.claim() $$, '42501', NULL, 'forwarder cannot claim events without inbox_worker');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

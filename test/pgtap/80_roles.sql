-- Least privilege: the receiver may only ingest, the worker may only claim,
-- complete and fail; neither reads or writes a table directly.
BEGIN;
SELECT plan(17);

SELECT inbox.register_provider('stripe');
SELECT inbox.ingest('stripe', 'seed', '{}');

SELECT has_role('inbox_receiver');
SELECT has_role('inbox_worker');
SELECT ok(NOT rolcanlogin, rolname || ' is a group role (NOLOGIN)')
  FROM pg_roles WHERE rolname IN ('inbox_receiver', 'inbox_worker') ORDER BY rolname;

SET LOCAL ROLE inbox_receiver;
SELECT is(inbox.ingest('stripe', 'r1', '{}'), 'inserted', 'receiver can ingest');
SELECT is(inbox.ingest_batch(ARRAY['stripe'], ARRAY['r2'], ARRAY['{}']::jsonb[]), ARRAY['inserted'],
  'receiver can ingest a batch');
SELECT throws_ok($$ SELECT * FROM inbox.claim() $$, '42501', NULL, 'receiver cannot claim');
SELECT throws_ok($$ SELECT * FROM inbox.events $$, '42501', NULL, 'receiver cannot read events');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload) VALUES ('stripe', 'x', '{}') $$,
  '42501', NULL, 'receiver cannot write events directly');
SELECT throws_ok($$ SELECT inbox.register_provider('evil') $$, '42501', NULL, 'receiver cannot register providers');
RESET ROLE;

SET LOCAL ROLE inbox_worker;
CREATE TEMP TABLE claimed AS SELECT id, lease_token FROM inbox.claim(10);
SELECT is((SELECT count(*)::int FROM claimed), 3, 'worker can claim');
SELECT ok(inbox.complete(id, lease_token), 'worker can complete') FROM claimed ORDER BY id LIMIT 1;
SELECT is(inbox.fail(id, lease_token, 'x'), 'retry', 'worker can fail') FROM claimed ORDER BY id DESC LIMIT 1;
SELECT is(inbox.complete_batch(ARRAY[id], ARRAY[lease_token]), ARRAY[true], 'worker can complete a batch')
  FROM claimed ORDER BY id LIMIT 1;
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'w', '{}') $$, '42501', NULL, 'worker cannot ingest');
SELECT throws_ok($$ UPDATE inbox.events SET status = 'done' $$, '42501', NULL, 'worker cannot update events directly');
RESET ROLE;

CREATE ROLE inbox_test_nobody;
SET LOCAL ROLE inbox_test_nobody;
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'p', '{}') $$, '42501', NULL, 'a role without grants cannot ingest');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

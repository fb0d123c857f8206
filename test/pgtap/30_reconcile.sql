-- inbox.reconcile: stuck events, expired leases (reclaim / hold), verify
-- functions reopening done events with history kept, dead counts, runs.
-- Time does not pass inside one transaction, so the test moves timestamps.
BEGIN;
SELECT plan(56);

SELECT has_function('inbox', 'reconcile', ARRAY['text'], 'inbox.reconcile(text) exists');
SELECT function_returns('inbox', 'reconcile', ARRAY['text'], 'jsonb', 'reconcile returns jsonb');
SELECT has_table('inbox', 'reconcile_runs', 'inbox.reconcile_runs exists');
SELECT has_table('inbox', 'event_history', 'inbox.event_history exists');

-- Bad input.
SELECT throws_ok($$SELECT inbox.reconcile(NULL)$$, '22004', 'trigger must not be null', 'NULL trigger');
SELECT throws_ok($$SELECT inbox.reconcile('')$$, '22023', 'trigger must not be empty', 'empty trigger');
SELECT throws_ok($$SELECT inbox.reconcile('Bad Trigger')$$, '22023', 'invalid trigger "Bad Trigger"',
                 'trigger with capitals and a space');
SELECT throws_ok($$SELECT inbox.reconcile(repeat('a', 64))$$, '22023',
                 'trigger is 64 bytes, over the limit of 63', 'trigger over 63 bytes');
SELECT throws_ok($$SELECT inbox.reconcile(42)$$, '42883', NULL, 'no reconcile(integer)');
SELECT is((SELECT count(*) FROM inbox.reconcile_runs)::int, 0, 'refused calls record no run');

-- A pass over an empty queue.
CREATE TEMP TABLE pass AS SELECT 1 AS n, inbox.reconcile() AS j;
SELECT is((SELECT j ->> 'trigger' FROM pass), 'manual', 'default trigger is manual');
SELECT is((SELECT (j ->> 'stuck')::int + (j ->> 'dead')::int + (j ->> 'leases_reclaimed')::int FROM pass),
          0, 'nothing to report on an empty queue');
SELECT ok((SELECT finished_at >= started_at AND NOT skipped AND counts ? 'stuck'
           FROM inbox.reconcile_runs WHERE id = (SELECT (j ->> 'run_id')::bigint FROM pass)),
          'the pass is recorded with its counts and times');

-- The scene.
SELECT inbox.register_provider('t_shop');
SELECT inbox.register_provider('t_bank', on_lease_expiry => 'hold');
SELECT inbox.register_provider('t_once', max_attempts => 1);
SELECT inbox.ingest('t_shop', 's' || g, jsonb_build_object('n', g)) FROM generate_series(1, 5) g;
SELECT inbox.ingest('t_bank', 'b' || g, '{}') FROM generate_series(1, 2) g;
SELECT inbox.ingest('t_shop', 'p1', '{}');
SELECT inbox.ingest('t_shop', 'p2', '{}');
SELECT inbox.ingest('t_bank', 'bp', '{}');
SELECT inbox.ingest('t_once', 'd1', '{}');

CREATE SCHEMA t30;
CREATE TABLE t30.orders (id text PRIMARY KEY, paid boolean);
INSERT INTO t30.orders VALUES ('s1', true), ('s2', true), ('s3', false);
CREATE FUNCTION t30.order_paid(e inbox.events) RETURNS boolean LANGUAGE sql AS
  $$ SELECT paid FROM t30.orders WHERE id = e.external_id $$;

-- s1..s3 done; s4, s5 leased (s4's lease expired); b1, b2 leased and expired.
SELECT inbox.complete(c.id, c.lease_token)
FROM inbox.claim(3, '1 hour', 't_shop') c;
CREATE TEMP TABLE leases AS
  SELECT c.external_id, c.id, c.lease_token FROM inbox.claim(2, '1 hour', 't_shop') c
  UNION ALL SELECT c.external_id, c.id, c.lease_token FROM inbox.claim(2, '1 hour', 't_bank') c;
UPDATE inbox.events SET lease_expires_at = now() - interval '1 minute'
 WHERE external_id IN ('s4', 'b1', 'b2');
-- p1 waited 2 hours (over the default), p2 20 minutes (over t_shop's 10),
-- bp 20 minutes (under t_bank's default hour).
SELECT inbox.set_stuck_after('t_shop', '10 minutes');
UPDATE inbox.events SET first_received_at = now() - interval '2 hours' WHERE external_id = 'p1';
UPDATE inbox.events SET first_received_at = now() - interval '20 minutes' WHERE external_id IN ('p2', 'bp');
-- d1 dies at its first failure.
SELECT inbox.fail(c.id, c.lease_token, 'boom') FROM inbox.claim(1, '1 hour', 't_once') c;

-- Verify function: bad registrations first.
SELECT throws_ok($$SELECT inbox.set_verify_function(NULL, 't30.order_paid(inbox.events)')$$,
                 '22004', 'provider must not be null', 'set_verify_function: NULL provider');
SELECT throws_ok($$SELECT inbox.set_verify_function('nope', 't30.order_paid(inbox.events)')$$,
                 '42704', 'unknown provider "nope"', 'set_verify_function: unknown provider');
SELECT throws_ok($$SELECT inbox.set_verify_function('t_shop', 'pg_catalog.now()')$$,
                 '42P13', 'verify function now() must take inbox.events and return boolean',
                 'set_verify_function: wrong signature');
SELECT throws_ok($$SELECT inbox.set_verify_function('t_shop', 't30.no_such(inbox.events)')$$,
                 '42883', NULL, 'set_verify_function: no such function');
SELECT throws_ok($$SELECT inbox.set_stuck_after('t_shop', '-1 minute')$$, '22023',
                 'stuck_after must be positive', 'set_stuck_after: negative');
SELECT throws_ok($$SELECT inbox.set_stuck_after('nope', '1 minute')$$, '42704',
                 'unknown provider "nope"', 'set_stuck_after: unknown provider');
SELECT throws_ok($$SELECT inbox.set_stuck_after(NULL, '1 minute')$$, '22004',
                 'provider must not be null', 'set_stuck_after: NULL provider');
SELECT lives_ok($$SELECT inbox.set_verify_function('t_shop', 't30.order_paid(inbox.events)')$$,
                'set_verify_function accepts f(inbox.events) RETURNS boolean');

INSERT INTO pass SELECT 2, inbox.reconcile('test');
SELECT is((SELECT j ->> 'trigger' FROM pass WHERE n = 2), 'test', 'trigger is recorded');
SELECT is((SELECT (j ->> 'leases_reclaimed')::int FROM pass WHERE n = 2), 1, 'one expired lease reclaimed (s4)');
SELECT is((SELECT status FROM inbox.events WHERE external_id = 's4'), 'pending', 's4 is pending again');
SELECT is((SELECT status FROM inbox.events WHERE external_id = 's5'), 'processing', 's5 (lease valid) untouched');
SELECT is((SELECT (j ->> 'leases_held')::int FROM pass WHERE n = 2), 2, 'two expired leases held (t_bank)');
SELECT is((SELECT count(*) FROM inbox.events WHERE provider = 't_bank' AND status = 'processing')::int, 2,
          'held leases stay processing');
SELECT is((SELECT (j ->> 'stuck')::int FROM pass WHERE n = 2), 4,
          'stuck: p1, p2 (per-provider threshold) and the two held leases, not bp');
SELECT is((SELECT (j ->> 'verified')::int FROM pass WHERE n = 2), 3, 'three done events verified');
SELECT is((SELECT (j ->> 'mismatches')::int FROM pass WHERE n = 2), 1, 'one mismatch (s3 unpaid)');
SELECT is((SELECT (j ->> 'reopened')::int FROM pass WHERE n = 2), 1, 'the mismatch is reopened');
SELECT is((SELECT status || '/' || (processed_at IS NULL)::text FROM inbox.events WHERE external_id = 's3'),
          'pending/true', 's3 is pending again');
SELECT is((SELECT h.status || '/' || h.attempts || '/' || (h.payload ->> 'n')
           FROM inbox.event_history h JOIN inbox.events e ON e.id = h.event_id
           WHERE e.external_id = 's3' AND h.reason = 'verify_mismatch'),
          'done/1/3', 'the processed attempt stays readable in event_history');
SELECT is((SELECT (j ->> 'dead')::int || '/' || (j ->> 'dead_new') FROM pass WHERE n = 2), '1/1',
          'one dead event, new since the last pass');
SELECT is((SELECT count(*) FROM inbox.event_history WHERE reason = 'lease_held')::int, 2,
          'held leases are recorded');

-- The worker whose lease was reclaimed cannot complete.
SELECT is(inbox.complete(l.id, l.lease_token), false, 'late complete after reclaim is refused')
FROM leases l WHERE l.external_id = 's4';

-- s3 processed again: a new attempt with a new lease.
SELECT is((SELECT c.attempts FROM inbox.claim(10, '1 hour', 't_shop') c WHERE c.external_id = 's3'), 2,
          'the reopened event is claimed as attempt 2');

-- A second pass records held leases only once per attempt.
INSERT INTO pass SELECT 3, inbox.reconcile('test');
SELECT is((SELECT (j ->> 'held_recorded')::int FROM pass WHERE n = 3), 0, 'held leases recorded once');
SELECT is((SELECT (j ->> 'leases_reclaimed')::int FROM pass WHERE n = 3), 0, 'nothing left to reclaim');
SELECT is((SELECT (j ->> 'dead_new')::int FROM pass WHERE n = 3), 0, 'no new dead since the last pass');

-- Mismatches stop being reopened after three.
UPDATE inbox.events SET status = 'done', processed_at = now(), lease_expires_at = NULL
 WHERE external_id = 's3';
INSERT INTO pass SELECT 4, inbox.reconcile('test');
UPDATE inbox.events SET status = 'done', processed_at = now() WHERE external_id = 's3';
INSERT INTO pass SELECT 5, inbox.reconcile('test');
UPDATE inbox.events SET status = 'done', processed_at = now() WHERE external_id = 's3';
INSERT INTO pass SELECT 6, inbox.reconcile('test');
SELECT is((SELECT string_agg(j ->> 'reopened', ',' ORDER BY n) FROM pass WHERE n IN (4, 5, 6)), '1,1,0',
          'reopened twice more, then not');
SELECT is((SELECT (j ->> 'verify_gave_up')::int FROM pass WHERE n = 6), 1, 'the fourth mismatch is reported');
SELECT is((SELECT status FROM inbox.events WHERE external_id = 's3'), 'done', 'and the event stays done');
SELECT is((SELECT count(*) FROM inbox.event_history h JOIN inbox.events e ON e.id = h.event_id
           WHERE e.external_id = 's3' AND h.reason = 'verify_mismatch')::int, 3, 'three recorded reopens');

-- A verify function that answers NULL, then one that was dropped.
UPDATE t30.orders SET paid = NULL WHERE id = 's1';
INSERT INTO pass SELECT 7, inbox.reconcile('test');
SELECT is((SELECT (j ->> 'verify_null')::int FROM pass WHERE n = 7), 1, 'a NULL answer is counted, not reopened');
DROP FUNCTION t30.order_paid(inbox.events);
INSERT INTO pass SELECT 8, inbox.reconcile('test');
SELECT is((SELECT (j ->> 'verify_missing')::int FROM pass WHERE n = 8), 1, 'a dropped verify function is reported');
SELECT lives_ok($$SELECT inbox.set_verify_function('t_shop', NULL)$$, 'NULL clears the verify function');
SELECT is((SELECT verify_function FROM inbox.providers WHERE name = 't_shop'), NULL, 'cleared');

-- The verify sweep: at most 1000 done events per provider and pass, resumed
-- where the previous pass stopped, starting over at the end.
SELECT inbox.register_provider('t_many');
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at, attempts)
SELECT 't_many', 'm' || g, '{}', 'done', now(), 1 FROM generate_series(1, 1500) g;
CREATE FUNCTION t30.always(e inbox.events) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
SELECT inbox.set_verify_function('t_many', 't30.always(inbox.events)');
INSERT INTO pass SELECT 11, inbox.reconcile('test');
INSERT INTO pass SELECT 12, inbox.reconcile('test');
INSERT INTO pass SELECT 13, inbox.reconcile('test');
SELECT is((SELECT string_agg((j ->> 'verified') || '/' || (j ->> 'more'), ',' ORDER BY n) FROM pass WHERE n IN (11, 12, 13)),
          '1000/true,500/false,1000/true', 'the sweep goes on where it stopped, then starts over');
SELECT inbox.set_verify_function('t_many', NULL);

-- A verify function that raises loses its own batch, not the pass.
SELECT inbox.register_provider('t_boom');
SELECT inbox.ingest('t_boom', 'x1', '{}');
SELECT inbox.complete(c.id, c.lease_token) FROM inbox.claim(1, '1 hour', 't_boom') c;
SELECT inbox.ingest('t_shop', 'late1', '{}');
CREATE TEMP TABLE boom_lease AS SELECT c.id FROM inbox.claim(10, '1 hour', 't_shop') c WHERE c.external_id = 'late1';
UPDATE inbox.events SET lease_expires_at = now() - interval '1 minute' WHERE id = (SELECT id FROM boom_lease);
CREATE FUNCTION t30.boom(e inbox.events) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'downstream unreachable'; END $$;
SELECT inbox.set_verify_function('t_boom', 't30.boom(inbox.events)');
SET LOCAL client_min_messages = error;
INSERT INTO pass SELECT 14, inbox.reconcile('test');
RESET client_min_messages;
SELECT is((SELECT j -> 'verify_failed' FROM pass WHERE n = 14), '["t_boom"]'::jsonb,
          'a raising verify function is reported');
SELECT is((SELECT status FROM inbox.events WHERE id = (SELECT id FROM boom_lease)), 'pending',
          'and the rest of the pass still repairs (lease reclaimed)');
SELECT inbox.set_verify_function('t_boom', NULL);

-- A scheduled pass reuses a dead count younger than 5 minutes; others count.
INSERT INTO pass SELECT 9, inbox.reconcile('schedule');
SELECT is((SELECT (j ->> 'dead_reused')::boolean || '/' || (j ->> 'dead') FROM pass WHERE n = 9), 'true/1',
          'a scheduled pass reuses the recent dead count');
UPDATE inbox.reconcile_runs SET counts = jsonb_set(counts, '{dead_counted_at}', to_jsonb(now() - interval '6 minutes'));
INSERT INTO pass SELECT 10, inbox.reconcile('schedule');
SELECT is((SELECT (j ->> 'dead_reused')::boolean FROM pass WHERE n = 10), false, 'but counts again once it is old');
INSERT INTO pass SELECT 15, inbox.reconcile('anomaly:dead_ratio');
SELECT is((SELECT (j ->> 'dead_reused')::boolean FROM pass WHERE n = 15), true,
          'a pass triggered by a firing check reuses the recent dead count too');
INSERT INTO pass SELECT 16, inbox.reconcile('manual');
SELECT is((SELECT (j ->> 'dead_reused')::boolean FROM pass WHERE n = 16), false, 'a manual pass counts afresh');

SELECT is((SELECT count(*) FROM inbox.reconcile_runs WHERE NOT skipped AND finished_at IS NOT NULL)::int, 16,
          'every pass is recorded');

SELECT * FROM finish();
ROLLBACK;

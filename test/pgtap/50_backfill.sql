-- The backfill queue the worker drains: claim (SKIP LOCKED + lease), then
-- fetched / not_found / failed, each fenced by the lease token; and the
-- worker role's privileges.
BEGIN;
SELECT plan(50);

SELECT inbox.register_provider('bf');
SELECT inbox.set_id_source('bf', 'sequence', 'e{n}', 1, '0 seconds');
SELECT inbox.ingest('bf', 'e' || g, '{}') FROM generate_series(1, 10) g WHERE g NOT IN (2, 4, 6, 8);
SELECT is((SELECT (inbox.scan_gaps('bf') ->> 'requested')::int), 4, 'four gaps became requests');

-- Bad input.
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(0)$$, '22023', 'max_rows must be between 1 and 1000, not 0',
                 'claim_backfill: max_rows 0');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(1001)$$, '22023', NULL, 'claim_backfill: max_rows over 1000');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(NULL)$$, '22023', NULL, 'claim_backfill: NULL max_rows');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(1, '0 seconds')$$, '22023', 'lease must be positive',
                 'claim_backfill: zero lease');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(1, NULL)$$, '22023', 'lease must be positive',
                 'claim_backfill: NULL lease');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill(1, '1 minute', 'nope')$$, '42704', 'unknown provider "nope"',
                 'claim_backfill: unknown provider');
SELECT throws_ok($$SELECT * FROM inbox.claim_backfill('many')$$, '22P02', NULL, 'claim_backfill: wrong type');
SELECT throws_ok($$SELECT inbox.backfill_fetched(NULL, gen_random_uuid(), '{}')$$, '22004', NULL,
                 'backfill_fetched: NULL request_id');
SELECT throws_ok($$SELECT inbox.backfill_fetched(-1, gen_random_uuid(), '{}')$$, 'P0002',
                 'backfill request -1 does not exist', 'backfill_fetched: unknown request');
SELECT throws_ok($$SELECT inbox.backfill_not_found(1, gen_random_uuid(), '')$$, '22023', NULL,
                 'backfill_not_found: empty reason');
SELECT throws_ok($$SELECT inbox.backfill_failed(1, gen_random_uuid(), NULL)$$, '22004', NULL,
                 'backfill_failed: NULL error');
SELECT throws_ok($$SELECT inbox.backfill_failed(1, gen_random_uuid(), 'x', '-1 second')$$, '22023', NULL,
                 'backfill_failed: negative retry_after');
SELECT throws_ok($$SELECT inbox.backfill_failed(1, gen_random_uuid(), 'x', NULL, 0)$$, '22023',
                 'max_attempts must be at least 1', 'backfill_failed: max_attempts 0');
SELECT throws_ok($$SELECT inbox.backfill_not_found(1, NULL)$$, '22004', NULL, 'backfill_not_found: NULL token');

-- Claims: disjoint, oldest first, leased.
CREATE TEMP TABLE c1 AS SELECT * FROM inbox.claim_backfill(2, '1 minute', 'bf');
CREATE TEMP TABLE c2 AS SELECT * FROM inbox.claim_backfill(10, '1 minute');
SELECT is((SELECT count(*) FROM c1)::int, 2, 'first claim: 2 requests');
SELECT is((SELECT count(*) FROM c2)::int, 2, 'second claim: the other 2');
SELECT is((SELECT count(*) FROM (SELECT external_id FROM c1 INTERSECT SELECT external_id FROM c2) x)::int, 0,
          'claims are disjoint');
SELECT is((SELECT count(*) FROM inbox.claim_backfill(10))::int, 0, 'nothing left while leased');
SELECT is((SELECT min(attempt) || '/' || max(attempt) FROM c1), '1/1', 'first attempt');

-- fetched with a payload: ingested in the same transaction.
SELECT is(inbox.backfill_fetched(request_id, lease_token, '{"from": "api"}'), 'inserted', 'fetched: ingested')
FROM c1 WHERE external_id = 'e2';
SELECT is((SELECT source || '/' || (payload ->> 'from') FROM inbox.events WHERE provider = 'bf' AND external_id = 'e2'),
          'backfill/api', 'the event is stored with source backfill');
SELECT is((SELECT status FROM inbox.backfill_requests WHERE external_id = 'e2' AND provider = 'bf'), 'fetched',
          'the request is fetched');
SELECT is((SELECT resolution FROM inbox.gaps WHERE provider = 'bf' AND external_id = 'e2'), 'arrived',
          'its gap is resolved');
SELECT is(inbox.backfill_fetched(request_id, lease_token, '{}'), 'lost', 'a second report is refused (lost)')
FROM c1 WHERE external_id = 'e2';
SELECT is(inbox.backfill_fetched(request_id, gen_random_uuid(), '{}'), 'lost', 'a wrong token is refused (lost)')
FROM c1 WHERE external_id = 'e4';

-- fetched without a payload: the worker ingested it itself first.
SELECT throws_ok(format('SELECT inbox.backfill_fetched(%s, %L)', request_id, lease_token), 'P0002', NULL,
                 'fetched without payload before the event exists')
FROM c1 WHERE external_id = 'e4';
SELECT inbox.ingest('bf', 'e4', '{}', source => 'backfill');
SELECT is(inbox.backfill_fetched(request_id, lease_token), 'ok', 'fetched after the worker ingested')
FROM c1 WHERE external_id = 'e4';

-- not_found: tombstoned with the reason.
SELECT is(inbox.backfill_not_found(request_id, lease_token, 'HTTP 404'), true, 'not_found accepted')
FROM c2 WHERE external_id = 'e6';
SELECT is((SELECT reason FROM inbox.tombstones WHERE provider = 'bf' AND external_id = 'e6'), 'HTTP 404',
          'the id is tombstoned with the reason');
SELECT is((SELECT status FROM inbox.backfill_requests WHERE provider = 'bf' AND external_id = 'e6'), 'not_found',
          'the request is not_found');
SELECT is(ARRAY(SELECT inbox.find_gaps('bf', 1, 10)), ARRAY['e8'], 'only e8 is still missing');

-- failed: retried with backoff, then given up.
SELECT is(inbox.backfill_failed(request_id, lease_token, 'HTTP 503'), 'retry', 'a failure is retried')
FROM c2 WHERE external_id = 'e8';
SELECT ok((SELECT status = 'pending' AND next_attempt_at > now() AND last_error = 'HTTP 503'
           FROM inbox.backfill_requests WHERE provider = 'bf' AND external_id = 'e8'), 'with a backoff');
SELECT is((SELECT count(*) FROM inbox.claim_backfill(10))::int, 0, 'not due during the backoff');
UPDATE inbox.backfill_requests SET next_attempt_at = now() WHERE provider = 'bf' AND external_id = 'e8';
CREATE TEMP TABLE c3 AS SELECT * FROM inbox.claim_backfill(10);
SELECT is((SELECT attempt FROM c3), 2, 'claimed again as attempt 2');
SELECT is(inbox.backfill_failed(request_id, lease_token, 'HTTP 429', '5 minutes'), 'retry', 'explicit retry_after')
FROM c3;
SELECT ok((SELECT next_attempt_at BETWEEN now() + interval '299 seconds' AND now() + interval '301 seconds'
           FROM inbox.backfill_requests WHERE provider = 'bf' AND external_id = 'e8'), 'retry_after is used as is');
UPDATE inbox.backfill_requests SET next_attempt_at = now() WHERE provider = 'bf' AND external_id = 'e8';
-- An expired lease is claimable again; the old token is then lost.
CREATE TEMP TABLE c4 AS SELECT * FROM inbox.claim_backfill(10);
UPDATE inbox.backfill_requests SET lease_expires_at = now() - interval '1 second' WHERE provider = 'bf' AND external_id = 'e8';
CREATE TEMP TABLE c5 AS SELECT * FROM inbox.claim_backfill(10);
SELECT is((SELECT attempt FROM c5), 4, 'an expired lease is claimed again');
SELECT is(inbox.backfill_failed(request_id, lease_token, 'late'), 'lost', 'the expired lease holder is lost') FROM c4;
SELECT is(inbox.backfill_failed(request_id, lease_token, 'HTTP 500', max_attempts => 4), 'gave_up',
          'gave up after max_attempts') FROM c5;

-- A request whose event arrives meanwhile is closed by the next claim.
SELECT inbox.ingest('bf', 'e20', '{}');
SELECT inbox.ingest('bf', 'e18', '{}');
SELECT inbox.scan_gaps('bf');
SELECT inbox.ingest('bf', 'e19', '{}');
SELECT is(ARRAY(SELECT external_id FROM inbox.claim_backfill(10) ORDER BY 1), ARRAY['e11', 'e12', 'e13', 'e14', 'e15', 'e16', 'e17'],
          'claim skips the request whose event arrived');
SELECT is((SELECT status FROM inbox.backfill_requests WHERE provider = 'bf' AND external_id = 'e19'), 'arrived',
          'and closes it');

-- The worker role: the queue functions, nothing else.
SET LOCAL ROLE inbox_worker;
SELECT lives_ok($$SELECT * FROM inbox.claim_backfill(1)$$, 'inbox_worker may claim backfill requests');
SELECT throws_ok($$SELECT inbox.backfill_failed(-1, gen_random_uuid(), 'x')$$, 'P0002', NULL,
                 'inbox_worker may report (the call reaches the function)');
SELECT throws_ok($$SELECT inbox.backfill_fetched(-1, gen_random_uuid(), '{}')$$, 'P0002', NULL,
                 'inbox_worker may report fetched');
SELECT throws_ok($$SELECT inbox.backfill_not_found(-1, gen_random_uuid())$$, 'P0002', NULL,
                 'inbox_worker may report not_found');
SELECT throws_ok($$SELECT count(*) FROM inbox.backfill_requests$$, '42501', NULL, 'but not read the table');
SELECT throws_ok($$SELECT inbox.reconcile()$$, '42501', NULL, 'nor reconcile');
SELECT throws_ok($$SELECT inbox.tombstone('bf', 'zz', 'x')$$, '42501', NULL, 'nor tombstone directly');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

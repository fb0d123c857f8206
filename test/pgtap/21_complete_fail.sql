-- inbox.complete / inbox.fail: fenced by the lease token.
BEGIN;
SELECT plan(27);

SELECT inbox.register_provider('stripe', max_attempts => 3, backoff_base => '10 seconds',
                               backoff_max => '25 seconds');
SELECT inbox.ingest('stripe', 'e' || i, '{}') FROM generate_series(1, 4) i;
CREATE TEMP TABLE lease1 AS SELECT id, external_id, lease_token FROM inbox.claim(10, '1 minute');
CREATE FUNCTION pg_temp.token(ext text) RETURNS uuid LANGUAGE sql AS
  $$ SELECT lease_token FROM inbox.events WHERE external_id = ext $$;
CREATE FUNCTION pg_temp.id(ext text) RETURNS bigint LANGUAGE sql AS
  $$ SELECT id FROM inbox.events WHERE external_id = ext $$;

-- complete
SELECT ok(inbox.complete(pg_temp.id('e1'), pg_temp.token('e1')), 'the lease holder completes');
SELECT row_eq($$ SELECT status, processed_at IS NOT NULL, lease_expires_at FROM inbox.events WHERE external_id = 'e1' $$,
              ROW('done'::text, true, NULL::timestamptz), 'completed: done, processed_at set, lease cleared');
SELECT ok(inbox.complete(pg_temp.id('e1'), pg_temp.token('e1')), 'completing again is idempotent');
SELECT is(inbox.ingest('stripe', 'e1', '{"late": true}'), 'duplicate', 're-delivery after complete is a duplicate');

-- A late worker whose lease was reclaimed cannot complete or fail.
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 'e2';
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 minute')), 1, 'the expired lease is reclaimed');
SELECT is(inbox.complete(pg_temp.id('e2'), (SELECT lease_token FROM lease1 WHERE external_id = 'e2')),
          false, 'the old token cannot complete');
SELECT is(inbox.fail(pg_temp.id('e2'), (SELECT lease_token FROM lease1 WHERE external_id = 'e2'), 'late'),
          'lost', 'the old token cannot fail');
SELECT is((SELECT status FROM inbox.events WHERE external_id = 'e2'), 'processing', 'still leased to the new holder');
SELECT ok(inbox.complete(pg_temp.id('e2'), pg_temp.token('e2')), 'the new holder completes');

-- An expired lease nobody reclaimed still completes: nobody else has it.
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 'e3';
SELECT ok(inbox.complete(pg_temp.id('e3'), pg_temp.token('e3')), 'expired but not reclaimed: completes');

-- fail: retry with capped exponential backoff and jitter, then dead.
SELECT is(inbox.fail(pg_temp.id('e4'), pg_temp.token('e4'), 'timeout'), 'retry', 'first failure retries');
SELECT row_eq($$ SELECT status, last_error, lease_expires_at FROM inbox.events WHERE external_id = 'e4' $$,
              ROW('pending'::text, 'timeout'::text, NULL::timestamptz), 'failed: pending again with the error');
SELECT ok((SELECT next_attempt_at - now() BETWEEN interval '5 seconds' AND interval '10 seconds'
             FROM inbox.events WHERE external_id = 'e4'), 'attempt 1 waits base * [0.5, 1]');
UPDATE inbox.events SET next_attempt_at = now() WHERE external_id = 'e4';
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 minute')), 1, 'claimed again after backoff');
SELECT is(inbox.fail(pg_temp.id('e4'), pg_temp.token('e4'), 'timeout', '2 minutes'), 'retry', 'second failure');
SELECT is((SELECT next_attempt_at - now() FROM inbox.events WHERE external_id = 'e4'),
          interval '2 minutes', 'retry_after overrides the backoff');
UPDATE inbox.events SET next_attempt_at = now() WHERE external_id = 'e4';
SELECT count(*) FROM inbox.claim(10, '1 minute');
SELECT is(inbox.fail(pg_temp.id('e4'), pg_temp.token('e4'), repeat('x', 5000)), 'dead', 'max_attempts reached: dead');
SELECT row_eq($$ SELECT status, attempts, processed_at IS NOT NULL, length(last_error) FROM inbox.events WHERE external_id = 'e4' $$,
              ROW('dead'::text, 3, true, 4096), 'dead after 3 attempts; long errors keep 4096 characters');
SELECT is(inbox.ingest('stripe', 'e4', '{}'), 'duplicate', 'dead is terminal for ingest');

-- Bad input
SELECT throws_ok($$ SELECT inbox.complete(1, 'not-a-uuid') $$, '22P02', NULL, 'lease_token of the wrong type');
SELECT throws_ok($$ SELECT inbox.complete(NULL, gen_random_uuid()) $$, '22004', 'id must not be null');
SELECT throws_ok($$ SELECT inbox.complete(1, NULL) $$, '22004', 'lease_token must not be null');
SELECT throws_ok($$ SELECT inbox.complete(-1, gen_random_uuid()) $$, 'P0002', 'event -1 does not exist');
SELECT throws_ok(format('SELECT inbox.complete(%s, gen_random_uuid())', pg_temp.id('e3')), '22023',
  'lease token was never issued for event ' || pg_temp.id('e3'));
SELECT throws_ok(format('SELECT inbox.fail(%s, %L, NULL)', pg_temp.id('e3'), pg_temp.token('e3')), '22004',
  'error must not be null');
SELECT throws_ok(format('SELECT inbox.fail(%s, %L, ''x'', ''-1 second'')', pg_temp.id('e3'), pg_temp.token('e3')),
  '22023', 'retry_after must not be negative');
SELECT throws_ok(format('SELECT inbox.fail(%s, gen_random_uuid(), ''x'')', pg_temp.id('e3')), '22023',
  'lease token was never issued for event ' || pg_temp.id('e3'));

SELECT * FROM finish();
ROLLBACK;

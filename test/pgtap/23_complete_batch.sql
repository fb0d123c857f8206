-- inbox.complete_batch: complete() for many events in one statement.
BEGIN;
SELECT plan(17);

SELECT inbox.register_provider('stripe');
SELECT inbox.ingest('stripe', 'e' || i, '{}') FROM generate_series(1, 4) i;
CREATE TEMP TABLE leases AS SELECT id, external_id, lease_token FROM inbox.claim(10, '1 minute');
CREATE TEMP TABLE old AS SELECT * FROM leases WHERE external_id = 'e3';
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 'e3';
SELECT count(*) FROM inbox.claim(10, '1 minute');   -- e3 is reclaimed: its old token is lost

SELECT is(inbox.complete_batch(ARRAY(SELECT id FROM leases WHERE external_id IN ('e1', 'e2', 'e3') ORDER BY external_id),
                               ARRAY(SELECT lease_token FROM leases WHERE external_id IN ('e1', 'e2', 'e3') ORDER BY external_id)),
          ARRAY[true, true, false], 'one result per element, in order; a lost lease is false');
SELECT set_eq($$ SELECT external_id FROM inbox.events WHERE status = 'done' $$, ARRAY['e1', 'e2'],
  'only the holders'' events are done');
SELECT is(inbox.complete_batch(ARRAY(SELECT id FROM leases WHERE external_id = 'e1'),
                               ARRAY(SELECT lease_token FROM leases WHERE external_id = 'e1')),
          ARRAY[true], 'completing again is idempotent');
SELECT is(inbox.complete_batch('{}', '{}'), '{}'::boolean[], 'an empty batch is a no-op');

-- Elements matched to what the UPDATE completed by id and token together.
SELECT inbox.ingest('stripe', 'f' || i, '{}') FROM generate_series(1, 3) i;
CREATE TEMP TABLE more AS SELECT id, external_id, lease_token FROM inbox.claim(10, '1 minute') WHERE external_id LIKE 'f%';
SELECT is(inbox.complete_batch(ARRAY(SELECT id FROM more WHERE external_id = 'f2') || ARRAY(SELECT id FROM leases WHERE external_id = 'e1')
                               || ARRAY(SELECT id FROM more WHERE external_id = 'f2') || ARRAY(SELECT id FROM old)
                               || ARRAY(SELECT id FROM more WHERE external_id = 'f1'),
                               ARRAY(SELECT lease_token FROM more WHERE external_id = 'f2') || ARRAY(SELECT lease_token FROM leases WHERE external_id = 'e1')
                               || ARRAY(SELECT lease_token FROM more WHERE external_id = 'f2') || ARRAY(SELECT lease_token FROM old)
                               || ARRAY(SELECT lease_token FROM more WHERE external_id = 'f1')),
          ARRAY[true, true, true, false, true],
          'in input order: completed, already done, the same pair again, a lost lease, completed');
SELECT throws_ok(format('SELECT inbox.complete_batch(ARRAY[%s, %s], ARRAY[%L, %L]::uuid[])',
                        (SELECT id FROM more WHERE external_id = 'f3'), (SELECT id FROM leases WHERE external_id = 'e4'),
                        (SELECT lease_token FROM leases WHERE external_id = 'e4'), (SELECT lease_token FROM more WHERE external_id = 'f3')),
  '22023', 'lease token was never issued for event ' || (SELECT id FROM more WHERE external_id = 'f3'),
  'two held tokens swapped between their events: an error naming the first');
SELECT is(ARRAY(SELECT status FROM inbox.events WHERE external_id IN ('f3', 'e4') ORDER BY external_id),
          ARRAY['processing', 'processing'], '... and neither event is completed');
SELECT throws_ok(format('SELECT inbox.complete_batch(ARRAY[%s, -1], ARRAY[gen_random_uuid(), gen_random_uuid()])',
                        (SELECT id FROM more WHERE external_id = 'f3')),
  '22023', 'lease token was never issued for event ' || (SELECT id FROM more WHERE external_id = 'f3'),
  'the first bad element in input order is the one named');
SELECT throws_ok($$ SELECT inbox.complete_batch('{{1}}', ARRAY[[gen_random_uuid()]]) $$,
  '2202E', 'ids and lease_tokens must be one-dimensional');

-- Bad input: a clear error, and the whole batch rolls back.
SELECT throws_ok($$ SELECT inbox.complete_batch(NULL, '{}') $$, '22004', 'ids must not be null');
SELECT throws_ok($$ SELECT inbox.complete_batch('{1}', NULL) $$, '22004', 'lease_tokens must not be null');
SELECT throws_ok($$ SELECT inbox.complete_batch('{1, NULL}', ARRAY[gen_random_uuid(), gen_random_uuid()]) $$,
  '22004', 'ids and lease_tokens must not contain nulls');
SELECT throws_ok($$ SELECT inbox.complete_batch('{1, 2}', ARRAY[gen_random_uuid()]) $$,
  '2202E', 'ids and lease_tokens must have the same length');
SELECT throws_ok($$ SELECT inbox.complete_batch('{-1}', ARRAY[gen_random_uuid()]) $$,
  'P0002', 'event -1 does not exist');
SELECT throws_ok(format('SELECT inbox.complete_batch(ARRAY[%s, %s], ARRAY[%L, gen_random_uuid()]::uuid[])',
                        (SELECT id FROM leases WHERE external_id = 'e4'), (SELECT id FROM leases WHERE external_id = 'e4'),
                        (SELECT lease_token FROM leases WHERE external_id = 'e4')),
  '22023', 'lease token was never issued for event ' || (SELECT id FROM leases WHERE external_id = 'e4'));
SELECT is((SELECT status FROM inbox.events WHERE external_id = 'e4'), 'processing',
  'a batch with a bad element completes nothing');
SELECT throws_ok($$ SELECT inbox.complete_batch(array_fill(1::bigint, ARRAY[10001]), array_fill(gen_random_uuid(), ARRAY[10001])) $$,
  '54000', 'a batch holds at most 10000 events, got 10001');

SELECT * FROM finish();
ROLLBACK;

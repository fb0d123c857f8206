-- inbox.ingest: one atomic upsert keyed by (provider, external_id).
BEGIN;
SELECT plan(47);

SELECT inbox.register_provider('stripe');
SELECT inbox.register_provider('github');

SELECT is(inbox.ingest('stripe', 'evt_1', '{"v": 1}'), 'inserted', 'first delivery is inserted');
SELECT is(inbox.ingest('stripe', 'evt_1', '{"v": 2}', '{"h": "x"}'), 'updated',
  'a re-delivery of an open event is updated');
SELECT row_eq($$ SELECT payload, headers, delivery_count, status, source
                 FROM inbox.events WHERE provider = 'stripe' AND external_id = 'evt_1' $$,
  ROW('{"v": 2}'::jsonb, '{"h": "x"}'::jsonb, 2, 'pending'::text, 'webhook'::text),
  'the re-delivery refreshed payload and headers and counted the delivery');
SELECT is(inbox.ingest('github', 'evt_1', '{}'), 'inserted',
  'the same external id from another provider is another event');
SELECT is(inbox.ingest('stripe', 'evt_b', '{}', NULL, 'backfill'), 'inserted', 'source can be set');
SELECT is((SELECT source FROM inbox.events WHERE external_id = 'evt_b'), 'backfill', 'source is stored');

-- A processed event is terminal: re-deliveries change nothing.
UPDATE inbox.events SET status = 'done', processed_at = now() - interval '1 hour'
 WHERE provider = 'stripe' AND external_id = 'evt_1';
CREATE TEMP TABLE before_dup AS SELECT * FROM inbox.events WHERE external_id = 'evt_1' AND provider = 'stripe';
SELECT is(inbox.ingest('stripe', 'evt_1', '{"v": 3}'), 'duplicate', 'a processed event is a duplicate');
SELECT results_eq($$ SELECT * FROM inbox.events WHERE provider = 'stripe' AND external_id = 'evt_1' $$,
                  $$ SELECT * FROM before_dup $$, 'a duplicate changes nothing in the row');

-- Batches: one outcome per element, in order.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe', 'stripe'],
                             ARRAY['b1', 'b2', 'b1', 'evt_1'],
                             ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{}']::jsonb[]),
          ARRAY['inserted', 'inserted', 'updated', 'duplicate'],
          'batch outcomes in input order; an id twice in a batch is inserted then updated');
SELECT row_eq($$ SELECT payload, delivery_count FROM inbox.events WHERE external_id = 'b1' $$,
              ROW('{"n": 3}'::jsonb, 2), 'the last copy in a batch wins and every copy is counted');
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['b2', 'b9'],
                             ARRAY['{}', '{}']::jsonb[], ARRAY['{"a": 1}', NULL]::jsonb[]),
          ARRAY['updated', 'inserted'], 'batch with headers');
SELECT is(inbox.ingest_batch('{}', '{}', '{}'), '{}'::text[], 'an empty batch is a no-op');

-- The external_id limit has one definition (extension/limits.hpp), read by
-- SQL through inbox._external_id_limit(): ingest's own check and the table's
-- CHECK agree to the byte.
SELECT is(inbox.ingest('stripe', repeat('y', inbox._external_id_limit()), '{}'), 'inserted',
  'an id of exactly the limit is accepted');
SELECT throws_ok(format('SELECT inbox.ingest(%L, repeat(%L, %s), %L)', 'stripe', 'y',
                        inbox._external_id_limit() + 1, '{}'),
  '22001', format('external_id is %s bytes, over the limit of %s', inbox._external_id_limit() + 1,
                  inbox._external_id_limit()),
  'one byte more is refused by ingest, with its own message');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload)
                    VALUES ('stripe', repeat('z', inbox._external_id_limit() + 1), '{}') $$,
  '23514', NULL, 'the table itself refuses an id over the limit');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload) VALUES ('stripe', '', '{}') $$,
  '23514', NULL, 'and an empty one');

-- Bad input: a clear error, nothing written.
CREATE TEMP TABLE count_before AS SELECT count(*) AS n FROM inbox.events;
SELECT throws_ok($$ SELECT inbox.ingest(NULL, 'x', '{}') $$, '22004', 'provider must not be null');
SELECT throws_ok($$ SELECT inbox.ingest('', 'x', '{}') $$, '22023', 'provider must not be empty');
SELECT throws_ok($$ SELECT inbox.ingest('nope', 'x', '{}') $$, '42704', 'unknown provider "nope"');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', NULL, '{}') $$, '22004', 'external_id must not be null');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', '', '{}') $$, '22023', 'external_id must not be empty');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', repeat('x', 256), '{}') $$, '22001',
  'external_id is 256 bytes, over the limit of 255');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x', NULL) $$, '22004', 'payload must not be null');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x', 'not json') $$, '22P02', NULL,
  'a payload that is not JSON is refused by the jsonb type');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x', '{}', NULL, '') $$, '22023', 'source must not be empty');
SET pg_inbox.max_payload_size = '1kB';
SELECT throws_like($$ SELECT inbox.ingest('stripe', 'x', jsonb_build_object('big', repeat('x', 2000))) $$,
  'payload is % bytes, over pg_inbox.max_payload_size (1 kB)', 'oversized payload');
RESET pg_inbox.max_payload_size;
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a', 'b'], ARRAY['{}']::jsonb[]) $$,
  '2202E', 'providers, external_ids, payloads and headers must have the same length');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe', 'nope'], ARRAY['ok1', 'ok2'], ARRAY['{}', '{}']::jsonb[]) $$,
  '42704', 'unknown provider "nope"');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['ok1', NULL], ARRAY['{}', '{}']::jsonb[]) $$,
  '22004', 'external_id must not be null');
SELECT is((SELECT count(*) FROM inbox.events), (SELECT n FROM count_before),
  'no bad call wrote a row, not even the good events of a bad batch');

-- ingest tries a plain update first while most of the connection's recent
-- ids were open events, and the upsert when that changed nothing; otherwise
-- the upsert alone (RecentIds, extension/ingest.cpp). The outcomes are the
-- same either way; each way is run below.
SELECT inbox.ingest('stripe', 'storm', '{}');
SELECT is((SELECT array_agg(inbox.ingest('stripe', 'storm', jsonb_build_object('n', g)) ORDER BY g)
             FROM generate_series(1, 12) g),
          array_fill('updated'::text, ARRAY[12]), 'a storm of re-deliveries: each one updated');
SELECT row_eq($$ SELECT delivery_count, payload FROM inbox.events WHERE external_id = 'storm' $$,
              ROW(13, '{"n": 12}'::jsonb), '... each one counted, the last payload stored');
-- After it, the update first:
SELECT is(inbox.ingest('stripe', 'after_storm', '{}'), 'inserted', 'update first: a new id is inserted');
SELECT is(inbox.ingest('stripe', 'evt_1', '{"v": 4}'), 'duplicate', 'update first: a processed id is a duplicate');
SELECT throws_ok($$ SELECT inbox.ingest('nope', 'x', '{}') $$, '42704', 'unknown provider "nope"',
                 'update first: an unknown provider is refused');
SELECT is(inbox.ingest('stripe', 'storm', '{"n": 13}'), 'updated', 'update first: a re-delivery is updated');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'storm'), 14, '... and counted');
-- After a run of new ids, the upsert alone first (no CTEs around it):
SELECT is((SELECT array_agg(inbox.ingest('stripe', 'fresh_' || g, '{}') ORDER BY g) FROM generate_series(1, 12) g),
          array_fill('inserted'::text, ARRAY[12]), 'a run of new ids: each one inserted');
SELECT is(inbox.ingest('stripe', 'storm', '{}'), 'updated', 'upsert alone first: a re-delivery of an open id is updated');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'storm'), 15, '... and counted');
SELECT is(inbox.ingest('stripe', 'evt_1', '{"v": 5}'), 'duplicate', 'upsert alone first: a processed id is a duplicate');
SELECT throws_ok($$ SELECT inbox.ingest('nope', 'x', '{}') $$, '42704', 'unknown provider "nope"',
                 'upsert alone first: an unknown provider is refused');
-- After a run of duplicates, the full statement first:
SELECT is((SELECT array_agg(inbox.ingest('stripe', 'evt_1', '{}') ORDER BY g) FROM generate_series(1, 12) g),
          array_fill('duplicate'::text, ARRAY[12]), 'a run of duplicates: each one a duplicate');
SELECT is(inbox.ingest('stripe', 'after_duplicates', '{}'), 'inserted', 'full statement first: a new id is inserted');
SELECT is(inbox.ingest('stripe', 'storm', '{}'), 'updated', 'full statement first: a re-delivery of an open id is updated');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'storm'), 16, '... and counted');
SELECT throws_ok($$ SELECT inbox.ingest('nope', 'x', '{}') $$, '42704', 'unknown provider "nope"',
                 'full statement first: an unknown provider is refused');

SELECT * FROM finish();
ROLLBACK;

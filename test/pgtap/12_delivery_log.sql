-- Issue 12: a re-delivery never changes the payload a worker holds, and
-- every delivery is a row of the log inbox.deliveries (a view over
-- inbox.delivery_batches: one hash-chained row per ingest call), which
-- inbox.verify_log checks (tampering as a superuser with the triggers off
-- included) and inbox.seal_log seals.
BEGIN;
SELECT plan(97);

SELECT inbox.register_provider('stripe');
CREATE FUNCTION pg_temp.log(ext text) RETURNS TABLE (delivery int, outcome text, kept boolean, differs boolean)
LANGUAGE sql AS $$
    SELECT d.delivery, d.outcome, d.payload_kept, d.payload_differs FROM inbox.deliveries d
     WHERE d.provider = 'stripe' AND d.external_id = ext ORDER BY d.stripe, d.seq, d.item
$$;

-- Structure.
SELECT has_table('inbox', 'delivery_batches', 'inbox.delivery_batches exists');
SELECT has_view('inbox', 'deliveries', 'inbox.deliveries is a view');
SELECT has_table('inbox', 'log_seals', 'inbox.log_seals exists');
SELECT has_function('inbox', 'verify_log', ARRAY['timestamp with time zone', 'timestamp with time zone'],
                    'inbox.verify_log exists');
SELECT has_function('inbox', 'seal_log', ARRAY[]::text[], 'inbox.seal_log exists');
SELECT is(inbox._log_stripes(), 64, 'sixty-four stripes (16 base, 48 overflow)');
SELECT is((SELECT count(*)::int FROM pg_extension e, unnest(e.extconfig) c
            WHERE e.extname = 'pg_inbox'
              AND c IN ('inbox.delivery_batches'::regclass, 'inbox.delivery_duplicates'::regclass,
                        'inbox.log_seals'::regclass)),
          3, 'the log''s tables are dumped with their rows');

-- A row's arrays are parallel: an insert that is not (only the owner could
-- try one; ingest builds them so) is refused, and nothing is stored.
CREATE FUNCTION pg_temp.insert_batch(ids bigint[], deliveries int[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO inbox.delivery_batches (stripe, seq, received_at, source, event_ids, deliveries, outcomes,
                                        payload_kept, payload_differs, differing, providers, external_ids,
                                        body_hashed, signature_schemes, body_sha256, headers_sha256, hash)
    VALUES (15, 1000000, now(), 'webhook', ids, deliveries, '{inserted}', '{f}', '{f}', 0, '{stripe}', '{x}',
            '{jsonb}', '{NULL}', ARRAY[sha256('')], '{NULL}', sha256(''))
$$;
SELECT throws_ok($$ SELECT pg_temp.insert_batch('{1}', '{1,2}') $$, '23514', NULL,
                 'a row whose arrays differ in length is refused');
SELECT throws_ok($$ SELECT pg_temp.insert_batch('{{1}}', '{1}') $$, '23514', NULL,
                 'a two-dimensional array is refused');
SELECT throws_ok($$ SELECT pg_temp.insert_batch('{}', '{}') $$, '23514', NULL, 'a row of empty arrays is refused');
SELECT is(inbox._log_arrays_aligned('{1}', '{1}', '{a}', '{t}', '{f}', '{a}', '{a}', '{a}', '{NULL}', '{NULL}', '{NULL}'),
          true, 'one element in each array (NULL elements included) is aligned');
SELECT is(inbox._log_arrays_aligned(NULL, '{1}', '{a}', '{t}', '{f}', '{a}', '{a}', '{a}', '{a}', '{NULL}', '{NULL}'),
          false, 'a NULL array is not');

-- No silent overwrite: pending events are refreshed, processing ones kept.
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 100}', '{"h": 1}'), 'inserted', 'first delivery');
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 200}', '{"h": 2}'), 'updated', 'a re-delivery while pending');
SELECT row_eq($$ SELECT payload, headers, delivery_count FROM inbox.events WHERE external_id = 'p1' $$,
              ROW('{"amount": 200}'::jsonb, '{"h": 2}'::jsonb, 2), 'pending: payload and headers refreshed');
CREATE TEMP TABLE held AS SELECT id, lease_token FROM inbox.claim(1, provider => 'stripe');
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 999}', '{"h": 3}'), 'updated',
          'a re-delivery while processing is still counted as updated');
SELECT row_eq($$ SELECT payload, headers, delivery_count, status FROM inbox.events WHERE external_id = 'p1' $$,
              ROW('{"amount": 200}'::jsonb, '{"h": 2}'::jsonb, 3, 'processing'::text),
              'processing: the worker''s payload and headers are kept, the delivery counted');
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 200}'), 'updated', 'the same body again while processing');
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['p1', 'p1'],
                             ARRAY['{"amount": 1}', '{"amount": 200}']::jsonb[]),
          ARRAY['updated', 'updated'], 'a batch re-delivering it twice while processing');
SELECT row_eq($$ SELECT payload, delivery_count FROM inbox.events WHERE external_id = 'p1' $$,
              ROW('{"amount": 200}'::jsonb, 6), 'the batch kept the payload too and counted both');
SELECT results_eq($$ SELECT * FROM pg_temp.log('p1') $$,
                  $$ VALUES (1, 'inserted', false, false), (2, 'updated', false, false), (3, 'updated', true, true),
                            (4, 'updated', true, false), (5, 'updated', true, true), (6, 'updated', true, false) $$,
                  'the log numbers every delivery and says which bodies differed from the kept payload');
SELECT ok(inbox.complete(id, lease_token), 'the worker completes what it claimed') FROM held;
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 5}'), 'duplicate', 'a processed event is a duplicate');
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['p1', 'p1'], ARRAY['{}', '{}']::jsonb[]),
          ARRAY['duplicate', 'duplicate'], 'twice in a batch');
SELECT results_eq($$ SELECT * FROM pg_temp.log('p1') WHERE outcome = 'duplicate' $$,
                  $$ VALUES (7, 'duplicate', false, false), (8, 'duplicate', false, false), (9, 'duplicate', false, false) $$,
                  'duplicates are logged too, numbered on from the event''s deliveries');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'p1'), 6,
          'duplicates still leave the event row alone');

-- Batches: copies of an id numbered in input order; new and open events.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['b1', 'b2', 'b1'],
                             ARRAY['{"n": 1}', '{}', '{"n": 2}']::jsonb[]),
          ARRAY['inserted', 'inserted', 'updated'], 'a batch with an id twice');
SELECT results_eq($$ SELECT * FROM pg_temp.log('b1') $$, $$ VALUES (1, 'inserted', false, false), (2, 'updated', false, false) $$,
                  'its copies are deliveries 1 and 2');
SELECT results_eq($$ SELECT count(DISTINCT (stripe, seq))::int, array_agg(item ORDER BY item) FROM inbox.deliveries
                      WHERE external_id IN ('b1', 'b2') $$,
                  $$ VALUES (1, ARRAY[1, 2, 3]) $$, 'a call is one stored row, its deliveries items 1 to 3');
SELECT is((SELECT duplicates FROM inbox.delivery_duplicates d JOIN inbox.events e ON e.id = d.event_id
            WHERE e.external_id = 'p1'), 3, 'the duplicates of an event are counted in one row');
SELECT is(inbox.ingest('stripe', 'p1', '{"amount": 6}'), 'duplicate', 'a single duplicate after the batch''s');
SELECT results_eq($$ SELECT d.delivery, c.duplicates FROM inbox.deliveries d
                      JOIN inbox.delivery_duplicates c ON c.event_id = d.event_id
                     WHERE d.provider = 'stripe' AND d.external_id = 'p1' ORDER BY d.delivery DESC LIMIT 1 $$,
                  $$ VALUES (10, 4) $$, 'it is delivery 10 and the fourth duplicate counted');
SELECT is((SELECT count(*)::int FROM inbox.deliveries d JOIN inbox.events e ON e.id = d.event_id
            WHERE e.external_id <> d.external_id OR e.provider <> d.provider), 0,
          'every row names its event by id, provider and external id');

-- What a row holds: body and header digests, source, scheme, time.
SELECT inbox.ingest('stripe', 'h1', '{"b": 1}');
SELECT row_eq($$ SELECT body_sha256, body_hashed, signature_scheme, headers_sha256, source, received_at
                   FROM inbox.deliveries WHERE external_id = 'h1' $$,
              ROW(sha256(convert_to('{"b": 1}', 'UTF8')), 'jsonb'::text, NULL::text, NULL::bytea, 'webhook'::text, now()),
              'without a raw digest the body hash is of the stored jsonb as text');
SELECT inbox.ingest('stripe', 'h2', '{"b": 2}', '{"x-sig": "v1"}', 'backfill', sha256('raw body'), 'stripe');
SELECT row_eq($$ SELECT body_sha256, body_hashed, signature_scheme, headers_sha256, source
                   FROM inbox.deliveries WHERE external_id = 'h2' $$,
              ROW(sha256('raw body'), 'raw'::text, 'stripe'::text, sha256(convert_to('{"x-sig": "v1"}', 'UTF8')),
                  'backfill'::text),
              'the raw body''s digest and the signature scheme as passed, the headers'' digest');
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['h3', 'h4'], ARRAY['{}', '{}']::jsonb[], NULL,
                             'webhook', ARRAY[sha256('a'), NULL], ARRAY['github', NULL]),
          ARRAY['inserted', 'inserted'], 'a batch with digests and schemes, NULL elements allowed');
SELECT results_eq($$ SELECT body_sha256, body_hashed, signature_scheme FROM inbox.deliveries
                      WHERE external_id IN ('h3', 'h4') ORDER BY external_id $$,
                  $$ VALUES (sha256('a'), 'raw', 'github'), (sha256(convert_to('{}', 'UTF8')), 'jsonb', NULL) $$,
                  'each element''s digest and scheme');

-- The text a body's and headers' digests cover is jsonb_out's, byte for
-- byte (extension/jsonb_text.cpp writes it without jsonb_out): escapes,
-- control characters, multibyte text, numbers, nesting, scalars, empties.
CREATE TEMP TABLE odd_bodies (n int, body jsonb);
INSERT INTO odd_bodies VALUES
    (1, $j${"tab": "a\tb", "quote": "say \"hi\"", "slash": "back\\slash /", "nl": "x\ny\r\n",
          "bf": "\b\f", "ctl": "\u0001\u001f\u007f", "uni": "é€😀 \u00e9", "k\"ey": {"": ""}}$j$),
    (2, '[1, 2.50, -0, 1e3, 1.0E-5, 123456789012345678901234567890.5, true, false, null, [], {}, [[]], {"a": {}}]'),
    (3, '"a scalar \"string\""'), (4, '42'), (5, 'null'), (6, 'true'), (7, '{}'), (8, '[]'),
    (9, '{"nested": [{"k": [1, {"x": null}]}, [2, [3, [4]]]], "z": [{"a": 1, "b": [true]}]}'),
    (10, jsonb_build_object('long', repeat('plain ' || E'\t' || '"q" ', 2000), 'n', 1));
SELECT is(inbox.ingest_batch(array_fill('stripe'::text, ARRAY[10]),
                             ARRAY(SELECT 'odd' || n FROM odd_bodies ORDER BY n),
                             ARRAY(SELECT body FROM odd_bodies ORDER BY n),
                             ARRAY(SELECT body FROM odd_bodies ORDER BY n)),
          array_fill('inserted'::text, ARRAY[10]), 'ten odd bodies, as headers too');
SELECT is((SELECT array_agg(o.n ORDER BY o.n) FROM inbox.deliveries d JOIN odd_bodies o ON d.external_id = 'odd' || o.n
            WHERE d.body_sha256 = sha256(convert_to(o.body::text, 'UTF8'))
              AND d.headers_sha256 = sha256(convert_to(o.body::text, 'UTF8'))),
          ARRAY[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'each body''s and headers'' digest is of their jsonb text');

-- Bad input: nothing is written.
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x1', '{}', NULL, 'webhook', '\x00'::bytea) $$, '22023',
                 'body_sha256 must be a SHA-256 digest of 32 bytes, not 1', 'a digest that is not 32 bytes');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x1', '{}', NULL, 'webhook', ''::bytea) $$, '22023',
                 'body_sha256 must be a SHA-256 digest of 32 bytes, not 0', 'an empty digest');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x1', '{}', NULL, 'webhook', NULL, '') $$, '22023',
                 'signature_scheme must not be empty', 'an empty scheme');
SELECT throws_ok($$ SELECT inbox.ingest('stripe', 'x1', '{}', NULL, 'webhook', NULL, repeat('s', 65)) $$, '22001',
                 'signature_scheme is 65 bytes, over the limit of 64', 'an oversized scheme');
SELECT throws_ok($$ SELECT inbox.ingest('nobody', 'x1', '{}', NULL, 'webhook', sha256('a'), 'stripe') $$, '42704',
                 NULL, 'an unknown provider');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['x1'], ARRAY['{}']::jsonb[], NULL, 'webhook',
                                              ARRAY[sha256('a'), sha256('b')]) $$, '2202E',
                 'body_sha256s must have as many elements as providers', 'digests of another length');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['x1'], ARRAY['{}']::jsonb[], NULL, 'webhook',
                                              NULL, ARRAY['a', 'b']) $$, '2202E',
                 'signature_schemes must have as many elements as providers', 'schemes of another length');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['x1', 'x2'], ARRAY['{}', '{}']::jsonb[],
                                              NULL, 'webhook', ARRAY[sha256('a'), '\x01'::bytea]) $$, '22023',
                 'body_sha256 must be a SHA-256 digest of 32 bytes, not 1', 'a short digest in a batch');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['x1'], ARRAY['{}']::jsonb[], NULL, 'webhook',
                                              NULL, ARRAY['']) $$, '22023',
                 'signature_scheme must not be empty', 'an empty scheme in a batch');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['x1'], ARRAY['{}']::jsonb[], NULL, 'webhook',
                                              ARRAY[[sha256('a')]]) $$, '2202E',
                 'body_sha256s must be a one-dimensional array', 'a two-dimensional digest array');
SELECT is((SELECT count(*)::int FROM inbox.deliveries WHERE external_id LIKE 'x%'), 0, 'bad input logs nothing');

-- The 0.1.0 definitions (five arguments) bind the same symbols: they keep
-- payloads too, but write no log (0.1.0 has no log tables).
CREATE FUNCTION pg_temp.ingest_010(text, text, jsonb, jsonb, text) RETURNS text
    AS '$libdir/pg_inbox', 'inbox_ingest' LANGUAGE C;
CREATE FUNCTION pg_temp.ingest_batch_010(text[], text[], jsonb[], jsonb[], text) RETURNS text[]
    AS '$libdir/pg_inbox', 'inbox_ingest_batch' LANGUAGE C;
SELECT is(pg_temp.ingest_010('stripe', 'old1', '{}', NULL, 'webhook'), 'inserted', 'the 0.1.0 ingest still works');
SELECT is(pg_temp.ingest_batch_010(ARRAY['stripe'], ARRAY['old2'], ARRAY['{}']::jsonb[], NULL, 'webhook'),
          ARRAY['inserted'], 'the 0.1.0 ingest_batch still works');
SELECT is((SELECT count(*)::int FROM inbox.deliveries WHERE external_id LIKE 'old%'), 0, '... and log nothing');

-- pg_inbox.delivery_log: off only for a superuser (the bench's baseline).
SET LOCAL pg_inbox.delivery_log = off;
SELECT inbox.ingest('stripe', 'off1', '{}');
SELECT is((SELECT count(*)::int FROM inbox.deliveries WHERE external_id = 'off1'), 0, 'off: nothing logged');
RESET pg_inbox.delivery_log;
SET LOCAL ROLE inbox_receiver;
SELECT throws_ok($$ SET pg_inbox.delivery_log = off $$, '42501', NULL, 'the receiver cannot turn the log off');
SELECT is(inbox.ingest('stripe', 'r1', '{}'), 'inserted', 'the receiver ingests ...');
SELECT throws_ok($$ SELECT * FROM inbox.deliveries $$, '42501', NULL, '... but cannot read the log');
SELECT throws_ok($$ INSERT INTO inbox.delivery_batches SELECT * FROM inbox.delivery_batches $$, '42501', NULL,
                 '... nor write it');
SELECT throws_ok($$ SELECT inbox.seal_log() $$, '42501', NULL, '... nor seal it');
RESET ROLE;
SET LOCAL ROLE inbox_worker;
SELECT throws_ok($$ SELECT * FROM inbox.deliveries $$, '42501', NULL, 'the worker cannot read the log');
RESET ROLE;

-- Append-only, even for the owner.
SELECT throws_ok($$ UPDATE inbox.delivery_batches SET outcomes = outcomes $$, '42501',
                 'inbox.delivery_batches is append-only: UPDATE refused', 'UPDATE refused to the owner');
SELECT throws_ok($$ DELETE FROM inbox.delivery_batches $$, '42501',
                 'inbox.delivery_batches is append-only: DELETE refused', 'DELETE refused to the owner');
SELECT throws_ok($$ TRUNCATE inbox.delivery_batches $$, '42501',
                 'inbox.delivery_batches is append-only: TRUNCATE refused', 'TRUNCATE refused to the owner');
SELECT throws_ok($$ UPDATE inbox.deliveries SET outcome = 'updated' $$, NULL, NULL,
                 'the view cannot be updated either');

-- verify_log on an honest log, and seals.
SELECT is_empty($$ SELECT * FROM inbox.verify_log() $$, 'an honest log verifies');
SELECT ok((SELECT count(DISTINCT stripe) FROM inbox.deliveries) >= 1, 'the log has rows');
SELECT isnt(inbox.seal_log(), NULL, 'a seal');
SELECT is(inbox.seal_log(), NULL, 'no second seal while nothing was appended');
SELECT throws_ok($$ UPDATE inbox.log_seals SET sealed_at = now() $$, '42501', NULL, 'seals are append-only');
SELECT throws_ok($$ DELETE FROM inbox.log_seals $$, '42501', NULL, 'seals cannot be deleted');
SELECT inbox.ingest('stripe', 'after_seal', '{}');
SELECT isnt(inbox.seal_log(), NULL, 'a second seal after new rows');
SELECT is((SELECT seqs[1] FROM inbox.log_seals ORDER BY id DESC LIMIT 1),
          (SELECT max(seq) FROM inbox.delivery_batches WHERE stripe = 0), 'a seal holds each stripe''s last seq');
SELECT is_empty($$ SELECT * FROM inbox.verify_log(now() - interval '1 day', now() + interval '1 day') $$,
                'a range verifies');
SELECT is_empty($$ SELECT * FROM inbox.verify_log(NULL, NULL) $$, 'NULL bounds: everything');
SELECT throws_ok($$ SELECT * FROM inbox.verify_log(now(), now() - interval '1 second') $$, '22023', NULL,
                 'from after to is refused');

-- Tampering as a superuser, triggers disabled: each is found.
ALTER TABLE inbox.delivery_batches DISABLE TRIGGER USER;
ALTER TABLE inbox.log_seals DISABLE TRIGGER USER;
CREATE TEMP TABLE target AS SELECT stripe, seq FROM inbox.deliveries WHERE external_id = 'p1' AND delivery = 3;
SAVEPOINT t;
UPDATE inbox.delivery_batches d SET payload_differs = '{f}', differing = 0
  FROM target t WHERE d.stripe = t.stripe AND d.seq = t.seq;
SELECT results_eq($$ SELECT stripe, seq, problem FROM inbox.verify_log() $$,
                  $$ SELECT stripe::int, seq, 'the row does not match its hash or the row before it' FROM target $$,
                  'an edited row is found');
ROLLBACK TO t;
UPDATE inbox.delivery_batches d SET differing = 0 FROM target t WHERE d.stripe = t.stripe AND d.seq = t.seq;
SELECT results_eq($$ SELECT stripe, seq, problem FROM inbox.verify_log() $$,
                  $$ SELECT stripe::int, seq, 'the row does not match its hash or the row before it' FROM target $$,
                  'an edited count of differing bodies (what the rollups read) is found');
ROLLBACK TO t;
UPDATE inbox.delivery_batches d SET body_sha256 = ARRAY[sha256('forged')]
  FROM target t WHERE d.stripe = t.stripe AND d.seq = t.seq;
UPDATE inbox.delivery_batches d SET hash = sha256((SELECT p.hash FROM inbox.delivery_batches p
                                                    WHERE p.stripe = d.stripe AND p.seq = d.seq - 1)
                                                  || inbox._batch_message(d))
  FROM target t WHERE d.stripe = t.stripe AND d.seq = t.seq;
SELECT results_eq($$ SELECT stripe, seq, problem FROM inbox.verify_log() $$,
                  $$ SELECT stripe::int, seq + 1, 'the row does not match its hash or the row before it' FROM target $$,
                  'an edited row with its own hash recomputed breaks the next link');
ROLLBACK TO t;
DELETE FROM inbox.delivery_batches d USING target t WHERE d.stripe = t.stripe AND d.seq = t.seq;
SELECT results_eq($$ SELECT stripe, seq, problem FROM inbox.verify_log() $$,
                  $$ SELECT stripe::int, seq, format('rows %s to %s are missing', seq, seq) FROM target $$,
                  'a deleted row is found');
ROLLBACK TO t;
UPDATE inbox.delivery_batches d SET seq = d.seq + 1000000 FROM target t WHERE d.stripe = t.stripe AND d.seq IN (t.seq, t.seq + 1);
UPDATE inbox.delivery_batches d SET seq = CASE WHEN d.seq - 1000000 = t.seq THEN t.seq + 1 ELSE t.seq END
  FROM target t WHERE d.stripe = t.stripe AND d.seq IN (t.seq + 1000000, t.seq + 1000001);
SELECT results_eq($$ SELECT stripe, seq, problem FROM inbox.verify_log() $$,
                  $$ SELECT stripe::int, seq, 'the row does not match its hash or the row before it' FROM target $$,
                  'two rows swapped are found');
ROLLBACK TO t;
DELETE FROM inbox.delivery_batches d WHERE d.stripe = 0 AND d.seq >= (SELECT seqs[1] FROM inbox.log_seals ORDER BY id DESC LIMIT 1);
SELECT results_eq($$ SELECT stripe, seq, seal_id, problem FROM inbox.verify_log() $$,
                  $$ SELECT 0, seqs[1], id, 'the row this seal sealed is missing or changed: rows were removed or rewritten'
                       FROM inbox.log_seals ORDER BY id DESC LIMIT 1 $$,
                  'a tail truncated below the last seal is found');
ROLLBACK TO t;
UPDATE inbox.log_seals SET sealed_at = sealed_at - interval '1 hour' WHERE id = (SELECT min(id) FROM inbox.log_seals);
SELECT results_eq($$ SELECT seal_id, problem FROM inbox.verify_log() $$,
                  $$ SELECT min(id), 'the seal does not match its contents or the seal before it' FROM inbox.log_seals $$,
                  'an edited seal is found');
ROLLBACK TO t;
DELETE FROM inbox.log_seals WHERE id = (SELECT min(id) FROM inbox.log_seals);
SELECT results_eq($$ SELECT seal_id, problem FROM inbox.verify_log() $$,
                  $$ SELECT min(id), 'the seal does not match its contents or the seal before it' FROM inbox.log_seals $$,
                  'a deleted seal breaks the next one');
ROLLBACK TO t;
SELECT is_empty($$ SELECT * FROM inbox.verify_log() $$, 'undone: the log verifies again');
ALTER TABLE inbox.delivery_batches ENABLE TRIGGER USER;
ALTER TABLE inbox.log_seals ENABLE TRIGGER USER;

-- The row is inserted without an INSERT statement (extension/direct_insert.cpp):
-- every index has its entries, the partial one too, ...
SET LOCAL enable_indexscan = off;
SET LOCAL enable_indexonlyscan = off;
SET LOCAL enable_bitmapscan = off;
CREATE TEMP TABLE in_heap AS
    SELECT count(*) AS calls, count(*) FILTER (WHERE differing > 0) AS differing FROM inbox.delivery_batches;
RESET enable_indexscan;
RESET enable_indexonlyscan;
SET LOCAL enable_seqscan = off;
SELECT ok((SELECT differing FROM in_heap) > 0, 'calls whose body differed');
SELECT is((SELECT count(*) FROM inbox.delivery_batches WHERE differing > 0 AND received_at > '-infinity'),
          (SELECT differing FROM in_heap), 'the partial index on differing > 0 has every one of them');
SELECT is((SELECT count(*) FROM inbox.delivery_batches WHERE stripe >= 0),
          (SELECT calls FROM in_heap), 'the primary key has every row');
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT is((SELECT received_at FROM inbox.delivery_batches ORDER BY stripe, seq DESC LIMIT 1), now(),
          'received_at is the transaction''s now()');
-- ... and with what only the executor does for the table, the statement runs.
SAVEPOINT direct;
CREATE TABLE pg_temp.fired (n int);
CREATE FUNCTION pg_temp.count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO fired VALUES (1); RETURN NEW; END $$;
CREATE TRIGGER count_insert AFTER INSERT ON inbox.delivery_batches
    FOR EACH ROW EXECUTE FUNCTION pg_temp.count_insert();
SELECT inbox.ingest('stripe', 'with_trigger', '{}');
SELECT is((SELECT count(*)::int FROM fired), 1, 'an INSERT trigger on the log''s table fires');
ROLLBACK TO direct;
ALTER TABLE inbox.delivery_batches ADD COLUMN note text DEFAULT 'a default';
SELECT inbox.ingest('stripe', 'with_column', '{}');
SELECT is((SELECT note FROM inbox.delivery_batches WHERE 'with_column' = ANY (external_ids)), 'a default',
          'a column ingest does not know gets its default');
SELECT is_empty($$ SELECT * FROM inbox.verify_log() $$, '... and the log still verifies');
ROLLBACK TO direct;

-- Appends after a rolled-back subtransaction that had read the stripe's
-- head past the rows that stay: the next append still follows the
-- stripe's last row (read_head starts at the head it read last and, when
-- nothing is left there, reads the stripe from its end).
SELECT max(seq) AS kept_head FROM inbox.delivery_batches
 WHERE stripe = (SELECT stripe FROM inbox.delivery_batches ORDER BY received_at DESC, seq DESC LIMIT 1) \gset
SAVEPOINT heads;
SELECT inbox.ingest('stripe', 'head-1', '{}');
SELECT inbox.ingest('stripe', 'head-2', '{}');
ROLLBACK TO heads;
SELECT inbox.ingest('stripe', 'head-3', '{}');
SELECT is((SELECT seq FROM inbox.delivery_batches WHERE 'head-3' = ANY (external_ids)), :'kept_head'::bigint + 1,
          'an append after a rolled-back one follows the last row that stayed');
SELECT is_empty($$ SELECT * FROM inbox.verify_log() $$, '... and the log verifies');

-- A batch's row is compressed with lz4 where the server has it (the
-- install's DO block; pglz cost a quarter of the log's CPU).
SELECT EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))
    AS has_lz4 \gset
SELECT is((SELECT count(*)::int FROM pg_attribute a
            WHERE a.attrelid = 'inbox.delivery_batches'::regclass AND a.attnum > 0 AND a.attstorage = 'x'
              AND a.attcompression IS DISTINCT FROM CASE WHEN :'has_lz4'::boolean THEN 'l' ELSE '' END::"char"),
          0, 'every compressible column of delivery_batches uses lz4 where the server has it');
SELECT inbox.ingest_batch(array_fill('stripe'::text, ARRAY[100]),
                          ARRAY(SELECT 'compressed-' || g || repeat('x', 40) FROM generate_series(1, 100) g),
                          array_fill('{}'::jsonb, ARRAY[100]));
SELECT is((SELECT pg_column_compression(external_ids) FROM inbox.delivery_batches
            WHERE 'compressed-1' || repeat('x', 40) = ANY (external_ids)),
          CASE WHEN :'has_lz4'::boolean THEN 'lz4' ELSE 'pglz' END, '... and a batch of 100 is stored compressed with it');

-- The payload_changed rollup (check payload_changed_processing) counts
-- the bodies that differed while processing.
SELECT inbox.refresh_stats();
SELECT is((SELECT sum(payload_changed)::int FROM inbox.stats_minute WHERE provider = 'stripe'), 2,
          'refresh_stats counts the two differing bodies from the log');
SELECT inbox.refresh_stats();
SELECT is((SELECT sum(payload_changed)::int FROM inbox.stats_minute WHERE provider = 'stripe'), 2,
          '... and counts them again, not twice, on the next refresh');

SELECT * FROM finish();
ROLLBACK;

-- inbox.ingest_batch's two ways in (extension/ingest.cpp): after four
-- batches in a row of new ids only (and first in a connection), a plain
-- INSERT in a subtransaction; when an id is already there, that rolls back
-- and the batch takes the ON CONFLICT statements, as do the batches after
-- it until four in a row were all new. Which way a row came in shows in its
-- xmin: a row the subtransaction inserted has the subtransaction's xid, not
-- this file's transaction's (pg_prove runs each file in a new connection).
BEGIN;
SELECT plan(25);

SELECT inbox.register_provider('stripe');
SET pg_inbox.delivery_log = on;

CREATE FUNCTION pg_temp.written_in_subtransaction(ids text[]) RETURNS boolean[]
LANGUAGE sql AS $$
  SELECT array_agg(xmin::text::bigint <> txid_current() % (2^32)::bigint ORDER BY external_id)
    FROM inbox.events WHERE external_id = ANY (ids)
$$;

-- 1. The first batch of a connection, all new: the plain INSERT.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['a2', 'a4', 'a6'],
                             ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]),
          ARRAY['inserted', 'inserted', 'inserted'], 'a new batch: every id inserted');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['a2', 'a4', 'a6']), ARRAY[true, true, true],
          '... by the plain INSERT, in a subtransaction');

-- 2. New ids around one already there: the plain INSERT wrote a1 before it
-- met a2; all of it is taken back and the ON CONFLICT statements write the
-- batch.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['a1', 'a2', 'a3'],
                             ARRAY['{"n": 4}', '{"n": 5}', '{"n": 6}']::jsonb[]),
          ARRAY['inserted', 'updated', 'inserted'], 'a batch with an id already there: its outcomes');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE external_id IN ('a1', 'a2', 'a3')), 3,
          '... one row per id: nothing left of the rolled-back INSERT');
SELECT row_eq($$ SELECT delivery_count, payload FROM inbox.events WHERE external_id = 'a2' $$,
              ROW(2, '{"n": 5}'::jsonb), '... the id already there counted once more, its payload refreshed');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['a1', 'a3']), ARRAY[false, false],
          '... the new ids inserted by the ON CONFLICT statement');
CREATE TEMP VIEW call_a AS  -- the logged call of a1, a2, a3
  SELECT * FROM inbox.deliveries
   WHERE (stripe, seq) = (SELECT stripe, seq FROM inbox.deliveries WHERE external_id = 'a1');
SELECT is((SELECT array_agg(outcome ORDER BY item) FROM call_a),
          ARRAY['inserted', 'updated', 'inserted'], '... and logged once, as they came out');
SELECT is((SELECT array_agg(e.id = d.event_id ORDER BY d.item)
             FROM call_a d JOIN inbox.events e USING (provider, external_id)),
          ARRAY[true, true, true], '... the log naming the rows that stayed');

-- 3. The four batches after one with an id already there: ON CONFLICT
-- first.
SELECT is((SELECT array_agg(inbox.ingest_batch(ARRAY['stripe'], ARRAY['c' || n], ARRAY['{}']::jsonb[]) ORDER BY n)
             FROM generate_series(1, 4) n),
          '{{inserted},{inserted},{inserted},{inserted}}'::text[], 'after a batch with an id already there: four new batches inserted');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['c1', 'c2', 'c3', 'c4']), ARRAY[false, false, false, false],
          '... by the ON CONFLICT statement, without trying the plain INSERT');

-- 4. Four new batches in a row: the next one tries the plain INSERT again.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['d1', 'd2'], ARRAY['{}', '{}']::jsonb[]),
          ARRAY['inserted', 'inserted'], 'after four all-new batches: a new batch inserted');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['d1', 'd2']), ARRAY[true, true],
          '... by the plain INSERT again');
SELECT is((SELECT array_agg(e.id = d.event_id AND d.delivery = 1 AND d.outcome = 'inserted' ORDER BY d.item)
             FROM inbox.deliveries d JOIN inbox.events e USING (provider, external_id)
            WHERE d.external_id IN ('d1', 'd2')),
          ARRAY[true, true], '... logged with the rows'' ids, first deliveries');

-- 5. Copies of one new id: grouped before the INSERT, never a conflict with
-- itself.
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['e1', 'e2', 'e1'],
                             ARRAY['{"n": 1}', '{}', '{"n": 2}']::jsonb[]),
          ARRAY['inserted', 'inserted', 'updated'], 'copies of a new id: inserted, then updated');
SELECT row_eq($$ SELECT delivery_count, payload FROM inbox.events WHERE external_id = 'e1' $$,
              ROW(2, '{"n": 2}'::jsonb), '... every copy counted, the last payload kept');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['e1', 'e2']), ARRAY[true, true],
          '... by the plain INSERT');

-- 6. A processed id in a batch: a duplicate, its row not written.
UPDATE inbox.events SET status = 'done', processed_at = now() WHERE external_id = 'a2';
CREATE TEMP TABLE a2_before AS SELECT xmin::text AS row_xmin, * FROM inbox.events WHERE external_id = 'a2';
SELECT is(inbox.ingest_batch(ARRAY['stripe', 'stripe'], ARRAY['a2', 'f1'], ARRAY['{"n": 9}', '{}']::jsonb[]),
          ARRAY['duplicate', 'inserted'], 'a processed id in a new batch: a duplicate');
SELECT results_eq($$ SELECT xmin::text AS row_xmin, * FROM inbox.events WHERE external_id = 'a2' $$,
                  $$ SELECT * FROM a2_before $$, '... its row untouched');

-- 7. Only a taken id sends the batch the ON CONFLICT way; any other error
-- of the plain INSERT is the call's. A trigger that fails the first insert
-- it sees, once (a sequence: its count survives the rollback):
SELECT is((SELECT array_agg(inbox.ingest_batch(ARRAY['stripe'], ARRAY['g0' || n], ARRAY['{}']::jsonb[]) ORDER BY n)
             FROM generate_series(1, 4) n),
          '{{inserted},{inserted},{inserted},{inserted}}'::text[], 'four all-new batches, so the next one tries the plain INSERT');
CREATE SEQUENCE pg_temp.failures;
CREATE FUNCTION pg_temp.fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('pg_temp.failures') = 1 THEN
    RAISE EXCEPTION 'first insert refused' USING ERRCODE = 'P0001';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_once BEFORE INSERT ON inbox.events FOR EACH ROW EXECUTE FUNCTION pg_temp.fail_once();
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['g1'], ARRAY['{}']::jsonb[]) $$,
                 'P0001', 'first insert refused', 'an error other than a taken id is raised, not retried');
DROP TRIGGER fail_once ON inbox.events;
-- A unique violation of another constraint: the primary key, its sequence
-- set back onto an existing id.
SELECT setval(pg_get_serial_sequence('inbox.events', 'id'), (SELECT id FROM inbox.events WHERE external_id = 'g04') - 1);
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['g2'], ARRAY['{}']::jsonb[]) $$,
                 '23505', NULL, 'a unique violation of the primary key is raised, not taken for an id already there');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE external_id IN ('g1', 'g2')), 0,
          '... and neither call wrote its event');

-- 8. Many batches in one transaction: each plain INSERT's subtransaction
-- keeps its xid in the backend's cache of 64 until the transaction ends,
-- and past 64 every snapshot of the cluster reads pg_subtrans. Half of the
-- cache is the most the batches take; then ON CONFLICT, in this one.
DO $$
BEGIN
  FOR n IN 1..40 LOOP
    PERFORM inbox.ingest_batch(ARRAY['stripe'], ARRAY['h' || n], ARRAY['{}']::jsonb[]);
  END LOOP;
END $$;
SELECT is((SELECT count(*)::int FROM inbox.events WHERE external_id LIKE 'h%'), 40,
          'forty batches in one transaction: every one inserted');
-- (pgTAP's own subtransactions take some of the 32 too.)
SELECT cmp_ok((SELECT count(DISTINCT xmin::text)::int FROM inbox.events
                WHERE xmin::text::bigint <> txid_current() % (2^32)::bigint), '<=', 32,
              '... the subtransactions stopped at half of the backend''s cache');
SELECT is(pg_temp.written_in_subtransaction(ARRAY['h1', 'h40']), ARRAY[true, false],
          '... the first by the plain INSERT, the last by ON CONFLICT');

SELECT * FROM finish();
ROLLBACK;

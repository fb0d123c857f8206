-- Issue 13: ingest's statements are planned at a connection's first call
-- and kept as generic plans (extension/spi.hpp). Made here while the table
-- is nearly empty, they must stay key probes once it holds 100,000 events,
-- open and processed: each call then touches a handful of buffers, where a
-- scan of an index (the plan a near-empty table invites) touches hundreds.
-- EXPLAIN (ANALYZE, BUFFERS) counts the buffers of the statements ingest
-- runs inside the call. The table is analyzed while empty (as a restore's
-- or a nightly ANALYZE leaves a fresh install), the state in which the
-- planner trusts an empty table most; no ANALYZE runs after the plans are
-- made (it would replan them). Before the fix, calls here touched 1,800
-- buffers each and the batch 22,900.
BEGIN;
SELECT plan(8);

SELECT inbox.register_provider('stripe');
ANALYZE inbox.events;
CREATE FUNCTION pg_temp.buffers(call text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || call INTO plan;
    RETURN (plan->0->'Plan'->>'Shared Hit Blocks')::int + (plan->0->'Plan'->>'Shared Read Blocks')::int;
END
$$;

-- Every plan, made on a table of one or two rows: the upsert (a new id),
-- the update first (a run of re-deliveries turns it on), a duplicate's
-- count, and the batch's.
SELECT inbox.ingest('stripe', 'warm', '{}');
SELECT count(*) FROM (SELECT inbox.ingest('stripe', 'warm', '{}') FROM generate_series(1, 12)) deliveries;
UPDATE inbox.events SET status = 'done', processed_at = now() WHERE external_id = 'warm';
SELECT inbox.ingest('stripe', 'warm', '{}');
SELECT inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['warm', 'warm2', 'warm2'],
                          ARRAY['{}', '{}', '{}']::jsonb[]);

-- The table grows: 50,000 processed events and 50,000 open ones.
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at)
SELECT 'stripe', 'done-' || g, '{}', 'done', now() FROM generate_series(1, 50000) g;
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'stripe', 'open-' || g, '{}' FROM generate_series(1, 50000) g;

-- The connection still updates first (most of its last ids were
-- re-deliveries): each kind of id; then a run of new ones (the upsert
-- alone again) and each kind; then a batch of all three.
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'open-7', '{"n": 1}') $$), '<', 60,
              'update first: a re-delivery of an open event touches a handful of buffers');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'done-7', '{"n": 1}') $$), '<', 60,
              'update first: a duplicate of a processed event too');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'new-1', '{"n": 1}') $$), '<', 60,
              'update first: a new event too');
SELECT count(*) FROM (SELECT inbox.ingest('stripe', 'new-run-' || g, '{}') FROM generate_series(1, 12) g) news;
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'new-2', '{"n": 1}') $$), '<', 60,
              'the upsert alone: a new event');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'open-8', '{"n": 1}') $$), '<', 60,
              'the upsert alone: a re-delivery');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest('stripe', 'done-8', '{"n": 1}') $$), '<', 60,
              'the upsert alone: a duplicate');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest_batch(array_fill('stripe'::text, ARRAY[30]),
                                      ARRAY(SELECT k || g FROM unnest(ARRAY['new-b-', 'open-1', 'done-1']) k,
                                                              generate_series(10, 19) g),
                                      array_fill('{}'::jsonb, ARRAY[30])) $$), '<', 600,
              'a batch of 10 new, 10 open and 10 processed events: a handful per event');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'open-7'), 2,
          'and the calls did their work');

SELECT * FROM finish();
ROLLBACK;

-- The calls of 13_plans_on_growth.sql and 13_plans_on_refill.sql, which
-- set the table's statistics first: plans made on a table of a few rows,
-- then the table grown to 100,000 events (no ANALYZE between: it would
-- replan them), then each call's buffers. pg_prove runs the files that
-- include this one, not this one (it is not in test/pgtap itself).
CREATE FUNCTION pg_temp.buffers(call text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || call INTO plan;
    RETURN (plan->0->'Plan'->>'Shared Hit Blocks')::int + (plan->0->'Plan'->>'Shared Read Blocks')::int;
END
$$;
-- One event's delivery, as every single-event case below sends it.
CREATE FUNCTION pg_temp.ingest_buffers(external_id text) RETURNS int LANGUAGE sql AS $$
    SELECT pg_temp.buffers(format('SELECT inbox.ingest(%L, %L, %L)', 'stripe', external_id, '{"n": 1}'))
$$;

-- Every plan, made on a table of one or two rows: the upsert alone (a new
-- id), the update first (a run of re-deliveries turns it on), the full
-- upsert and a duplicate's count (a processed id, after the update found
-- nothing), and the batch's.
SELECT inbox.ingest('stripe', 'warm', '{}');
SELECT count(*) FROM (SELECT inbox.ingest('stripe', 'warm', '{}') FROM generate_series(1, 12)) deliveries;
UPDATE inbox.events SET status = 'done', processed_at = now() WHERE external_id = 'warm';
SELECT inbox.ingest('stripe', 'warm', '{}');
SELECT inbox.ingest_batch(ARRAY['stripe', 'stripe', 'stripe'], ARRAY['warm', 'warm2', 'warm2'],
                          ARRAY['{}', '{}', '{}']::jsonb[]);
-- The queue's: claim, complete, fail, complete_batch.
SELECT inbox.ingest_batch(array_fill('stripe'::text, ARRAY[4]), ARRAY['q1', 'q2', 'q3', 'q4'],
                          array_fill('{}'::jsonb, ARRAY[4]));
CREATE TEMP TABLE warm_leases AS SELECT id, lease_token FROM inbox.claim(10);
SELECT inbox.complete(id, lease_token) FROM warm_leases WHERE id = (SELECT min(id) FROM warm_leases);
SELECT inbox.fail(id, lease_token, 'warming up') FROM warm_leases WHERE id = (SELECT max(id) FROM warm_leases);
SELECT inbox.complete_batch(array_agg(id), array_agg(lease_token)) FROM warm_leases;

-- The table grows: 50,000 processed events and 50,000 open ones.
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at)
SELECT 'stripe', 'done-' || g, '{}', 'done', now() FROM generate_series(1, 50000) g;
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'stripe', 'open-' || g, '{}' FROM generate_series(1, 50000) g;

-- The connection still updates first (most of its last ids were
-- re-deliveries): each kind of id; then a run of new ones (the upsert
-- alone first again, the full upsert after it for a duplicate) and each
-- kind; then a batch of all three.
SELECT cmp_ok(pg_temp.ingest_buffers('open-7'), '<', 60,
              'update first: a re-delivery of an open event touches a handful of buffers');
SELECT cmp_ok(pg_temp.ingest_buffers('done-7'), '<', 60,
              'update first: a duplicate of a processed event too');
SELECT cmp_ok(pg_temp.ingest_buffers('new-1'), '<', 60,
              'update first: a new event too');
SELECT count(*) FROM (SELECT inbox.ingest('stripe', 'new-run-' || g, '{}') FROM generate_series(1, 12) g) news;
SELECT cmp_ok(pg_temp.ingest_buffers('new-2'), '<', 60,
              'the upsert alone: a new event');
SELECT cmp_ok(pg_temp.ingest_buffers('open-8'), '<', 60,
              'the upsert alone: a re-delivery');
SELECT cmp_ok(pg_temp.ingest_buffers('done-8'), '<', 60,
              'the upsert alone: a duplicate');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.ingest_batch(array_fill('stripe'::text, ARRAY[30]),
                                      ARRAY(SELECT k || g FROM unnest(ARRAY['new-b-', 'open-1', 'done-1']) k,
                                                              generate_series(10, 19) g),
                                      array_fill('{}'::jsonb, ARRAY[30])) $$), '<', 600,
              'a batch of 10 new, 10 open and 10 processed events: a handful per event');
-- The queue: a claim across all providers and one naming the provider
-- (planned per call, but from the same statistics), then each way to end a
-- lease.
SELECT cmp_ok(pg_temp.buffers($$ SELECT count(*) FROM inbox.claim(20) $$), '<', 600,
              'claim: a walk of the open events in id order, not a sort of all of them');
SELECT cmp_ok(pg_temp.buffers($$ SELECT count(*) FROM inbox.claim(20, NULL, 'stripe') $$), '<', 600,
              'claim of a named provider: the same walk, while the statistics know no rows');
CREATE TEMP TABLE leases AS SELECT id, lease_token FROM inbox.claim(20);
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.complete(id, lease_token) FROM leases
                                  WHERE id = (SELECT min(id) FROM leases) $$), '<', 60,
              'complete: a handful of buffers');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.fail(id, lease_token, 'x') FROM leases
                                  WHERE id = (SELECT max(id) FROM leases) $$), '<', 60,
              'fail: a handful of buffers');
SELECT cmp_ok(pg_temp.buffers($$ SELECT inbox.complete_batch(array_agg(id), array_agg(lease_token)) FROM leases
                                  WHERE id > (SELECT min(id) FROM leases) AND id < (SELECT max(id) FROM leases) $$),
              '<', 600, 'complete_batch: a probe per event');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE status = 'done' AND external_id LIKE 'open-%'), 19,
          'the leases ended: 19 done');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE status = 'processing'), 40,
          'and the first two claims hold their 20 each');
SELECT is((SELECT delivery_count FROM inbox.events WHERE external_id = 'open-7'), 2,
          'and the calls did their work');

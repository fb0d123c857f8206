-- Issue 13: ingest's statements (and the queue's) are planned at a
-- connection's first call and kept as generic plans (extension/spi.hpp), or
-- planned per call from statistics that have not seen the table grow. Made
-- while the table is nearly empty, they must stay key probes once it holds
-- 100,000 events, open and processed: each call then touches a handful of
-- buffers, where a scan of an index (the plan a near-empty table invites)
-- touches hundreds. EXPLAIN (ANALYZE, BUFFERS) counts the buffers of the
-- statements a call runs inside it (plans_on_growth/calls.sql).
--
-- Here the table is analyzed while empty (a fresh install, as a restore's
-- or a nightly ANALYZE leaves it; TRUNCATE first: earlier files' rolled-back
-- rows would leave pages behind). Before the fixes, calls here touched 1,800
-- buffers each, the batch 22,900 and fail 22,460; a claim of 20 sorted every
-- open event (1,823), a claim naming the provider too (2,927 for 20 of
-- 45,000 in a test by hand), and complete_batch walked every event (3,744).
BEGIN;
SELECT plan(16);

TRUNCATE inbox.events CASCADE;
SELECT inbox.register_provider('stripe');
ANALYZE inbox.events;
SELECT is((SELECT relpages FROM pg_class WHERE oid = 'inbox.events'::regclass), 0, 'the table starts with no pages');
\ir plans_on_growth/calls.sql

SELECT * FROM finish();
ROLLBACK;

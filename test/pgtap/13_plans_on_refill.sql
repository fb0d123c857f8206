-- Issue 13: as 13_plans_on_growth.sql, from the statistics of a table
-- emptied and then refilled (every event deleted, or a load rolled back;
-- autoanalyze has not seen the new rows yet): pages, but no rows. From them
-- the planner believes the table empty whatever its size, and before the
-- fix a claim of 20 looped over all 100,000 events for its join (3,962
-- buffers, 674 ms) and complete_batch over the whole key index (4,020).
BEGIN;
SELECT plan(15);

SELECT inbox.register_provider('stripe');
-- Deleted by this transaction, the rows count as dead for ANALYZE. Done
-- events: outside events_open_idx, which a claim walks (VACUUM would have
-- removed their entries from the other indexes).
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at)
SELECT 'stripe', 'gone-' || g, '{}', 'done', now() FROM generate_series(1, 20000) g;
DELETE FROM inbox.events;
ANALYZE inbox.events;
SELECT ok((SELECT relpages > 100 AND reltuples = 0 FROM pg_class WHERE oid = 'inbox.events'::regclass),
          'the table has pages and, by its statistics, no rows');
\ir plans_on_growth/calls.sql

SELECT * FROM finish();
ROLLBACK;

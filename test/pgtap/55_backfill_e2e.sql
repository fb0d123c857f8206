-- End to end in the database: a numbered stream with events dropped,
-- duplicated and late; scans, then a worker draining the backfill queue
-- against a stand-in for the provider's API. Afterwards every event the
-- provider sent is present exactly once, the ids it never sent are
-- tombstoned, and a rescan flags nothing.
BEGIN;
SELECT plan(12);

SELECT inbox.register_provider('e2e');
SELECT inbox.set_id_source('e2e', 'sequence', 'e{n}', 1, grace => '10 minutes');

-- The provider's API: 1..200, except 13, 77 and 150 (drafts it never sent).
CREATE TEMP TABLE api AS
  SELECT 'e' || n AS id, n, jsonb_build_object('n', n, 'from', 'api') AS body
  FROM generate_series(1, 200) n WHERE n NOT IN (13, 77, 150);
-- Deliveries: every 17th dropped, every 5th twice, every 23rd late.
SELECT is((SELECT count(*)::int FROM (
             SELECT inbox.ingest('e2e', a.id, jsonb_build_object('n', a.n)) FROM api a, generate_series(1, 2) copy
             WHERE a.n % 17 <> 0 AND a.n % 23 <> 0 AND (copy = 1 OR a.n % 5 = 0)) d), 178 + 36,
          'deliveries: dropped, duplicated and late ones held back');

SELECT is((SELECT (inbox.scan_gaps('e2e') ->> 'new_gaps')::int), 22,
          'first scan: 11 dropped, 8 late, 3 never sent');
SELECT inbox.ingest('e2e', a.id, jsonb_build_object('n', a.n)) FROM api a WHERE a.n % 23 = 0;
SELECT is((SELECT (inbox.scan_gaps('e2e') ->> 'resolved')::int), 8, 'the late retries close their gaps');

-- Past the grace period the rest become backfill requests.
UPDATE inbox.gaps SET first_seen_at = now() - interval '1 hour' WHERE provider = 'e2e';
SELECT is((SELECT (inbox.scan_gaps('e2e') ->> 'requested')::int), 14, '14 backfill requests');

-- The worker: claim, call the API, report.
CREATE TEMP TABLE claimed AS SELECT * FROM inbox.claim_backfill(1000, '1 minute', 'e2e');
CREATE TEMP TABLE reports AS
  SELECT c.external_id,
         CASE WHEN a.id IS NOT NULL THEN inbox.backfill_fetched(c.request_id, c.lease_token, a.body)
              ELSE inbox.backfill_not_found(c.request_id, c.lease_token, 'HTTP 404')::text END AS outcome
  FROM claimed c LEFT JOIN api a ON a.id = c.external_id;
SELECT is((SELECT count(*)::int FROM reports WHERE outcome = 'inserted'), 11, 'the 11 dropped events are fetched');
SELECT is((SELECT count(*)::int FROM reports WHERE outcome = 'true'), 3, 'the 3 never sent are not found');

SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 'e2e'), 197, 'every sent event is present');
SELECT is((SELECT count(*)::int FROM api a
           WHERE (SELECT count(*) FROM inbox.events e WHERE e.provider = 'e2e' AND e.external_id = a.id) <> 1), 0,
          'each exactly once');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 'e2e' AND source = 'backfill'), 11,
          'the backfilled ones say so');
SELECT is(ARRAY(SELECT external_id FROM inbox.tombstones WHERE provider = 'e2e' ORDER BY external_id),
          ARRAY['e13', 'e150', 'e77'], 'the never-sent ids are tombstoned');

-- A rescan of the whole stream flags nothing.
UPDATE inbox.gap_sources SET scanned_to = NULL WHERE provider = 'e2e';
SELECT is((SELECT (inbox.scan_gaps('e2e') ->> 'new_gaps')::int), 0, 'a rescan finds no gap');
SELECT is(ARRAY(SELECT inbox.find_gaps('e2e', 1, 200)), '{}'::text[], 'and find_gaps agrees');

SELECT * FROM finish();
ROLLBACK;

-- Retention: inbox.configure_retention and inbox.purge. A purged payload
-- keeps the row as the dedup key (a re-delivery is still a duplicate); after
-- the dedup horizon the row goes, and a re-delivery is a new event.
BEGIN;
SELECT plan(52);

SELECT has_function('inbox', 'configure_retention', ARRAY['text', 'interval', 'interval'], 'configure_retention exists');
SELECT has_function('inbox', 'purge', ARRAY['interval', 'integer'], 'purge exists');
SELECT has_column('inbox', 'providers', 'keep_payload_for', 'providers.keep_payload_for');
SELECT has_column('inbox', 'providers', 'keep_dedup_for', 'providers.keep_dedup_for');

SELECT inbox.register_provider('stripe');
SELECT inbox.register_provider('github');

-- configure_retention: defaults, settings, bad input.
SELECT is(inbox.configure_retention('stripe'),
          '{"provider": "stripe", "keep_payload_for": "30 days", "keep_dedup_for": "90 days"}'::jsonb,
          'NULL horizons are the defaults: 30 and 90 days');
SELECT is(inbox.configure_retention('github', '1 day', '4 days'),
          '{"provider": "github", "keep_payload_for": "1 day", "keep_dedup_for": "4 days"}'::jsonb,
          'horizons are set per provider');
SELECT is(inbox.configure_retention('github', '0 seconds'),
          '{"provider": "github", "keep_payload_for": "00:00:00", "keep_dedup_for": "90 days"}'::jsonb,
          'a payload may be dropped as soon as the event is processed');
SELECT throws_ok($$SELECT inbox.configure_retention(NULL)$$, '22004', 'provider must not be null', 'NULL provider');
SELECT throws_ok($$SELECT inbox.configure_retention('')$$, '42704', 'unknown provider ""', 'empty provider');
SELECT throws_ok($$SELECT inbox.configure_retention('nope')$$, '42704', 'unknown provider "nope"', 'unknown provider');
SELECT throws_ok($$SELECT inbox.configure_retention(repeat('a', 300))$$, '42704', NULL, 'oversized provider name');
SELECT throws_ok($$SELECT inbox.configure_retention('stripe', '-1 day')$$, '22023',
                 'keep_payload_for must not be negative', 'negative payload horizon');
SELECT throws_ok($$SELECT inbox.configure_retention('stripe', NULL, '2 days')$$, '22023',
                 'keep_dedup_for must be at least 3 days, not 2 days', 'a dedup horizon under the retry window');
SELECT throws_ok($$SELECT inbox.configure_retention('stripe', '10 days', '5 days')$$, '22023',
                 'keep_dedup_for (5 days) must not be shorter than keep_payload_for (10 days)',
                 'a dedup horizon shorter than the payload horizon');
SELECT throws_ok($$SELECT inbox.configure_retention('stripe', '100 days')$$, '22023', NULL,
                 'a payload horizon past the default dedup horizon');
SELECT throws_ok($$SELECT inbox.configure_retention('stripe', 'soon')$$, '22007', NULL, 'not an interval');
SELECT throws_ok($$UPDATE inbox.providers SET keep_dedup_for = '1 day' WHERE name = 'stripe'$$, '23514', NULL,
                 'the table refuses a dedup horizon under 3 days too');
-- The 3-day floor is the longest retry window of the presets (27_ordering.sql):
-- a preset with a longer window must raise the floor with it.
SELECT cmp_ok((SELECT max(retry_window) FROM inbox.provider_presets), '<=', interval '3 days',
              'the dedup floor covers every preset''s retry window');

-- purge: bad input
SELECT throws_ok($$SELECT inbox.purge('-1 day')$$, '22023', 'older_than must not be negative', 'purge: negative older_than');
SELECT throws_ok($$SELECT inbox.purge(NULL, 0)$$, '22023', 'max_rows must be between 1 and 100000, not 0', 'purge: max_rows 0');
SELECT throws_ok($$SELECT inbox.purge(NULL, NULL)$$, '22023', 'max_rows must be between 1 and 100000, not NULL', 'purge: NULL max_rows');
SELECT throws_ok($$SELECT inbox.purge(NULL, 100001)$$, '22023', NULL, 'purge: max_rows over the limit');
SELECT throws_ok($$SELECT inbox.purge('a while')$$, '22007', NULL, 'purge: not an interval');

-- Events in every state, aged by hand: stripe keeps payloads 30 days and keys 90 (defaults).
SELECT inbox.ingest('stripe', 's' || i, jsonb_build_object('n', i), '{"h": "1"}') FROM generate_series(1, 8) i;
SELECT count(inbox.complete(id, lease_token)) FROM inbox.claim(5, '1 hour', 'stripe');
-- s1-s5 done, s6 processing, s7 and s8 pending
UPDATE inbox.events SET processed_at = now() - interval '40 days' WHERE external_id IN ('s1', 's2');
UPDATE inbox.events SET processed_at = now() - interval '100 days' WHERE external_id IN ('s3', 's4');
UPDATE inbox.events SET status = 'dead', processed_at = now() - interval '100 days' WHERE external_id = 's5';
SELECT count(*) FROM inbox.claim(1, '1 hour', 'stripe');
-- s3 had a duplicate: the log counts it in inbox.delivery_duplicates.
SELECT is(inbox.ingest('stripe', 's3', '{"n": 3}'), 'duplicate', 's3 is delivered again while it is kept');
SELECT is((SELECT count(*)::int FROM inbox.delivery_duplicates d JOIN inbox.events e ON e.id = d.event_id
            WHERE e.external_id = 's3'), 1, 'its duplicate is counted');
CREATE TEMP TABLE s3_id AS SELECT id FROM inbox.events WHERE external_id = 's3';
UPDATE inbox.events SET first_received_at = now() - interval '200 days' WHERE provider = 'stripe';
-- s4 is named by an open backfill request: its row must stay.
INSERT INTO inbox.backfill_requests (provider, external_id) VALUES ('stripe', 's4');
CREATE FUNCTION pg_temp.row(ext text) RETURNS text LANGUAGE sql AS
  $$ SELECT concat_ws('/', status, payload::text, coalesce(headers::text, '-'), purged_at IS NOT NULL)
       FROM inbox.events WHERE external_id = ext $$;

SELECT is(inbox.purge(), '{"more": false, "rows_deleted": 2, "payloads_purged": 3}'::jsonb,
          'one call: two rows past 90 days, then three payloads past 30 days');
SELECT is(pg_temp.row('s1'), 'done/null/-/t', 'a purged event keeps its row and status, payload and headers gone');
SELECT is(pg_temp.row('s3'), NULL, 'a done event past the dedup horizon is deleted');
SELECT is(pg_temp.row('s5'), NULL, 'a dead one too');
SELECT is((SELECT count(*)::int FROM inbox.delivery_duplicates d JOIN s3_id ON s3_id.id = d.event_id), 0,
          'with the row goes its duplicate count');
SELECT is(pg_temp.row('s4'), 'done/null/-/t', 'a row an open backfill request names stays');
SELECT is(pg_temp.row('s6'), 'processing/{"n": 6}/{"h": "1"}/f', 'a processing event is untouched, however old');
SELECT is(pg_temp.row('s7'), 'pending/{"n": 7}/{"h": "1"}/f', 'a pending event is untouched');
SELECT is(pg_temp.row('s2'), 'done/null/-/t', 'and s2 like s1');

-- Dedup survives the payload purge; after the dedup horizon an id is new.
SELECT is(inbox.ingest('stripe', 's1', '{"n": 1}'), 'duplicate', 'a re-delivery after the payload purge is a duplicate');
SELECT is(inbox.ingest_batch(ARRAY['stripe'], ARRAY['s2'], ARRAY['{"n": 2}'::jsonb]), ARRAY['duplicate'],
          'also in a batch');
SELECT is(pg_temp.row('s1'), 'done/null/-/t', 'and it wrote nothing');
SELECT is(inbox.ingest('stripe', 's3', '{"n": 3}'), 'inserted', 'after the dedup horizon a re-delivery is a new event');

-- A purged event cannot be replayed; a resolution needs no payload.
SELECT throws_ok(format('SELECT inbox.replay(%s, %L)', (SELECT id FROM inbox.events WHERE external_id = 's1'), 'why'),
                 '55000', NULL, 'replay of a purged event is refused');

-- older_than overrides the payload horizon only.
UPDATE inbox.events SET processed_at = now() - interval '2 days' WHERE external_id IN ('s1', 's2');
SELECT inbox.complete(id, lease_token) FROM inbox.events WHERE external_id = 's6';
UPDATE inbox.events SET processed_at = now() - interval '2 hours' WHERE external_id = 's6';
SELECT is(inbox.purge('1 hour'), '{"more": false, "rows_deleted": 0, "payloads_purged": 1}'::jsonb,
          'purge(older_than) purges payloads older than it, and deletes no row sooner');
SELECT is(pg_temp.row('s6'), 'done/null/-/t', 'the payload of s6 is gone');

-- The history: payload copies go with the payload, rows with the row.
SELECT inbox.ingest('github', 'g1', '{"n": 1}');
SELECT inbox.complete(id, lease_token) FROM inbox.claim(1, '1 hour', 'github');
UPDATE inbox.events SET processed_at = now() - interval '1 second' WHERE external_id = 'g1';
INSERT INTO inbox.event_history (event_id, reason, status, attempts, payload)
SELECT id, 'verify_mismatch', 'done', 1, payload FROM inbox.events WHERE external_id = 'g1';
SELECT is(inbox.purge()->>'payloads_purged', '1', 'github keeps no payload (0 seconds)');
SELECT is((SELECT h.payload FROM inbox.event_history h JOIN inbox.events e ON e.id = h.event_id WHERE e.external_id = 'g1'),
          NULL, 'the history''s copy of the payload is purged with it');
UPDATE inbox.events SET processed_at = now() - interval '91 days' WHERE external_id = 'g1';
SELECT is(inbox.purge()->>'rows_deleted', '1', 'past 90 days the row goes');
SELECT is((SELECT count(*)::int FROM inbox.event_history WHERE reason = 'verify_mismatch'), 0, 'with its history');

-- Batches are bounded: max_rows per step, "more" says there is more.
SELECT inbox.ingest('stripe', 'b' || i, '{}') FROM generate_series(1, 5) i;
SELECT count(inbox.complete(id, lease_token)) FROM inbox.claim(10, '1 hour', 'stripe');
UPDATE inbox.events SET processed_at = now() - interval '31 days' WHERE external_id LIKE 'b%';
SELECT is(inbox.purge(NULL, 3), '{"more": true, "rows_deleted": 0, "payloads_purged": 3}'::jsonb, 'a bounded batch');
SELECT is(inbox.purge(NULL, 3), '{"more": false, "rows_deleted": 0, "payloads_purged": 2}'::jsonb, 'then the rest');

-- Rows past the dedup horizon leave from both retention indexes: those whose
-- payload is gone (b1, b2) first, then those that kept it (s7, older).
SELECT count(inbox.complete(id, lease_token)) FROM inbox.claim(10, '1 hour', 'stripe');
UPDATE inbox.events SET processed_at = now() - interval '95 days' WHERE external_id IN ('b1', 'b2');
UPDATE inbox.events SET processed_at = now() - interval '99 days' WHERE external_id = 's7';
CREATE TEMP TABLE index_scans AS
SELECT pg_stat_get_xact_numscans('inbox.events_purged_idx'::regclass) AS purged,
       pg_stat_get_xact_numscans('inbox.events_payload_kept_idx'::regclass) AS kept;
SELECT is(inbox.purge(NULL, 2), '{"more": true, "rows_deleted": 2, "payloads_purged": 0}'::jsonb,
          'purged rows are deleted first');
SELECT is((SELECT string_agg(external_id, ',' ORDER BY external_id) FROM inbox.events
            WHERE external_id IN ('b1', 'b2', 's7')), 's7', 'b1 and b2 went, s7 waits for the next batch');
SELECT is((SELECT array[pg_stat_get_xact_numscans('inbox.events_purged_idx'::regclass) - purged,
                        pg_stat_get_xact_numscans('inbox.events_payload_kept_idx'::regclass) - kept]
             FROM index_scans), ARRAY[2, 2]::bigint[],
          'each provider''s purged rows are read from events_purged_idx (github then reads '
          'events_payload_kept_idx for its rows and its payloads; stripe''s budget is spent)');
SELECT is(inbox.purge(NULL, 2), '{"more": false, "rows_deleted": 1, "payloads_purged": 0}'::jsonb,
          'then a row past the horizon that kept its payload');
SELECT is(pg_temp.row('s7'), NULL, 's7 is deleted');

SELECT * FROM finish();
ROLLBACK;

-- inbox.refresh_stats from real events: each counter and gauge the checks
-- read, counted once however often the refresh runs, and the watermark that
-- keeps a refresh's cost to the window and the open set.
BEGIN;
SELECT plan(54);

SELECT inbox.register_provider('r');
SELECT inbox.register_provider('hold', on_lease_expiry => 'hold');
SELECT inbox.register_provider('seq');
SELECT inbox.set_id_source('seq', 'sequence', 'evt_{n}');

CREATE FUNCTION pg_temp.stat(p text, col text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    EXECUTE format('SELECT sum(%I)::bigint FROM inbox.stats_minute WHERE provider = $1', col) INTO v USING p;
    RETURN v;
END
$$;
CREATE FUNCTION pg_temp.gauge(p text, col text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    EXECUTE format('SELECT %I::bigint FROM inbox.stats_minute WHERE provider = $1 AND backlog IS NOT NULL
                    ORDER BY minute DESC LIMIT 1', col) INTO v USING p;
    RETURN v;
END
$$;

-- Twelve arrivals; one delivered twice; two with the same body; six done,
-- one failed for good, one held, one processing whose payload a re-delivery
-- changes.
SELECT inbox.ingest('r', 'e' || i, jsonb_build_object('i', i)) FROM generate_series(1, 10) i;
SELECT inbox.ingest('r', 'twin-a', '{"same": "body", "object": "charge", "amount": 4200, "currency": "eur"}');
SELECT inbox.ingest('r', 'twin-b', '{"same": "body", "object": "charge", "amount": 4200, "currency": "eur"}',
                    '{"webhook-timestamp": "1000000000"}');
SELECT inbox.ingest('r', 'tiny-a', '{}');
SELECT inbox.ingest('r', 'tiny-b', '{}');
SELECT inbox.ingest('r', 'e1', '{"i": 1, "again": true}');
SELECT inbox.complete(id, lease_token) FROM inbox.claim(6, provider => 'r');
SELECT inbox.ingest('hold', 'h1', '{}');
SELECT inbox.claim(1, provider => 'hold');
UPDATE inbox.events SET lease_expires_at = now() - interval '1 minute' WHERE provider = 'hold';
SELECT inbox.ingest('seq', 'evt_' || n, '{}') FROM unnest(ARRAY[5, 7, 6]) n;

SELECT ok((inbox.refresh_stats() ->> 'candidates')::int >= 16, 'the first refresh reads the last hour');
SELECT is(pg_temp.stat('r', 'arrivals'), 14::bigint, 'arrivals');
SELECT is(pg_temp.stat('r', 'redeliveries'), 1::bigint, 'a re-delivery of an open event');
SELECT is(pg_temp.stat('r', 'claims'), 6::bigint, 'claims');
SELECT is(pg_temp.stat('r', 'first_claims'), 6::bigint, 'first claims');
SELECT is(pg_temp.stat('r', 'processed'), 6::bigint, 'processed');
SELECT is((SELECT sum(x)::int FROM inbox.stats_minute, unnest(latency_hist) x WHERE provider = 'r'), 6,
          'a latency for each processed event');
SELECT is((SELECT sum(x)::int FROM inbox.stats_minute, unnest(claim_hist) x WHERE provider = 'r'), 6,
          'a first-claim delay for each claimed event');
SELECT is(pg_temp.stat('r', 'replay_suspects'), 1::bigint, 'the same body under two ids (tiny bodies do not count)');
SELECT ok(pg_temp.stat('r', 'skew_max_s') > 1e8, 'the skew of a delivery stamped in 2001');
SELECT is(pg_temp.gauge('r', 'backlog'), 8::bigint, 'backlog');
SELECT ok(pg_temp.gauge('r', 'oldest_pending_s') >= 0, 'oldest pending age');
SELECT is(pg_temp.gauge('hold', 'held'), 1::bigint, 'a held event');
SELECT is(pg_temp.gauge('r', 'held'), 0::bigint, 'nothing held elsewhere');
SELECT is(pg_temp.stat('seq', 'max_seq'), 7::bigint, 'the highest sequence number that arrived');
SELECT is((SELECT count(*)::int FROM inbox.stats_minute WHERE backlog IS NOT NULL AND minute = date_trunc('minute', now())), 3,
          'a gauge row for every provider');
SELECT is((SELECT count(*)::int FROM inbox.stats_global), 1, 'a global row');
SELECT ok((SELECT xid_age > 0 FROM inbox.stats_global), 'with the transaction id age');

-- Nothing happened: nothing is counted twice.
SELECT inbox.refresh_stats();
SELECT is(pg_temp.stat('r', 'arrivals'), 14::bigint, 'a second refresh counts no arrival twice');
SELECT is(pg_temp.stat('r', 'processed'), 6::bigint, '... nor a processed event');
SELECT is(pg_temp.stat('r', 'claims'), 6::bigint, '... nor a claim');

-- Retries, a dead event, a changed payload while processing, a lease expiry.
CREATE TEMP TABLE leased AS SELECT id, lease_token, external_id FROM inbox.claim(3, provider => 'r');
SELECT inbox.refresh_stats();  -- sees them processing
SELECT inbox.ingest('r', (SELECT external_id FROM leased ORDER BY id LIMIT 1), '{"changed": true}');
SELECT is(inbox.fail(id, lease_token, 'timeout after 30s', '0 seconds'), 'retry', 'a retry')
  FROM (SELECT * FROM leased ORDER BY id LIMIT 1 OFFSET 1) l;
SELECT inbox.register_provider('r', max_attempts => 1);
SELECT is(inbox.fail(id, lease_token, 'HTTP 500 from downstream'), 'dead', 'a dead event')
  FROM (SELECT * FROM leased ORDER BY id LIMIT 1 OFFSET 2) l;
UPDATE inbox.events SET lease_expires_at = now() - interval '10 minutes'
 WHERE id = (SELECT id FROM leased ORDER BY id LIMIT 1);
SELECT inbox.register_provider('r');
SELECT inbox.reconcile('test');
CREATE TEMP TABLE leased2 AS SELECT id, lease_token FROM inbox.claim(10, provider => 'r');
SELECT inbox.refresh_stats();
SELECT is(pg_temp.stat('r', 'payload_changed'), 1::bigint, 'a re-delivery changed a payload while it was processed');
SELECT is(pg_temp.stat('r', 'dead'), 1::bigint, 'a dead event');
SELECT is(pg_temp.stat('r', 'lease_expiries'), 1::bigint, 'a lease reconcile reclaimed');
SELECT is(pg_temp.stat('r', 'claims') - pg_temp.stat('r', 'first_claims'), 2::bigint, 'two claims were retries');
SELECT is(pg_temp.stat('r', 'redeliveries'), 2::bigint, 'the second re-delivery');
SELECT is(ARRAY(SELECT class FROM inbox.error_classes WHERE provider = 'r' ORDER BY class),
          ARRAY['HTTP N from downstream', 'timeout after Ns'], 'error classes, numbers folded');

-- Tombstones, backfill outcomes, effect and reference tables.
SELECT inbox.tombstone('seq', 'evt_4', 'never sent');
CREATE TABLE pg_temp.effects (event_id text);
CREATE TABLE pg_temp.orders (stripe_event text);
INSERT INTO pg_temp.orders VALUES ('e2'), ('nowhere');
SELECT inbox.register_reference('r', 'pg_temp.effects', 'event_id', 'effect');
SELECT inbox.register_reference('r', 'pg_temp.orders', 'stripe_event');
SELECT inbox.complete(id, lease_token) FROM (SELECT * FROM leased2 ORDER BY id LIMIT 1) l;
DELETE FROM inbox.stats_state;  -- a first refresh again: the last hour
DELETE FROM inbox.stats_minute;
SELECT inbox.refresh_stats();
SELECT is(pg_temp.stat('seq', 'tombstoned'), 1::bigint, 'a tombstone');
SELECT ok(pg_temp.stat('r', 'missing_effects') >= 1, 'done events with no effect row');
SELECT is(pg_temp.gauge('r', 'orphans'), 1::bigint, 'a reference with no event');
SELECT throws_ok($$SELECT inbox.register_reference('r', 'pg_temp.orders', 'nope')$$, '42703', NULL,
                 'register_reference: unknown column');
SELECT throws_ok($$SELECT inbox.register_reference('ghost', 'pg_temp.orders', 'stripe_event')$$, '42704', NULL,
                 'register_reference: unknown provider');
SELECT throws_ok($$SELECT inbox.register_reference('r', 'pg_temp.orders', 'stripe_event', 'both')$$, '22023', NULL,
                 'register_reference: unknown kind');
SELECT throws_ok($$SELECT inbox.register_reference('r', NULL, 'stripe_event')$$, '22004', NULL,
                 'register_reference: NULL table');
SELECT lives_ok($$SELECT inbox.register_reference('r', 'pg_temp.orders', 'stripe_event', NULL)$$,
                'register_reference: kind NULL removes it');

-- The watermark: events older than two minutes leave the window, so the
-- next refresh reads only the open set.
UPDATE inbox.events SET first_received_at = now() - interval '10 minutes';
SELECT inbox.refresh_stats();
SELECT is((inbox.refresh_stats() ->> 'watermark')::bigint, (SELECT max(id) FROM inbox.events), 'the watermark moved past every event');
SELECT is((inbox.refresh_stats() ->> 'candidates')::int, (SELECT count(*)::int FROM inbox.events WHERE processed_at IS NULL),
          'a refresh reads the open events and nothing else');

-- The receiver's counters.
SELECT is(inbox.report_receiver_stats('[{"provider": "r", "requests_2xx": 10, "signature_failures": 2},
                                        {"provider": "unregistered", "requests_4xx": 3}]'), 2, 'two reports taken');
SELECT inbox.report_receiver_stats('[{"provider": "r", "requests_2xx": 5, "duplicates": 1}]');
SELECT is((SELECT (requests_2xx, signature_failures, duplicates, reports)::text FROM inbox.receiver_stats WHERE provider = 'r'),
          '(15,2,1,2)', 'reports add up per minute');
SELECT throws_ok($$SELECT inbox.report_receiver_stats(NULL)$$, '22004', NULL, 'report: NULL');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('{}')$$, '22023', 'counters must be a JSON array', 'report: not an array');
SELECT is(inbox.report_receiver_stats('[]'), 0, 'report: an empty array takes nothing');
SELECT throws_ok($$SELECT inbox.report_receiver_stats((SELECT jsonb_agg(jsonb_build_object('provider', 'r'))
                                                           FROM generate_series(1, 1001)))$$,
                 '54000', 'at most 1000 counter objects per report, got 1001', 'report: oversized');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "r", "requests_3xx": 1}]')$$, '22023',
                 'unknown counter ''requests_3xx''', 'report: unknown counter');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "r", "requests_2xx": -1}]')$$, '22023',
                 'counter requests_2xx must be a whole number between 0 and 1000000000', 'report: negative');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "r", "requests_2xx": 1.5}]')$$, '22023', NULL,
                 'report: fraction');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "r", "requests_2xx": "7"}]')$$, '22023', NULL,
                 'report: a string');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"requests_2xx": 1}]')$$, '22023', 'invalid provider name NULL',
                 'report: no provider');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "Bad Name"}]')$$, '22023', NULL, 'report: bad provider name');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[{"provider": "r", "minute": "2001-01-01T00:00:00Z"}]')$$, '22023',
                 NULL, 'report: a minute long past');
SELECT throws_ok($$SELECT inbox.report_receiver_stats('[1]')$$, '22023', 'each counter report must be a JSON object',
                 'report: not an object');
SELECT throws_ok($$SELECT inbox.run_checks('infinity')$$, '22023', 'at must be a finite time', 'run_checks: infinity');

SELECT * FROM finish();
ROLLBACK;

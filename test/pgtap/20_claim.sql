-- inbox.claim: leases due events with SKIP LOCKED.
BEGIN;
SELECT plan(26);

SELECT inbox.register_provider('stripe');
SELECT inbox.register_provider('github');
SELECT inbox.register_provider('shop', on_lease_expiry => 'hold');
SELECT inbox.ingest('stripe', 's' || i, jsonb_build_object('i', i)) FROM generate_series(1, 5) i;
SELECT inbox.ingest('github', 'g1', '{}');

CREATE TEMP TABLE first_claim AS SELECT * FROM inbox.claim(3, '10 minutes', 'stripe');
SELECT is((SELECT count(*)::int FROM first_claim), 3, 'claims up to max_rows');
SELECT set_eq('SELECT external_id FROM first_claim', ARRAY['s1', 's2', 's3'], 'oldest first');
SELECT ok((SELECT bool_and(status = 'processing' AND attempts = 1 AND lease_token IS NOT NULL
                          AND lease_expires_at = now() + interval '10 minutes') FROM first_claim),
          'claimed rows carry status, attempt, token and lease');
SELECT is((SELECT count(DISTINCT lease_token)::int FROM first_claim), 3, 'one token per event');
SELECT set_eq('SELECT external_id FROM inbox.claim(10, NULL, ''stripe'')', ARRAY['s4', 's5'],
  'leased events are not claimed again');
SELECT is((SELECT lease_expires_at FROM inbox.events WHERE external_id = 's4'),
          now() + current_setting('pg_inbox.default_lease')::interval,
          'NULL lease uses pg_inbox.default_lease');
SELECT is((SELECT count(*)::int FROM inbox.claim(10)), 1, 'NULL provider claims from every provider');
SELECT is_empty('SELECT * FROM inbox.claim()', 'nothing due: empty set');

-- Expired leases are claimable again, with a new token.
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 's1';
SELECT row_eq($$ SELECT external_id, attempts FROM inbox.claim(10, '1 minute') $$, ROW('s1'::text, 2),
  'an expired lease is reclaimed and the attempt counted');
SELECT isnt((SELECT lease_token FROM inbox.events WHERE external_id = 's1'),
            (SELECT lease_token FROM first_claim WHERE external_id = 's1'), 'reclaim mints a new token');

-- Providers with on_lease_expiry = hold keep expired leases for the reconciler.
SELECT inbox.ingest('shop', 'o1', '{}');
SELECT is((SELECT count(*)::int FROM inbox.claim(5, '1 minute', 'shop')), 1, 'claimed once');
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 'o1';
SELECT is_empty($$ SELECT * FROM inbox.claim(5, '1 minute', 'shop') $$, 'hold: an expired lease is not reclaimed');

-- Events in backoff wait for next_attempt_at.
SELECT inbox.ingest('github', 'g2', '{}');
UPDATE inbox.events SET next_attempt_at = now() + interval '1 minute' WHERE external_id = 'g2';
SELECT is_empty($$ SELECT * FROM inbox.claim(5, '1 minute', 'github') $$, 'events in backoff are not due');

SELECT throws_ok($$ SELECT * FROM inbox.claim(0) $$, '22023', 'max_rows must be between 1 and 10000, not 0');
SELECT throws_ok($$ SELECT * FROM inbox.claim(-5) $$, '22023', 'max_rows must be between 1 and 10000, not -5');
SELECT throws_ok($$ SELECT * FROM inbox.claim(1, '-1 minute') $$, '22023', 'lease must be positive');
SELECT throws_ok($$ SELECT * FROM inbox.claim('ten') $$, '22P02', NULL, 'max_rows of the wrong type');
SELECT throws_ok($$ SELECT * FROM inbox.claim(1, 'soon') $$, '22007', NULL, 'lease of the wrong type');
SELECT throws_ok($$ SELECT * FROM inbox.claim(NULL) $$, '22004', 'max_rows must not be null');
SELECT throws_ok($$ SELECT * FROM inbox.claim(1, NULL, '') $$, '22023', 'provider must not be empty');
SELECT throws_ok($$ SELECT * FROM inbox.claim(1, NULL, 'nope') $$, '42704', 'unknown provider "nope"');

-- Claims are HOT updates (no new index entries): fillfactor 50 leaves every
-- row room for its claimed version, payloads of a small Stripe event
-- included (at fillfactor 80, 10 of these 40 claims found room). The
-- transaction's own counters: the statistics views lag.
SELECT inbox.register_provider('hot');
SELECT inbox.ingest('hot', 'h' || i, jsonb_build_object('i', i, 'lines', repeat('x', 600)))
  FROM generate_series(1, 40) i;
CREATE TEMP TABLE hot_before AS
SELECT pg_stat_get_xact_tuples_updated('inbox.events'::regclass) AS updated,
       pg_stat_get_xact_tuples_hot_updated('inbox.events'::regclass) AS hot;
SELECT is((SELECT count(*)::int FROM inbox.claim(40, '1 minute', 'hot')), 40, 'forty wide events claimed');
SELECT is((SELECT pg_stat_get_xact_tuples_hot_updated('inbox.events'::regclass) - hot FROM hot_before),
          (SELECT pg_stat_get_xact_tuples_updated('inbox.events'::regclass) - updated FROM hot_before),
          'every claim was a HOT update');

-- A claim across all providers plans its scan with sorting (and JIT) off;
-- the caller's settings are as they were after it, and after its error.
SET LOCAL enable_sort = on;
SET LOCAL jit = on;
SELECT count(*) FROM inbox.claim(1);
SELECT is(current_setting('enable_sort') || ' ' || current_setting('jit'), 'on on',
          'after a claim the session sorts and compiles as before');
CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused' USING ERRCODE = 'P0001';
END
$$;
CREATE TRIGGER refuse_updates BEFORE UPDATE ON inbox.events FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse();
SELECT inbox.ingest('github', 'g-refused', '{}');
SELECT throws_ok($$ SELECT count(*) FROM inbox.claim(1) $$, 'P0001', 'refused',
                 'an error inside the claim reaches the caller');
SELECT is(current_setting('enable_sort') || ' ' || current_setting('jit'), 'on on',
          'and leaves the settings as they were');
DROP TRIGGER refuse_updates ON inbox.events;

SELECT * FROM finish();
ROLLBACK;

-- One provider, 'bench'; run.sh turns its ordering pointers on and off
-- between workloads, so every workload claims from the same backlog.
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
TRUNCATE inbox.events;
DELETE FROM inbox.entity_versions;
SELECT inbox.register_provider('bench');
-- Another provider, with pointers and no events: a claim from every provider
-- (provider NULL) then runs the ordering statement for bench's events too.
SELECT inbox.register_provider('other');
SELECT inbox.apply_preset('other', 'stripe');
-- The claim of 0.1.0 (the symbol 0.1.0's install script binds), the baseline.
CREATE FUNCTION bench.claim_010(max_rows int, lease interval, provider text)
RETURNS SETOF inbox.events AS '$libdir/pg_inbox', 'inbox_claim'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 50;
-- A 600-byte payload shaped like a small Stripe event, one object per event.
CREATE FUNCTION bench.payload(n bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('id', 'evt_' || n, 'type', 'invoice.paid', 'created', 1700000000 + n,
           'data', jsonb_build_object('object', jsonb_build_object('id', 'in_' || n, 'status', 'paid',
             'amount_paid', 4200, 'currency', 'eur', 'customer', 'cus_' || (n % 997),
             'lines', repeat('x', 400))))
$$;
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'bench', 'evt_' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
VACUUM ANALYZE inbox.events;

-- Two tables of the same shape: inbox.events (through pg_inbox's functions)
-- and bench.raw_events (through the plain SQL a team would write by hand).
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
TRUNCATE inbox.events;
CREATE TABLE bench.raw_events (LIKE inbox.events INCLUDING ALL);
SELECT inbox.register_provider('bench');
-- A 600-byte payload, about a small Stripe event.
CREATE FUNCTION bench.payload(n bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('id', 'evt_' || n, 'type', 'invoice.paid', 'livemode', false,
           'data', jsonb_build_object('object', jsonb_build_object('id', 'in_' || n,
             'amount_paid', 4200, 'currency', 'eur', 'customer', 'cus_' || (n % 997),
             'lines', repeat('x', 400))))
$$;
-- The raw side's audit log (raw_ingest_one_audited.sql): one row per
-- delivery, the size of the delivery log's row for a single event.
CREATE TABLE bench.raw_audit (stripe smallint, seq bigserial, row_bytes bytea, PRIMARY KEY (stripe, seq));
CREATE FUNCTION bench.audit_bytes() RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT decode(repeat('ab', 420), 'hex')
$$;

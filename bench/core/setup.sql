-- Two tables of the same shape: inbox.events (through pg_inbox's functions)
-- and bench.raw_events (through the plain SQL a team would write by hand).
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
TRUNCATE inbox.events;
CREATE TABLE bench.raw_events (LIKE inbox.events INCLUDING ALL EXCLUDING CONSTRAINTS);
-- The rules of inbox.events' row, as a team writes them: SQL CHECKs (those of
-- pg_inbox 0.1.0). pg_inbox checks the same rules in one C function, which
-- PostgreSQL does not parse again at every statement; BENCH_RAW_CHECK=c gives
-- the raw table that CHECK too, to see how much of a ratio it makes.
\set raw_check sql
\getenv raw_check BENCH_RAW_CHECK
SELECT :'raw_check' = 'c' AS raw_check_in_c \gset
\if :raw_check_in_c
ALTER TABLE bench.raw_events ADD CHECK (inbox._event_row_valid(status, processed_at, external_id));
\else
ALTER TABLE bench.raw_events
  ADD CHECK (status IN ('pending', 'processing', 'done', 'dead')),
  ADD CHECK ((status IN ('done', 'dead')) = (processed_at IS NOT NULL)),
  ADD CHECK (octet_length(external_id) BETWEEN 1 AND 255);
\endif
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

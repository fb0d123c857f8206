-- Ingest: one atomic upsert keyed by (provider, external_id).
--
-- The statements these C functions run are planned once per connection and
-- kept (extension/spi.hpp). enable_seqscan = off makes every lookup of a
-- kept plan an index probe whatever the statistics said when it was made: a
-- plan made on an empty table would otherwise keep scanning the whole table
-- once it has grown (bench/core: cold start).

CREATE FUNCTION inbox.ingest(
    provider text,
    external_id text,
    payload jsonb,
    headers jsonb DEFAULT NULL,
    source text DEFAULT 'webhook',
    body_sha256 bytea DEFAULT NULL,
    signature_scheme text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_ingest'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.ingest(text, text, jsonb, jsonb, text, bytea, text) IS
  'Store one delivery: inserted (first), updated (re-delivery, not yet processed), duplicate (already processed)';

CREATE FUNCTION inbox.ingest_batch(
    providers text[],
    external_ids text[],
    payloads jsonb[],
    headers jsonb[] DEFAULT NULL,
    source text DEFAULT 'webhook',
    body_sha256s bytea[] DEFAULT NULL,
    signature_schemes text[] DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'inbox_ingest_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text, bytea[], text[]) IS
  'Store many deliveries in one statement; one outcome per element, in input order';

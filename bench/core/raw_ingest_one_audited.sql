\set n random(1, 9000000000000000000)
\set s random(0, 63)
-- The raw one-row upsert plus what any audit log adds: one append-only row
-- of the delivery log's size (about 450 bytes) with a primary key, in the
-- same statement (ingest_versions.sh: the ceiling a logged ingest can reach).
WITH e AS (
    INSERT INTO bench.raw_events AS e (provider, external_id, payload)
    VALUES ('bench', 'one-' || :n, bench.payload(:n))
    ON CONFLICT (provider, external_id) DO UPDATE
       SET payload = EXCLUDED.payload, delivery_count = e.delivery_count + 1, received_at = now()
     WHERE e.processed_at IS NULL
    RETURNING id)
INSERT INTO bench.raw_audit (stripe, row_bytes) SELECT :s, bench.audit_bytes() FROM e;

-- The delivery log (issue 12): every delivery that inbox.ingest /
-- inbox.ingest_batch saw, stored as one append-only row per call
-- (inbox.delivery_batches; the view inbox.deliveries has one row per
-- delivery), hash-chained so that an edit, a deletion or a reordering is
-- detectable (docs/delivery-log.md).
--
-- Concurrency: one chain would serialise every ingest transaction until its
-- commit. The log is cut into kLogStripes independent chains ("stripes").
-- An ingest transaction takes a free stripe (a transaction-level advisory
-- lock, tried without waiting: a base stripe, or while another transaction
-- waits for stripe 0, an overflow one; else it waits for stripe 0),
-- appends after the stripe's last row (a backward probe of the primary
-- key) and keeps the stripe until it ends: an abort takes its rows
-- with it, a commit leaves them for the next holder. The primary key
-- (stripe, seq) makes a fork impossible: two rows cannot share a place.

-- The number of stripes: kLogStripes of extension/delivery_log.hpp, the one
-- definition.
CREATE FUNCTION inbox._log_stripes()
RETURNS int
AS 'MODULE_PATHNAME', 'inbox_log_stripes'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- The shape of a row of inbox.delivery_batches: its arrays are parallel
-- (one dimension, the same length, not empty). In C: a CHECK expression is
-- parsed and planned again at every insert, and the cardinality() version
-- of this was an eighth of a single-event ingest.
CREATE FUNCTION inbox._log_arrays_aligned(bigint[], int[], text[], boolean[], boolean[], text[],
                                          text[], text[], text[], bytea[], bytea[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_log_arrays_aligned'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Storage: one row per ingest / ingest_batch call (a "batch"), the call's
-- deliveries as parallel arrays. One heap tuple and one primary-key entry per
-- call instead of per delivery: what brought the log's cost under the
-- target (bench/README.md). inbox.deliveries, the view below, gives one row
-- per delivery.
CREATE TABLE inbox.delivery_batches (
    stripe            smallint NOT NULL,
    seq               bigint NOT NULL CHECK (seq > 0),
    received_at       timestamptz NOT NULL,
    source            text NOT NULL,
    event_ids         bigint[] NOT NULL,   -- an element NULL when the event's row was already gone
    deliveries        int[] NOT NULL,      -- the event's 1st, 2nd, ... delivery
    outcomes          text[] NOT NULL,     -- inserted, updated, duplicate
    payload_kept      boolean[] NOT NULL,  -- the event was processing: payload and headers unchanged
    payload_differs   boolean[] NOT NULL,  -- ... and this body differs from the one kept
    differing         int NOT NULL,        -- how many elements of payload_differs are true
    providers         text[] NOT NULL,
    external_ids      text[] NOT NULL,
    body_hashed       text[] NOT NULL,     -- raw, jsonb
    signature_schemes text[] NOT NULL,
    body_sha256       bytea[] NOT NULL,
    headers_sha256    bytea[] NOT NULL,
    hash              bytea NOT NULL,
    CONSTRAINT delivery_batches_pkey PRIMARY KEY (stripe, seq),
    CONSTRAINT delivery_batches_shape CHECK (inbox._log_arrays_aligned(
        event_ids, deliveries, outcomes, payload_kept, payload_differs, providers, external_ids,
        body_hashed, signature_schemes, body_sha256, headers_sha256))
);
-- What the rollups count: calls with a body that differed from the one a
-- worker held (one entry per such call, none for the others).
CREATE INDEX delivery_batches_differs_idx ON inbox.delivery_batches (received_at) WHERE differing > 0;
-- A batch's row is about 10 kB of arrays, past the TOAST threshold: every
-- insert compresses it. pglz was a quarter of the log's CPU on a batch of
-- 100; lz4, where the server was built with it, costs a fraction of that
-- (bench/README.md, "The log row's compression").
DO $lz4$
DECLARE
    columns text;
BEGIN
    IF EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        SELECT string_agg(format('ALTER COLUMN %I SET COMPRESSION lz4', a.attname), ', ' ORDER BY a.attnum)
          INTO columns
          FROM pg_attribute a
         WHERE a.attrelid = 'inbox.delivery_batches'::regclass AND a.attnum > 0 AND a.attstorage = 'x';
        EXECUTE 'ALTER TABLE inbox.delivery_batches ' || columns;
    END IF;
END
$lz4$;
COMMENT ON TABLE inbox.delivery_batches IS
  'the delivery log''s storage: one append-only, hash-chained row per inbox.ingest/ingest_batch call; read it through inbox.deliveries';

-- The number a duplicate (a delivery of a processed event, which changes
-- nothing in inbox.events) gets: the event's delivery_count plus its
-- duplicates so far. One row per event that had duplicates, not one index
-- entry per delivery; the upsert also orders concurrent duplicates of one
-- event. Not part of the chain (the numbers it hands out are).
CREATE TABLE inbox.delivery_duplicates (
    event_id   bigint PRIMARY KEY,
    duplicates int NOT NULL CHECK (duplicates > 0)
);
COMMENT ON TABLE inbox.delivery_duplicates IS
  'per event, the deliveries after it was processed (duplicates): how ingest numbers the next one';

-- One row per delivery, in call order.
CREATE VIEW inbox.deliveries AS
SELECT b.stripe, b.seq, t.item::int AS item, t.event_id, t.delivery, b.received_at, t.payload_kept,
       t.payload_differs, t.outcome, t.provider, t.external_id, b.source, t.body_hashed,
       t.signature_scheme, t.body_sha256, t.headers_sha256, b.hash
  FROM inbox.delivery_batches b
 CROSS JOIN LATERAL unnest(b.event_ids, b.deliveries, b.outcomes, b.payload_kept, b.payload_differs,
                           b.providers, b.external_ids, b.body_hashed, b.signature_schemes,
                           b.body_sha256, b.headers_sha256)
       WITH ORDINALITY AS t(event_id, delivery, outcome, payload_kept, payload_differs, provider,
                            external_id, body_hashed, signature_scheme, body_sha256, headers_sha256, item);
COMMENT ON VIEW inbox.deliveries IS
  'one row per delivery seen by inbox.ingest/ingest_batch (stored per call in inbox.delivery_batches); inbox.verify_log checks it';
COMMENT ON COLUMN inbox.deliveries.item IS 'the delivery''s place in its call (1, 2, ...): (stripe, seq, item) is unique';
COMMENT ON COLUMN inbox.deliveries.body_sha256 IS
  'SHA-256 of the raw body when the caller passed it (body_hashed = raw), else of the stored jsonb as text';
COMMENT ON COLUMN inbox.deliveries.headers_sha256 IS 'SHA-256 of the headers jsonb as text; NULL without headers';
COMMENT ON COLUMN inbox.deliveries.hash IS 'the hash of the call''s row (the chain links calls, not deliveries)';

-- Periodic seals: every stripe's last (seq, hash) at one moment, chained
-- too. Export them (docs/delivery-log.md): a copy kept elsewhere is what
-- proves the log was not rewritten after the seal.
CREATE TABLE inbox.log_seals (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sealed_at timestamptz NOT NULL,
    seqs      bigint[] NOT NULL,  -- per stripe 0..n-1: its last seq (0: empty)
    hashes    bytea[] NOT NULL,   -- per stripe: that row's hash (zeros: empty)
    hash      bytea NOT NULL      -- SHA-256 over the previous seal's hash and this seal
);
COMMENT ON TABLE inbox.log_seals IS
  'the heads of the delivery log at intervals (inbox.seal_log); export them and keep them elsewhere';

-- Append-only, even for the owner: UPDATE, DELETE and TRUNCATE are refused.
-- (A superuser can disable the triggers; inbox.verify_log detects what they
-- change, up to a rewrite of everything after the last exported seal.)
CREATE FUNCTION inbox._refuse_log_change()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER delivery_batches_append_only BEFORE UPDATE OR DELETE ON inbox.delivery_batches
    FOR EACH ROW EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER delivery_batches_no_truncate BEFORE TRUNCATE ON inbox.delivery_batches
    FOR EACH STATEMENT EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER log_seals_append_only BEFORE UPDATE OR DELETE ON inbox.log_seals
    FOR EACH ROW EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER log_seals_no_truncate BEFORE TRUNCATE ON inbox.log_seals
    FOR EACH STATEMENT EXECUTE FUNCTION inbox._refuse_log_change();

-- A text field of a hashed message: its length in bytes, ':', its bytes;
-- '~' for NULL. Unambiguous whatever the text holds.
CREATE FUNCTION inbox._log_field(value text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(octet_length(value) || ':' || value, '~')
$$;

-- The bytes a call's hash covers after the previous hash: one line per
-- delivery, joined by newlines. The same encoding as batch_message() in
-- extension/log_chain.cpp (verify_log proves they agree on every row
-- ingest wrote).
CREATE FUNCTION inbox._batch_message(b inbox.delivery_batches)
RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_to(string_agg(concat_ws('|', b.stripe, b.seq, t.n, coalesce(t.event_id::text, '~'),
                                           coalesce(t.delivery::text, '~'),
                                           (extract(epoch FROM b.received_at) * 1000000)::bigint,
                                           inbox._log_field(t.provider), inbox._log_field(t.external_id),
                                           inbox._log_field(b.source), t.outcome,
                                           CASE WHEN t.kept THEN 't' ELSE 'f' END,
                                           CASE WHEN t.differs THEN 't' ELSE 'f' END,
                                           encode(t.body_sha256, 'hex'), t.body_hashed,
                                           inbox._log_field(t.scheme),
                                           coalesce(encode(t.headers_sha256, 'hex'), '~')),
                                 E'\n' ORDER BY t.n),
                      pg_catalog.getdatabaseencoding())
      FROM unnest(b.event_ids, b.deliveries, b.outcomes, b.payload_kept, b.payload_differs,
                  b.providers, b.external_ids, b.body_hashed, b.signature_schemes,
                  b.body_sha256, b.headers_sha256)
           WITH ORDINALITY AS t(event_id, delivery, outcome, kept, differs, provider, external_id,
                                body_hashed, scheme, body_sha256, headers_sha256, n)
$$;

-- A seal's hash: over the previous seal's hash, its id, time and heads.
CREATE FUNCTION inbox._seal_hash(prev bytea, id bigint, sealed_at timestamptz, seqs bigint[], hashes bytea[])
RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(prev || convert_to(concat_ws('|', id, (extract(epoch FROM sealed_at) * 1000000)::bigint,
                                               array_to_string(seqs, ','),
                                               (SELECT string_agg(encode(h, 'hex'), ',' ORDER BY k)
                                                  FROM unnest(hashes) WITH ORDINALITY AS x(h, k))),
                                     'UTF8'))
$$;

-- Seals the log: every stripe's last row, when anything was appended since
-- the last seal. Returns the seal's id, or NULL when nothing changed.
CREATE FUNCTION inbox.seal_log()
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last inbox.log_seals;
    heads_seqs bigint[];
    heads_hashes bytea[];
    new_id bigint;
    at timestamptz := clock_timestamp();
BEGIN
    -- One seal at a time, or two would chain to the same predecessor.
    PERFORM pg_advisory_xact_lock(1885957740, -1);
    SELECT array_agg(coalesce(h.seq, 0) ORDER BY s), array_agg(coalesce(h.hash, decode(repeat('00', 32), 'hex')) ORDER BY s)
      INTO heads_seqs, heads_hashes
      FROM generate_series(0, inbox._log_stripes() - 1) s
      LEFT JOIN LATERAL (SELECT d.seq, d.hash FROM inbox.delivery_batches d
                          WHERE d.stripe = s ORDER BY d.seq DESC LIMIT 1) h ON true;
    SELECT * INTO last FROM inbox.log_seals l ORDER BY l.id DESC LIMIT 1;
    IF last.seqs IS NOT DISTINCT FROM heads_seqs THEN
        RETURN NULL;
    END IF;
    new_id := nextval(pg_get_serial_sequence('inbox.log_seals', 'id'));
    INSERT INTO inbox.log_seals (id, sealed_at, seqs, hashes, hash)
    OVERRIDING SYSTEM VALUE
    VALUES (new_id, at, heads_seqs, heads_hashes,
            inbox._seal_hash(coalesce(last.hash, decode(repeat('00', 32), 'hex')), new_id, at,
                             heads_seqs, heads_hashes));
    RETURN new_id;
END
$$;
COMMENT ON FUNCTION inbox.seal_log() IS
  'seal the delivery log (scheduled by inbox.schedule); the new seal''s id, NULL when nothing was appended';

-- Checks the log between two times and returns its first broken link, or no
-- row. The range is widened to seals: it starts at the last seal at or
-- before from_time (NULL: the beginning) and ends at the first seal at or
-- after to_time (NULL: the last row). Checked: every link of every stripe
-- in the range (hash over the previous hash and the row; no missing seq),
-- then every seal in the range against the seal before it and the rows it
-- sealed (so a tail truncated below the last seal is found).
CREATE FUNCTION inbox.verify_log(from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL)
RETURNS TABLE (stripe int, seq bigint, seal_id bigint, problem text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    zeros CONSTANT bytea := decode(repeat('00', 32), 'hex');
    stripes CONSTANT int := inbox._log_stripes();
    first_seal inbox.log_seals;
    end_seal inbox.log_seals;
    s record;
    k int;
    lo bigint;
    lo_hash bytea;
    hi bigint;
    got record;
BEGIN
    IF from_time > to_time THEN
        RAISE EXCEPTION 'from_time % is after to_time %', from_time, to_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF from_time IS NOT NULL THEN
        SELECT * INTO first_seal FROM inbox.log_seals l WHERE l.sealed_at <= from_time ORDER BY l.id DESC LIMIT 1;
    END IF;
    IF to_time IS NOT NULL THEN
        SELECT * INTO end_seal FROM inbox.log_seals l WHERE l.sealed_at >= to_time ORDER BY l.id LIMIT 1;
    END IF;

    FOR k IN 0 .. stripes - 1 LOOP
        lo := coalesce(first_seal.seqs[k + 1], 0);
        lo_hash := coalesce(first_seal.hashes[k + 1], zeros);
        hi := end_seal.seqs[k + 1];
        -- Every link of the range: the hash over the previous one, no gap,
        -- and the count the rollups read agreeing with the flags it counts.
        SELECT x.seq, x.expected_seq INTO got
          FROM (SELECT d.seq, d.hash, d.differing,
                       (SELECT count(*) FROM unnest(d.payload_differs) f WHERE f) AS counted,
                       coalesce(lag(d.seq) OVER w, lo) + 1 AS expected_seq,
                       sha256(coalesce(lag(d.hash) OVER w, lo_hash) || inbox._batch_message(d)) AS computed
                  FROM inbox.delivery_batches d
                 WHERE d.stripe = k AND d.seq > lo AND (hi IS NULL OR d.seq <= hi)
                WINDOW w AS (ORDER BY d.seq)) x
         WHERE x.seq <> x.expected_seq OR x.computed IS DISTINCT FROM x.hash OR x.counted <> x.differing
         ORDER BY x.seq LIMIT 1;
        IF FOUND THEN
            IF got.seq <> got.expected_seq THEN
                RETURN QUERY SELECT k, got.expected_seq, NULL::bigint,
                                    format('rows %s to %s are missing', got.expected_seq, got.seq - 1);
            ELSE
                RETURN QUERY SELECT k, got.seq, NULL::bigint,
                                    'the row does not match its hash or the row before it'::text;
            END IF;
            RETURN;
        END IF;
    END LOOP;

    -- The seals of the range: each chained to the one before it, and the
    -- row each sealed still there, unchanged (a truncated tail shows here).
    FOR s IN SELECT l.*, (SELECT p.hash FROM inbox.log_seals p WHERE p.id < l.id
                           ORDER BY p.id DESC LIMIT 1) AS prev_hash
               FROM inbox.log_seals l
              WHERE l.id >= coalesce(first_seal.id, 0) AND (end_seal.id IS NULL OR l.id <= end_seal.id)
              ORDER BY l.id LOOP
        IF cardinality(s.seqs) <> stripes OR cardinality(s.hashes) <> stripes
           OR s.hash IS DISTINCT FROM inbox._seal_hash(coalesce(s.prev_hash, zeros), s.id, s.sealed_at,
                                                       s.seqs, s.hashes) THEN
            RETURN QUERY SELECT NULL::int, NULL::bigint, s.id,
                                'the seal does not match its contents or the seal before it'::text;
            RETURN;
        END IF;
        FOR k IN 0 .. stripes - 1 LOOP
            IF s.seqs[k + 1] > 0 AND NOT EXISTS (SELECT 1 FROM inbox.delivery_batches d
                                                  WHERE d.stripe = k AND d.seq = s.seqs[k + 1]
                                                    AND d.hash = s.hashes[k + 1]) THEN
                RETURN QUERY SELECT k, s.seqs[k + 1], s.id,
                                    'the row this seal sealed is missing or changed: rows were removed or rewritten'::text;
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION inbox.verify_log(timestamptz, timestamptz) IS
  'the first broken link of the delivery log between two times (widened to seals), or no row';

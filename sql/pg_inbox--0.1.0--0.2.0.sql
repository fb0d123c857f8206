-- pg_inbox 0.1.0 -> 0.2.0. Run by ALTER EXTENSION pg_inbox UPDATE.
--
-- One script per release, appended to by every change in the release: each
-- change to an object in sql/src/ is repeated here, in a block headed by the
-- issue it belongs to, so that an upgraded database ends up identical to a
-- fresh 0.2.0 install (test/upgrade/upgrade.t proves it in `make test`).
\echo Use "ALTER EXTENSION pg_inbox UPDATE TO '0.2.0'" to load this file. \quit

-- Issue 7: DROP EXTENSION removes the pg_cron jobs (sql/src/65_uninstall.sql).
CREATE FUNCTION inbox._unschedule_on_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'inbox_unschedule_on_drop'
LANGUAGE C SET search_path = pg_catalog, pg_temp;

CREATE EVENT TRIGGER pg_inbox_unschedule_on_drop ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
  EXECUTE FUNCTION inbox._unschedule_on_drop();
REVOKE ALL ON FUNCTION inbox._unschedule_on_drop() FROM PUBLIC;

-- Issue 14: one definition each, enforced by the tables: the provider-name
-- rule (inbox._valid_provider_name), the external_id limit
-- (inbox._external_id_limit, now also a CHECK on inbox.events) and the
-- id-pattern grammar (inbox._id_pattern_error, the scans' own parser);
-- "unknown provider" from inbox._require_provider only. Existing rows already
-- meet every rule (ingest refused longer ids since 0.1.0), so the constraints
-- are added valid.

-- The one definition of a provider name: 1 to 63 of a-z, 0-9, "_", "-". The
-- table's CHECK and register_provider use it (simple SQL: inlined, no call).
CREATE FUNCTION inbox._valid_provider_name(name text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT name ~ '^[a-z0-9_-]{1,63}$'
$$;

-- The longest external_id, in bytes: kMaxExternalIdBytes of
-- extension/limits.hpp, the one definition, which ingest checks itself. The
-- CHECKs of inbox.events, inbox.tombstones and inbox.listed_ids and the SQL
-- functions' messages read it here. C, not SQL: a constraint folds it once
-- per statement, and a SQL function would be parsed and run each time.
CREATE FUNCTION inbox._external_id_limit()
RETURNS int
AS 'MODULE_PATHNAME', 'inbox_external_id_limit'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

ALTER TABLE inbox.providers DROP CONSTRAINT providers_name_check,
    ADD CONSTRAINT providers_name_check CHECK (inbox._valid_provider_name(name));
ALTER TABLE inbox.events ADD CONSTRAINT events_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit());
ALTER TABLE inbox.tombstones DROP CONSTRAINT tombstones_external_id_check,
    ADD CONSTRAINT tombstones_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit());
ALTER TABLE inbox.listed_ids DROP CONSTRAINT listed_ids_external_id_check,
    ADD CONSTRAINT listed_ids_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit());

-- Why a sequence pattern is malformed, or NULL: the grammar the scans parse
-- (extension/gaps_sequence.hpp), so set_id_source accepts exactly what they can.
CREATE FUNCTION inbox._id_pattern_error(pattern text)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_id_pattern_error'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Register or update a provider. NULL settings use the pg_inbox.* defaults.
CREATE OR REPLACE FUNCTION inbox.register_provider(
    name text,
    max_attempts int DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    on_lease_expiry text DEFAULT 'reclaim')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR NOT inbox._valid_provider_name(name) THEN
        RAISE EXCEPTION 'invalid provider name %', coalesce(quote_literal(name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 1 to 63 characters from a-z, 0-9, "_" and "-".';
    END IF;
    IF on_lease_expiry IS NULL OR on_lease_expiry NOT IN ('reclaim', 'hold') THEN
        RAISE EXCEPTION 'on_lease_expiry must be ''reclaim'' or ''hold'', not %',
            coalesce(quote_literal(on_lease_expiry), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.providers AS p (name, max_attempts, backoff_base, backoff_max, on_lease_expiry)
    VALUES (register_provider.name, register_provider.max_attempts, register_provider.backoff_base,
            register_provider.backoff_max, register_provider.on_lease_expiry)
    ON CONFLICT ON CONSTRAINT providers_pkey DO UPDATE
       SET max_attempts = EXCLUDED.max_attempts, backoff_base = EXCLUDED.backoff_base,
           backoff_max = EXCLUDED.backoff_max, on_lease_expiry = EXCLUDED.on_lease_expiry;
END
$$;

-- Sets (or, with NULL, resets to 1 hour) when an open event counts as stuck.
CREATE OR REPLACE FUNCTION inbox.set_stuck_after(provider text, stuck_after interval)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF provider IS NULL THEN
        RAISE EXCEPTION 'provider must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF stuck_after IS NOT NULL AND stuck_after <= interval '0' THEN
        RAISE EXCEPTION 'stuck_after must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE inbox.providers p SET stuck_after = set_stuck_after.stuck_after WHERE p.name = provider;
    IF NOT FOUND THEN
        PERFORM inbox._require_provider(provider);  -- raises: unknown provider
    END IF;
END
$$;

-- Configures (or, with kind NULL, removes) a provider's expected-id source.
-- Changing the kind or pattern starts the scan over.
CREATE OR REPLACE FUNCTION inbox.set_id_source(
    provider text,
    kind text,
    pattern text DEFAULT NULL,
    start_at bigint DEFAULT NULL,
    grace interval DEFAULT '1 hour')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM inbox._require_provider(provider);
    IF kind IS NULL THEN
        DELETE FROM inbox.gap_sources s WHERE s.provider = set_id_source.provider;
        RETURN;
    END IF;
    IF kind NOT IN ('sequence', 'listed') THEN
        RAISE EXCEPTION 'id source kind must be ''sequence'' or ''listed'', not %', quote_literal(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kind = 'sequence' THEN
        IF pattern IS NULL OR inbox._id_pattern_error(pattern) IS NOT NULL THEN
            RAISE EXCEPTION 'malformed id pattern %', coalesce(quote_literal(pattern), 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = coalesce(inbox._id_pattern_error(pattern), 'The pattern is null.'),
                      HINT = 'A prefix (no braces, at most 200 bytes) followed by {n}, or {n:WIDTH} '
                             'for numbers zero-padded to WIDTH (1-18) digits: ''evt_{n}'', ''ord-{n:8}''.';
        END IF;
    ELSIF pattern IS NOT NULL THEN
        RAISE EXCEPTION 'a listed id source takes no pattern' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF start_at IS NOT NULL AND start_at < 0 THEN
        RAISE EXCEPTION 'start_at must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF grace IS NULL OR grace < interval '0' THEN
        RAISE EXCEPTION 'grace must not be null or negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.gap_sources AS s (provider, kind, pattern, start_at, grace)
    VALUES (set_id_source.provider, set_id_source.kind, set_id_source.pattern,
            set_id_source.start_at, set_id_source.grace)
    ON CONFLICT ON CONSTRAINT gap_sources_pkey DO UPDATE
       SET kind = EXCLUDED.kind, pattern = EXCLUDED.pattern, start_at = EXCLUDED.start_at,
           grace = EXCLUDED.grace,
           scanned_to = CASE WHEN (s.kind, s.pattern, s.start_at) IS NOT DISTINCT FROM
                                  (EXCLUDED.kind, EXCLUDED.pattern, EXCLUDED.start_at)
                             THEN s.scanned_to END,
           high_number = CASE WHEN s.pattern IS NOT DISTINCT FROM EXCLUDED.pattern
                              THEN s.high_number END,
           event_watermark = CASE WHEN s.pattern IS NOT DISTINCT FROM EXCLUDED.pattern
                                  THEN s.event_watermark ELSE 0 END;
END
$$;

-- Records a confirmed non-event; closes its gap and any backfill request.
-- Returns false when the id was already tombstoned (the first reason stays).
CREATE OR REPLACE FUNCTION inbox.tombstone(provider text, external_id text, reason text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF provider IS NULL OR external_id IS NULL OR reason IS NULL THEN
        RAISE EXCEPTION 'provider, external_id and reason must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF external_id = '' OR reason = '' THEN
        RAISE EXCEPTION 'external_id and reason must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(external_id) > inbox._external_id_limit() THEN
        RAISE EXCEPTION 'external_id is % bytes, over the limit of %', octet_length(external_id),
            inbox._external_id_limit() USING ERRCODE = 'string_data_right_truncation';
    END IF;
    PERFORM inbox._require_provider(provider);
    IF EXISTS (SELECT 1 FROM inbox.events e
               WHERE e.provider = tombstone.provider AND e.external_id = tombstone.external_id) THEN
        RAISE EXCEPTION 'event "%" of provider "%" exists: it cannot be tombstoned', external_id, provider
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A tombstone marks an id that was never sent.';
    END IF;
    INSERT INTO inbox.tombstones AS t (provider, external_id, reason)
    VALUES (tombstone.provider, tombstone.external_id, left(tombstone.reason, 1000))
    ON CONFLICT ON CONSTRAINT tombstones_pkey DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE inbox.gaps g SET status = 'resolved', resolved_at = now(), resolution = 'tombstoned'
     WHERE g.provider = tombstone.provider AND g.external_id = tombstone.external_id
       AND g.status <> 'resolved';
    UPDATE inbox.backfill_requests r SET status = 'not_found', lease_expires_at = NULL,
           finished_at = now(), last_error = left(tombstone.reason, 1000)
     WHERE r.provider = tombstone.provider AND r.external_id = tombstone.external_id
       AND r.status IN ('pending', 'leased');
    RETURN true;
END
$$;

-- Loads ids a provider's list API reported into the staging table of a
-- `listed` source. Returns how many were new.
CREATE OR REPLACE FUNCTION inbox.add_listed(provider text, external_ids text[], listed_at timestamptz DEFAULT now())
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    added int;
BEGIN
    IF provider IS NULL OR external_ids IS NULL OR listed_at IS NULL THEN
        RAISE EXCEPTION 'provider, external_ids and listed_at must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM inbox.gap_sources s WHERE s.provider = add_listed.provider AND s.kind = 'listed') THEN
        RAISE EXCEPTION 'provider "%" has no listed id source', provider
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT inbox.set_id_source(provider, ''listed'');';
    END IF;
    IF cardinality(external_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 ids per call, got %', cardinality(external_ids)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(external_ids) x
               WHERE x IS NULL OR x = '' OR octet_length(x) > inbox._external_id_limit()) THEN
        RAISE EXCEPTION 'external_ids must be non-empty strings of at most % bytes',
            inbox._external_id_limit() USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.listed_ids (provider, external_id, listed_at)
    SELECT DISTINCT add_listed.provider, x, add_listed.listed_at FROM unnest(external_ids) x
    ON CONFLICT ON CONSTRAINT listed_ids_provider_external_id_key DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;

REVOKE ALL ON FUNCTION inbox._valid_provider_name(text), inbox._external_id_limit(),
    inbox._id_pattern_error(text) FROM PUBLIC;

-- Issue 13: kept plans that cannot degrade. The functions whose statements
-- are planned once per connection run with enable_seqscan = off, so every
-- lookup stays an index probe however small the table was when the plan was
-- made (sql/src/10_ingest.sql, 20_queue.sql).
ALTER FUNCTION inbox.ingest(text, text, jsonb, jsonb, text) SET enable_seqscan = off;
ALTER FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text) SET enable_seqscan = off;
ALTER FUNCTION inbox.complete(bigint, uuid) SET enable_seqscan = off;
ALTER FUNCTION inbox.complete_batch(bigint[], uuid[]) SET enable_seqscan = off;
ALTER FUNCTION inbox.fail(bigint, uuid, text, interval) SET enable_seqscan = off;

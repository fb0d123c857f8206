-- Gap detection: which events a provider sent that never arrived. Each
-- provider may have one expected-id source; gaps are recorded, closed when
-- they resolve themselves, and turned into backfill requests after a grace
-- period. Confirmed non-events are tombstoned and never flagged again.

-- A confirmed non-event: a draft that never fired, a filtered test event,
-- an id the provider's API says does not exist.
CREATE TABLE inbox.tombstones (
    provider    text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id text NOT NULL CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit()),
    reason      text NOT NULL CHECK (reason <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, external_id)
);
COMMENT ON TABLE inbox.tombstones IS 'ids that are known never to have been sent: never flagged as gaps';

-- The expected-id source of a provider, and how far its scans have come.
--   sequence: ids are prefix + number ("evt_{n}", or "evt_{n:8}" zero-padded)
--   listed:   ids the provider's list API reported, in inbox.listed_ids
CREATE TABLE inbox.gap_sources (
    provider         text PRIMARY KEY REFERENCES inbox.providers (name) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('sequence', 'listed')),
    pattern          text CHECK ((kind = 'sequence') = (pattern IS NOT NULL)),
    start_at         bigint CHECK (start_at >= 0),
    grace            interval NOT NULL DEFAULT '1 hour' CHECK (grace >= interval '0'),
    scanned_to       bigint,            -- sequence: last number scanned
    high_number      bigint,            -- sequence: highest number seen in inbox.events, or listed
                                        -- by the provider after it (inbox.raise_sequence_high)
    event_watermark  bigint NOT NULL DEFAULT 0,  -- sequence: inbox.events.id read up to
    listed_watermark bigint NOT NULL DEFAULT 0,  -- listed: inbox.listed_ids.id read up to
    last_scan_at     timestamptz
);
COMMENT ON TABLE inbox.gap_sources IS 'per provider: where the expected ids come from, and scan progress';

-- Staging for `listed` sources: filled by the backfill worker (inbox.add_listed).
CREATE TABLE inbox.listed_ids (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider    text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id text NOT NULL CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit()),
    listed_at   timestamptz NOT NULL,   -- when the provider says it sent the event
    loaded_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, external_id)
);
CREATE INDEX listed_ids_provider_time_idx ON inbox.listed_ids (provider, listed_at);
CREATE INDEX listed_ids_provider_id_idx ON inbox.listed_ids (provider, id);

-- Gaps found by inbox.scan_gaps: open, then requested (a backfill request
-- exists), then resolved (arrived, tombstoned or backfilled).
CREATE TABLE inbox.gaps (
    provider      text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id   text NOT NULL,
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'requested', 'resolved')),
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    requested_at  timestamptz,
    resolved_at   timestamptz,
    resolution    text CHECK (resolution IN ('arrived', 'tombstoned')),
    PRIMARY KEY (provider, external_id),
    CHECK ((status = 'resolved') = (resolution IS NOT NULL))
);
CREATE INDEX gaps_unresolved_idx ON inbox.gaps (provider, first_seen_at) WHERE status <> 'resolved';
COMMENT ON TABLE inbox.gaps IS 'missing events: when first seen, whether requested, how resolved';

-- Why a sequence pattern is malformed, or NULL: the grammar the scans parse
-- (extension/gaps_sequence.hpp), so set_id_source accepts exactly what they can.
CREATE FUNCTION inbox._id_pattern_error(pattern text)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_id_pattern_error'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Configures (or, with kind NULL, removes) a provider's expected-id source.
-- Changing the kind or pattern starts the scan over.
CREATE FUNCTION inbox.set_id_source(
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
CREATE FUNCTION inbox.tombstone(provider text, external_id text, reason text)
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

-- Ids a provider's list API reported, as inbox.add_listed and
-- inbox.raise_sequence_high take them: at most 10000 per call, each a
-- non-empty string within the external id limit.
CREATE FUNCTION inbox._require_listed_ids(external_ids text[])
RETURNS void LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF cardinality(external_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 ids per call, got %', cardinality(external_ids)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(external_ids) x
               WHERE x IS NULL OR x = '' OR octet_length(x) > inbox._external_id_limit()) THEN
        RAISE EXCEPTION 'external_ids must be non-empty strings of at most % bytes',
            inbox._external_id_limit() USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- Loads ids a provider's list API reported into the staging table of a
-- `listed` source. Returns how many were new.
CREATE FUNCTION inbox.add_listed(provider text, external_ids text[], listed_at timestamptz DEFAULT now())
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
    PERFORM inbox._require_listed_ids(external_ids);
    INSERT INTO inbox.listed_ids (provider, external_id, listed_at)
    SELECT DISTINCT add_listed.provider, x, add_listed.listed_at FROM unnest(external_ids) x
    ON CONFLICT ON CONSTRAINT listed_ids_provider_external_id_key DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;

CREATE FUNCTION inbox.find_gaps(provider text, "from" bigint, "to" bigint)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'inbox_find_gaps_sequence'
LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp
-- The merge needs the index's order: never a seq scan and sort per chunk,
-- whatever the statistics of a freshly loaded table say.
SET enable_seqscan = off SET enable_bitmapscan = off ROWS 100;
COMMENT ON FUNCTION inbox.find_gaps(text, bigint, bigint) IS
  'Expected ids of a sequence source numbered from..to that are neither events nor tombstones';

CREATE FUNCTION inbox.find_gaps(provider text, "from" timestamptz, "to" timestamptz)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'inbox_find_gaps_listed'
LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp ROWS 100;
COMMENT ON FUNCTION inbox.find_gaps(text, timestamptz, timestamptz) IS
  'Ids a listed source reported sent in [from, to) that are neither events nor tombstones';

CREATE FUNCTION inbox.scan_gaps(provider text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'inbox_scan_gaps'
LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off;
COMMENT ON FUNCTION inbox.scan_gaps(text) IS
  'Record new gaps, close resolved ones, request backfill of those past the grace period';

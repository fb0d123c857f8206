-- pg_inbox: webhooks in at least once, out exactly once.
\echo Use "CREATE EXTENSION pg_inbox" to load this file. \quit

-- Providers must be registered before their events are accepted: a typo in a
-- receiver's config is an error, not a new stream nobody processes.
CREATE TABLE inbox.providers (
    name            text PRIMARY KEY CHECK (name ~ '^[a-z0-9_-]{1,63}$'),
    max_attempts    int CHECK (max_attempts BETWEEN 1 AND 1000),
    backoff_base    interval CHECK (backoff_base > interval '0'),
    backoff_max     interval CHECK (backoff_max > interval '0'),
    on_lease_expiry text NOT NULL DEFAULT 'reclaim' CHECK (on_lease_expiry IN ('reclaim', 'hold')),
    created_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE inbox.providers IS
  'Webhook providers whose events inbox.ingest accepts; NULL settings fall back on pg_inbox.* GUCs';

-- One row per event, identified by (provider, external_id). Fixed-width
-- columns first, payload last (TOASTed when large, never rewritten by
-- claim/complete/fail). The only partial index is on a column claim does not
-- change, so claims are HOT updates; see README "Storage and vacuum".
CREATE TABLE inbox.events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempts          int NOT NULL DEFAULT 0,
    delivery_count    int NOT NULL DEFAULT 1,
    received_at       timestamptz NOT NULL DEFAULT now(),
    first_received_at timestamptz NOT NULL DEFAULT now(),
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz,
    processed_at      timestamptz,
    lease_token       uuid,
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    provider          text NOT NULL,
    external_id       text NOT NULL,
    source            text NOT NULL DEFAULT 'webhook',
    last_error        text,
    headers           jsonb,
    payload           jsonb NOT NULL,
    CONSTRAINT events_provider_external_id_key UNIQUE (provider, external_id),
    -- processed_at marks the end of the event's life in the queue, done or dead.
    CONSTRAINT events_terminal_has_processed_at
      CHECK ((status IN ('done', 'dead')) = (processed_at IS NOT NULL))
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 1
);

-- Open events, oldest id first: what claim scans. Done and dead rows leave it.
CREATE INDEX events_open_idx ON inbox.events (id) WHERE processed_at IS NULL;

COMMENT ON COLUMN inbox.events.received_at IS 'last delivery that changed the row';
COMMENT ON COLUMN inbox.events.delivery_count IS
  'deliveries while the event was open; re-deliveries after processing are counted by the receiver, not here';
COMMENT ON COLUMN inbox.events.next_attempt_at IS 'earliest claim of a pending event (backoff)';
COMMENT ON COLUMN inbox.events.processed_at IS 'when the event became done or dead';

-- Lease tokens are derived from (event, attempt), so complete/fail can tell a
-- token that was superseded (false / 'lost') from one never issued (error).
-- Epoch, not text, so DateStyle and TimeZone cannot change a token.
CREATE FUNCTION inbox._lease_token(event_id bigint, attempt int, first_received_at timestamptz)
RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT md5(concat_ws(':', event_id, attempt, extract(epoch FROM first_received_at)))::uuid
$$;

-- The check every function taking a provider name makes first.
CREATE FUNCTION inbox._require_provider(provider text)
RETURNS void LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF provider IS NULL THEN
        RAISE EXCEPTION 'provider must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM inbox.providers p WHERE p.name = provider) THEN
        RAISE EXCEPTION 'unknown provider "%"', provider USING ERRCODE = 'undefined_object',
              HINT = 'Register it first: SELECT inbox.register_provider(''name'');';
    END IF;
END
$$;

-- Whether token was issued for any attempt of the event so far: a token that
-- was superseded, as opposed to one that never existed.
CREATE FUNCTION inbox._lease_token_issued(event_id bigint, attempts int,
                                          first_received_at timestamptz, token uuid)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.generate_series(1, attempts) AS k
                   WHERE inbox._lease_token(event_id, k, first_received_at) = token)
$$;

-- Register or update a provider. NULL settings use the pg_inbox.* defaults.
CREATE FUNCTION inbox.register_provider(
    name text,
    max_attempts int DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    on_lease_expiry text DEFAULT 'reclaim')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR name !~ '^[a-z0-9_-]{1,63}$' THEN
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
-- Ingest: one atomic upsert keyed by (provider, external_id).

CREATE FUNCTION inbox.ingest(
    provider text,
    external_id text,
    payload jsonb,
    headers jsonb DEFAULT NULL,
    source text DEFAULT 'webhook')
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_ingest'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.ingest(text, text, jsonb, jsonb, text) IS
  'Store one delivery: inserted (first), updated (re-delivery, not yet processed), duplicate (already processed)';

CREATE FUNCTION inbox.ingest_batch(
    providers text[],
    external_ids text[],
    payloads jsonb[],
    headers jsonb[] DEFAULT NULL,
    source text DEFAULT 'webhook')
RETURNS text[]
AS 'MODULE_PATHNAME', 'inbox_ingest_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text) IS
  'Store many deliveries in one statement; one outcome per element, in input order';
-- Processing: claim with a lease, then complete or fail, fenced by the lease token.

CREATE FUNCTION inbox.claim(
    max_rows int DEFAULT 50,
    lease interval DEFAULT NULL,
    provider text DEFAULT NULL)
RETURNS SETOF inbox.events
AS 'MODULE_PATHNAME', 'inbox_claim'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
ROWS 50;
COMMENT ON FUNCTION inbox.claim(int, interval, text) IS
  'Lease up to max_rows due events (oldest first, not ordered); lease NULL = pg_inbox.default_lease';

CREATE FUNCTION inbox.complete(id bigint, lease_token uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_complete'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.complete(bigint, uuid) IS
  'Mark a leased event done; false when the lease was lost to another claim';

CREATE FUNCTION inbox.complete_batch(ids bigint[], lease_tokens uuid[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'inbox_complete_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.complete_batch(bigint[], uuid[]) IS
  'complete() for many events in one statement; one result per element, in input order';

CREATE FUNCTION inbox.fail(
    id bigint,
    lease_token uuid,
    error text,
    retry_after interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_fail'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.fail(bigint, uuid, text, interval) IS
  'Record a failed attempt: retry (with backoff), dead (attempts used up) or lost (lease lost)';
-- Reconciliation: a bounded pass that re-reads the queue and repairs what it
-- finds (stuck events, expired leases, done events whose downstream state no
-- longer matches), recording every pass. See docs/reconciliation.md.

-- Per-provider reconciliation policy. NULL stuck_after means 1 hour.
ALTER TABLE inbox.providers
    ADD COLUMN stuck_after interval CHECK (stuck_after > interval '0'),
    ADD COLUMN verify_function regprocedure;
COMMENT ON COLUMN inbox.providers.stuck_after IS
  'an open event older than this is reported stuck by inbox.reconcile (NULL: 1 hour)';
COMMENT ON COLUMN inbox.providers.verify_function IS
  'f(inbox.events) RETURNS boolean: false reopens a done event (set with inbox.set_verify_function)';

-- One row per pass, skipped ones included.
CREATE TABLE inbox.reconcile_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger     text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    skipped     boolean NOT NULL DEFAULT false,
    counts      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX reconcile_runs_started_idx ON inbox.reconcile_runs (started_at);
COMMENT ON TABLE inbox.reconcile_runs IS 'every inbox.reconcile() pass: trigger, times, counts, skipped';

-- What reconciliation did to an event, with the row as it was before: a
-- reopened event keeps its processed attempt (and payload) readable here.
CREATE TABLE inbox.event_history (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         bigint NOT NULL,
    run_id           bigint REFERENCES inbox.reconcile_runs (id) ON DELETE SET NULL,
    reason           text NOT NULL CHECK (reason IN ('verify_mismatch', 'lease_reclaimed', 'lease_held')),
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    status           text NOT NULL,
    attempts         int NOT NULL,
    lease_token      uuid,
    lease_expires_at timestamptz,
    processed_at     timestamptz,
    last_error       text,
    payload          jsonb  -- kept for verify_mismatch only: what was processed
);
CREATE INDEX event_history_event_idx ON inbox.event_history (event_id);
COMMENT ON TABLE inbox.event_history IS
  'reconciliation actions on events, with the state the event had before each';

-- Where each provider's verify sweep stands (events are swept in id order).
CREATE TABLE inbox.reconcile_state (
    provider      text PRIMARY KEY REFERENCES inbox.providers (name) ON DELETE CASCADE,
    verify_cursor bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION inbox.reconcile(trigger text DEFAULT 'manual')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'inbox_reconcile'
LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION inbox.reconcile(text) IS
  'One bounded reconciliation pass; {"skipped":"busy"} when another pass holds the lock';

-- Registers (or, with NULL, clears) the function reconcile calls on done events.
CREATE FUNCTION inbox.set_verify_function(provider text, verify_function regprocedure)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn pg_catalog.pg_proc%ROWTYPE;
BEGIN
    PERFORM inbox._require_provider(provider);
    IF verify_function IS NOT NULL THEN
        SELECT * INTO fn FROM pg_catalog.pg_proc WHERE oid = verify_function;
        IF fn.pronargs <> 1 OR fn.proargtypes[0] <> 'inbox.events'::regtype
           OR fn.prorettype <> 'boolean'::regtype OR fn.proretset OR fn.prokind <> 'f' THEN
            RAISE EXCEPTION 'verify function % must take inbox.events and return boolean',
                verify_function
                USING ERRCODE = 'invalid_function_definition',
                      HINT = 'CREATE FUNCTION my_check(e inbox.events) RETURNS boolean ...';
        END IF;
    END IF;
    UPDATE inbox.providers p SET verify_function = set_verify_function.verify_function
     WHERE p.name = provider;
END
$$;

-- Sets (or, with NULL, resets to 1 hour) when an open event counts as stuck.
CREATE FUNCTION inbox.set_stuck_after(provider text, stuck_after interval)
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
        RAISE EXCEPTION 'unknown provider "%"', provider USING ERRCODE = 'undefined_object';
    END IF;
END
$$;
-- Gap detection: which events a provider sent that never arrived. Each
-- provider may have one expected-id source; gaps are recorded, closed when
-- they resolve themselves, and turned into backfill requests after a grace
-- period. Confirmed non-events are tombstoned and never flagged again.

-- A confirmed non-event: a draft that never fired, a filtered test event,
-- an id the provider's API says does not exist.
CREATE TABLE inbox.tombstones (
    provider    text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id text NOT NULL CHECK (octet_length(external_id) BETWEEN 1 AND 255),
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
    high_number      bigint,            -- sequence: highest number seen in inbox.events
    event_watermark  bigint NOT NULL DEFAULT 0,  -- sequence: inbox.events.id read up to
    listed_watermark bigint NOT NULL DEFAULT 0,  -- listed: inbox.listed_ids.id read up to
    last_scan_at     timestamptz
);
COMMENT ON TABLE inbox.gap_sources IS 'per provider: where the expected ids come from, and scan progress';

-- Staging for `listed` sources: filled by the backfill worker (inbox.add_listed).
CREATE TABLE inbox.listed_ids (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider    text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id text NOT NULL CHECK (octet_length(external_id) BETWEEN 1 AND 255),
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
        IF pattern IS NULL OR pattern !~ '^[^{}]{0,200}\{n(:([1-9]|1[0-8]))?\}$' THEN
            RAISE EXCEPTION 'malformed id pattern %', coalesce(quote_literal(pattern), 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
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
    IF octet_length(external_id) > 255 THEN
        RAISE EXCEPTION 'external_id is % bytes, over the limit of 255', octet_length(external_id)
            USING ERRCODE = 'string_data_right_truncation';
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
    IF cardinality(external_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 ids per call, got %', cardinality(external_ids)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(external_ids) x WHERE x IS NULL OR x = '' OR octet_length(x) > 255) THEN
        RAISE EXCEPTION 'external_ids must be non-empty strings of at most 255 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
-- The backfill queue: gaps past their grace period become requests that a
-- worker (inbox-receiver backfill) drains. The worker claims with SKIP
-- LOCKED and a lease, asks the provider's API for the one id, and reports
-- fetched / not_found / failed, each fenced by the lease token. The exact
-- contract is in docs/reconciliation.md.

CREATE TABLE inbox.backfill_requests (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider         text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    external_id      text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'leased', 'fetched', 'not_found', 'arrived', 'gave_up')),
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_token      uuid,
    lease_expires_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    UNIQUE (provider, external_id)
);
CREATE INDEX backfill_requests_open_idx ON inbox.backfill_requests (next_attempt_at)
    WHERE status IN ('pending', 'leased');
COMMENT ON TABLE inbox.backfill_requests IS
  'one request per missing event: pending -> leased -> fetched | not_found | arrived | gave_up';

-- Leases up to max_rows due requests (pending, or leased with an expired
-- lease). A request whose event arrived meanwhile is closed, not handed out.
CREATE FUNCTION inbox.claim_backfill(
    max_rows int DEFAULT 10,
    lease interval DEFAULT '2 minutes',
    only_provider text DEFAULT NULL)
RETURNS TABLE (request_id bigint, provider text, external_id text, attempt int, lease_token uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 10 AS $$
BEGIN
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 1000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 1000, not %', coalesce(max_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lease IS NULL OR lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF only_provider IS NOT NULL THEN
        PERFORM inbox._require_provider(only_provider);
    END IF;

    WITH arrived AS (
        SELECT r.id FROM inbox.backfill_requests r
        WHERE r.status IN ('pending', 'leased')
          AND (only_provider IS NULL OR r.provider = only_provider)
          AND EXISTS (SELECT 1 FROM inbox.events e
                      WHERE e.provider = r.provider AND e.external_id = r.external_id)
        LIMIT 1000
        FOR UPDATE SKIP LOCKED
    )
    UPDATE inbox.backfill_requests r
       SET status = 'arrived', lease_expires_at = NULL, finished_at = now()
      FROM arrived WHERE r.id = arrived.id;

    RETURN QUERY
    WITH due AS (
        SELECT r.id FROM inbox.backfill_requests r
        WHERE ((r.status = 'pending' AND r.next_attempt_at <= now())
            OR (r.status = 'leased' AND r.lease_expires_at <= now()))
          AND (only_provider IS NULL OR r.provider = only_provider)
        ORDER BY r.next_attempt_at, r.id
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED
    )
    UPDATE inbox.backfill_requests r
       SET status = 'leased', attempts = r.attempts + 1, lease_token = gen_random_uuid(),
           lease_expires_at = now() + lease
      FROM due WHERE r.id = due.id
    RETURNING r.id, r.provider, r.external_id, r.attempts, r.lease_token;
END
$$;

-- The request behind a lease, locked; NULL when the token is not current.
-- Raises for a request that does not exist.
CREATE FUNCTION inbox._backfill_leased(request_id bigint, lease_token uuid)
RETURNS inbox.backfill_requests
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r inbox.backfill_requests;
BEGIN
    IF request_id IS NULL OR lease_token IS NULL THEN
        RAISE EXCEPTION 'request_id and lease_token must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO r FROM inbox.backfill_requests b WHERE b.id = request_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'backfill request % does not exist', request_id USING ERRCODE = 'no_data_found';
    END IF;
    IF r.status <> 'leased' OR r.lease_token IS DISTINCT FROM _backfill_leased.lease_token THEN
        RETURN NULL;
    END IF;
    RETURN r;
END
$$;

-- The worker fetched the event. With payload, it is ingested here
-- (source 'backfill') in the same transaction that closes the request; with
-- payload NULL the worker must already have called inbox.ingest itself.
-- Returns the ingest outcome ('inserted', 'updated', 'duplicate'), 'ok' when
-- the worker ingested itself, or 'lost' when the lease is no longer this one.
CREATE FUNCTION inbox.backfill_fetched(
    request_id bigint,
    lease_token uuid,
    payload jsonb DEFAULT NULL,
    headers jsonb DEFAULT NULL)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r inbox.backfill_requests;
    outcome text := 'ok';
BEGIN
    r := inbox._backfill_leased(request_id, lease_token);
    IF r.id IS NULL THEN
        RETURN 'lost';
    END IF;
    IF payload IS NOT NULL THEN
        outcome := inbox.ingest(r.provider, r.external_id, payload, headers, 'backfill');
    ELSIF NOT EXISTS (SELECT 1 FROM inbox.events e
                      WHERE e.provider = r.provider AND e.external_id = r.external_id) THEN
        RAISE EXCEPTION 'event "%" of provider "%" is not in inbox.events', r.external_id, r.provider
            USING ERRCODE = 'no_data_found',
                  HINT = 'Pass the payload, or call inbox.ingest(..., source => ''backfill'') first.';
    END IF;
    UPDATE inbox.backfill_requests b SET status = 'fetched', lease_expires_at = NULL, finished_at = now()
     WHERE b.id = r.id;
    UPDATE inbox.gaps g SET status = 'resolved', resolved_at = now(), resolution = 'arrived'
     WHERE g.provider = r.provider AND g.external_id = r.external_id AND g.status <> 'resolved';
    RETURN outcome;
END
$$;

-- The provider's API says the id does not exist (404/410): tombstone it.
-- Returns false when the lease is no longer this one (nothing changes).
CREATE FUNCTION inbox.backfill_not_found(
    request_id bigint,
    lease_token uuid,
    reason text DEFAULT 'not found at the provider')
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r inbox.backfill_requests;
BEGIN
    IF reason IS NULL OR reason = '' THEN
        RAISE EXCEPTION 'reason must not be null or empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    r := inbox._backfill_leased(request_id, lease_token);
    IF r.id IS NULL THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = r.provider AND e.external_id = r.external_id) THEN
        -- It arrived meanwhile: the provider's 404 was stale or wrong.
        UPDATE inbox.backfill_requests b SET status = 'arrived', lease_expires_at = NULL, finished_at = now()
         WHERE b.id = r.id;
        RETURN true;
    END IF;
    PERFORM inbox.tombstone(r.provider, r.external_id, reason);
    UPDATE inbox.backfill_requests b SET status = 'not_found', lease_expires_at = NULL,
           finished_at = now(), last_error = left(reason, 1000)
     WHERE b.id = r.id;
    RETURN true;
END
$$;

-- A transient failure (timeout, 5xx, 429): retry with exponential backoff
-- and jitter (30 s doubling, at most 1 hour), or an explicit retry_after
-- (a provider's Retry-After). After max_attempts the request gives up.
-- Returns 'retry', 'gave_up' or 'lost'.
CREATE FUNCTION inbox.backfill_failed(
    request_id bigint,
    lease_token uuid,
    error text,
    retry_after interval DEFAULT NULL,
    max_attempts int DEFAULT 10)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r inbox.backfill_requests;
BEGIN
    IF error IS NULL THEN
        RAISE EXCEPTION 'error must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF retry_after IS NOT NULL AND retry_after < interval '0' THEN
        RAISE EXCEPTION 'retry_after must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_attempts IS NULL OR max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    r := inbox._backfill_leased(request_id, lease_token);
    IF r.id IS NULL THEN
        RETURN 'lost';
    END IF;
    IF r.attempts >= max_attempts THEN
        UPDATE inbox.backfill_requests b SET status = 'gave_up', lease_expires_at = NULL,
               finished_at = now(), last_error = left(error, 4096)
         WHERE b.id = r.id;
        RETURN 'gave_up';
    END IF;
    UPDATE inbox.backfill_requests b
       SET status = 'pending', lease_expires_at = NULL, last_error = left(error, 4096),
           next_attempt_at = now() + coalesce(retry_after,
               least(interval '1 hour', interval '30 seconds' * power(2, least(r.attempts - 1, 20)))
               * (0.5 + random() / 2))
     WHERE b.id = r.id;
    RETURN 'retry';
END
$$;

-- The backfill worker's functions. Privileges are granted here, after the
-- functions exist; 90_privileges.sql only revokes from PUBLIC.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_worker') THEN
        CREATE ROLE inbox_worker NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA inbox TO inbox_worker;
GRANT EXECUTE ON FUNCTION
    inbox.claim_backfill(int, interval, text),
    inbox.backfill_fetched(bigint, uuid, jsonb, jsonb),
    inbox.backfill_not_found(bigint, uuid, text),
    inbox.backfill_failed(bigint, uuid, text, interval, int),
    inbox.add_listed(text, text[], timestamptz)
  TO inbox_worker;
-- Scheduling: pg_cron jobs that call inbox.run_job(). Every job runs under
-- its own advisory lock and at most once per schedule window, however many
-- schedulers fire it (pg_cron on a replica promoted by mistake, an external
-- cron as a fallback, a person calling it by hand): the window claim is a
-- row in inbox.job_windows. Without pg_cron everything works when called by
-- hand; schedule() says what is missing.

-- Scans every provider that has an expected-id source.
CREATE FUNCTION inbox.scan_all_gaps()
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    results jsonb := '[]';
    p text;
BEGIN
    FOR p IN SELECT s.provider FROM inbox.gap_sources s ORDER BY s.provider LOOP
        results := results || jsonb_build_array(inbox.scan_gaps(p));
    END LOOP;
    RETURN results;
END
$$;

-- One row per (job, window) a scheduler claimed, with what the run did.
CREATE TABLE inbox.job_windows (
    job          text NOT NULL,
    window_start timestamptz NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    result       jsonb,
    PRIMARY KEY (job, window_start)
);
COMMENT ON TABLE inbox.job_windows IS
  'schedule windows claimed by inbox.run_job: a job runs at most once per window';

-- Runs a scheduled job at most once per window of length `every`.
-- Returns the job's result, or {"skipped": "busy"} when another run of the
-- job holds its lock, or {"skipped": "window already claimed"}.
CREATE FUNCTION inbox.run_job(job text, every interval)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds double precision;
    this_window timestamptz;
    outcome jsonb;
BEGIN
    IF job IS NULL OR job NOT IN ('reconcile', 'scan_gaps') THEN
        RAISE EXCEPTION 'unknown job %', coalesce(quote_literal(job), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Jobs: reconcile, scan_gaps.';
    END IF;
    IF every IS NULL OR every < interval '1 second' OR every > interval '7 days' THEN
        RAISE EXCEPTION 'every must be between 1 second and 7 days'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(1885957732, hashtext(job)) THEN
        RETURN jsonb_build_object('job', job, 'skipped', 'busy');
    END IF;
    seconds := extract(epoch FROM every);
    this_window := to_timestamp(floor(extract(epoch FROM now()) / seconds) * seconds);
    INSERT INTO inbox.job_windows AS w (job, window_start)
    VALUES (run_job.job, this_window)
    ON CONFLICT ON CONSTRAINT job_windows_pkey DO NOTHING;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('job', job, 'skipped', 'window already claimed',
                                  'window_start', this_window);
    END IF;
    IF job = 'reconcile' THEN
        outcome := inbox.reconcile('schedule');
    ELSE
        outcome := jsonb_build_object('providers', inbox.scan_all_gaps());
    END IF;
    UPDATE inbox.job_windows w SET result = outcome
     WHERE w.job = run_job.job AND w.window_start = this_window;
    DELETE FROM inbox.job_windows w
     WHERE w.job = run_job.job AND w.window_start < now() - interval '7 days';
    RETURN jsonb_build_object('job', job, 'window_start', this_window, 'result', outcome);
END
$$;

-- Why pg_cron cannot be used from this database, or NULL when it can.
CREATE FUNCTION inbox._cron_missing()
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    preload text := coalesce(current_setting('shared_preload_libraries', true), '');
    cron_db text := current_setting('cron.database_name', true);
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        RETURN NULL;
    END IF;
    IF preload !~ '(^|[\s,])pg_cron($|[\s,])' THEN
        RETURN format('pg_cron is not loaded: add pg_cron to shared_preload_libraries and set '
                      'cron.database_name = %L in postgresql.conf, restart, then run '
                      'CREATE EXTENSION pg_cron in that database', current_database());
    END IF;
    IF cron_db IS DISTINCT FROM current_database() THEN
        RETURN format('pg_cron runs in database %L (cron.database_name), not in %L: set '
                      'cron.database_name = %L and restart, or call inbox.run_job() from '
                      'another scheduler', coalesce(cron_db, 'postgres'), current_database(),
                      current_database());
    END IF;
    RETURN 'pg_cron is loaded but not created in this database: run CREATE EXTENSION pg_cron';
END
$$;

-- A cron expression for a whole number of minutes or hours that divides
-- the hour or the day evenly, so windows line up with the firings.
CREATE FUNCTION inbox._cron_expression(every interval)
RETURNS text LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds bigint;
BEGIN
    IF every IS NULL THEN
        RAISE EXCEPTION 'interval must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    seconds := extract(epoch FROM every)::bigint;
    IF extract(epoch FROM every) <> seconds OR seconds % 60 <> 0 THEN
        RAISE EXCEPTION 'interval % is not a whole number of minutes', every
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF seconds = 60 THEN
        RETURN '* * * * *';
    ELSIF seconds < 3600 AND 3600 % seconds = 0 THEN
        RETURN format('*/%s * * * *', seconds / 60);
    ELSIF seconds = 3600 THEN
        RETURN '0 * * * *';
    ELSIF seconds < 86400 AND seconds % 3600 = 0 AND 86400 % seconds = 0 THEN
        RETURN format('0 */%s * * *', seconds / 3600);
    ELSIF seconds = 86400 THEN
        RETURN '0 0 * * *';
    END IF;
    RAISE EXCEPTION 'interval % does not divide an hour or a day evenly', every
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Use 1, 2, 3, 4, 5, 6, 10, 12, 15, 20 or 30 minutes, or 1, 2, 3, 4, 6, 8, 12 or 24 hours.';
END
$$;

-- Installs (or updates) the pg_cron jobs; re-running it changes nothing
-- but the schedules passed. Returns the jobs as installed.
CREATE FUNCTION inbox.schedule(
    reconcile_every interval DEFAULT '1 minute',
    scan_gaps_every interval DEFAULT '5 minutes')
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    missing text := inbox._cron_missing();
    jobs jsonb := '[]';
    spec record;
BEGIN
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'inbox.schedule() needs pg_cron: %', missing
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Without pg_cron, call SELECT inbox.run_job(''reconcile'', ''1 minute'') and '
                         'SELECT inbox.run_job(''scan_gaps'', ''5 minutes'') from any scheduler.';
    END IF;
    FOR spec IN
        SELECT * FROM (VALUES ('reconcile', reconcile_every), ('scan_gaps', scan_gaps_every)) v(job, every)
    LOOP
        EXECUTE 'SELECT cron.schedule($1, $2, $3)'
          USING 'pg_inbox:' || spec.job, inbox._cron_expression(spec.every),
                format('SELECT inbox.run_job(%L, %L)', spec.job, spec.every);
        jobs := jobs || jsonb_build_object('job', 'pg_inbox:' || spec.job,
                                           'schedule', inbox._cron_expression(spec.every),
                                           'every', spec.every);
    END LOOP;
    RETURN jobs;
END
$$;

-- Removes the pg_cron jobs schedule() installed. Returns how many.
CREATE FUNCTION inbox.unschedule()
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    name text;
    removed int := 0;
BEGIN
    IF inbox._cron_missing() IS NOT NULL THEN
        RAISE NOTICE 'pg_cron is not installed here: no jobs to remove';
        RETURN 0;
    END IF;
    FOR name IN EXECUTE 'SELECT jobname FROM cron.job WHERE jobname LIKE ''pg\_inbox:%'' ORDER BY jobname' LOOP
        EXECUTE 'SELECT cron.unschedule($1)' USING name;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$$;
-- pg_dump dumps the rows of an extension's tables only when they are marked:
-- without this a dump and restore would keep the schema and lose every event.
-- Identity sequences too, or restored tables would hand out used ids again.
DO $$
DECLARE
    member regclass;
BEGIN
    FOR member IN
        SELECT c.oid::regclass FROM pg_catalog.pg_class c
         WHERE c.relnamespace = 'inbox'::regnamespace AND c.relkind IN ('r', 'S')
         ORDER BY c.relkind, c.relname
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(member, '');
    END LOOP;
END
$$;
-- Least privilege. Two group roles (NOLOGIN; grant them to login roles):
--   inbox_receiver  may only ingest;
--   inbox_worker    may only claim, complete and fail.
-- Neither touches a table directly: every function they call is SECURITY
-- DEFINER with a fixed search_path. Roles are cluster-wide, so they are
-- created once and reused by every database that installs pg_inbox.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_receiver') THEN
        CREATE ROLE inbox_receiver NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_worker') THEN
        CREATE ROLE inbox_worker NOLOGIN;
    END IF;
END
$$;

REVOKE ALL ON SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC;

GRANT USAGE ON SCHEMA inbox TO inbox_receiver, inbox_worker;
GRANT EXECUTE ON FUNCTION
    inbox.ingest(text, text, jsonb, jsonb, text),
    inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text)
  TO inbox_receiver;
GRANT EXECUTE ON FUNCTION
    inbox.claim(int, interval, text),
    inbox.complete(bigint, uuid),
    inbox.complete_batch(bigint[], uuid[]),
    inbox.fail(bigint, uuid, text, interval)
  TO inbox_worker;

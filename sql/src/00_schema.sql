-- pg_inbox: webhooks in at least once, out exactly once.
\echo Use "CREATE EXTENSION pg_inbox" to load this file. \quit

-- The group roles of the receiver and the workers (their privileges:
-- 90_privileges.sql). Roles are cluster-wide, so they are created once, here,
-- before any part grants to them, and reused by every database that installs
-- pg_inbox.
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

-- The one definition of a provider name: 1 to 63 of a-z, 0-9, "_", "-". The
-- table's CHECK and register_provider use it (simple SQL: inlined, no call).
CREATE FUNCTION inbox._valid_provider_name(name text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT name ~ '^[a-z0-9_-]{1,63}$'
$$;

-- The longest external_id, in bytes: kMaxExternalIdBytes of
-- extension/limits.hpp, the one definition, which ingest checks itself, and
-- inbox.events' CHECK too (inbox._event_row_valid). The CHECKs of
-- inbox.tombstones and inbox.listed_ids and the SQL functions' messages read
-- it here. C, not SQL: a constraint folds it once per statement, and a SQL
-- function would be parsed and run each time.
CREATE FUNCTION inbox._external_id_limit()
RETURNS int
AS 'MODULE_PATHNAME', 'inbox_external_id_limit'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- inbox.events' rules of a row, in one C call: status is pending,
-- processing, done or dead; processed_at is set exactly when the status is
-- done or dead; external_id is 1 to _external_id_limit() bytes. In C, one
-- CHECK: PostgreSQL parses and plans a table's CHECK expressions again at
-- every statement that writes it, and the three SQL CHECKs of 0.1.0 were
-- a fifth to a third of a single-event ingest's CPU (bench/README.md). It
-- returns true or refuses the row naming the rule (23514), without the
-- "failing row" detail that would carry the payload into the server's log.
CREATE FUNCTION inbox._event_row_valid(status text, processed_at timestamptz, external_id text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_event_row_valid'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Providers must be registered before their events are accepted: a typo in a
-- receiver's config is an error, not a new stream nobody processes.
CREATE TABLE inbox.providers (
    name            text PRIMARY KEY CHECK (inbox._valid_provider_name(name)),
    max_attempts    int CHECK (max_attempts BETWEEN 1 AND 1000),
    backoff_base    interval CHECK (backoff_base > interval '0'),
    backoff_max     interval CHECK (backoff_max > interval '0'),
    on_lease_expiry text NOT NULL DEFAULT 'reclaim' CHECK (on_lease_expiry IN ('reclaim', 'hold')),
    created_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE inbox.providers IS
  'Webhook providers whose events inbox.ingest accepts; NULL settings fall back on pg_inbox.* GUCs';

-- One row per event, identified by (provider, external_id). Fixed-width
-- columns first, payload after them (TOASTed when large, never rewritten by
-- claim/complete/fail). No index covers a column claim changes, so a claim
-- is a HOT update when its page has room: fillfactor 50 leaves every row room
-- for one more version (at 80, a page of 600-byte rows had room for about a
-- quarter of its claims); see README "Storage and vacuum".
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
    status            text NOT NULL DEFAULT 'pending',
    provider          text NOT NULL,
    external_id       text NOT NULL,
    source            text NOT NULL DEFAULT 'webhook',
    last_error        text,
    headers           jsonb,
    payload           jsonb NOT NULL,
    -- Issue 12, version checks (27_ordering.sql): set by claim for providers
    -- with ordering pointers; held_reason marks an event held by a rule.
    entity_key        text,
    version           numeric,
    held_reason       text,
    CONSTRAINT events_provider_external_id_key UNIQUE (provider, external_id),
    -- processed_at marks the end of the event's life in the queue, done or dead.
    CONSTRAINT events_row_check CHECK (inbox._event_row_valid(status, processed_at, external_id))
) WITH (
    fillfactor = 50,
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
COMMENT ON CONSTRAINT events_row_check ON inbox.events IS
  'status is pending, processing, done or dead; processed_at is set exactly when done or dead; external_id is 1 to inbox._external_id_limit() bytes';

-- Lease tokens are derived from (event, attempt), so complete/fail can tell a
-- token that was superseded (false / 'lost') from one never issued (error).
-- Epoch, not text, so DateStyle and TimeZone cannot change a token. The
-- token is md5(concat_ws(':', event_id, attempt, extract(epoch FROM
-- first_received_at)))::uuid, as 0.1.0 computed it in SQL; in C
-- (extension/lease_token.cpp) because every claim computes one per event.
CREATE FUNCTION inbox._lease_token(event_id bigint, attempt int, first_received_at timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'inbox_lease_token'
LANGUAGE C STABLE PARALLEL SAFE;

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

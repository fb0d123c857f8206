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

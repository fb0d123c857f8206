-- The transactional outbox: inbox.publish writes a message in the caller's
-- transaction (a rollback publishes nothing), and forwarders (inbox-receiver
-- forward) deliver it with the queue's semantics: claim with SKIP LOCKED and
-- a lease, a token per attempt derived by inbox._lease_token, complete / fail
-- fenced by that token, backoff with equal jitter, dead after max attempts.
-- Messages are append-only; their delivery state and the history of their
-- attempts live beside them (docs/outbox.md).

-- The messages: written once by publish, never updated. A correction is a new
-- (compensating) message.
CREATE TABLE inbox.outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    published_at timestamptz NOT NULL DEFAULT now(),
    topic        text NOT NULL,
    key          text,
    headers      jsonb,
    payload      jsonb NOT NULL
);
COMMENT ON TABLE inbox.outbox IS
  'messages published by inbox.publish, append-only; id is the idempotency key downstream (webhook-id)';

-- inbox.outbox_delivery's rules of a row, in one C call (why in C, and how
-- it refuses a row: as inbox._event_row_valid): status is pending,
-- processing, done, rejected or dead; processed_at is set exactly when it is
-- done, rejected or dead.
CREATE FUNCTION inbox._outbox_row_valid(status text, processed_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_outbox_row_valid'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- One row per message: where its delivery stands. topic, key and
-- published_at are copies of the message's (never change), so claim reads
-- this table alone. processed_at marks the end, as in inbox.events.
CREATE TABLE inbox.outbox_delivery (
    message_id       bigint PRIMARY KEY REFERENCES inbox.outbox (id) ON DELETE CASCADE,
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz,
    processed_at     timestamptz,
    published_at     timestamptz NOT NULL,
    lease_token      uuid,
    status           text NOT NULL DEFAULT 'pending',
    topic            text NOT NULL,
    key              text,
    last_error       text,
    CONSTRAINT outbox_delivery_row_check CHECK (inbox._outbox_row_valid(status, processed_at))
) WITH (fillfactor = 80);
-- Open messages, oldest first: what claim scans.
CREATE INDEX outbox_delivery_open_idx ON inbox.outbox_delivery (message_id) WHERE processed_at IS NULL;
-- Ordered routes: the open messages of one key, to find the head.
CREATE INDEX outbox_delivery_open_key_idx ON inbox.outbox_delivery (key, message_id)
    WHERE processed_at IS NULL AND key IS NOT NULL;
-- Messages that went dead, by when: what inbox.refresh_stats counts (the checks see them).
CREATE INDEX outbox_delivery_dead_idx ON inbox.outbox_delivery (processed_at) WHERE status = 'dead';
COMMENT ON TABLE inbox.outbox_delivery IS
  'delivery state of each outbox message: pending -> processing -> done | rejected | dead';

-- Every attempt: who claimed it, how it ended and what the consumer answered.
-- outcome NULL = in flight (or its forwarder died and nobody reclaimed it yet).
CREATE TABLE inbox.outbox_attempts (
    message_id  bigint NOT NULL REFERENCES inbox.outbox (id) ON DELETE CASCADE,
    attempt     int NOT NULL,
    route       text,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text CHECK (outcome IN ('delivered', 'retry', 'rejected', 'dead', 'expired')),
    status_code int,
    detail      text,
    PRIMARY KEY (message_id, attempt)
);
COMMENT ON TABLE inbox.outbox_attempts IS
  'history of every delivery attempt; expired = the lease ran out and another attempt was claimed';

-- Append-only: no update of a message, no delete of one not yet finished.
CREATE FUNCTION inbox._outbox_append_only()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'outbox message % cannot be changed', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Messages are append-only: publish a compensating message instead.';
    END IF;
    IF EXISTS (SELECT 1 FROM inbox.outbox_delivery d
               WHERE d.message_id = OLD.id AND d.processed_at IS NULL) THEN
        RAISE EXCEPTION 'outbox message % is not delivered yet and cannot be deleted', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER outbox_append_only BEFORE UPDATE OR DELETE ON inbox.outbox
    FOR EACH ROW EXECUTE FUNCTION inbox._outbox_append_only();

-- A pg_inbox.* interval setting, also when the module is not loaded in this
-- session yet (then the GUC is a placeholder holding a bare number in its
-- base unit, or absent).
CREATE FUNCTION inbox._setting_interval(name text, base_unit interval, fallback interval)
RETURNS interval LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v text := current_setting(name, true);
BEGIN
    IF v IS NULL OR v = '' THEN
        RETURN fallback;
    ELSIF v ~ '^[0-9]+$' THEN
        RETURN v::bigint * base_unit;
    END IF;
    RETURN v::interval;
END
$$;

-- Publish a message in the caller's transaction. Returns its id, the
-- idempotency key downstream. Messages of one key are published one
-- transaction at a time (an advisory lock until commit), so for every key
-- id order is commit order: what ordered routes deliver in.
CREATE FUNCTION inbox.publish(topic text, key text, payload jsonb, headers jsonb DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    limit_text text := current_setting('pg_inbox.max_payload_size', true);
    limit_bytes bigint;
    payload_bytes int;
    message inbox.outbox;
BEGIN
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF topic !~ '^[a-z0-9][a-z0-9_.-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid topic %', quote_literal(left(topic, 200))
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 1 to 128 characters from a-z, 0-9, ".", "_" and "-", starting with a letter or digit.';
    END IF;
    IF key = '' THEN
        RAISE EXCEPTION 'key must not be empty' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Pass NULL for a message without a key (never ordered).';
    END IF;
    IF octet_length(key) > 255 THEN
        RAISE EXCEPTION 'key is % bytes, over the limit of 255', octet_length(key)
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'payload must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'headers must be a JSON object, not %', jsonb_typeof(headers)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    limit_bytes := CASE WHEN limit_text IS NULL OR limit_text = '' THEN 1024 * 1024
                        WHEN limit_text ~ '^[0-9]+$' THEN limit_text::bigint * 1024
                        ELSE pg_size_bytes(limit_text) END;
    payload_bytes := pg_column_size(payload) + coalesce(pg_column_size(headers), 0);
    IF payload_bytes > limit_bytes THEN
        RAISE EXCEPTION 'payload is % bytes, over pg_inbox.max_payload_size (% kB)',
            payload_bytes, limit_bytes / 1024 USING ERRCODE = 'program_limit_exceeded';
    END IF;
    -- Class "ping", publish's own: under "pine" (the rollups' and the
    -- checks' runs take objects 1 and 2 of it) a key hashing to 1 or 2
    -- waited for a whole refresh, and held it off, at every publish.
    IF key IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(1885957735, hashtext(key));
    END IF;
    INSERT INTO inbox.outbox AS o (topic, key, headers, payload)
    VALUES (publish.topic, publish.key, publish.headers, publish.payload)
    RETURNING o.* INTO message;
    INSERT INTO inbox.outbox_delivery (message_id, published_at, topic, key)
    VALUES (message.id, message.published_at, message.topic, message.key);
    RETURN message.id;
END
$$;

-- Why a token did not change a delivery: 'done' (completed with this very
-- token: a repeated complete), 'lost' (superseded). Raises for a message that
-- does not exist and for a token never issued, like the event queue.
CREATE FUNCTION inbox._outbox_lease_state(message_id bigint, token uuid)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d inbox.outbox_delivery;
BEGIN
    SELECT * INTO d FROM inbox.outbox_delivery x WHERE x.message_id = _outbox_lease_state.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox message % does not exist', message_id USING ERRCODE = 'no_data_found';
    END IF;
    IF d.status = 'done' AND d.lease_token = token THEN
        RETURN 'done';
    END IF;
    IF NOT inbox._lease_token_issued(d.message_id, d.attempts, d.published_at, token) THEN
        RAISE EXCEPTION 'lease token was never issued for outbox message %', message_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the lease_token that inbox.claim_outbox() returned with the message.';
    END IF;
    RETURN 'lost';
END
$$;

-- The NULL checks every delivery function makes first.
CREATE FUNCTION inbox._outbox_require(id bigint, lease_token uuid)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF id IS NULL THEN
        RAISE EXCEPTION 'id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF lease_token IS NULL THEN
        RAISE EXCEPTION 'lease_token must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
END
$$;

-- Lease up to max_rows due messages of the given topics, oldest first, with
-- inbox.claim's rules: pending and due, or processing with an expired lease
-- unless the route holds expired leases (on_lease_expiry 'hold'). Ordered:
-- only the oldest open message of each key, so one in flight per key and
-- publish order, while other keys proceed. route is recorded in the history.
CREATE FUNCTION inbox.claim_outbox(
    topics text[],
    max_rows int DEFAULT 50,
    lease interval DEFAULT NULL,
    ordered boolean DEFAULT false,
    on_lease_expiry text DEFAULT 'reclaim',
    route text DEFAULT NULL)
RETURNS TABLE (id bigint, topic text, key text, payload jsonb, headers jsonb,
               published_at timestamptz, attempt int, lease_token uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 50 AS $$
DECLARE
    reclaim boolean;
BEGIN
    IF topics IS NULL OR array_position(topics, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'topics must not be null or contain nulls' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(topics) = 0 THEN
        RAISE EXCEPTION 'topics must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 10000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 10000, not %', coalesce(max_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    lease := coalesce(lease, inbox._setting_interval('pg_inbox.default_lease', interval '1 second',
                                                     interval '5 minutes'));
    IF lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ordered IS NULL THEN
        RAISE EXCEPTION 'ordered must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF on_lease_expiry IS NULL OR on_lease_expiry NOT IN ('reclaim', 'hold') THEN
        RAISE EXCEPTION 'on_lease_expiry must be ''reclaim'' or ''hold'', not %',
            coalesce(quote_literal(on_lease_expiry), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    reclaim := on_lease_expiry = 'reclaim';

    RETURN QUERY
    WITH due AS (
        SELECT d.message_id, d.status FROM inbox.outbox_delivery d
        WHERE d.processed_at IS NULL
          AND d.topic = ANY (topics)
          AND ((d.status = 'pending' AND d.next_attempt_at <= now())
            OR (d.status = 'processing' AND d.lease_expires_at <= now() AND reclaim))
          -- Finished is final, so a head seen here is the head: a snapshot
          -- can only show too many open predecessors, never too few.
          AND (NOT ordered OR d.key IS NULL OR NOT EXISTS (
                SELECT 1 FROM inbox.outbox_delivery p
                WHERE p.key = d.key AND p.processed_at IS NULL
                  AND p.message_id < d.message_id AND p.topic = ANY (topics)))
        ORDER BY d.message_id
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE inbox.outbox_delivery d
           SET status = 'processing',
               attempts = d.attempts + 1,
               lease_token = inbox._lease_token(d.message_id, d.attempts + 1, d.published_at),
               lease_expires_at = now() + lease
          FROM due
         WHERE d.message_id = due.message_id
        RETURNING d.message_id, d.attempts, d.lease_token, due.status AS was
    ), expired AS (
        UPDATE inbox.outbox_attempts a
           SET finished_at = now(), outcome = 'expired'
          FROM claimed c
         WHERE c.was = 'processing' AND a.message_id = c.message_id
           AND a.attempt = c.attempts - 1 AND a.outcome IS NULL
    ), history AS (
        INSERT INTO inbox.outbox_attempts (message_id, attempt, route)
        SELECT c.message_id, c.attempts, claim_outbox.route FROM claimed c
    )
    SELECT m.id, m.topic, m.key, m.payload, m.headers, m.published_at, c.attempts, c.lease_token
      FROM claimed c JOIN inbox.outbox m ON m.id = c.message_id
     ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION inbox.claim_outbox(text[], int, interval, boolean, text, text) IS
  'Lease up to max_rows due outbox messages of these topics; ordered = one in flight per key';

-- Records how an attempt ended in its history row.
CREATE FUNCTION inbox._outbox_record(message_id bigint, attempt int, outcome text, status_code int, detail text)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    UPDATE inbox.outbox_attempts a
       SET finished_at = now(), outcome = $3, status_code = $4, detail = left($5, 4096)
     WHERE a.message_id = $1 AND a.attempt = $2
$$;

-- Ends the delivery a current lease holds as done or rejected, with its
-- history; false (nothing changed) when the token is not the current lease.
CREATE FUNCTION inbox._outbox_finish(id bigint, lease_token uuid, final_status text, outcome text,
                                     status_code int, detail text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int;
BEGIN
    PERFORM inbox._outbox_require(id, lease_token);
    UPDATE inbox.outbox_delivery d
       SET status = final_status, processed_at = now(), lease_expires_at = NULL,
           last_error = CASE WHEN final_status = 'done' THEN d.last_error ELSE left(detail, 4096) END
     WHERE d.message_id = _outbox_finish.id AND d.lease_token = _outbox_finish.lease_token
       AND d.status = 'processing'
    RETURNING d.attempts INTO n;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM inbox._outbox_record(id, n, outcome, status_code, detail);
    RETURN true;
END
$$;

-- The consumer answered 2xx. True also when repeated; false when the lease
-- was lost to another claim (an expired lease nobody reclaimed still completes).
CREATE FUNCTION inbox.complete_outbox(id bigint, lease_token uuid,
                                      status_code int DEFAULT NULL, detail text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN inbox._outbox_finish(id, lease_token, 'done', 'delivered', status_code, detail)
        OR inbox._outbox_lease_state(id, lease_token) = 'done';
END
$$;

-- A failed attempt (non-2xx but 410, timeout, refused connection): retry with
-- the queue's backoff (backoff_base * 2^(attempt-1), capped at backoff_max,
-- times 0.5..1), or after exactly retry_after; dead once max_attempts claims
-- were used. NULL settings use pg_inbox.max_attempts / backoff_base /
-- backoff_max. Returns 'retry', 'dead' or 'lost'.
CREATE FUNCTION inbox.fail_outbox(
    id bigint,
    lease_token uuid,
    error text,
    retry_after interval DEFAULT NULL,
    max_attempts int DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    status_code int DEFAULT NULL)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d inbox.outbox_delivery;
    result text;
BEGIN
    PERFORM inbox._outbox_require(id, lease_token);
    IF error IS NULL THEN
        RAISE EXCEPTION 'error must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF retry_after < interval '0' THEN
        RAISE EXCEPTION 'retry_after must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_attempts < 1 OR max_attempts > 1000 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 1000, not %', max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF backoff_base <= interval '0' OR backoff_max <= interval '0' THEN
        RAISE EXCEPTION 'backoff_base and backoff_max must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    max_attempts := coalesce(max_attempts, nullif(current_setting('pg_inbox.max_attempts', true), '')::int, 10);
    backoff_base := coalesce(backoff_base, inbox._setting_interval('pg_inbox.backoff_base',
                                                                   interval '1 millisecond', interval '10 seconds'));
    backoff_max := coalesce(backoff_max, inbox._setting_interval('pg_inbox.backoff_max',
                                                                 interval '1 second', interval '1 hour'));
    UPDATE inbox.outbox_delivery x
       SET status = CASE WHEN x.attempts >= fail_outbox.max_attempts THEN 'dead' ELSE 'pending' END,
           processed_at = CASE WHEN x.attempts >= fail_outbox.max_attempts THEN now() END,
           next_attempt_at = now() + coalesce(retry_after,
               least(fail_outbox.backoff_max,
                     fail_outbox.backoff_base * power(2, least(x.attempts - 1, 40)))
               * (0.5 + random() / 2)),
           lease_expires_at = NULL,
           last_error = left(error, 4096)
     WHERE x.message_id = fail_outbox.id AND x.lease_token = fail_outbox.lease_token
       AND x.status = 'processing'
    RETURNING x.* INTO d;
    IF NOT FOUND THEN
        PERFORM inbox._outbox_lease_state(id, lease_token);
        RETURN 'lost';
    END IF;
    result := CASE d.status WHEN 'dead' THEN 'dead' ELSE 'retry' END;
    PERFORM inbox._outbox_record(d.message_id, d.attempts, result, status_code, error);
    RETURN result;
END
$$;

-- The consumer answered 410 Gone: it will never take this message; stop
-- without further attempts. Returns 'rejected' or 'lost'.
CREATE FUNCTION inbox.reject_outbox(id bigint, lease_token uuid, error text,
                                    status_code int DEFAULT 410)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF error IS NULL THEN
        RAISE EXCEPTION 'error must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF inbox._outbox_finish(id, lease_token, 'rejected', 'rejected', status_code, error) THEN
        RETURN 'rejected';
    END IF;
    PERFORM inbox._outbox_lease_state(id, lease_token);
    RETURN 'lost';
END
$$;

-- Roles. inbox_publisher may publish and read the outbox and its history;
-- inbox_worker may publish too (a receipt in the transaction that completes
-- an event); inbox_forwarder may only claim, complete, fail and reject
-- deliveries (grant it inbox_worker as well to forward a provider's events).
-- 90_privileges.sql revokes everything from PUBLIC afterwards.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_publisher') THEN
        CREATE ROLE inbox_publisher NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_forwarder') THEN
        CREATE ROLE inbox_forwarder NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA inbox TO inbox_publisher, inbox_forwarder;
GRANT EXECUTE ON FUNCTION inbox.publish(text, text, jsonb, jsonb) TO inbox_publisher, inbox_worker;
GRANT SELECT ON inbox.outbox, inbox.outbox_delivery, inbox.outbox_attempts TO inbox_publisher;
GRANT EXECUTE ON FUNCTION
    inbox.claim_outbox(text[], int, interval, boolean, text, text),
    inbox.complete_outbox(bigint, uuid, int, text),
    inbox.fail_outbox(bigint, uuid, text, interval, int, interval, interval, int),
    inbox.reject_outbox(bigint, uuid, text, int)
  TO inbox_forwarder;

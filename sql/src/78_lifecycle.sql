-- An event's life after its first processing (docs/retention.md):
--   inbox.replay    runs a done or dead event again, on purpose, as a new attempt;
--   inbox.resolve   a person settles a held or dead event;
--   inbox.purge     forgets in two steps: the payload after keep_payload_for,
--                   the row (the dedup key) after keep_dedup_for.
-- Every replay and resolution is a row of inbox.event_history, never a
-- silent update.

-- The columns are appended to inbox.events (claim returns them: a worker sees
-- that an event is a replay, and its attempt number).
ALTER TABLE inbox.events
    ADD COLUMN is_replay boolean NOT NULL DEFAULT false,
    ADD COLUMN attempts_at_replay int NOT NULL DEFAULT 0,
    ADD COLUMN purged_at timestamptz;
COMMENT ON COLUMN inbox.events.is_replay IS
  'run again on purpose by inbox.replay: it was processed (done or dead) before';
COMMENT ON COLUMN inbox.events.attempts_at_replay IS
  'attempts used before the latest replay; max_attempts counts the attempts after it';
COMMENT ON COLUMN inbox.events.purged_at IS
  'when inbox.purge removed payload and headers; the row stays as the dedup key until keep_dedup_for';

-- What purge reads, per provider and oldest first: processed events that
-- still hold their payload, and those whose payload it removed. Each
-- processed event is in exactly one of the two, so complete and a final
-- fail add one entry (they are not HOT anyway: processed_at is in
-- events_open_idx's predicate) and purge's payload step moves it to the
-- other. Claims change none of these columns (they stay HOT).
CREATE INDEX events_payload_kept_idx ON inbox.events (provider, processed_at)
    WHERE processed_at IS NOT NULL AND purged_at IS NULL;
CREATE INDEX events_purged_idx ON inbox.events (provider, processed_at)
    WHERE processed_at IS NOT NULL AND purged_at IS NOT NULL;

-- Per-provider horizons, counted from processed_at. NULL: the defaults, 30
-- and 90 days. The dedup horizon is never shorter than the payload horizon,
-- nor than 3 days, the longest automatic retry window of the supported
-- providers (Stripe's).
ALTER TABLE inbox.providers
    ADD COLUMN keep_payload_for interval CHECK (keep_payload_for >= interval '0'),
    ADD COLUMN keep_dedup_for interval CHECK (keep_dedup_for >= interval '3 days'),
    ADD CONSTRAINT providers_dedup_outlives_payload
      CHECK (coalesce(keep_dedup_for, interval '90 days') >= coalesce(keep_payload_for, interval '30 days'));
COMMENT ON COLUMN inbox.providers.keep_payload_for IS
  'inbox.purge removes payload and headers of events done or dead this long (NULL: 30 days)';
COMMENT ON COLUMN inbox.providers.keep_dedup_for IS
  'inbox.purge deletes the row (the dedup key) of events done or dead this long (NULL: 90 days)';

-- The history also records what people did: who (actor, the session user),
-- why (note, the reason they gave) and the status it led to.
ALTER TABLE inbox.event_history
    ADD COLUMN actor text,
    ADD COLUMN note text,
    ADD COLUMN to_status text,
    DROP CONSTRAINT event_history_reason_check,
    ADD CONSTRAINT event_history_reason_check
      CHECK (reason IN ('verify_mismatch', 'lease_reclaimed', 'lease_held', 'replay', 'resolve'));
ALTER TABLE inbox.event_history ALTER COLUMN actor SET DEFAULT session_user;
COMMENT ON COLUMN inbox.event_history.reason IS
  'the action: verify_mismatch, lease_reclaimed, lease_held (reconcile), replay, resolve (a person)';
COMMENT ON COLUMN inbox.event_history.note IS 'the reason given to inbox.replay or inbox.resolve';
COMMENT ON COLUMN inbox.event_history.to_status IS 'the status the action left the event in';

-- The reason a person gives: required, at most 1000 bytes.
CREATE FUNCTION inbox._check_reason(reason text)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF reason IS NULL THEN
        RAISE EXCEPTION 'reason must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF btrim(reason) = '' THEN
        RAISE EXCEPTION 'reason must not be empty' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Say why, for the history: ''customer asked for a resend'', ''refunded by hand''.';
    END IF;
    IF octet_length(reason) > 1000 THEN
        RAISE EXCEPTION 'reason is % bytes, over the limit of 1000', octet_length(reason)
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
END
$$;

-- The event, locked; raises for a NULL or unknown id.
CREATE FUNCTION inbox._lock_event(id bigint)
RETURNS inbox.events LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e inbox.events;
BEGIN
    IF id IS NULL THEN
        RAISE EXCEPTION 'id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO e FROM inbox.events ev WHERE ev.id = _lock_event.id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'event % does not exist', id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN e;
END
$$;

-- Runs a done or dead event again: pending, flagged is_replay, as a new
-- attempt (attempts only grow, so its lease token is new: the old holder's
-- late complete says false). max_attempts counts the attempts after the
-- replay. Returns the attempt number its first claim will carry.
CREATE FUNCTION inbox.replay(id bigint, reason text)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e inbox.events;
BEGIN
    PERFORM inbox._check_reason(reason);
    e := inbox._lock_event(id);
    IF e.status NOT IN ('done', 'dead') THEN
        RAISE EXCEPTION 'event % is %: only done or dead events can be replayed', e.id, e.status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = CASE e.status WHEN 'pending' THEN 'It will be claimed anyway.'
                         ELSE 'It is leased to a worker; a held one is settled with inbox.resolve().' END;
    END IF;
    IF e.purged_at IS NOT NULL THEN
        RAISE EXCEPTION 'event % was purged at %: its payload is gone, it cannot be replayed', e.id, e.purged_at
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'inbox.configure_retention() sets how long payloads are kept.';
    END IF;
    INSERT INTO inbox.event_history (event_id, reason, status, attempts, lease_token, lease_expires_at,
                                     processed_at, last_error, note, to_status)
    VALUES (e.id, 'replay', e.status, e.attempts, e.lease_token, e.lease_expires_at, e.processed_at,
            e.last_error, replay.reason, 'pending');
    UPDATE inbox.events ev
       SET status = 'pending', processed_at = NULL, next_attempt_at = now(), lease_expires_at = NULL,
           last_error = NULL, is_replay = true, attempts_at_replay = ev.attempts
     WHERE ev.id = e.id;
    RETURN e.attempts + 1;
END
$$;
COMMENT ON FUNCTION inbox.replay(bigint, text) IS
  'Run a done or dead event again as a new attempt flagged is_replay; recorded in inbox.event_history';

-- A person settles an event no worker will finish: held (processing with an
-- expired lease: on_lease_expiry 'hold') or dead.
--   'done'   handled by hand;
--   'dead'   given up (held events only: a dead one already is);
--   'retry'  back to pending for another attempt (held events only: a dead
--            event runs again with inbox.replay).
-- Returns the status the event now has.
CREATE FUNCTION inbox.resolve(id bigint, outcome text, reason text)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e inbox.events;
    new_status text;
BEGIN
    IF outcome IS NULL THEN
        RAISE EXCEPTION 'outcome must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF outcome NOT IN ('done', 'dead', 'retry') THEN
        RAISE EXCEPTION 'outcome must be ''done'', ''dead'' or ''retry'', not %', quote_literal(left(outcome, 100))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM inbox._check_reason(reason);
    e := inbox._lock_event(id);
    -- Held: a lease that expired under the 'hold' policy, or an event a
    -- transition rule held at claim (held_reason, an infinite lease).
    IF e.status = 'processing' AND e.lease_expires_at > now() AND e.held_reason IS NULL THEN
        RAISE EXCEPTION 'event % is leased to a worker until %: only held and dead events can be resolved',
            e.id, e.lease_expires_at USING ERRCODE = 'object_not_in_prerequisite_state';
    ELSIF e.status IN ('pending', 'done') THEN
        RAISE EXCEPTION 'event % is %: only held and dead events can be resolved', e.id, e.status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = CASE e.status WHEN 'done' THEN 'inbox.replay() runs a done event again.'
                         ELSE 'It will be claimed anyway.' END;
    ELSIF e.status = 'dead' AND outcome <> 'done' THEN
        RAISE EXCEPTION 'event % is dead: it can be resolved as done, not %', e.id, outcome
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'inbox.replay() runs a dead event again.';
    END IF;
    new_status := CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END;
    INSERT INTO inbox.event_history (event_id, reason, status, attempts, lease_token, lease_expires_at,
                                     processed_at, last_error, note, to_status)
    VALUES (e.id, 'resolve', e.status, e.attempts, e.lease_token, e.lease_expires_at, e.processed_at,
            e.last_error, resolve.reason, new_status);
    UPDATE inbox.events ev
       SET status = new_status,
           processed_at = CASE WHEN new_status = 'pending' THEN NULL ELSE now() END,
           next_attempt_at = CASE WHEN new_status = 'pending' THEN now() ELSE ev.next_attempt_at END,
           lease_expires_at = NULL,
           -- kept on a settled event (why it was held); a retry is judged afresh by claim
           held_reason = CASE WHEN new_status = 'pending' THEN NULL ELSE ev.held_reason END
     WHERE ev.id = e.id;
    RETURN new_status;
END
$$;
COMMENT ON FUNCTION inbox.resolve(bigint, text, text) IS
  'Settle a held or dead event by hand (done, dead, retry); recorded in inbox.event_history';

-- Sets (NULL: back to the default) how long a provider's processed events
-- keep their payload and their dedup key. Returns the horizons in force.
CREATE FUNCTION inbox.configure_retention(provider text, keep_payload_for interval DEFAULT NULL,
                                          keep_dedup_for interval DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p inbox.providers;
BEGIN
    PERFORM inbox._require_provider(provider);
    IF keep_payload_for < interval '0' THEN
        RAISE EXCEPTION 'keep_payload_for must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF keep_dedup_for < interval '3 days' THEN
        RAISE EXCEPTION 'keep_dedup_for must be at least 3 days, not %', keep_dedup_for
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A re-delivery after the dedup horizon is a new event; providers retry '
                           'for up to 3 days (Stripe).',
                  HINT = 'docs/retention.md lists the providers'' retry windows.';
    END IF;
    IF coalesce(keep_dedup_for, interval '90 days') < coalesce(keep_payload_for, interval '30 days') THEN
        RAISE EXCEPTION 'keep_dedup_for (%) must not be shorter than keep_payload_for (%)',
            coalesce(keep_dedup_for, interval '90 days'), coalesce(keep_payload_for, interval '30 days')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE inbox.providers pr
       SET keep_payload_for = configure_retention.keep_payload_for,
           keep_dedup_for = configure_retention.keep_dedup_for
     WHERE pr.name = provider
    RETURNING * INTO p;
    RETURN jsonb_build_object('provider', p.name,
                              'keep_payload_for', coalesce(p.keep_payload_for, interval '30 days'),
                              'keep_dedup_for', coalesce(p.keep_dedup_for, interval '90 days'));
END
$$;
COMMENT ON FUNCTION inbox.configure_retention(text, interval, interval) IS
  'Per provider: how long processed events keep payload (default 30 days) and dedup key (default 90 days)';

-- One bounded purge batch, in the caller's transaction, under its advisory
-- lock ({"skipped": "busy"} when another batch holds it): per provider,
-- oldest first, taken with SKIP LOCKED, up to max_rows rows and max_rows
-- payloads in all:
--   1. rows done or dead longer than keep_dedup_for are deleted, with their
--      history (a re-delivery after that is a new event); rows an open gap or
--      backfill request names stay;
--   2. payload and headers of events done or dead longer than
--      keep_payload_for (or older_than, when given) are removed; the row
--      stays, status intact, so a re-delivery is still a duplicate (the one
--      upsert is the dedup).
-- The payload step keeps a generic plan, so it runs with enable_seqscan =
-- off like the other kept plans (README, "C++ inside PostgreSQL"): index
-- probes whatever the statistics said when the plan was made. The row step
-- is planned at each call (EXECUTE), under the same setting.
CREATE FUNCTION inbox.purge(older_than interval DEFAULT NULL, max_rows int DEFAULT 5000)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE
    p record;
    row_budget int := max_rows;
    payload_budget int := max_rows;
    payload_state text;
    n int;
BEGIN
    IF older_than < interval '0' THEN
        RAISE EXCEPTION 'older_than must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 100000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 100000, not %', coalesce(max_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Class "pinf", the purge's own (the others: extension/reconcile_locks.hpp,
    -- "pind" run_job's, "pine" the rollups' and the checks', "ping" publish's).
    IF NOT pg_try_advisory_xact_lock(1885957734, 1) THEN
        RETURN jsonb_build_object('skipped', 'busy');
    END IF;
    FOR p IN SELECT pr.name, coalesce(older_than, pr.keep_payload_for, interval '30 days') AS payload_horizon,
                    coalesce(pr.keep_dedup_for, interval '90 days') AS dedup_horizon
               FROM inbox.providers pr ORDER BY pr.name LOOP
        -- Rows past the dedup horizon, from one retention index and then the
        -- other: first those whose payload is gone (the usual case), then
        -- any that kept it (a payload horizon as long as the dedup one). The
        -- predicate is written out so that each statement reads the range
        -- of its own partial index.
        FOREACH payload_state IN ARRAY ARRAY['IS NOT NULL', 'IS NULL'] LOOP
            EXIT WHEN row_budget = 0;
            EXECUTE format($doomed$
            WITH doomed AS (
                SELECT e.id FROM inbox.events e
                 WHERE e.provider = $1 AND e.processed_at IS NOT NULL AND e.purged_at %s
                   AND e.processed_at < now() - $2
                   AND NOT EXISTS (SELECT 1 FROM inbox.backfill_requests b
                                   WHERE b.provider = e.provider AND b.external_id = e.external_id
                                     AND b.status IN ('pending', 'leased'))
                   AND NOT EXISTS (SELECT 1 FROM inbox.gaps g
                                   WHERE g.provider = e.provider AND g.external_id = e.external_id
                                     AND g.status <> 'resolved')
                 ORDER BY e.processed_at LIMIT $3
                   FOR UPDATE SKIP LOCKED
            ), history AS (
                DELETE FROM inbox.event_history h USING doomed WHERE h.event_id = doomed.id
            ), duplicate_counts AS (
                DELETE FROM inbox.delivery_duplicates d USING doomed WHERE d.event_id = doomed.id
            )
            DELETE FROM inbox.events e USING doomed WHERE e.id = doomed.id
            $doomed$, payload_state) USING p.name, p.dedup_horizon, row_budget;
            GET DIAGNOSTICS n = ROW_COUNT;
            row_budget := row_budget - n;
        END LOOP;
        -- Payloads only once the rows to delete are gone: no payload is
        -- removed from a row about to be deleted.
        IF payload_budget > 0 AND row_budget > 0 THEN
            WITH due AS (
                SELECT e.id FROM inbox.events e
                 WHERE e.provider = p.name AND e.processed_at IS NOT NULL AND e.purged_at IS NULL
                   AND e.processed_at < now() - p.payload_horizon
                 ORDER BY e.processed_at LIMIT payload_budget
                   FOR UPDATE SKIP LOCKED
            ), copies AS (
                UPDATE inbox.event_history h SET payload = NULL
                  FROM due WHERE h.event_id = due.id AND h.payload IS NOT NULL
            )
            UPDATE inbox.events e SET payload = 'null', headers = NULL, purged_at = now()
              FROM due WHERE e.id = due.id;
            GET DIAGNOSTICS n = ROW_COUNT;
            payload_budget := payload_budget - n;
        END IF;
    END LOOP;
    RETURN jsonb_build_object('rows_deleted', max_rows - row_budget,
                              'payloads_purged', max_rows - payload_budget,
                              'more', row_budget = 0 OR payload_budget = 0);
END
$$;
COMMENT ON FUNCTION inbox.purge(interval, int) IS
  'One bounded retention batch: payloads past keep_payload_for (or older_than), rows past keep_dedup_for';

-- Purges in batches of max_rows, each its own short transaction, until
-- nothing is left or max_duration has passed; after each batch it pauses
-- `throttle` times as long as the batch took, so ingest keeps the machine
-- (at 1, deleting rows cost ingest a quarter of its rate: bench/retention).
-- What the scheduled job runs (CALL: it commits, so never inside BEGIN).
-- No SET clause (a procedure with one cannot commit): its names are qualified.
CREATE PROCEDURE inbox.purge_all(older_than interval DEFAULT NULL, max_rows int DEFAULT 5000,
                                 max_duration interval DEFAULT '4 minutes', throttle float8 DEFAULT 3,
                                 INOUT result jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := pg_catalog.clock_timestamp();
    batch_started timestamptz;
    batch jsonb;
    batches int := 0;
    payloads bigint := 0;
    deleted bigint := 0;
BEGIN
    IF max_duration IS NULL OR max_duration <= interval '0' THEN
        RAISE EXCEPTION 'max_duration must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF throttle IS NULL OR throttle < 0 OR throttle > 100 THEN
        RAISE EXCEPTION 'throttle must be between 0 and 100' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        batch_started := pg_catalog.clock_timestamp();
        batch := inbox.purge(older_than, max_rows);
        COMMIT;
        EXIT WHEN batch ? 'skipped';
        batches := batches + 1;
        payloads := payloads + (batch ->> 'payloads_purged')::bigint;
        deleted := deleted + (batch ->> 'rows_deleted')::bigint;
        EXIT WHEN NOT (batch ->> 'more')::boolean
               OR pg_catalog.clock_timestamp() - started >= max_duration;
        PERFORM pg_catalog.pg_sleep(throttle * pg_catalog.date_part('epoch',
                                                 pg_catalog.clock_timestamp() - batch_started));
    END LOOP;
    result := pg_catalog.jsonb_build_object(
        'batches', batches, 'payloads_purged', payloads, 'rows_deleted', deleted,
        'more', coalesce((batch ->> 'more')::boolean, false), 'skipped', batch ->> 'skipped');
END
$$;
COMMENT ON PROCEDURE inbox.purge_all(interval, int, interval, float8, jsonb) IS
  'inbox.purge in short transactions until done or max_duration; CALL it (the pg_inbox:purge job does)';

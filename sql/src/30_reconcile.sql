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
        PERFORM inbox._require_provider(provider);  -- raises: unknown provider
    END IF;
END
$$;

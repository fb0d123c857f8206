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

-- Issue 10: one replica lists a provider per interval (sql/src/62_list_windows.sql).
CREATE FUNCTION inbox.claim_list_window(provider text, every interval)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds double precision;
    this_window timestamptz;
BEGIN
    PERFORM inbox._require_provider(provider);
    IF every IS NULL THEN
        RAISE EXCEPTION 'every must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF every < interval '1 second' OR every > interval '7 days' THEN
        RAISE EXCEPTION 'every must be between 1 second and 7 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    seconds := extract(epoch FROM every);
    this_window := to_timestamp(floor(extract(epoch FROM now()) / seconds) * seconds);
    INSERT INTO inbox.job_windows AS w (job, window_start)
    VALUES ('list:' || claim_list_window.provider, this_window)
    ON CONFLICT ON CONSTRAINT job_windows_pkey DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM inbox.job_windows w
     WHERE w.job = 'list:' || claim_list_window.provider AND w.window_start < now() - interval '7 days';
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION inbox.claim_list_window(text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.claim_list_window(text, interval) TO inbox_worker;

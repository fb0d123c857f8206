-- Listing windows: replicas of the backfill worker agree that only one of
-- them calls a provider's list API per interval. The claim is a row in
-- inbox.job_windows, as for the scheduled jobs (job 'list:<provider>'), so
-- N replicas make one listing per window instead of N.

-- True for the one caller that claims the current window of length `every`
-- for `provider`; false for every other caller in that window. A claim in a
-- transaction still open makes a concurrent caller wait for its outcome.
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

-- Listing windows: replicas of the backfill worker agree that only one of
-- them calls a provider's list API per interval. The claim is a row in
-- inbox.job_windows, as for the scheduled jobs (job 'list:<provider>' for
-- the listing of a `listed` source, 'list-tail:<provider>' for the tail
-- listing of a sequence source, 74_tail_listing.sql), so N replicas make
-- one listing per window instead of N.

-- The start of the current window of length `every`, aligned to the epoch.
CREATE FUNCTION inbox._list_window(every interval)
RETURNS timestamptz LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds double precision;
BEGIN
    IF every IS NULL THEN
        RAISE EXCEPTION 'every must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF every < interval '1 second' OR every > interval '7 days' THEN
        RAISE EXCEPTION 'every must be between 1 second and 7 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    seconds := extract(epoch FROM every);
    RETURN to_timestamp(floor(extract(epoch FROM now()) / seconds) * seconds);
END
$$;

-- True for the one caller that claims (job, window_start); false for every
-- other. A claim in a transaction still open makes a concurrent caller wait
-- for its outcome. Windows of the job over 7 days old are dropped.
CREATE FUNCTION inbox._claim_list_window(job text, window_start timestamptz)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO inbox.job_windows AS w (job, window_start)
    VALUES (_claim_list_window.job, _claim_list_window.window_start)
    ON CONFLICT ON CONSTRAINT job_windows_pkey DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM inbox.job_windows w
     WHERE w.job = _claim_list_window.job AND w.window_start < now() - interval '7 days';
    RETURN true;
END
$$;

-- True for the one caller that claims the current window of length `every`
-- for listing `provider`; false for every other caller in that window.
CREATE FUNCTION inbox.claim_list_window(provider text, every interval)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM inbox._require_provider(provider);
    RETURN inbox._claim_list_window('list:' || provider, inbox._list_window(every));
END
$$;
REVOKE ALL ON FUNCTION inbox._list_window(interval), inbox._claim_list_window(text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION inbox.claim_list_window(text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.claim_list_window(text, interval) TO inbox_worker;

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
    IF job IS NULL OR job NOT IN ('reconcile', 'scan_gaps', 'refresh', 'checks', 'seal_log', 'purge') THEN
        RAISE EXCEPTION 'unknown job %', coalesce(quote_literal(job), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Jobs: reconcile, scan_gaps, refresh, checks, seal_log, purge.';
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
    ELSIF job = 'refresh' THEN
        outcome := inbox.refresh_stats();
    ELSIF job = 'checks' THEN
        outcome := inbox.run_checks();
    ELSIF job = 'seal_log' THEN
        outcome := jsonb_build_object('seal', inbox.seal_log());
    ELSIF job = 'purge' THEN
        outcome := inbox.purge();  -- one batch; pg_cron's job CALLs inbox.purge_all()
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

-- The command of a scheduled job. purge drains its backlog in short
-- transactions (CALL inbox.purge_all, which commits), for at most 4/5 of its
-- interval; it needs no window claim: its batches take a lock of their own.
CREATE FUNCTION inbox._job_command(job text, every interval)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN job = 'purge'
                THEN format('CALL inbox.purge_all(max_duration => %L)', every * 0.8)
                ELSE format('SELECT inbox.run_job(%L, %L)', job, every) END
$$;

-- Installs (or updates) the pg_cron jobs; re-running it changes nothing
-- but the schedules passed. Returns the jobs as installed.
CREATE FUNCTION inbox.schedule(
    reconcile_every interval DEFAULT '1 minute',
    scan_gaps_every interval DEFAULT '5 minutes',
    refresh_every interval DEFAULT '1 minute',
    checks_every interval DEFAULT '1 minute',
    seal_log_every interval DEFAULT '5 minutes',
    purge_every interval DEFAULT '5 minutes')
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    missing text := inbox._cron_missing();
    jobs jsonb := '[]';
    spec record;
BEGIN
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'inbox.schedule() needs pg_cron: %', missing
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Without pg_cron, call SELECT inbox.run_job(''reconcile'', ''1 minute''), '
                         'inbox.run_job(''scan_gaps'', ''5 minutes''), inbox.run_job(''refresh'', ''1 minute''), '
                         'inbox.run_job(''checks'', ''1 minute''), inbox.run_job(''seal_log'', ''5 minutes'') '
                         'and CALL inbox.purge_all() from any scheduler.';
    END IF;
    FOR spec IN
        SELECT * FROM (VALUES ('reconcile', reconcile_every), ('scan_gaps', scan_gaps_every),
                              ('refresh', refresh_every), ('checks', checks_every),
                              ('seal_log', seal_log_every), ('purge', purge_every)) v(job, every)
    LOOP
        EXECUTE 'SELECT cron.schedule($1, $2, $3)'
          USING 'pg_inbox:' || spec.job, inbox._cron_expression(spec.every),
                inbox._job_command(spec.job, spec.every);
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

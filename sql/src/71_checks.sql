-- Anomaly checks (docs/checks.md). Each check turns the rollups into one
-- value per provider (or one global value), compares it with its range, fixed
-- or learned from the metric's own history, and moves a hysteresis state
-- machine: firing after M of the last N evaluations were out of range,
-- resolved after K in range. A check that starts firing opens an anomaly and
-- runs a reconciliation pass at once.

-- The built-in checks. Their settings are overridden per check (provider '*')
-- or per provider in inbox.check_settings, through inbox.configure_check.
--   side:   'high' fires above max (or the band), 'low' below min (or the band)
--   sample: the stats_minute column a learned band is learned from (NULL: the
--           check has no learned mode)
CREATE FUNCTION inbox._check_definitions()
RETURNS TABLE (name text, family text, scope text, severity text, data_loss boolean, side text,
               mode text, min_value float8, max_value float8, k float8, min_samples int,
               fire_after int, window_size int, resolve_after int, sample text, unit text,
               description text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT * FROM (VALUES
  ('latency_p50', 'latency', 'provider', 'P3', false, 'high', 'fixed', NULL::float8, 60::float8, 4::float8, 12, 2, 3, 3, NULL::text, 's',
   'median received -> processed of the events done in the last 15 minutes'),
  ('latency_p95', 'latency', 'provider', 'P2', false, 'high', 'fixed', NULL, 300, 4, 12, 2, 3, 3, NULL, 's',
   '95th percentile received -> processed, last 15 minutes'),
  ('latency_p99', 'latency', 'provider', 'P2', false, 'high', 'fixed', NULL, 900, 4, 12, 2, 3, 3, NULL, 's',
   '99th percentile received -> processed, last 15 minutes'),
  ('latency_widening', 'latency', 'provider', 'P3', false, 'high', 'fixed', NULL, 3, 4, 12, 2, 3, 3, NULL, 'buckets',
   'consecutive 5-minute buckets (of the last 30 minutes) whose p95 rose: the early warning'),
  ('first_claim_delay', 'latency', 'provider', 'P2', false, 'high', 'fixed', NULL, 120, 4, 12, 2, 3, 3, NULL, 's',
   '95th percentile received -> first claim (a lower bound), last 15 minutes'),
  ('oldest_pending_age', 'latency', 'provider', 'P2', false, 'high', 'fixed', NULL, 1800, 4, 12, 2, 3, 3, NULL, 's',
   'age of the oldest pending event'),
  ('leases_overdue', 'latency', 'provider', 'P2', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'leases expired over 2 minutes ago and not reclaimed (reconcile is not running)'),
  ('backlog_size', 'backlog', 'provider', 'P2', false, 'high', 'fixed', NULL, 10000, 6, 12, 2, 3, 3, 'backlog', 'events',
   'open (pending and processing) events'),
  ('backlog_growing', 'backlog', 'provider', 'P2', false, 'high', 'fixed', NULL, 4, 4, 12, 2, 3, 3, NULL, 'refreshes',
   'consecutive refreshes (last 10 minutes) in which a backlog of over 50 grew: arrivals outpace processing'),
  ('processing_rate_drop', 'backlog', 'provider', 'P2', false, 'low', 'learned', NULL, NULL, 4, 12, 2, 3, 3, 'processed', 'events',
   'events processed in the last 15 minutes, below the learned band, while 10 or more wait'),
  ('claim_starvation', 'backlog', 'provider', 'P2', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'pending events due for over 5 minutes and unclaimed while workers claim others'),
  ('arrivals_low', 'volume', 'provider', 'P2', false, 'low', 'learned', NULL, NULL, 4, 12, 2, 3, 3, 'arrivals', 'events',
   'new events in the last 15 minutes, below the learned band: provider silent or intake down'),
  ('arrivals_spike', 'volume', 'provider', 'P3', false, 'high', 'learned', NULL, NULL, 8, 12, 2, 3, 3, 'arrivals', 'events',
   'new events in the last 15 minutes, above the learned band'),
  ('provider_silent', 'volume', 'provider', 'P2', false, 'high', 'fixed', NULL, 1.5, 4, 12, 2, 3, 3, NULL, 'ratio',
   'time since the last arrival over the longest gap of the last 7 days (at least 10 minutes)'),
  ('deliveries_per_event', 'volume', 'provider', 'P2', false, 'high', 'fixed', NULL, 1.5, 4, 12, 2, 3, 3, NULL, 'ratio',
   'deliveries (first, re-deliveries, duplicates) per new event, last 15 minutes: a retry storm, are our answers failing?'),
  ('redeliveries_processed', 'volume', 'provider', 'P3', false, 'high', 'fixed', NULL, 0.2, 4, 12, 2, 3, 3, NULL, 'ratio',
   're-deliveries of processed events (receiver-reported duplicates) per new event, last 15 minutes'),
  ('intake_unavailable', 'volume', 'provider', 'P1', false, 'high', 'fixed', NULL, 0.01, 4, 12, 2, 3, 3, NULL, 'ratio',
   'share of requests the receiver answered 503 (database unavailable), last 15 minutes'),
  ('refused_bodies', 'volume', 'provider', 'P3', false, 'high', 'fixed', NULL, 10, 4, 12, 2, 3, 3, NULL, 'requests',
   'bodies the receiver refused (411, 413, 415), last 15 minutes'),
  ('retry_ratio', 'failure', 'provider', 'P2', false, 'high', 'fixed', NULL, 0.2, 4, 12, 2, 3, 3, NULL, 'ratio',
   'claims that were retries, last 15 minutes'),
  ('dead_new', 'failure', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'events that went dead in the last 15 minutes'),
  ('dead_ratio', 'failure', 'provider', 'P1', true, 'high', 'fixed', NULL, 0.01, 4, 12, 2, 3, 3, NULL, 'ratio',
   'dead among events finished in the last hour'),
  ('outbox_dead_new', 'failure', 'global', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 1, 3, 3, NULL, 'messages',
   'outbox messages that went dead in the last 15 minutes, all topics'),
  ('new_error_class', 'failure', 'provider', 'P3', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'classes',
   'kinds of last_error first seen in the last hour, for a provider with a day of history'),
  ('lease_expiry_rate', 'failure', 'provider', 'P2', false, 'high', 'fixed', NULL, 0.05, 4, 12, 2, 3, 3, NULL, 'ratio',
   'leases that expired per claim, last 15 minutes: workers crashing'),
  ('held_events', 'failure', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'events held after a lease expiry, waiting for a person'),
  ('gaps_past_grace', 'completeness', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'unresolved gaps older than the source''s grace period'),
  ('oldest_gap_age', 'completeness', 'provider', 'P2', true, 'high', 'fixed', NULL, 21600, 4, 12, 2, 3, 3, NULL, 's',
   'age of the oldest unresolved gap'),
  ('backfill_failures', 'completeness', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'requests',
   'backfill requests that gave up in the last hour'),
  ('backfill_not_found_ratio', 'completeness', 'provider', 'P3', false, 'high', 'fixed', NULL, 0.5, 4, 12, 2, 3, 3, NULL, 'ratio',
   'backfill requests the provider answered not found, of those finished in 24 hours: phantom gaps'),
  ('sequence_regression', 'completeness', 'provider', 'P2', false, 'high', 'fixed', NULL, 1000, 4, 12, 2, 3, 3, NULL, 'ids',
   'how far the newest sequence number of the last 15 minutes is below the earlier high mark'),
  ('sequence_tail_silence', 'completeness', 'provider', 'P2', false, 'high', 'fixed', NULL, 1.5, 4, 12, 2, 3, 3, NULL, 'ratio',
   'time since the sequence high mark last rose over its longest pause in 7 days (at least 10 minutes)'),
  ('orphan_references', 'referential', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'rows',
   'rows of registered reference tables naming an external id with no event'),
  ('missing_effects', 'referential', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'events done in the last hour with no row in a registered effect table'),
  ('verify_mismatch', 'referential', 'provider', 'P1', true, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'done events the verify function reported without their effect, last hour'),
  ('payload_changed_processing', 'integrity', 'provider', 'P2', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   're-deliveries that changed the payload of an event being processed, last hour'),
  ('replay_suspect', 'integrity', 'provider', 'P2', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'events',
   'new events with the same body as another new event under a different id, last hour'),
  ('signature_failure_rate', 'integrity', 'provider', 'P2', false, 'high', 'fixed', NULL, 0.05, 4, 12, 2, 3, 3, NULL, 'ratio',
   'requests failing signature verification (receiver-reported), last 15 minutes'),
  ('timestamp_skew', 'integrity', 'provider', 'P3', false, 'high', 'fixed', NULL, 300, 4, 12, 2, 3, 3, NULL, 's',
   'largest |provider timestamp - received_at| of new events, last 15 minutes'),
  ('stats_stale', 'watcher', 'global', 'P1', false, 'high', 'fixed', NULL, 180, 4, 12, 1, 1, 2, NULL, 's',
   'time since the last inbox.refresh_stats(): the checks are reading old numbers'),
  ('reconcile_stale', 'watcher', 'global', 'P2', false, 'high', 'fixed', NULL, 600, 4, 12, 2, 3, 3, NULL, 's',
   'time since the last reconciliation pass'),
  ('gap_scan_stale', 'watcher', 'global', 'P2', false, 'high', 'fixed', NULL, 1800, 4, 12, 2, 3, 3, NULL, 's',
   'time since the stalest gap scan of a provider with an id source'),
  ('cron_failing', 'watcher', 'global', 'P1', false, 'high', 'fixed', NULL, 0, 4, 12, 2, 3, 3, NULL, 'runs',
   'failed pg_cron runs of the pg_inbox jobs, last 15 minutes'),
  ('events_dead_tuples', 'watcher', 'global', 'P3', false, 'high', 'fixed', NULL, 0.2, 4, 12, 2, 3, 3, NULL, 'ratio',
   'dead tuples of inbox.events (when over 10000)'),
  ('autovacuum_lag', 'watcher', 'global', 'P3', false, 'high', 'fixed', NULL, 3600, 4, 12, 2, 3, 3, NULL, 's',
   'time since inbox.events was last vacuumed, while it holds over 10000 dead tuples'),
  ('xid_age', 'watcher', 'global', 'P1', false, 'high', 'fixed', NULL, 1000000000, 4, 12, 2, 3, 3, NULL, 'xids',
   'transaction id age of the database (wraparound at 2 billion)')
) AS d (name, family, scope, severity, data_loss, side, mode, min_value, max_value, k, min_samples,
        fire_after, window_size, resolve_after, sample, unit, description)
$$;

-- Overrides: provider '*' changes a check for every provider.
CREATE TABLE inbox.check_settings (
    check_name    text NOT NULL,
    provider      text NOT NULL,
    enabled       boolean,
    severity      text CHECK (severity IN ('P0', 'P1', 'P2', 'P3')),
    mode          text CHECK (mode IN ('fixed', 'learned')),
    min_value     float8,
    max_value     float8,
    k             float8 CHECK (k > 0 AND k <= 100),
    min_samples   int CHECK (min_samples BETWEEN 1 AND 10000),
    fire_after    int CHECK (fire_after BETWEEN 1 AND 64),
    window_size   int CHECK (window_size BETWEEN 1 AND 64),
    resolve_after int CHECK (resolve_after BETWEEN 1 AND 1000),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (check_name, provider)
);
COMMENT ON TABLE inbox.check_settings IS
  'per-check (provider ''*'') and per-provider overrides of the built-in check settings';

-- The checks with the settings every provider gets.
CREATE VIEW inbox.checks AS
SELECT d.name, d.family, d.scope, coalesce(o.severity, d.severity) AS severity, d.data_loss, d.side,
       coalesce(o.enabled, true) AS enabled, coalesce(o.mode, d.mode) AS mode,
       CASE WHEN o.min_value IS NOT NULL THEN o.min_value ELSE d.min_value END AS min_value,
       CASE WHEN o.max_value IS NOT NULL THEN o.max_value ELSE d.max_value END AS max_value,
       coalesce(o.k, d.k) AS k, coalesce(o.min_samples, d.min_samples) AS min_samples,
       coalesce(o.fire_after, d.fire_after) AS fire_after, coalesce(o.window_size, d.window_size) AS window_size,
       coalesce(o.resolve_after, d.resolve_after) AS resolve_after, d.sample IS NOT NULL AS learnable,
       d.unit, d.description
  FROM inbox._check_definitions() d
  LEFT JOIN inbox.check_settings o ON o.check_name = d.name AND o.provider = '*';
COMMENT ON VIEW inbox.checks IS 'every anomaly check: definition and the settings all providers get';

-- Every check's settings for every provider ('*': what providers get unless
-- overridden): its own overrides, then '*', then built-in.
CREATE FUNCTION inbox._check_configs()
RETURNS TABLE (name text, provider text, scope text, severity text, data_loss boolean, side text,
               enabled boolean, mode text, min_value float8, max_value float8, k float8, min_samples int,
               fire_after int, window_size int, resolve_after int, sample text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT d.name, x.provider, d.scope, coalesce(p.severity, o.severity, d.severity), d.data_loss, d.side,
           coalesce(p.enabled, o.enabled, true), coalesce(p.mode, o.mode, d.mode),
           coalesce(p.min_value, o.min_value, d.min_value), coalesce(p.max_value, o.max_value, d.max_value),
           coalesce(p.k, o.k, d.k), coalesce(p.min_samples, o.min_samples, d.min_samples),
           coalesce(p.fire_after, o.fire_after, d.fire_after), coalesce(p.window_size, o.window_size, d.window_size),
           coalesce(p.resolve_after, o.resolve_after, d.resolve_after), d.sample
      FROM inbox._check_definitions() d
     CROSS JOIN (SELECT '*'::text AS provider UNION ALL SELECT pr.name FROM inbox.providers pr) x
      LEFT JOIN inbox.check_settings o ON o.check_name = d.name AND o.provider = '*'
      LEFT JOIN inbox.check_settings p ON p.check_name = d.name AND p.provider = x.provider AND x.provider <> '*'
$$;

-- Changes a check's settings for one provider, or (provider NULL) for all.
-- NULL arguments leave a setting as it is; reset => true first drops the
-- overrides of that scope. Returns the settings now in force there.
CREATE FUNCTION inbox.configure_check(
    name text,
    provider text DEFAULT NULL,
    enabled boolean DEFAULT NULL,
    severity text DEFAULT NULL,
    mode text DEFAULT NULL,
    min_value float8 DEFAULT NULL,
    max_value float8 DEFAULT NULL,
    k float8 DEFAULT NULL,
    min_samples int DEFAULT NULL,
    fire_after int DEFAULT NULL,
    window_size int DEFAULT NULL,
    resolve_after int DEFAULT NULL,
    reset boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    def record;
    scope_key text := coalesce(provider, '*');
    eff record;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'check name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO def FROM inbox._check_definitions() d WHERE d.name = configure_check.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown check %', quote_literal(left(name, 100)) USING ERRCODE = 'undefined_object',
              HINT = 'SELECT name FROM inbox.checks;';
    END IF;
    IF provider IS NOT NULL THEN
        IF def.scope = 'global' THEN
            RAISE EXCEPTION 'check % is global: it takes no provider', name
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM inbox._require_provider(provider);
    END IF;
    IF severity IS NOT NULL AND severity NOT IN ('P0', 'P1', 'P2', 'P3') THEN
        RAISE EXCEPTION 'severity must be P0, P1, P2 or P3, not %', quote_literal(severity)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF mode IS NOT NULL AND mode NOT IN ('fixed', 'learned') THEN
        RAISE EXCEPTION 'mode must be ''fixed'' or ''learned'', not %', quote_literal(mode)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF mode = 'learned' AND def.sample IS NULL THEN
        RAISE EXCEPTION 'check % has no learned mode', name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF 'NaN'::float8 IN (min_value, max_value, k) THEN
        RAISE EXCEPTION 'settings must not be NaN' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k IS NOT NULL AND (k <= 0 OR k > 100) THEN
        RAISE EXCEPTION 'k must be in (0, 100]' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF min_samples IS NOT NULL AND min_samples NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'min_samples must be between 1 and 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF fire_after IS NOT NULL AND fire_after NOT BETWEEN 1 AND 64
       OR window_size IS NOT NULL AND window_size NOT BETWEEN 1 AND 64
       OR resolve_after IS NOT NULL AND resolve_after NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'fire_after and window_size must be between 1 and 64, resolve_after between 1 and 1000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset THEN
        DELETE FROM inbox.check_settings s WHERE s.check_name = configure_check.name AND s.provider = scope_key;
    END IF;
    INSERT INTO inbox.check_settings AS s (check_name, provider, enabled, severity, mode, min_value, max_value,
                                           k, min_samples, fire_after, window_size, resolve_after)
    VALUES (configure_check.name, scope_key, configure_check.enabled, configure_check.severity,
            configure_check.mode, configure_check.min_value, configure_check.max_value, configure_check.k,
            configure_check.min_samples, configure_check.fire_after, configure_check.window_size,
            configure_check.resolve_after)
    ON CONFLICT ON CONSTRAINT check_settings_pkey DO UPDATE
       SET enabled = coalesce(EXCLUDED.enabled, s.enabled), severity = coalesce(EXCLUDED.severity, s.severity),
           mode = coalesce(EXCLUDED.mode, s.mode), min_value = coalesce(EXCLUDED.min_value, s.min_value),
           max_value = coalesce(EXCLUDED.max_value, s.max_value), k = coalesce(EXCLUDED.k, s.k),
           min_samples = coalesce(EXCLUDED.min_samples, s.min_samples),
           fire_after = coalesce(EXCLUDED.fire_after, s.fire_after),
           window_size = coalesce(EXCLUDED.window_size, s.window_size),
           resolve_after = coalesce(EXCLUDED.resolve_after, s.resolve_after), updated_at = now();
    SELECT * INTO eff FROM inbox._check_configs() c WHERE c.name = configure_check.name AND c.provider = scope_key;
    IF eff.fire_after > eff.window_size THEN
        RAISE EXCEPTION 'fire_after (%) must not exceed window_size (%)', eff.fire_after, eff.window_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF eff.min_value > eff.max_value THEN
        RAISE EXCEPTION 'min_value (%) must not exceed max_value (%)', eff.min_value, eff.max_value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN to_jsonb(eff) || jsonb_build_object('provider', provider);
END
$$;

-- Where each (check, provider) stands.
CREATE TABLE inbox.check_state (
    check_name    text NOT NULL,
    provider      text NOT NULL,   -- '*' for global checks
    state         text NOT NULL CHECK (state IN ('ok', 'firing', 'no_data')),
    firing        boolean NOT NULL DEFAULT false,
    recent        boolean[] NOT NULL DEFAULT '{}',  -- out of range, newest last
    ok_streak     int NOT NULL DEFAULT 0,
    anomaly_id    bigint,
    value         float8,
    range_lo      float8,
    range_hi      float8,
    evaluated_at  timestamptz NOT NULL,
    PRIMARY KEY (check_name, provider)
);
COMMENT ON TABLE inbox.check_state IS 'hysteresis state of every (check, provider)';

-- Every evaluation, kept for a day.
CREATE TABLE inbox.check_results (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    evaluated_at  timestamptz NOT NULL,
    check_name    text NOT NULL,
    provider      text NOT NULL,
    state         text NOT NULL CHECK (state IN ('ok', 'firing', 'no_data')),
    value         float8,
    range_lo      float8,
    range_hi      float8,
    out_of_range  boolean NOT NULL
);
CREATE INDEX check_results_evaluated_idx ON inbox.check_results (evaluated_at);
CREATE INDEX check_results_check_idx ON inbox.check_results (check_name, provider, evaluated_at);
COMMENT ON TABLE inbox.check_results IS 'history of check evaluations (the last 24 hours)';

-- One row per firing episode.
CREATE TABLE inbox.anomalies (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    check_name       text NOT NULL,
    provider         text NOT NULL,
    severity         text NOT NULL,
    data_loss        boolean NOT NULL,
    first_seen_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    resolved_at      timestamptz,
    first_value      float8,
    worst_value      float8,
    last_value       float8,
    range_lo         float8,   -- the range when it started firing
    range_hi         float8,
    reconcile_run_id bigint    -- the pass it triggered, when it did
);
CREATE UNIQUE INDEX anomalies_open_idx ON inbox.anomalies (check_name, provider) WHERE resolved_at IS NULL;
CREATE INDEX anomalies_first_seen_idx ON inbox.anomalies (first_seen_at);
COMMENT ON TABLE inbox.anomalies IS 'firing episodes of the checks: first and last seen, resolved, worst value';

-- Samples a learned band learns from: the 15-minute windows of `sample`
-- (summed, or the largest value of a gauge) in the same hour of the week
-- over the last 4 weeks; when those are fewer than min_samples, every
-- window of the last 7 days. Windows without any stats row are missing.
CREATE FUNCTION inbox._check_samples(provider text, sample text, as_of timestamptz, min_samples int)
RETURNS float8[] LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    agg text := CASE WHEN sample = 'backlog' THEN 'max' ELSE 'sum' END;
    t0 timestamptz := date_trunc('minute', as_of);
    result float8[];
BEGIN
    IF sample NOT IN ('arrivals', 'processed', 'backlog') THEN
        RAISE EXCEPTION 'no samples for %', sample USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('SELECT array_agg(v) FROM pg_catalog.generate_series(1, 4) w CROSS JOIN LATERAL (
                      SELECT %s(s.%I)::float8 AS v FROM inbox.stats_minute s
                       WHERE s.provider = $1
                         AND s.minute >= $2 - w * interval ''7 days'' - interval ''30 minutes''
                         AND s.minute < $2 - w * interval ''7 days'' + interval ''30 minutes''
                       GROUP BY floor(extract(epoch FROM s.minute) / 900)) x', agg, sample)
      INTO result USING provider, t0;
    IF coalesce(cardinality(result), 0) >= min_samples THEN
        RETURN result;
    END IF;
    EXECUTE format('SELECT array_agg(v) FROM (
                      SELECT %s(s.%I)::float8 AS v FROM inbox.stats_minute s
                       WHERE s.provider = $1 AND s.minute >= $2 - interval ''7 days''
                         AND s.minute < $2 - interval ''15 minutes''
                       GROUP BY floor(extract(epoch FROM s.minute) / 900)) x', agg, sample)
      INTO result USING provider, t0;
    RETURN result;
END
$$;

-- The samples of a band change slowly: they are read once an hour.
CREATE TABLE inbox.band_samples (
    provider    text NOT NULL,
    sample      text NOT NULL,
    min_samples int NOT NULL,
    hour        timestamptz NOT NULL,
    samples     float8[],
    PRIMARY KEY (provider, sample, min_samples)
);
COMMENT ON TABLE inbox.band_samples IS 'learned-band samples per provider, recomputed once an hour';

CREATE FUNCTION inbox._band_samples(provider text, sample text, as_of timestamptz, min_samples int)
RETURNS float8[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cached inbox.band_samples;
BEGIN
    SELECT * INTO cached FROM inbox.band_samples b
     WHERE b.provider = _band_samples.provider AND b.sample = _band_samples.sample
       AND b.min_samples = _band_samples.min_samples;
    IF FOUND AND cached.hour = date_trunc('hour', as_of) THEN
        RETURN cached.samples;
    END IF;
    cached.samples := inbox._check_samples(provider, sample, as_of, min_samples);
    INSERT INTO inbox.band_samples AS b (provider, sample, min_samples, hour, samples)
    VALUES (provider, sample, min_samples, date_trunc('hour', as_of), cached.samples)
    ON CONFLICT ON CONSTRAINT band_samples_pkey DO UPDATE SET hour = EXCLUDED.hour, samples = EXCLUDED.samples;
    RETURN cached.samples;
END
$$;

-- A silence (since the last arrival, or since the sequence high mark last
-- rose) over the longest such pause of the 7 days before it, at least 10
-- minutes. The 7-day read happens only when the silence is long enough to
-- matter: below 1.5 times the 10-minute floor the ratio cannot fire.
CREATE FUNCTION inbox._silence_ratio(provider text, kind text, as_of timestamptz, since timestamptz)
RETURNS float8 LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    silence float8 := extract(epoch FROM as_of - since) - 60;  -- since the end of that minute
    usual float8;
BEGIN
    IF since IS NULL THEN
        RETURN NULL;
    END IF;
    IF silence <= 900 THEN
        RETURN silence / 600;
    END IF;
    IF kind = 'arrivals' THEN
        SELECT max(extract(epoch FROM x.gap)) INTO usual
          FROM (SELECT s.minute - lag(s.minute) OVER (ORDER BY s.minute) AS gap
                  FROM inbox.stats_minute s
                 WHERE s.provider = _silence_ratio.provider AND s.arrivals > 0
                   AND s.minute <= since AND s.minute >= since - interval '7 days') x;
    ELSE
        SELECT max(extract(epoch FROM y.gap)) INTO usual
          FROM (SELECT x.minute - lag(x.minute) OVER (ORDER BY x.minute) AS gap
                  FROM (SELECT s.minute, coalesce(s.max_seq > max(s.max_seq) OVER (ORDER BY s.minute
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), true) AS rose
                          FROM inbox.stats_minute s
                         WHERE s.provider = _silence_ratio.provider AND s.max_seq IS NOT NULL
                           AND s.minute <= since AND s.minute >= since - interval '7 days') x
                 WHERE x.rose) y;
    END IF;
    RETURN silence / greatest(coalesce(usual, 0), 600);
END
$$;

-- Every check's value at `at`, from the rollups only: one row per check and
-- provider ('*' for global checks). quiet: too little traffic for the value
-- to mean anything; such an evaluation counts as in range.
CREATE FUNCTION inbox._check_values(as_of timestamptz)
RETURNS TABLE (check_name text, provider text, value float8, quiet boolean)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    t0 timestamptz := date_trunc('minute', as_of);
    refreshed timestamptz := (SELECT max(s.refreshed_at) FROM inbox.stats_global s WHERE s.minute <= t0);
    -- Stale rollups say nothing about now: every check but stats_stale has
    -- no data, rather than reading silence into a refresh that did not run.
    stale boolean := refreshed IS NOT NULL AND extract(epoch FROM as_of - refreshed) >
                     (SELECT c.max_value FROM inbox._check_configs() c WHERE c.name = 'stats_stale' AND c.provider = '*');
BEGIN
    RETURN QUERY
    WITH w15 AS (
        SELECT s.provider, sum(s.arrivals) AS arrivals, sum(s.redeliveries) AS redeliveries,
               sum(s.claims) AS claims, sum(s.first_claims) AS first_claims, sum(s.processed) AS processed,
               sum(s.dead) AS dead, sum(s.lease_expiries) AS lease_expiries, max(s.max_seq) AS max_seq,
               max(s.skew_max_s) AS skew, inbox._hist_sum(s.latency_hist) AS lat,
               inbox._hist_sum(s.claim_hist) AS claim
          FROM inbox.stats_minute s WHERE s.minute >= t0 - interval '15 minutes' AND s.minute < t0
         GROUP BY s.provider
    ), w60 AS (
        SELECT s.provider, sum(s.processed) AS processed, sum(s.dead) AS dead,
               sum(s.backfill_gave_up) AS gave_up, sum(s.verify_mismatches) AS verify_mismatches,
               sum(s.payload_changed) AS payload_changed, sum(s.replay_suspects) AS replays,
               sum(s.missing_effects) AS missing_effects
          FROM inbox.stats_minute s WHERE s.minute >= t0 - interval '60 minutes' AND s.minute <= t0
         GROUP BY s.provider
    ), w24h AS (
        SELECT s.provider, sum(s.backfill_fetched) AS fetched, sum(s.backfill_not_found) AS not_found,
               sum(s.backfill_gave_up) AS gave_up, min(s.minute) AS first_minute
          FROM inbox.stats_minute s WHERE s.minute >= t0 - interval '24 hours' AND s.minute <= t0
         GROUP BY s.provider
    ), gauge AS (
        SELECT DISTINCT ON (s.provider) s.* FROM inbox.stats_minute s
         WHERE s.minute <= t0 AND s.minute > t0 - interval '10 minutes' AND s.backlog IS NOT NULL
         ORDER BY s.provider, s.minute DESC
    ), growth AS (
        -- consecutive rises of a backlog over 50, newest first
        SELECT x.provider, coalesce(min(x.rn) FILTER (WHERE NOT x.rose) - 1, max(x.rn)) AS rises
          FROM (SELECT s.provider, row_number() OVER (PARTITION BY s.provider ORDER BY s.minute DESC) AS rn,
                       coalesce(s.backlog > 50 AND s.backlog > lag(s.backlog) OVER (PARTITION BY s.provider ORDER BY s.minute), false) AS rose
                  FROM inbox.stats_minute s
                 WHERE s.minute > t0 - interval '10 minutes' AND s.minute <= t0 AND s.backlog IS NOT NULL) x
         GROUP BY x.provider
    ), widening AS (
        -- consecutive rises of the 5-minute p95, newest first, over 30 minutes
        SELECT y.provider, coalesce(min(y.rn) FILTER (WHERE NOT y.rose) - 1, max(y.rn)) AS rises
          FROM (SELECT b.provider, row_number() OVER (PARTITION BY b.provider ORDER BY b.bucket DESC) AS rn,
                       coalesce(b.p95 > lag(b.p95) OVER (PARTITION BY b.provider ORDER BY b.bucket), false) AS rose
                  FROM (SELECT s.provider, floor(extract(epoch FROM s.minute) / 300) AS bucket,
                               inbox._hist_percentile(inbox._hist_sum(s.latency_hist), 0.95) AS p95
                          FROM inbox.stats_minute s
                         WHERE s.minute >= t0 - interval '30 minutes' AND s.minute < t0
                           AND s.latency_hist IS NOT NULL
                         GROUP BY 1, 2) b) y
         GROUP BY y.provider
    ), silence AS (
        -- the last arrival, and the first minute the sequence high mark
        -- reached its present value: index reads, however long the history
        SELECT p.name AS provider,
               (SELECT max(s.minute) FROM inbox.stats_minute s
                 WHERE s.provider = p.name AND s.arrivals > 0
                   AND s.minute <= t0 AND s.minute >= t0 - interval '7 days') AS last_arrival,
               CASE WHEN src.kind = 'sequence' THEN
                 (SELECT min(s.minute) FROM inbox.stats_minute s
                   WHERE s.provider = p.name AND s.minute <= t0 AND s.minute >= t0 - interval '7 days'
                     AND s.max_seq = (SELECT max(s2.max_seq) FROM inbox.stats_minute s2
                                       WHERE s2.provider = p.name AND s2.minute <= t0
                                         AND s2.minute >= t0 - interval '7 days')) END AS last_rise,
               -- the high mark is a running maximum: its last sample before the window
               CASE WHEN src.kind = 'sequence' THEN
                 (SELECT s.high_seq FROM inbox.stats_minute s
                   WHERE s.provider = p.name AND s.high_seq IS NOT NULL AND s.minute < t0 - interval '15 minutes'
                     AND s.minute >= t0 - interval '1 day' ORDER BY s.minute DESC LIMIT 1) END AS earlier_high,
               (SELECT min(s.minute) FROM inbox.stats_minute s
                 WHERE s.provider = p.name AND s.minute >= t0 - interval '35 days') AS first_minute
          FROM inbox.providers p LEFT JOIN inbox.gap_sources src ON src.provider = p.name
    ), errors AS (
        SELECT c.provider, count(*) FILTER (WHERE c.first_seen_at > as_of - interval '1 hour' AND c.first_seen_at <= as_of) AS fresh
          FROM inbox.error_classes c GROUP BY c.provider
    ), rx AS (
        SELECT r.provider, sum(r.requests_2xx + r.requests_4xx + r.requests_5xx) AS requests,
               sum(r.signature_failures) AS sig, sum(r.refused_bodies) AS refused,
               sum(r.db_unavailable) AS unavailable, sum(r.duplicates) AS duplicates
          FROM inbox.receiver_stats r WHERE r.minute >= t0 - interval '15 minutes' AND r.minute < t0
         GROUP BY r.provider
    ), claims_any AS (
        SELECT coalesce(sum(s.claims), 0) AS claims FROM inbox.stats_minute s
         WHERE s.minute >= t0 - interval '5 minutes' AND s.minute <= t0
    ), refs AS (
        SELECT rf.provider, bool_or(rf.kind = 'reference') AS has_reference, bool_or(rf.kind = 'effect') AS has_effect
          FROM inbox.references rf GROUP BY rf.provider
    )
    SELECT v.check_name, p.name, CASE WHEN NOT stale THEN v.value::float8 END, coalesce(v.quiet, false)
      FROM inbox.providers p
      LEFT JOIN w15 ON w15.provider = p.name
      LEFT JOIN w60 ON w60.provider = p.name
      LEFT JOIN w24h ON w24h.provider = p.name
      LEFT JOIN gauge g ON g.provider = p.name
      LEFT JOIN growth gr ON gr.provider = p.name
      LEFT JOIN widening wd ON wd.provider = p.name
      LEFT JOIN silence si ON si.provider = p.name
      LEFT JOIN errors er ON er.provider = p.name
      LEFT JOIN rx ON rx.provider = p.name
      LEFT JOIN refs rf ON rf.provider = p.name
      LEFT JOIN inbox.gap_sources src ON src.provider = p.name
      CROSS JOIN claims_any ca
      CROSS JOIN LATERAL (VALUES
        ('latency_p50', inbox._hist_percentile(w15.lat, 0.5), NULL::boolean),
        ('latency_p95', inbox._hist_percentile(w15.lat, 0.95), NULL),
        ('latency_p99', inbox._hist_percentile(w15.lat, 0.99), NULL),
        ('latency_widening', wd.rises::float8, NULL),
        ('first_claim_delay', inbox._hist_percentile(w15.claim, 0.95), NULL),
        ('oldest_pending_age', CASE WHEN g.provider IS NOT NULL THEN coalesce(g.oldest_pending_s, 0) END, NULL),
        ('leases_overdue', g.leases_overdue::float8, NULL),
        ('backlog_size', g.backlog::float8, NULL),
        ('backlog_growing', gr.rises::float8, NULL),
        ('processing_rate_drop', coalesce(w15.processed, 0)::float8, coalesce(g.backlog, 0) < 10),
        ('claim_starvation', g.due_unclaimed::float8, ca.claims = 0),
        ('arrivals_low', CASE WHEN si.first_minute IS NOT NULL THEN coalesce(w15.arrivals, 0) END::float8, NULL),
        ('arrivals_spike', CASE WHEN si.first_minute IS NOT NULL THEN coalesce(w15.arrivals, 0) END::float8, NULL),
        ('provider_silent', inbox._silence_ratio(p.name, 'arrivals', as_of, si.last_arrival), NULL),
        ('deliveries_per_event', (coalesce(w15.arrivals, 0) + coalesce(w15.redeliveries, 0) + coalesce(rx.duplicates, 0))::float8
                                 / nullif(w15.arrivals, 0), coalesce(w15.arrivals, 0) < 20),
        ('redeliveries_processed', coalesce(rx.duplicates, 0)::float8 / greatest(w15.arrivals, 1),
                                   coalesce(rx.duplicates, 0) + coalesce(w15.arrivals, 0) < 20),
        ('intake_unavailable', rx.unavailable::float8 / nullif(rx.requests, 0), coalesce(rx.requests, 0) < 20),
        ('refused_bodies', coalesce(rx.refused, 0)::float8, NULL),
        ('retry_ratio', (w15.claims - w15.first_claims)::float8 / nullif(w15.claims, 0), coalesce(w15.claims, 0) < 20),
        ('dead_new', coalesce(w15.dead, 0)::float8, NULL),
        ('dead_ratio', w60.dead::float8 / nullif(w60.processed + w60.dead, 0), coalesce(w60.processed + w60.dead, 0) < 20),
        ('new_error_class', coalesce(er.fresh, 0)::float8, si.first_minute IS NULL OR si.first_minute > as_of - interval '1 day'),
        ('lease_expiry_rate', w15.lease_expiries::float8 / nullif(w15.claims, 0), coalesce(w15.claims, 0) < 20),
        ('held_events', g.held::float8, NULL),
        ('gaps_past_grace', g.gaps_past_grace::float8, NULL),
        ('oldest_gap_age', CASE WHEN g.provider IS NOT NULL THEN coalesce(g.oldest_gap_s, 0) END, NULL),
        ('backfill_failures', coalesce(w60.gave_up, 0)::float8, NULL),
        ('backfill_not_found_ratio', w24h.not_found::float8 / nullif(w24h.fetched + w24h.not_found + w24h.gave_up, 0),
                                     coalesce(w24h.fetched + w24h.not_found + w24h.gave_up, 0) < 10),
        ('sequence_regression', CASE WHEN src.kind = 'sequence' AND w15.max_seq IS NOT NULL
                                     THEN greatest(coalesce(si.earlier_high, 0) - w15.max_seq, 0) END::float8,
                                NULL),
        ('sequence_tail_silence', CASE WHEN src.kind = 'sequence' THEN
                                       inbox._silence_ratio(p.name, 'sequence', as_of, si.last_rise) END, NULL),
        ('orphan_references', CASE WHEN rf.has_reference THEN coalesce(g.orphans, 0) END::float8, NULL),
        ('missing_effects', CASE WHEN rf.has_effect THEN coalesce(w60.missing_effects, 0) END::float8, NULL),
        ('verify_mismatch', coalesce(w60.verify_mismatches, 0)::float8, NULL),
        ('payload_changed_processing', coalesce(w60.payload_changed, 0)::float8, NULL),
        ('replay_suspect', coalesce(w60.replays, 0)::float8, NULL),
        ('signature_failure_rate', rx.sig::float8 / nullif(rx.requests, 0), coalesce(rx.requests, 0) < 20),
        ('timestamp_skew', w15.skew, NULL)
      ) AS v (check_name, value, quiet)
    UNION ALL
    SELECT v.check_name, '*', CASE WHEN NOT stale OR v.check_name = 'stats_stale' THEN v.value::float8 END,
           coalesce(v.quiet, false)
      FROM (SELECT refreshed AS refreshed_at,
                   (SELECT sum(s.cron_failures) FROM inbox.stats_global s
                     WHERE s.minute >= t0 - interval '15 minutes' AND s.minute <= t0) AS cron_failures,
                   (SELECT bool_or(s.cron_failures IS NOT NULL) FROM inbox.stats_global s
                     WHERE s.minute >= t0 - interval '15 minutes' AND s.minute <= t0) AS has_cron,
                   (SELECT s FROM inbox.stats_global s WHERE s.minute <= t0 ORDER BY s.minute DESC LIMIT 1) AS last,
                   EXISTS (SELECT 1 FROM inbox.gap_sources) AS has_sources,
                   (SELECT coalesce(sum(s.dead), 0) FROM inbox.stats_minute s
                     WHERE s.provider LIKE 'outbox:%' AND s.minute >= t0 - interval '15 minutes'
                       AND s.minute < t0) AS outbox_dead) gl
      CROSS JOIN LATERAL (VALUES
        ('stats_stale', extract(epoch FROM as_of - gl.refreshed_at)::float8, NULL::boolean),
        ('reconcile_stale', extract(epoch FROM as_of - (gl.last).last_reconcile_at)::float8, NULL),
        ('gap_scan_stale', CASE WHEN gl.has_sources THEN
                                coalesce(extract(epoch FROM as_of - (gl.last).last_gap_scan_at)::float8, 'Infinity') END, NULL),
        ('cron_failing', CASE WHEN gl.has_cron THEN gl.cron_failures::float8 END, NULL),
        ('events_dead_tuples', (gl.last).dead_tuple_ratio, coalesce((gl.last).dead_tuples, 0) < 10000),
        ('autovacuum_lag', coalesce((gl.last).vacuum_age_s, 'Infinity'::float8), coalesce((gl.last).dead_tuples, 0) < 10000),
        ('xid_age', (gl.last).xid_age::float8, NULL),
        ('outbox_dead_new', gl.outbox_dead::float8, NULL)
      ) AS v (check_name, value, quiet);
END
$$;

-- The one place a check changes state: opens or closes its anomaly.
-- (Alerts, issue 9, are written here, in the same transaction.)
CREATE FUNCTION inbox._check_transition(check_name text, provider text, started boolean, as_of timestamptz,
                                        value float8, range_lo float8, range_hi float8,
                                        severity text, data_loss boolean)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    anomaly bigint;
BEGIN
    IF started THEN
        -- An episode still open (its state was reset by hand) goes on.
        INSERT INTO inbox.anomalies AS a (check_name, provider, severity, data_loss, first_seen_at, last_seen_at,
                                          first_value, worst_value, last_value, range_lo, range_hi)
        VALUES (_check_transition.check_name, _check_transition.provider, _check_transition.severity,
                _check_transition.data_loss, as_of, as_of, _check_transition.value, _check_transition.value,
                _check_transition.value, _check_transition.range_lo, _check_transition.range_hi)
        ON CONFLICT (check_name, provider) WHERE resolved_at IS NULL
        DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at, last_value = EXCLUDED.last_value
        RETURNING a.id INTO anomaly;
    ELSE
        UPDATE inbox.anomalies a SET resolved_at = as_of, last_seen_at = as_of
         WHERE a.check_name = _check_transition.check_name AND a.provider = _check_transition.provider
           AND a.resolved_at IS NULL
        RETURNING a.id INTO anomaly;
    END IF;
    -- Issue 9 (sql/src/73_alerts.sql): the alert row, in this transaction.
    IF anomaly IS NOT NULL THEN
        PERFORM inbox._write_alert(anomaly, CASE WHEN started THEN 'firing' ELSE 'resolved' END);
    END IF;
    RETURN anomaly;
END
$$;

CREATE FUNCTION inbox._check_band(samples float8[], k float8, min_samples int)
RETURNS float8[] AS 'MODULE_PATHNAME', 'inbox_check_band'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inbox._check_band(float8[], float8, int) IS
  '{lo, hi, median}: median +- k * max(1.4826 * MAD, sqrt(median), 1); NULL below min_samples';

CREATE FUNCTION inbox._check_step(was_firing boolean, recent boolean[], ok_streak int,
                                  fire_after int, resolve_after int)
RETURNS int[] AS 'MODULE_PATHNAME', 'inbox_check_step'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inbox._check_step(boolean, boolean[], int, int, int) IS
  '{firing, ok_streak, started, resolved}: fire after fire_after of recent out of range, resolve after resolve_after in range';

-- Evaluates every enabled check once (at: the time to evaluate at, now by
-- default; tests and the fault matrix pass past times). One run at a time:
-- a second concurrent run returns {"skipped": "busy"}. A check that starts
-- firing runs a reconciliation pass, reconcile('anomaly:<check>'), once per
-- run for the most severe of them.
CREATE FUNCTION inbox.run_checks("at" timestamptz DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t timestamptz := coalesce(run_checks."at", now());
    r record;
    st inbox.check_state;
    band float8[];
    lo float8;
    hi float8;
    out_of_range boolean;
    new_state text;
    recent boolean[];
    stepped int[];
    anomaly bigint;
    started text[] := '{}';
    started_sev text[] := '{}';
    resolved text[] := '{}';
    firing int := 0;
    evaluated int := 0;
    pass jsonb;
    trigger_check text;
BEGIN
    IF NOT isfinite(t) THEN
        RAISE EXCEPTION 'at must be a finite time' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(1885957733, 2) THEN
        RETURN jsonb_build_object('skipped', 'busy');
    END IF;
    FOR r IN
        SELECT v.check_name, v.value, v.quiet, c.*
          FROM inbox._check_values(t) v
          JOIN inbox._check_configs() c ON c.name = v.check_name AND c.provider = v.provider
         ORDER BY v.check_name, v.provider
    LOOP
        CONTINUE WHEN NOT r.enabled;
        evaluated := evaluated + 1;
        lo := r.min_value;
        hi := r.max_value;
        band := NULL;
        IF r.mode = 'learned' AND r.value IS NOT NULL THEN
            band := inbox._check_band(inbox._band_samples(r.provider, r.sample, t, r.min_samples),
                                      r.k, r.min_samples);
            -- A fixed limit still bounds a learned band: the band never
            -- tolerates more than the user allowed.
            lo := CASE WHEN r.side = 'low' AND band IS NOT NULL THEN greatest(band[1], r.min_value) END;
            hi := CASE WHEN r.side = 'high' AND band IS NOT NULL THEN least(band[2], r.max_value) END;
        END IF;
        IF r.value IS NULL OR (r.mode = 'learned' AND band IS NULL) THEN
            new_state := 'no_data';
            out_of_range := false;
        ELSE
            out_of_range := NOT r.quiet AND (r.value > hi OR r.value < lo) IS TRUE;
        END IF;

        SELECT * INTO st FROM inbox.check_state s
         WHERE s.check_name = r.check_name AND s.provider = r.provider FOR UPDATE;
        recent := coalesce(st.recent, '{}') || out_of_range;
        recent := recent[greatest(1, cardinality(recent) - r.window_size + 1):];
        stepped := inbox._check_step(coalesce(st.firing, false), recent, coalesce(st.ok_streak, 0),
                                     r.fire_after, r.resolve_after);
        anomaly := st.anomaly_id;
        IF stepped[3] = 1 OR stepped[4] = 1 THEN
            anomaly := inbox._check_transition(r.check_name, r.provider, stepped[3] = 1, t, r.value, lo, hi,
                                               r.severity, r.data_loss);
            IF stepped[3] = 1 THEN
                started := started || r.check_name;
                started_sev := started_sev || (r.severity || ' ' || r.check_name);
            ELSE
                resolved := resolved || r.check_name;
                anomaly := NULL;
                recent := '{}';
            END IF;
        ELSIF stepped[1] = 1 THEN
            UPDATE inbox.anomalies a
               SET last_seen_at = t, last_value = r.value,
                   worst_value = CASE WHEN r.side = 'low' THEN least(a.worst_value, r.value)
                                      ELSE greatest(a.worst_value, r.value) END
             WHERE a.id = anomaly;
        END IF;
        IF stepped[1] = 1 THEN
            new_state := 'firing';
            firing := firing + 1;
        ELSIF r.value IS NOT NULL AND NOT (r.mode = 'learned' AND band IS NULL) THEN
            new_state := 'ok';
        END IF;
        INSERT INTO inbox.check_state AS s (check_name, provider, state, firing, recent, ok_streak, anomaly_id,
                                            value, range_lo, range_hi, evaluated_at)
        VALUES (r.check_name, r.provider, new_state, stepped[1] = 1, recent, stepped[2], anomaly,
                r.value, lo, hi, t)
        ON CONFLICT ON CONSTRAINT check_state_pkey DO UPDATE
           SET state = EXCLUDED.state, firing = EXCLUDED.firing, recent = EXCLUDED.recent,
               ok_streak = EXCLUDED.ok_streak, anomaly_id = EXCLUDED.anomaly_id, value = EXCLUDED.value,
               range_lo = EXCLUDED.range_lo, range_hi = EXCLUDED.range_hi, evaluated_at = EXCLUDED.evaluated_at;
        INSERT INTO inbox.check_results (evaluated_at, check_name, provider, state, value, range_lo, range_hi,
                                         out_of_range)
        VALUES (t, r.check_name, r.provider, new_state, r.value, lo, hi, out_of_range);
    END LOOP;
    DELETE FROM inbox.check_results c WHERE c.evaluated_at < t - interval '24 hours';

    IF cardinality(started) > 0 THEN
        SELECT split_part(x, ' ', 2) INTO trigger_check FROM unnest(started_sev) x ORDER BY x LIMIT 1;
        pass := inbox.reconcile('anomaly:' || trigger_check);
        UPDATE inbox.anomalies a SET reconcile_run_id = (pass ->> 'run_id')::bigint
         WHERE a.resolved_at IS NULL AND a.first_seen_at = t AND a.check_name = ANY (started);
    END IF;
    RETURN jsonb_build_object('at', t, 'evaluated', evaluated, 'firing', firing,
                              'started', to_jsonb(started), 'resolved', to_jsonb(resolved),
                              'reconcile', pass);
END
$$;
COMMENT ON FUNCTION inbox.run_checks(timestamptz) IS
  'Evaluate every check once (at now, or a given time); {"skipped":"busy"} when another run holds the lock';

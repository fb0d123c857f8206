-- Alerts (docs/alerts.md). A check that starts firing or resolves writes a
-- row of inbox.alerts in the same transaction (inbox._check_transition):
-- an outbox, nothing is sent from inside Postgres. The sidecar
-- (inbox-receiver alerts) reads the recent rows and, before sending one,
-- claims its key for the severity's window with inbox.claim_alert, so any
-- number of replicas, restarts and deploys send it once per window.

-- What "the same alert" means, for the rows below and for the sidecar's own
-- alerts (receiver/alerts/alert.h mirrors it; a test compares the two).
CREATE FUNCTION inbox.alert_key(check_name text, provider text, state text)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT check_name || '/' || provider || '/' || state
$$;
COMMENT ON FUNCTION inbox.alert_key(text, text, text) IS
  'the deduplication key of an alert: check/provider/state';

CREATE TABLE inbox.alerts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    key         text NOT NULL,
    check_name  text NOT NULL,
    provider    text NOT NULL,                    -- '*' for global checks
    state       text NOT NULL CHECK (state IN ('firing', 'resolved')),
    severity    text NOT NULL CHECK (severity IN ('P0', 'P1', 'P2', 'P3')),
    data_loss   boolean NOT NULL,
    anomaly_id  bigint,
    since       timestamptz,                      -- when the episode started firing
    value       float8,
    range_lo    float8,
    range_hi    float8,
    summary     text NOT NULL
);
CREATE INDEX alerts_created_idx ON inbox.alerts (created_at);
COMMENT ON TABLE inbox.alerts IS
  'outbox of alerts: one row per check that started firing or resolved (kept 30 days)';

-- The shared dedup store: a key is claimed until expires_at.
CREATE TABLE inbox.alert_claims (
    key         text PRIMARY KEY,
    claimed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX alert_claims_expires_idx ON inbox.alert_claims (expires_at);
COMMENT ON TABLE inbox.alert_claims IS
  'alert keys claimed by a sender, each until its own expires_at (inbox.claim_alert)';

-- Writes the alert of one anomaly's transition; called by
-- inbox._check_transition only. Alerts older than 30 days are deleted.
CREATE FUNCTION inbox._write_alert(anomaly bigint, state text)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    a inbox.anomalies;
    d record;
    alert bigint;
BEGIN
    SELECT * INTO a FROM inbox.anomalies x WHERE x.id = anomaly;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT c.description, c.unit INTO d FROM inbox._check_definitions() c WHERE c.name = a.check_name;
    INSERT INTO inbox.alerts (key, check_name, provider, state, severity, data_loss, anomaly_id, since,
                              value, range_lo, range_hi, summary)
    VALUES (inbox.alert_key(a.check_name, a.provider, state), a.check_name, a.provider, state, a.severity,
            a.data_loss, a.id, a.first_seen_at, a.last_value, a.range_lo, a.range_hi,
            format('%s %s %s: %s %s (allowed %s..%s): %s', a.severity, a.check_name,
                   CASE WHEN state = 'firing' THEN 'firing' ELSE 'resolved' END
                   || CASE WHEN a.provider = '*' THEN '' ELSE ' for ' || a.provider END,
                   coalesce(round(a.last_value::numeric, 3)::float8::text, 'no value'), coalesce(d.unit, ''),
                   coalesce(round(a.range_lo::numeric, 3)::float8::text, ''),
                   coalesce(round(a.range_hi::numeric, 3)::float8::text, ''), coalesce(d.description, '')))
    RETURNING id INTO alert;
    DELETE FROM inbox.alerts x WHERE x.created_at < now() - interval '30 days';
    RETURN alert;
END
$$;

-- The alerts of the last `since`, oldest first: what a sender looks at. A
-- sender that started a minute ago sees what fired before it started, and
-- the claims keep it from sending what another replica already sent.
CREATE FUNCTION inbox.recent_alerts(since interval DEFAULT '15 minutes', max_rows int DEFAULT 1000)
RETURNS SETOF inbox.alerts LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp ROWS 10 AS $$
BEGIN
    IF since IS NULL OR max_rows IS NULL THEN
        RAISE EXCEPTION 'since and max_rows must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF since < interval '1 second' OR since > interval '7 days' THEN
        RAISE EXCEPTION 'since must be between 1 second and 7 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_rows < 1 OR max_rows > 10000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 10000, not %', max_rows
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT * FROM (SELECT * FROM inbox.alerts a WHERE a.created_at > now() - recent_alerts.since
                        ORDER BY a.id DESC LIMIT recent_alerts.max_rows) newest
         ORDER BY newest.id;
END
$$;

-- Set-if-absent-with-expiry: true when the caller now holds `key` for
-- `window` (it was absent, or its claim had expired), false when another
-- sender holds it. One statement: concurrent claims of a key serialise on
-- it, and exactly one of them wins. Each entry keeps its own expiry; a few
-- expired entries (and only expired ones) are deleted by every call.
CREATE FUNCTION inbox.claim_alert(key text, "window" interval)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    won boolean;
BEGIN
    IF claim_alert.key IS NULL OR claim_alert."window" IS NULL THEN
        RAISE EXCEPTION 'key and window must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF claim_alert.key = '' THEN
        RAISE EXCEPTION 'key must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(claim_alert.key) > 500 THEN
        RAISE EXCEPTION 'key is % bytes, over the limit of 500', octet_length(claim_alert.key)
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    IF claim_alert."window" <= interval '0' OR claim_alert."window" > interval '30 days' THEN
        RAISE EXCEPTION 'window must be positive and at most 30 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.alert_claims AS c (key, claimed_at, expires_at)
    VALUES (claim_alert.key, now(), now() + claim_alert."window")
    ON CONFLICT ON CONSTRAINT alert_claims_pkey DO UPDATE
       SET claimed_at = EXCLUDED.claimed_at, expires_at = EXCLUDED.expires_at
     WHERE c.expires_at <= now()
    RETURNING true INTO won;
    DELETE FROM inbox.alert_claims c
     WHERE c.key IN (SELECT x.key FROM inbox.alert_claims x
                      WHERE x.expires_at <= now() AND x.key <> claim_alert.key
                      ORDER BY x.expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)
       AND c.expires_at <= now();
    RETURN coalesce(won, false);
END
$$;
COMMENT ON FUNCTION inbox.claim_alert(text, interval) IS
  'true: the caller holds key for window and sends the alert; false: another sender holds it';

-- Everything the status page shows, in one document: inbox.health_summary()
-- plus 24 hours of arrivals, processed and p95 latency (15-minute buckets,
-- all providers), the backfill queue, and the last alerts.
CREATE FUNCTION inbox.status_report()
RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH buckets AS (
        SELECT b AS bucket
          FROM pg_catalog.generate_series(
                   to_timestamp(floor(extract(epoch FROM now()) / 900) * 900) - interval '23 hours 45 minutes',
                   to_timestamp(floor(extract(epoch FROM now()) / 900) * 900), interval '15 minutes') b
    ), sums AS (
        SELECT to_timestamp(floor(extract(epoch FROM s.minute) / 900) * 900) AS bucket,
               sum(s.arrivals) AS arrivals, sum(s.processed) AS processed,
               inbox._hist_sum(s.latency_hist) AS hist
          FROM inbox.stats_minute s
         WHERE s.minute >= now() - interval '24 hours 15 minutes'
         GROUP BY 1
    )
    SELECT inbox.health_summary() || jsonb_build_object(
        'series', jsonb_build_object(
            'bucket_seconds', 900,
            'start', (SELECT min(bucket) FROM buckets),
            'arrivals', (SELECT jsonb_agg(coalesce(s.arrivals, 0) ORDER BY b.bucket)
                           FROM buckets b LEFT JOIN sums s USING (bucket)),
            'processed', (SELECT jsonb_agg(coalesce(s.processed, 0) ORDER BY b.bucket)
                            FROM buckets b LEFT JOIN sums s USING (bucket)),
            'p95_seconds', (SELECT jsonb_agg(inbox._hist_percentile(s.hist, 0.95) ORDER BY b.bucket)
                              FROM buckets b LEFT JOIN sums s USING (bucket))),
        'backfill', (SELECT jsonb_build_object(
                         'waiting', count(*) FILTER (WHERE r.status IN ('pending', 'leased')),
                         'fetched_24h', count(*) FILTER (WHERE r.status IN ('fetched', 'arrived')
                                                           AND r.finished_at > now() - interval '24 hours'),
                         'not_found_24h', count(*) FILTER (WHERE r.status = 'not_found'
                                                             AND r.finished_at > now() - interval '24 hours'),
                         'gave_up_24h', count(*) FILTER (WHERE r.status = 'gave_up'
                                                           AND r.finished_at > now() - interval '24 hours'))
                       FROM inbox.backfill_requests r
                      WHERE r.status IN ('pending', 'leased') OR r.finished_at > now() - interval '24 hours'),
        'alerts', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'at', a.created_at, 'check', a.check_name, 'provider', a.provider,
                                'state', a.state, 'severity', a.severity) ORDER BY a.id DESC)
                              FROM (SELECT * FROM inbox.alerts x WHERE x.created_at > now() - interval '24 hours'
                                     ORDER BY x.id DESC LIMIT 20) a), '[]'))
$$;
COMMENT ON FUNCTION inbox.status_report() IS
  'health_summary() plus 24 hours of arrivals, processed and p95 latency, the backfill queue and the last alerts';

-- inbox_alerter: what an alert sender needs (read the recent alerts, claim
-- keys) and nothing else. inbox_monitor may also read the status report.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_alerter') THEN
        CREATE ROLE inbox_alerter NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA inbox TO inbox_alerter;
GRANT EXECUTE ON FUNCTION inbox.recent_alerts(interval, int), inbox.claim_alert(text, interval),
                          inbox.alert_key(text, text, text) TO inbox_alerter;
GRANT EXECUTE ON FUNCTION inbox.status_report() TO inbox_monitor;

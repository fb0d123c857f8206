-- "Did we lose anything?", answered per provider at a glance.
--   losing:   a data-loss check is firing, a gap is past its grace period, or
--             events went dead (last 24 hours) or are held for a person;
--             an outbox topic whose messages went dead has a row of its own,
--             provider 'outbox:<topic>', losing for 24 hours;
--   degraded: any other check is firing (slow, retrying, the watcher itself),
--             or the statistics are stale;
--   ok:       none of that.
-- Reads the rollups' latest gauges, the open anomalies and the last passes:
-- never the events table.
CREATE VIEW inbox.health AS
WITH gauge AS (
    SELECT DISTINCT ON (s.provider) s.provider, s.backlog, s.oldest_pending_s, s.held, s.open_gaps,
           s.gaps_past_grace, s.oldest_gap_s
      FROM inbox.stats_minute s
     WHERE s.backlog IS NOT NULL AND s.minute > now() - interval '1 day'
     ORDER BY s.provider, s.minute DESC
), dead AS (
    SELECT s.provider, sum(s.dead) AS dead FROM inbox.stats_minute s
     WHERE s.minute > now() - interval '24 hours' GROUP BY s.provider
), firing AS (
    SELECT a.provider, array_agg(a.check_name ORDER BY a.check_name) AS checks, bool_or(a.data_loss) AS loss
      FROM inbox.anomalies a WHERE a.resolved_at IS NULL GROUP BY a.provider
), refreshed AS (
    SELECT max(st.refreshed_at) AS at FROM inbox.stats_state st
), reconciled AS (
    SELECT r.started_at AS at FROM inbox.reconcile_runs r WHERE NOT r.skipped ORDER BY r.started_at DESC LIMIT 1
), facts AS (
    SELECT p.name AS provider, g.backlog, g.oldest_pending_s, coalesce(g.held, 0) AS held,
           coalesce(g.open_gaps, 0) AS open_gaps, coalesce(g.gaps_past_grace, 0) AS gaps_past_grace,
           g.oldest_gap_s, coalesce(d.dead, 0) AS dead_24h, coalesce(f.loss, false) AS loss,
           coalesce(f.checks, '{}') || coalesce(fg.checks, '{}') AS firing_checks,
           refreshed.at AS stats_refreshed_at,
           refreshed.at IS NULL OR refreshed.at < now() - interval '3 minutes' AS stale,
           (SELECT rc.at FROM reconciled rc) AS last_reconcile_at, src.last_scan_at AS last_gap_scan_at
      FROM (SELECT pr.name FROM inbox.providers pr
            -- outbox topics whose messages went dead (issue 11), as 'outbox:<topic>'
            UNION SELECT s.provider FROM inbox.stats_minute s
             WHERE s.provider LIKE 'outbox:%' AND s.dead > 0 AND s.minute > now() - interval '24 hours') p
      LEFT JOIN gauge g ON g.provider = p.name
      LEFT JOIN dead d ON d.provider = p.name
      LEFT JOIN firing f ON f.provider = p.name
      LEFT JOIN firing fg ON fg.provider = '*'
      LEFT JOIN inbox.gap_sources src ON src.provider = p.name
      CROSS JOIN refreshed
)
SELECT x.provider,
       CASE WHEN x.loss OR x.gaps_past_grace > 0 OR x.held > 0 OR x.dead_24h > 0 THEN 'losing'
            WHEN cardinality(x.firing_checks) > 0 OR x.stale THEN 'degraded'
            ELSE 'ok' END AS verdict,
       array_remove(ARRAY[
           CASE WHEN x.loss THEN 'a data-loss check is firing' END,
           CASE WHEN x.gaps_past_grace > 0 THEN x.gaps_past_grace || ' gaps past their grace period' END,
           CASE WHEN x.held > 0 THEN x.held || ' events held for a person' END,
           CASE WHEN x.dead_24h > 0 THEN x.dead_24h || ' events went dead in 24 hours' END,
           CASE WHEN cardinality(x.firing_checks) > 0 AND NOT x.loss THEN 'checks firing' END,
           CASE WHEN x.stats_refreshed_at IS NULL THEN 'statistics never refreshed: schedule inbox.refresh_stats'
                WHEN x.stale THEN 'statistics are stale' END], NULL) AS reasons,
       x.firing_checks,
       x.backlog,
       make_interval(secs => x.oldest_pending_s) AS oldest_pending_age,
       x.held,
       x.dead_24h,
       x.open_gaps,
       x.gaps_past_grace,
       make_interval(secs => x.oldest_gap_s) AS oldest_gap_age,
       x.last_reconcile_at,
       x.last_gap_scan_at,
       x.stats_refreshed_at
  FROM facts x;
COMMENT ON VIEW inbox.health IS
  'one row per provider: verdict ok / degraded / losing, why, and the counts and ages behind it';

-- inbox.health and the open anomalies as one JSON document, for the sidecar.
CREATE FUNCTION inbox.health_summary()
RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT jsonb_build_object(
        'generated_at', now(),
        'verdict', coalesce((SELECT CASE max(CASE h.verdict WHEN 'losing' THEN 2 WHEN 'degraded' THEN 1 ELSE 0 END)
                                     WHEN 2 THEN 'losing' WHEN 1 THEN 'degraded' ELSE 'ok' END
                               FROM inbox.health h), 'ok'),
        'stats_refreshed_at', (SELECT max(st.refreshed_at) FROM inbox.stats_state st),
        'providers', coalesce((SELECT jsonb_agg(to_jsonb(h) ORDER BY h.provider) FROM inbox.health h), '[]'),
        'firing', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'check', a.check_name, 'provider', a.provider, 'severity', a.severity,
                                'data_loss', a.data_loss, 'since', a.first_seen_at, 'last_seen', a.last_seen_at,
                                'value', a.last_value, 'worst', a.worst_value,
                                'range', jsonb_build_array(a.range_lo, a.range_hi))
                                ORDER BY a.severity, a.first_seen_at)
                              FROM inbox.anomalies a WHERE a.resolved_at IS NULL), '[]'))
$$;
COMMENT ON FUNCTION inbox.health_summary() IS 'inbox.health and the firing checks as one JSON document';

-- inbox_monitor reads the verdict and nothing else; the receiver (its role
-- is created in 00_schema.sql) may report its counters.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_monitor') THEN
        CREATE ROLE inbox_monitor NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA inbox TO inbox_monitor;
GRANT SELECT ON inbox.health TO inbox_monitor;
GRANT EXECUTE ON FUNCTION inbox.health_summary() TO inbox_monitor;
GRANT EXECUTE ON FUNCTION inbox.report_receiver_stats(jsonb) TO inbox_receiver;

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

-- Issue 8: the inbox watches itself: rollups, anomaly checks, inbox.health
-- (sql/src/70_rollups.sql, 71_checks.sql, 72_health.sql, and the jobs
-- refresh and checks in 60_schedule.sql).

-- Rollups: what the anomaly checks read (docs/checks.md). inbox.refresh_stats()
-- turns what happened since its last run into per-provider, per-minute rows
-- of inbox.stats_minute (counters and latency histograms) and samples gauges
-- (backlog, oldest pending, gaps, held) into the current minute. Checks never
-- read the tables the intake writes. The cost of a refresh is bounded by the
-- window and the open set, never by the table: new events are read by id
-- past a watermark, events that were open are re-read one by one from a
-- snapshot of their previous state (inbox.stats_seen), and everything else
-- through indexes on time.

-- Latency histograms: int[120], bucket i counts durations below 2^(i/4) ms
-- (extension/checks_math.hpp). Percentiles of any window: sum, then read.
CREATE FUNCTION inbox._hist_bucket(seconds float8)
RETURNS int AS 'MODULE_PATHNAME', 'inbox_hist_bucket'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION inbox._hist_percentile(hist int[], q float8)
RETURNS float8 AS 'MODULE_PATHNAME', 'inbox_hist_percentile'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inbox._hist_percentile(int[], float8) IS
  'upper edge in seconds of the histogram bucket holding quantile q; NULL when empty';

CREATE FUNCTION inbox._hist_add(a int[], b int[])
RETURNS int[] AS 'MODULE_PATHNAME', 'inbox_hist_add'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE inbox._hist_sum(int[]) (SFUNC = inbox._hist_add, STYPE = int[]);

-- A histogram of durations in seconds, as an aggregate over rows.
CREATE FUNCTION inbox._hist_of(buckets int[])
RETURNS int[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cardinality(buckets) > 0 THEN
           ARRAY(SELECT count(b.b)::int
                   FROM pg_catalog.generate_series(1, (SELECT max(x) FROM unnest(buckets) x)) i
                   LEFT JOIN unnest(buckets) b(b) ON b.b = i
                  GROUP BY i ORDER BY i) END
$$;

-- Per provider and minute. Counters are added to the minute their event
-- happened in; gauges are sampled by the refresh that ran in the minute.
CREATE TABLE inbox.stats_minute (
    provider           text NOT NULL,
    minute             timestamptz NOT NULL,
    arrivals           int NOT NULL DEFAULT 0,  -- new events, by first_received_at
    backfilled         int NOT NULL DEFAULT 0,  -- of which source = 'backfill'
    redeliveries       int NOT NULL DEFAULT 0,  -- re-deliveries of open events
    claims             int NOT NULL DEFAULT 0,  -- attempts started
    first_claims       int NOT NULL DEFAULT 0,
    processed          int NOT NULL DEFAULT 0,  -- became done, by processed_at
    dead               int NOT NULL DEFAULT 0,  -- became dead, by processed_at
    lease_expiries     int NOT NULL DEFAULT 0,  -- reclaimed or held by reconcile
    verify_mismatches  int NOT NULL DEFAULT 0,
    payload_changed    int NOT NULL DEFAULT 0,  -- re-delivery changed the payload while processing
    replay_suspects    int NOT NULL DEFAULT 0,  -- same payload as another new event, other id
    missing_effects    int NOT NULL DEFAULT 0,  -- done, no row in a registered effect table
    tombstoned         int NOT NULL DEFAULT 0,
    backfill_fetched   int NOT NULL DEFAULT 0,
    backfill_not_found int NOT NULL DEFAULT 0,
    backfill_gave_up   int NOT NULL DEFAULT 0,
    max_seq            bigint,                  -- highest sequence number that arrived
    skew_max_s         float8,                  -- largest |provider timestamp - received_at|
    latency_hist       int[],                   -- received -> done
    claim_hist         int[],                   -- received -> first claim (lower bound)
    -- gauges
    backlog            int,
    due_unclaimed      int,                     -- pending, due for over 5 minutes
    oldest_pending_s   float8,
    leases_overdue     int,                     -- expired over 2 minutes ago, not reclaimed
    held               int,
    open_gaps          int,
    gaps_past_grace    int,
    oldest_gap_s       float8,
    high_seq           bigint,
    orphans            int,                     -- registered references with no event
    PRIMARY KEY (provider, minute)
);
CREATE INDEX stats_minute_minute_idx ON inbox.stats_minute (minute);
COMMENT ON TABLE inbox.stats_minute IS
  'per provider and minute: what inbox.refresh_stats saw happen (counters) and found (gauges)';

-- What only the database as a whole shows, one row per refresh minute.
CREATE TABLE inbox.stats_global (
    minute             timestamptz PRIMARY KEY,
    refreshed_at       timestamptz NOT NULL,
    refresh_ms         float8,
    last_reconcile_at  timestamptz,
    last_gap_scan_at   timestamptz,   -- the stalest provider's
    cron_failures      int,           -- failed pg_inbox:* runs since the last refresh
    dead_tuple_ratio   float8,        -- inbox.events
    dead_tuples        bigint,
    vacuum_age_s       float8,        -- since the last (auto)vacuum of inbox.events
    xid_age            bigint         -- age(datfrozenxid) of this database
);
COMMENT ON TABLE inbox.stats_global IS 'per refresh minute: the watcher''s own health';

-- What the receiver sees and the database cannot: inbox.report_receiver_stats.
CREATE TABLE inbox.receiver_stats (
    provider           text NOT NULL,
    minute             timestamptz NOT NULL,
    requests_2xx       bigint NOT NULL DEFAULT 0,
    requests_4xx       bigint NOT NULL DEFAULT 0,
    requests_5xx       bigint NOT NULL DEFAULT 0,
    signature_failures bigint NOT NULL DEFAULT 0,
    refused_bodies     bigint NOT NULL DEFAULT 0,  -- 411/413/415
    db_unavailable     bigint NOT NULL DEFAULT 0,  -- 503 answers
    duplicates         bigint NOT NULL DEFAULT 0,  -- re-deliveries of processed events
    reports            int NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, minute)
);
CREATE INDEX receiver_stats_minute_idx ON inbox.receiver_stats (minute);
COMMENT ON TABLE inbox.receiver_stats IS 'counters reported by inbox-receiver processes, summed per minute';

-- Where the refresh stands.
CREATE TABLE inbox.stats_state (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    refreshed_at      timestamptz NOT NULL,
    event_watermark   bigint NOT NULL,  -- events up to this id are in the rollups or in stats_seen
    history_watermark bigint NOT NULL   -- inbox.event_history read up to
);

-- The events whose next change the refresh must see: every open event and
-- every event past the watermark, as they were at the last refresh.
CREATE TABLE inbox.stats_seen (
    id             bigint PRIMARY KEY,
    status         text NOT NULL,
    attempts       int NOT NULL,
    delivery_count int NOT NULL,
    payload_md5    text  -- processing events only
);

-- Error classes seen in last_error: digits and hex runs folded, 80 chars.
CREATE TABLE inbox.error_classes (
    provider      text NOT NULL,
    class         text NOT NULL,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    seen          bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (provider, class)
);
COMMENT ON TABLE inbox.error_classes IS 'kinds of last_error per provider, for the new_error_class check';

CREATE FUNCTION inbox._error_class(error text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT left(regexp_replace(regexp_replace(error, '[0-9a-f]{8,}', 'H', 'gi'), '[0-9]+', 'N', 'g'), 80)
$$;

-- Tables of the user's that name events: `reference` rows (an order row
-- holding a Stripe event id) must have their event; `effect` tables must
-- have a row for every done event. Swept a bounded chunk per refresh.
CREATE TABLE inbox.references (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider       text NOT NULL REFERENCES inbox.providers (name) ON DELETE CASCADE,
    rel            regclass NOT NULL,
    col            name NOT NULL,
    kind           text NOT NULL DEFAULT 'reference' CHECK (kind IN ('reference', 'effect')),
    sweep_cursor   text,
    cycle_orphans  int NOT NULL DEFAULT 0,
    last_orphans   int,  -- orphans of the last complete sweep
    UNIQUE (provider, rel, col)
);
COMMENT ON TABLE inbox.references IS 'user tables whose column holds external ids of a provider';

-- Indexes on time for the window reads of tables the refresh does not own.
CREATE INDEX tombstones_created_idx ON inbox.tombstones (created_at);
CREATE INDEX backfill_requests_finished_idx ON inbox.backfill_requests (finished_at)
    WHERE finished_at IS NOT NULL;

-- Declares (or, with kind NULL, removes) a reference to a provider's events.
CREATE FUNCTION inbox.register_reference(provider text, "table" regclass, "column" name,
                                         kind text DEFAULT 'reference')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM inbox._require_provider(provider);
    IF "table" IS NULL OR "column" IS NULL THEN
        RAISE EXCEPTION 'table and column must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF kind IS NULL THEN
        DELETE FROM inbox.references r
         WHERE r.provider = register_reference.provider AND r.rel = "table" AND r.col = "column";
        RETURN;
    END IF;
    IF kind NOT IN ('reference', 'effect') THEN
        RAISE EXCEPTION 'kind must be ''reference'' or ''effect'', not %', quote_literal(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = "table" AND a.attname = "column" AND a.attnum > 0
                     AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'column "%" of % does not exist', "column", "table"
            USING ERRCODE = 'undefined_column';
    END IF;
    INSERT INTO inbox.references AS r (provider, rel, col, kind)
    VALUES (register_reference.provider, "table", "column", kind)
    ON CONFLICT ON CONSTRAINT references_provider_rel_col_key DO UPDATE
       SET kind = EXCLUDED.kind, sweep_cursor = NULL, cycle_orphans = 0, last_orphans = NULL;
END
$$;

-- The receiver's counters. counters is a JSON array of objects
--   {"provider": "stripe", "minute": "2026-12-01T06:00:00Z" (optional: now),
--    "requests_2xx": 10, "requests_4xx": 0, "requests_5xx": 0,
--    "signature_failures": 0, "refused_bodies": 0, "db_unavailable": 0,
--    "duplicates": 2}
-- each counter optional; values are added to the minute's row. Returns the
-- number of objects taken. At most 1000 objects; minutes in the last hour.
CREATE FUNCTION inbox.report_receiver_stats(counters jsonb)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    item jsonb;
    key text;
    minute timestamptz;
    taken int := 0;
    known constant text[] := ARRAY['provider', 'minute', 'requests_2xx', 'requests_4xx', 'requests_5xx',
                                   'signature_failures', 'refused_bodies', 'db_unavailable', 'duplicates'];
BEGIN
    IF counters IS NULL THEN
        RAISE EXCEPTION 'counters must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(counters) <> 'array' THEN
        RAISE EXCEPTION 'counters must be a JSON array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_array_length(counters) > 1000 THEN
        RAISE EXCEPTION 'at most 1000 counter objects per report, got %', jsonb_array_length(counters)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    FOR item IN SELECT x FROM jsonb_array_elements(counters) x LOOP
        IF jsonb_typeof(item) <> 'object' THEN
            RAISE EXCEPTION 'each counter report must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR key IN SELECT jsonb_object_keys(item) LOOP
            IF key <> ALL (known) THEN
                RAISE EXCEPTION 'unknown counter %', quote_literal(key) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF key NOT IN ('provider', 'minute') AND (jsonb_typeof(item -> key) <> 'number'
                    OR (item ->> key)::numeric NOT BETWEEN 0 AND 1000000000
                    OR (item ->> key)::numeric <> trunc((item ->> key)::numeric)) THEN
                RAISE EXCEPTION 'counter % must be a whole number between 0 and 1000000000', key
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
        IF item ->> 'provider' IS NULL OR (item ->> 'provider') !~ '^[a-z0-9_-]{1,63}$' THEN
            RAISE EXCEPTION 'invalid provider name %', coalesce(quote_literal(item ->> 'provider'), 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        minute := date_trunc('minute', coalesce((item ->> 'minute')::timestamptz, now()));
        IF minute < now() - interval '1 hour' OR minute > now() + interval '1 minute' THEN
            RAISE EXCEPTION 'minute % is not within the last hour', minute
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO inbox.receiver_stats AS s
               (provider, minute, requests_2xx, requests_4xx, requests_5xx, signature_failures,
                refused_bodies, db_unavailable, duplicates, reports)
        VALUES (item ->> 'provider', minute,
                coalesce((item ->> 'requests_2xx')::bigint, 0), coalesce((item ->> 'requests_4xx')::bigint, 0),
                coalesce((item ->> 'requests_5xx')::bigint, 0), coalesce((item ->> 'signature_failures')::bigint, 0),
                coalesce((item ->> 'refused_bodies')::bigint, 0), coalesce((item ->> 'db_unavailable')::bigint, 0),
                coalesce((item ->> 'duplicates')::bigint, 0), 1)
        ON CONFLICT ON CONSTRAINT receiver_stats_pkey DO UPDATE
           SET requests_2xx = s.requests_2xx + EXCLUDED.requests_2xx,
               requests_4xx = s.requests_4xx + EXCLUDED.requests_4xx,
               requests_5xx = s.requests_5xx + EXCLUDED.requests_5xx,
               signature_failures = s.signature_failures + EXCLUDED.signature_failures,
               refused_bodies = s.refused_bodies + EXCLUDED.refused_bodies,
               db_unavailable = s.db_unavailable + EXCLUDED.db_unavailable,
               duplicates = s.duplicates + EXCLUDED.duplicates,
               reports = s.reports + 1;
        taken := taken + 1;
    END LOOP;
    RETURN taken;
END
$$;

-- A provider timestamp carried by the delivery, in epoch seconds, or NULL:
-- Standard Webhooks' webhook-timestamp, Slack's request timestamp, Stripe's
-- `created`.
CREATE FUNCTION inbox._provider_epoch(headers jsonb, payload jsonb)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v ~ '^[0-9]{9,11}(\.[0-9]+)?$' THEN v::float8 END
      FROM (SELECT coalesce(headers ->> 'webhook-timestamp', headers ->> 'Webhook-Timestamp',
                            headers ->> 'x-slack-request-timestamp', headers ->> 'X-Slack-Request-Timestamp',
                            CASE WHEN jsonb_typeof(payload -> 'created') = 'number' THEN payload ->> 'created' END) v) s
$$;

-- One refresh: counters for what changed since the last one, gauges now.
-- Returns what it did; {"skipped": "busy"} when another refresh runs.
CREATE FUNCTION inbox.refresh_stats()
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    started timestamptz := clock_timestamp();
    this_minute timestamptz := date_trunc('minute', now());
    st inbox.stats_state;
    prev_at timestamptz;
    low bigint;
    new_low bigint;
    hist_low bigint;
    new_hist bigint;
    candidates bigint;
    ref inbox.references;
    chunk_rows int;
    chunk_orphans int;
    chunk_last text;
    cron_failed int;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1885957733, 1) THEN
        RETURN jsonb_build_object('skipped', 'busy');
    END IF;
    SELECT * INTO st FROM inbox.stats_state;
    IF NOT FOUND THEN
        -- First refresh: the last hour, read backwards along the primary key.
        prev_at := now() - interval '1 hour';
        low := coalesce((SELECT e.id FROM inbox.events e WHERE e.first_received_at < prev_at
                          ORDER BY e.id DESC LIMIT 1), 0);
        hist_low := coalesce((SELECT h.id FROM inbox.event_history h WHERE h.recorded_at < prev_at
                               ORDER BY h.id DESC LIMIT 1), 0);
    ELSE
        prev_at := st.refreshed_at;
        low := st.event_watermark;
        hist_low := st.history_watermark;
    END IF;

    -- Every candidate as it is now, beside what it was at the last refresh.
    -- (Everything later statements need from an event is copied here, read
    -- once by id: no statement below joins the events table, whatever the
    -- planner would think of a temp table without statistics.)
    IF to_regclass('pg_temp.inbox_stats_diff') IS NULL THEN
        CREATE TEMP TABLE inbox_stats_diff (
            id bigint, provider text, external_id text, status text, attempts int, delivery_count int,
            received_at timestamptz, first_received_at timestamptz, processed_at timestamptz,
            source text, last_error text, payload_md5 text, new_event boolean,
            body_md5 text, skew float8,
            s_status text, s_attempts int, s_delivery_count int, s_payload_md5 text
        ) ON COMMIT DELETE ROWS;
    END IF;
    TRUNCATE inbox_stats_diff;
    INSERT INTO inbox_stats_diff
    SELECT e.id, e.provider, e.external_id, e.status, e.attempts, e.delivery_count, e.received_at,
           e.first_received_at, e.processed_at, e.source, e.last_error,
           CASE WHEN e.status = 'processing' OR s.status = 'processing' THEN md5(e.payload::text) END,
           s.id IS NULL,
           -- new events: the body, for replays (64 bytes or more), and the provider's clock
           CASE WHEN s.id IS NULL AND octet_length(e.payload::text) >= 64 THEN md5(e.payload::text) END,
           CASE WHEN s.id IS NULL THEN abs(extract(epoch FROM e.first_received_at)
                                           - inbox._provider_epoch(e.headers, e.payload)) END,
           s.status, s.attempts, s.delivery_count, s.payload_md5
      FROM (SELECT c.id FROM inbox.events c WHERE c.id > low
            UNION SELECT x.id FROM inbox.stats_seen x) ids
      CROSS JOIN LATERAL (SELECT * FROM inbox.events ev WHERE ev.id = ids.id) e
      LEFT JOIN inbox.stats_seen s ON s.id = e.id;
    GET DIAGNOSTICS candidates = ROW_COUNT;

    -- Counters, each added to the minute it happened in.
    WITH facts AS (
        SELECT d.provider, date_trunc('minute', d.first_received_at) AS minute,
               1 AS arrivals, (d.source = 'backfill')::int AS backfilled,
               0 AS redeliveries, 0 AS claims, 0 AS first_claims, 0 AS processed, 0 AS dead,
               0 AS payload_changed, NULL::bigint AS max_seq,
               d.skew,
               NULL::int AS latency_bucket, NULL::int AS claim_bucket
          FROM inbox_stats_diff d
         WHERE d.new_event
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.received_at), 0, 0,
               d.delivery_count - coalesce(d.s_delivery_count, 1), 0, 0, 0, 0,
               -- processing at the last refresh, re-delivered with another payload since
               (d.s_status = 'processing' AND d.payload_md5 <> d.s_payload_md5)::int,
               NULL, NULL, NULL, NULL
          FROM inbox_stats_diff d
         WHERE d.delivery_count > coalesce(d.s_delivery_count, 1)
        UNION ALL
        SELECT d.provider, this_minute, 0, 0, 0, d.attempts - coalesce(d.s_attempts, 0),
               (coalesce(d.s_attempts, 0) = 0)::int, 0, 0, 0, NULL, NULL, NULL,
               CASE WHEN coalesce(d.s_attempts, 0) = 0 THEN inbox._hist_bucket(
                   least(extract(epoch FROM coalesce(d.processed_at, now()) - d.first_received_at),
                         greatest(extract(epoch FROM prev_at - d.first_received_at), 0))) END
          FROM inbox_stats_diff d
         WHERE d.attempts > coalesce(d.s_attempts, 0)
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.processed_at), 0, 0, 0, 0, 0,
               (d.status = 'done')::int, (d.status = 'dead')::int, 0, NULL, NULL,
               CASE WHEN d.status = 'done' THEN
                   inbox._hist_bucket(extract(epoch FROM d.processed_at - d.first_received_at)) END,
               NULL
          FROM inbox_stats_diff d
         WHERE d.status IN ('done', 'dead') AND d.status IS DISTINCT FROM d.s_status
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.first_received_at), 0, 0, 0, 0, 0, 0, 0, 0,
               substr(d.id_text, length(g.prefix) + 1)::bigint, NULL, NULL, NULL
          FROM (SELECT x.provider, x.first_received_at, x.external_id AS id_text
                  FROM inbox_stats_diff x WHERE x.new_event) d
          JOIN (SELECT s.provider, split_part(s.pattern, '{', 1) AS prefix
                  FROM inbox.gap_sources s WHERE s.kind = 'sequence') g ON g.provider = d.provider
         WHERE left(d.id_text, length(g.prefix)) = g.prefix
           AND substr(d.id_text, length(g.prefix) + 1) ~ '^[0-9]{1,18}$'
    )
    INSERT INTO inbox.stats_minute AS m
           (provider, minute, arrivals, backfilled, redeliveries, claims, first_claims, processed,
            dead, payload_changed, max_seq, skew_max_s, latency_hist, claim_hist)
    SELECT f.provider, f.minute, sum(f.arrivals), sum(f.backfilled), sum(f.redeliveries),
           sum(f.claims), sum(f.first_claims), sum(f.processed), sum(f.dead),
           sum(f.payload_changed), max(f.max_seq), max(f.skew),
           inbox._hist_of(array_agg(f.latency_bucket) FILTER (WHERE f.latency_bucket IS NOT NULL)),
           inbox._hist_of(array_agg(f.claim_bucket) FILTER (WHERE f.claim_bucket IS NOT NULL))
      FROM facts f
     GROUP BY f.provider, f.minute
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET arrivals = m.arrivals + EXCLUDED.arrivals,
           backfilled = m.backfilled + EXCLUDED.backfilled,
           redeliveries = m.redeliveries + EXCLUDED.redeliveries,
           claims = m.claims + EXCLUDED.claims,
           first_claims = m.first_claims + EXCLUDED.first_claims,
           processed = m.processed + EXCLUDED.processed,
           dead = m.dead + EXCLUDED.dead,
           payload_changed = m.payload_changed + EXCLUDED.payload_changed,
           max_seq = greatest(m.max_seq, EXCLUDED.max_seq),
           skew_max_s = greatest(m.skew_max_s, EXCLUDED.skew_max_s),
           latency_hist = inbox._hist_add(m.latency_hist, EXCLUDED.latency_hist),
           claim_hist = inbox._hist_add(m.claim_hist, EXCLUDED.claim_hist);

    -- Replays: new events whose payload another new event of the window has.
    -- Bodies under 64 bytes ({} from a test button) say nothing: a real
    -- event body carries its own ids and times.
    INSERT INTO inbox.stats_minute AS m (provider, minute, replay_suspects)
    SELECT r.provider, this_minute, sum(r.n - 1)
      FROM (SELECT d.provider, count(*) AS n FROM inbox_stats_diff d
             WHERE d.body_md5 IS NOT NULL
             GROUP BY d.provider, d.body_md5 HAVING count(*) > 1) r
     GROUP BY r.provider
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE SET replay_suspects = m.replay_suspects + EXCLUDED.replay_suspects;

    -- Error classes of the attempts that failed in the window.
    INSERT INTO inbox.error_classes AS c (provider, class, first_seen_at, last_seen_at, seen)
    SELECT d.provider, inbox._error_class(d.last_error), now(), now(), count(*)
      FROM inbox_stats_diff d
     WHERE d.last_error IS NOT NULL AND (d.new_event OR d.attempts <> d.s_attempts OR d.status <> d.s_status)
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT error_classes_pkey DO UPDATE SET last_seen_at = now(), seen = c.seen + EXCLUDED.seen;

    -- Reconcile's actions (lease expiries, verify mismatches), by id.
    new_hist := coalesce((SELECT max(h.id) FROM inbox.event_history h WHERE h.id > hist_low), hist_low);
    INSERT INTO inbox.stats_minute AS m (provider, minute, lease_expiries, verify_mismatches)
    SELECT e.provider, date_trunc('minute', h.recorded_at),
           count(*) FILTER (WHERE h.reason IN ('lease_reclaimed', 'lease_held')),
           count(*) FILTER (WHERE h.reason = 'verify_mismatch')
      FROM inbox.event_history h JOIN inbox.events e ON e.id = h.event_id
     WHERE h.id > hist_low AND h.id <= new_hist
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET lease_expiries = m.lease_expiries + EXCLUDED.lease_expiries,
           verify_mismatches = m.verify_mismatches + EXCLUDED.verify_mismatches;

    -- Tombstones and backfill outcomes of the window, through their time indexes.
    INSERT INTO inbox.stats_minute AS m (provider, minute, tombstoned, backfill_fetched,
                                         backfill_not_found, backfill_gave_up)
    SELECT x.provider, x.minute, sum(x.t), sum(x.f), sum(x.nf), sum(x.g)
      FROM (SELECT t.provider, date_trunc('minute', t.created_at) AS minute, 1 AS t, 0 AS f, 0 AS nf, 0 AS g
              FROM inbox.tombstones t WHERE t.created_at > prev_at AND t.created_at <= now()
            UNION ALL
            SELECT b.provider, date_trunc('minute', b.finished_at), 0,
                   (b.status IN ('fetched', 'arrived'))::int, (b.status = 'not_found')::int,
                   (b.status = 'gave_up')::int
              FROM inbox.backfill_requests b WHERE b.finished_at > prev_at AND b.finished_at <= now()) x
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET tombstoned = m.tombstoned + EXCLUDED.tombstoned,
           backfill_fetched = m.backfill_fetched + EXCLUDED.backfill_fetched,
           backfill_not_found = m.backfill_not_found + EXCLUDED.backfill_not_found,
           backfill_gave_up = m.backfill_gave_up + EXCLUDED.backfill_gave_up;

    -- Effect tables: every event done in the window must have its row.
    FOR ref IN SELECT * FROM inbox.references r WHERE r.kind = 'effect' ORDER BY r.id LOOP
        EXECUTE format('INSERT INTO inbox.stats_minute AS m (provider, minute, missing_effects)
                        SELECT $1, date_trunc(''minute'', d.processed_at), count(*)
                          FROM inbox_stats_diff d
                         WHERE d.provider = $1 AND d.status = ''done'' AND d.s_status IS DISTINCT FROM ''done''
                           AND NOT EXISTS (SELECT 1 FROM %s u WHERE u.%I::text = d.external_id)
                         GROUP BY 2
                        ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
                           SET missing_effects = m.missing_effects + EXCLUDED.missing_effects',
                       ref.rel, ref.col) USING ref.provider;
    END LOOP;

    -- Reference tables: 10000 values per refresh, in value order, round and round.
    FOR ref IN SELECT * FROM inbox.references r WHERE r.kind = 'reference' ORDER BY r.id LOOP
        EXECUTE format('SELECT count(*)::int, count(*) FILTER (WHERE NOT EXISTS (
                                SELECT 1 FROM inbox.events e WHERE e.provider = $1 AND e.external_id = v.v)
                              AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t
                                WHERE t.provider = $1 AND t.external_id = v.v))::int, max(v.v)
                          FROM (SELECT u.%1$I::text AS v FROM %2$s u
                                 WHERE u.%1$I IS NOT NULL AND ($2::text IS NULL OR u.%1$I::text > $2)
                                 ORDER BY u.%1$I::text LIMIT 10000) v', ref.col, ref.rel)
          INTO chunk_rows, chunk_orphans, chunk_last USING ref.provider, ref.sweep_cursor;
        IF chunk_rows < 10000 THEN
            UPDATE inbox.references r SET sweep_cursor = NULL, cycle_orphans = 0,
                   last_orphans = ref.cycle_orphans + chunk_orphans WHERE r.id = ref.id;
        ELSE
            UPDATE inbox.references r SET sweep_cursor = chunk_last,
                   cycle_orphans = ref.cycle_orphans + chunk_orphans WHERE r.id = ref.id;
        END IF;
    END LOOP;

    -- Gauges: one row per provider for this minute, from the open set, the
    -- unresolved gaps and the reference sweeps.
    INSERT INTO inbox.stats_minute AS m (provider, minute, backlog, due_unclaimed, oldest_pending_s,
                                         leases_overdue, held, open_gaps, gaps_past_grace,
                                         oldest_gap_s, high_seq, orphans)
    SELECT p.name, this_minute, coalesce(o.backlog, 0), coalesce(o.due_unclaimed, 0), o.oldest_pending_s,
           coalesce(o.leases_overdue, 0), coalesce(o.held, 0), coalesce(g.open_gaps, 0),
           coalesce(g.past_grace, 0), g.oldest_gap_s, gs.high_number, r.orphans
      FROM inbox.providers p
      LEFT JOIN (SELECT e.provider, count(*) AS backlog,
                        count(*) FILTER (WHERE e.status = 'pending' AND e.next_attempt_at < now() - interval '5 minutes') AS due_unclaimed,
                        extract(epoch FROM now() - min(e.first_received_at) FILTER (WHERE e.status = 'pending')) AS oldest_pending_s,
                        count(*) FILTER (WHERE e.status = 'processing' AND e.lease_expires_at < now() - interval '2 minutes'
                                           AND pp.on_lease_expiry = 'reclaim') AS leases_overdue,
                        count(*) FILTER (WHERE e.status = 'processing' AND e.lease_expires_at <= now()
                                           AND pp.on_lease_expiry = 'hold') AS held
                   FROM inbox.events e JOIN inbox.providers pp ON pp.name = e.provider
                  WHERE e.processed_at IS NULL
                  GROUP BY e.provider) o ON o.provider = p.name
      LEFT JOIN (SELECT gp.provider, count(*) AS open_gaps,
                        count(*) FILTER (WHERE gp.first_seen_at < now() - coalesce(src.grace, interval '1 hour')) AS past_grace,
                        extract(epoch FROM now() - min(gp.first_seen_at)) AS oldest_gap_s
                   FROM inbox.gaps gp LEFT JOIN inbox.gap_sources src ON src.provider = gp.provider
                  WHERE gp.status <> 'resolved'
                  GROUP BY gp.provider) g ON g.provider = p.name
      LEFT JOIN inbox.gap_sources gs ON gs.provider = p.name AND gs.kind = 'sequence'
      LEFT JOIN (SELECT rf.provider, sum(greatest(rf.last_orphans, rf.cycle_orphans))::int AS orphans
                   FROM inbox.references rf WHERE rf.kind = 'reference' GROUP BY rf.provider) r ON r.provider = p.name
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET backlog = EXCLUDED.backlog, due_unclaimed = EXCLUDED.due_unclaimed,
           oldest_pending_s = EXCLUDED.oldest_pending_s, leases_overdue = EXCLUDED.leases_overdue,
           held = EXCLUDED.held, open_gaps = EXCLUDED.open_gaps, gaps_past_grace = EXCLUDED.gaps_past_grace,
           oldest_gap_s = EXCLUDED.oldest_gap_s, high_seq = EXCLUDED.high_seq, orphans = EXCLUDED.orphans;

    -- The next snapshot: open events, and those past the new watermark (ids
    -- of transactions still in flight are below it only if they have been
    -- open for over two minutes).
    new_low := greatest(low, coalesce((SELECT e.id FROM inbox.events e
                                        WHERE e.id > low AND e.first_received_at < now() - interval '2 minutes'
                                        ORDER BY e.id DESC LIMIT 1), low));
    -- DELETE, not TRUNCATE: its lock would queue the refresh behind a pg_dump.
    DELETE FROM inbox.stats_seen;
    INSERT INTO inbox.stats_seen (id, status, attempts, delivery_count, payload_md5)
    SELECT d.id, d.status, d.attempts, d.delivery_count, d.payload_md5
      FROM inbox_stats_diff d WHERE d.id > new_low
    UNION
    SELECT e.id, e.status, e.attempts, e.delivery_count,
           CASE WHEN e.status = 'processing' THEN md5(e.payload::text) END
      FROM inbox.events e WHERE e.processed_at IS NULL;

    -- The watcher's own health.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        EXECUTE 'SELECT count(*)::int FROM cron.job_run_details d JOIN cron.job j ON j.jobid = d.jobid
                  WHERE j.jobname LIKE ''pg\_inbox:%'' AND d.status = ''failed'' AND d.end_time > $1'
           INTO cron_failed USING prev_at;
    END IF;
    INSERT INTO inbox.stats_global AS g (minute, refreshed_at, refresh_ms, last_reconcile_at, last_gap_scan_at,
                                         cron_failures, dead_tuple_ratio, dead_tuples, vacuum_age_s, xid_age)
    SELECT this_minute, now(), extract(epoch FROM clock_timestamp() - started) * 1000,
           (SELECT r.started_at FROM inbox.reconcile_runs r WHERE NOT r.skipped ORDER BY r.started_at DESC LIMIT 1),
           (SELECT min(s.last_scan_at) FROM inbox.gap_sources s),
           cron_failed,
           t.n_dead_tup::float8 / nullif(t.n_live_tup + t.n_dead_tup, 0), t.n_dead_tup,
           extract(epoch FROM now() - greatest(t.last_vacuum, t.last_autovacuum)),
           (SELECT age(d.datfrozenxid) FROM pg_catalog.pg_database d WHERE d.datname = current_database())
      FROM pg_catalog.pg_stat_user_tables t WHERE t.relid = 'inbox.events'::regclass
    ON CONFLICT ON CONSTRAINT stats_global_pkey DO UPDATE
       SET refreshed_at = EXCLUDED.refreshed_at, refresh_ms = EXCLUDED.refresh_ms,
           last_reconcile_at = EXCLUDED.last_reconcile_at, last_gap_scan_at = EXCLUDED.last_gap_scan_at,
           cron_failures = coalesce(g.cron_failures, 0) + coalesce(EXCLUDED.cron_failures, 0),
           dead_tuple_ratio = EXCLUDED.dead_tuple_ratio, dead_tuples = EXCLUDED.dead_tuples,
           vacuum_age_s = EXCLUDED.vacuum_age_s, xid_age = EXCLUDED.xid_age;

    INSERT INTO inbox.stats_state AS s (singleton, refreshed_at, event_watermark, history_watermark)
    VALUES (true, now(), new_low, new_hist)
    ON CONFLICT ON CONSTRAINT stats_state_pkey DO UPDATE
       SET refreshed_at = EXCLUDED.refreshed_at, event_watermark = EXCLUDED.event_watermark,
           history_watermark = EXCLUDED.history_watermark;

    -- Bounded history: 35 days of minutes (four weeks of bands and a margin).
    DELETE FROM inbox.stats_minute m WHERE m.minute < now() - interval '35 days';
    DELETE FROM inbox.stats_global g WHERE g.minute < now() - interval '35 days';
    DELETE FROM inbox.receiver_stats r WHERE r.minute < now() - interval '35 days';

    RETURN jsonb_build_object('since', prev_at, 'candidates', candidates, 'watermark', new_low,
                              'elapsed_ms', round((extract(epoch FROM clock_timestamp() - started) * 1000)::numeric, 1));
END
$$;
COMMENT ON FUNCTION inbox.refresh_stats() IS
  'Roll up what happened since the last refresh into inbox.stats_minute; cost bounded by the window and the open set';

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
                   EXISTS (SELECT 1 FROM inbox.gap_sources) AS has_sources) gl
      CROSS JOIN LATERAL (VALUES
        ('stats_stale', extract(epoch FROM as_of - gl.refreshed_at)::float8, NULL::boolean),
        ('reconcile_stale', extract(epoch FROM as_of - (gl.last).last_reconcile_at)::float8, NULL),
        ('gap_scan_stale', CASE WHEN gl.has_sources THEN
                                coalesce(extract(epoch FROM as_of - (gl.last).last_gap_scan_at)::float8, 'Infinity') END, NULL),
        ('cron_failing', CASE WHEN gl.has_cron THEN gl.cron_failures::float8 END, NULL),
        ('events_dead_tuples', (gl.last).dead_tuple_ratio, coalesce((gl.last).dead_tuples, 0) < 10000),
        ('autovacuum_lag', coalesce((gl.last).vacuum_age_s, 'Infinity'::float8), coalesce((gl.last).dead_tuples, 0) < 10000),
        ('xid_age', (gl.last).xid_age::float8, NULL)
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

-- "Did we lose anything?", answered per provider at a glance.
--   losing:   a data-loss check is firing, a gap is past its grace period, or
--             events went dead (last 24 hours) or are held for a person;
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
      FROM inbox.providers p
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

-- inbox_monitor reads the verdict and nothing else; the receiver may report
-- its counters.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_monitor') THEN
        CREATE ROLE inbox_monitor NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'inbox_receiver') THEN
        CREATE ROLE inbox_receiver NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA inbox TO inbox_monitor, inbox_receiver;
GRANT SELECT ON inbox.health TO inbox_monitor;
GRANT EXECUTE ON FUNCTION inbox.health_summary() TO inbox_monitor;
GRANT EXECUTE ON FUNCTION inbox.report_receiver_stats(jsonb) TO inbox_receiver;

-- run_job learns the jobs refresh and checks; schedule() schedules them.
CREATE OR REPLACE FUNCTION inbox.run_job(job text, every interval)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds double precision;
    this_window timestamptz;
    outcome jsonb;
BEGIN
    IF job IS NULL OR job NOT IN ('reconcile', 'scan_gaps', 'refresh', 'checks') THEN
        RAISE EXCEPTION 'unknown job %', coalesce(quote_literal(job), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Jobs: reconcile, scan_gaps, refresh, checks.';
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

DROP FUNCTION inbox.schedule(interval, interval);
CREATE FUNCTION inbox.schedule(
    reconcile_every interval DEFAULT '1 minute',
    scan_gaps_every interval DEFAULT '5 minutes',
    refresh_every interval DEFAULT '1 minute',
    checks_every interval DEFAULT '1 minute')
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
                         'inbox.run_job(''scan_gaps'', ''5 minutes''), inbox.run_job(''refresh'', ''1 minute'') '
                         'and inbox.run_job(''checks'', ''1 minute'') from any scheduler.';
    END IF;
    FOR spec IN
        SELECT * FROM (VALUES ('reconcile', reconcile_every), ('scan_gaps', scan_gaps_every),
                              ('refresh', refresh_every), ('checks', checks_every)) v(job, every)
    LOOP
        EXECUTE 'SELECT cron.schedule($1, $2, $3)'
          USING 'pg_inbox:' || spec.job, inbox._cron_expression(spec.every),
                format('SELECT inbox.run_job(%L, %L)', spec.job, spec.every);
        jobs := jobs || jsonb_build_object('job', 'pg_inbox:' || spec.job,
                                           'schedule', inbox._cron_expression(spec.every),
                                           'every', spec.every);
    END LOOP;
    RETURN jobs;
END
$$;

-- What 85_dump.sql and 90_privileges.sql do for a fresh install.
DO $$
DECLARE
    member text;
BEGIN
    FOREACH member IN ARRAY ARRAY['inbox.anomalies_id_seq', 'inbox.check_results_id_seq', 'inbox.references_id_seq',
                                  'inbox.anomalies', 'inbox.band_samples', 'inbox.check_results', 'inbox.check_settings',
                                  'inbox.check_state', 'inbox.error_classes', 'inbox.receiver_stats',
                                  'inbox.references', 'inbox.stats_global', 'inbox.stats_minute',
                                  'inbox.stats_seen', 'inbox.stats_state'] LOOP
        PERFORM pg_catalog.pg_extension_config_dump(member::regclass, '');
    END LOOP;
END
$$;
REVOKE ALL ON ALL TABLES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC;

-- A database that had the 0.1.0 jobs scheduled gets the new ones, as
-- inbox.schedule() with its defaults would install them, and paused when
-- the old ones are paused.
DO $$
DECLARE
    spec record;
    active boolean;
    job bigint;
BEGIN
    IF inbox._cron_missing() IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT bool_or(j.active) INTO active FROM cron.job j
     WHERE j.jobname IN ('pg_inbox:reconcile', 'pg_inbox:scan_gaps');
    IF active IS NULL THEN
        RETURN;
    END IF;
    FOR spec IN SELECT * FROM (VALUES ('refresh', interval '1 minute'), ('checks', interval '1 minute')) v(job, every) LOOP
        job := cron.schedule('pg_inbox:' || spec.job, inbox._cron_expression(spec.every),
                             format('SELECT inbox.run_job(%L, %L)', spec.job, spec.every));
        IF NOT active THEN
            PERFORM cron.alter_job(job, active => false);
        END IF;
    END LOOP;
END
$$;

-- Issue 11: the transactional outbox and the forwarder's functions (sql/src/75_outbox.sql,
-- repeated here verbatim), then what 85_dump.sql and 90_privileges.sql do for a fresh install.
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

-- As 85_dump.sql: pg_dump keeps the outbox's rows and its identity sequence.
SELECT pg_catalog.pg_extension_config_dump('inbox.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.outbox_delivery', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.outbox_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.outbox_id_seq', '');
-- As 90_privileges.sql: nothing for PUBLIC.
REVOKE ALL ON inbox.outbox, inbox.outbox_delivery, inbox.outbox_attempts, inbox.outbox_id_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION
    inbox._outbox_row_valid(text, timestamptz),
    inbox._outbox_append_only(),
    inbox._setting_interval(text, interval, interval),
    inbox.publish(text, text, jsonb, jsonb),
    inbox._outbox_lease_state(bigint, uuid),
    inbox._outbox_require(bigint, uuid),
    inbox._outbox_record(bigint, int, text, int, text),
    inbox._outbox_finish(bigint, uuid, text, text, int, text),
    inbox.claim_outbox(text[], int, interval, boolean, text, text),
    inbox.complete_outbox(bigint, uuid, int, text),
    inbox.fail_outbox(bigint, uuid, text, interval, int, interval, interval, int),
    inbox.reject_outbox(bigint, uuid, text, int)
  FROM PUBLIC;
-- Issue 14: one definition each, enforced by the tables: the provider-name
-- rule (inbox._valid_provider_name), the external_id limit
-- (inbox._external_id_limit; inbox.events' rules now one C CHECK) and the
-- id-pattern grammar (inbox._id_pattern_error, the scans' own parser);
-- "unknown provider" from inbox._require_provider only. Existing rows already
-- meet every rule (ingest refused longer ids since 0.1.0), so the constraints
-- are added valid.

-- The one definition of a provider name: 1 to 63 of a-z, 0-9, "_", "-". The
-- table's CHECK and register_provider use it (simple SQL: inlined, no call).
CREATE FUNCTION inbox._valid_provider_name(name text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT name ~ '^[a-z0-9_-]{1,63}$'
$$;

-- The longest external_id, in bytes: kMaxExternalIdBytes of
-- extension/limits.hpp, the one definition, which ingest checks itself, and
-- inbox.events' CHECK too (inbox._event_row_valid). The CHECKs of
-- inbox.tombstones and inbox.listed_ids and the SQL functions' messages read
-- it here. C, not SQL: a constraint folds it once per statement, and a SQL
-- function would be parsed and run each time.
CREATE FUNCTION inbox._external_id_limit()
RETURNS int
AS 'MODULE_PATHNAME', 'inbox_external_id_limit'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

ALTER TABLE inbox.providers DROP CONSTRAINT providers_name_check,
    ADD CONSTRAINT providers_name_check CHECK (inbox._valid_provider_name(name));

-- inbox.events' rules of a row, in one C call: status is pending,
-- processing, done or dead; processed_at is set exactly when the status is
-- done or dead; external_id is 1 to _external_id_limit() bytes. In C, one
-- CHECK: PostgreSQL parses and plans a table's CHECK expressions again at
-- every statement that writes it, and the three SQL CHECKs of 0.1.0 were
-- a fifth to a third of a single-event ingest's CPU (bench/README.md). It
-- returns true or refuses the row naming the rule (23514), without the
-- "failing row" detail that would carry the payload into the server's log.
CREATE FUNCTION inbox._event_row_valid(status text, processed_at timestamptz, external_id text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_event_row_valid'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
ALTER TABLE inbox.events DROP CONSTRAINT events_status_check,
    DROP CONSTRAINT events_terminal_has_processed_at,
    ADD CONSTRAINT events_row_check CHECK (inbox._event_row_valid(status, processed_at, external_id));
COMMENT ON CONSTRAINT events_row_check ON inbox.events IS
  'status is pending, processing, done or dead; processed_at is set exactly when done or dead; external_id is 1 to inbox._external_id_limit() bytes';
ALTER TABLE inbox.tombstones DROP CONSTRAINT tombstones_external_id_check,
    ADD CONSTRAINT tombstones_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit());
ALTER TABLE inbox.listed_ids DROP CONSTRAINT listed_ids_external_id_check,
    ADD CONSTRAINT listed_ids_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit());

-- The lease token in C, the same token 0.1.0 computed in SQL, so a lease
-- held across the upgrade still completes: md5(concat_ws(':', event_id,
-- attempt, extract(epoch FROM first_received_at)))::uuid. Every claim
-- computes one per event (extension/lease_token.cpp).
CREATE OR REPLACE FUNCTION inbox._lease_token(event_id bigint, attempt int, first_received_at timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'inbox_lease_token'
LANGUAGE C STABLE PARALLEL SAFE;

-- Why a sequence pattern is malformed, or NULL: the grammar the scans parse
-- (extension/gaps_sequence.hpp), so set_id_source accepts exactly what they can.
CREATE FUNCTION inbox._id_pattern_error(pattern text)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_id_pattern_error'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Register or update a provider. NULL settings use the pg_inbox.* defaults.
CREATE OR REPLACE FUNCTION inbox.register_provider(
    name text,
    max_attempts int DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    on_lease_expiry text DEFAULT 'reclaim')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR NOT inbox._valid_provider_name(name) THEN
        RAISE EXCEPTION 'invalid provider name %', coalesce(quote_literal(name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 1 to 63 characters from a-z, 0-9, "_" and "-".';
    END IF;
    IF on_lease_expiry IS NULL OR on_lease_expiry NOT IN ('reclaim', 'hold') THEN
        RAISE EXCEPTION 'on_lease_expiry must be ''reclaim'' or ''hold'', not %',
            coalesce(quote_literal(on_lease_expiry), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.providers AS p (name, max_attempts, backoff_base, backoff_max, on_lease_expiry)
    VALUES (register_provider.name, register_provider.max_attempts, register_provider.backoff_base,
            register_provider.backoff_max, register_provider.on_lease_expiry)
    ON CONFLICT ON CONSTRAINT providers_pkey DO UPDATE
       SET max_attempts = EXCLUDED.max_attempts, backoff_base = EXCLUDED.backoff_base,
           backoff_max = EXCLUDED.backoff_max, on_lease_expiry = EXCLUDED.on_lease_expiry;
END
$$;

-- Sets (or, with NULL, resets to 1 hour) when an open event counts as stuck.
CREATE OR REPLACE FUNCTION inbox.set_stuck_after(provider text, stuck_after interval)
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

-- Configures (or, with kind NULL, removes) a provider's expected-id source.
-- Changing the kind or pattern starts the scan over.
CREATE OR REPLACE FUNCTION inbox.set_id_source(
    provider text,
    kind text,
    pattern text DEFAULT NULL,
    start_at bigint DEFAULT NULL,
    grace interval DEFAULT '1 hour')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM inbox._require_provider(provider);
    IF kind IS NULL THEN
        DELETE FROM inbox.gap_sources s WHERE s.provider = set_id_source.provider;
        RETURN;
    END IF;
    IF kind NOT IN ('sequence', 'listed') THEN
        RAISE EXCEPTION 'id source kind must be ''sequence'' or ''listed'', not %', quote_literal(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kind = 'sequence' THEN
        IF pattern IS NULL OR inbox._id_pattern_error(pattern) IS NOT NULL THEN
            RAISE EXCEPTION 'malformed id pattern %', coalesce(quote_literal(pattern), 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = coalesce(inbox._id_pattern_error(pattern), 'The pattern is null.'),
                      HINT = 'A prefix (no braces, at most 200 bytes) followed by {n}, or {n:WIDTH} '
                             'for numbers zero-padded to WIDTH (1-18) digits: ''evt_{n}'', ''ord-{n:8}''.';
        END IF;
    ELSIF pattern IS NOT NULL THEN
        RAISE EXCEPTION 'a listed id source takes no pattern' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF start_at IS NOT NULL AND start_at < 0 THEN
        RAISE EXCEPTION 'start_at must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF grace IS NULL OR grace < interval '0' THEN
        RAISE EXCEPTION 'grace must not be null or negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.gap_sources AS s (provider, kind, pattern, start_at, grace)
    VALUES (set_id_source.provider, set_id_source.kind, set_id_source.pattern,
            set_id_source.start_at, set_id_source.grace)
    ON CONFLICT ON CONSTRAINT gap_sources_pkey DO UPDATE
       SET kind = EXCLUDED.kind, pattern = EXCLUDED.pattern, start_at = EXCLUDED.start_at,
           grace = EXCLUDED.grace,
           scanned_to = CASE WHEN (s.kind, s.pattern, s.start_at) IS NOT DISTINCT FROM
                                  (EXCLUDED.kind, EXCLUDED.pattern, EXCLUDED.start_at)
                             THEN s.scanned_to END,
           high_number = CASE WHEN s.pattern IS NOT DISTINCT FROM EXCLUDED.pattern
                              THEN s.high_number END,
           event_watermark = CASE WHEN s.pattern IS NOT DISTINCT FROM EXCLUDED.pattern
                                  THEN s.event_watermark ELSE 0 END;
END
$$;

-- Records a confirmed non-event; closes its gap and any backfill request.
-- Returns false when the id was already tombstoned (the first reason stays).
CREATE OR REPLACE FUNCTION inbox.tombstone(provider text, external_id text, reason text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF provider IS NULL OR external_id IS NULL OR reason IS NULL THEN
        RAISE EXCEPTION 'provider, external_id and reason must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF external_id = '' OR reason = '' THEN
        RAISE EXCEPTION 'external_id and reason must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(external_id) > inbox._external_id_limit() THEN
        RAISE EXCEPTION 'external_id is % bytes, over the limit of %', octet_length(external_id),
            inbox._external_id_limit() USING ERRCODE = 'string_data_right_truncation';
    END IF;
    PERFORM inbox._require_provider(provider);
    IF EXISTS (SELECT 1 FROM inbox.events e
               WHERE e.provider = tombstone.provider AND e.external_id = tombstone.external_id) THEN
        RAISE EXCEPTION 'event "%" of provider "%" exists: it cannot be tombstoned', external_id, provider
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A tombstone marks an id that was never sent.';
    END IF;
    INSERT INTO inbox.tombstones AS t (provider, external_id, reason)
    VALUES (tombstone.provider, tombstone.external_id, left(tombstone.reason, 1000))
    ON CONFLICT ON CONSTRAINT tombstones_pkey DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE inbox.gaps g SET status = 'resolved', resolved_at = now(), resolution = 'tombstoned'
     WHERE g.provider = tombstone.provider AND g.external_id = tombstone.external_id
       AND g.status <> 'resolved';
    UPDATE inbox.backfill_requests r SET status = 'not_found', lease_expires_at = NULL,
           finished_at = now(), last_error = left(tombstone.reason, 1000)
     WHERE r.provider = tombstone.provider AND r.external_id = tombstone.external_id
       AND r.status IN ('pending', 'leased');
    RETURN true;
END
$$;

-- Loads ids a provider's list API reported into the staging table of a
-- `listed` source. Returns how many were new.
CREATE OR REPLACE FUNCTION inbox.add_listed(provider text, external_ids text[], listed_at timestamptz DEFAULT now())
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    added int;
BEGIN
    IF provider IS NULL OR external_ids IS NULL OR listed_at IS NULL THEN
        RAISE EXCEPTION 'provider, external_ids and listed_at must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM inbox.gap_sources s WHERE s.provider = add_listed.provider AND s.kind = 'listed') THEN
        RAISE EXCEPTION 'provider "%" has no listed id source', provider
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT inbox.set_id_source(provider, ''listed'');';
    END IF;
    IF cardinality(external_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 ids per call, got %', cardinality(external_ids)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(external_ids) x
               WHERE x IS NULL OR x = '' OR octet_length(x) > inbox._external_id_limit()) THEN
        RAISE EXCEPTION 'external_ids must be non-empty strings of at most % bytes',
            inbox._external_id_limit() USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO inbox.listed_ids (provider, external_id, listed_at)
    SELECT DISTINCT add_listed.provider, x, add_listed.listed_at FROM unnest(external_ids) x
    ON CONFLICT ON CONSTRAINT listed_ids_provider_external_id_key DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;

REVOKE ALL ON FUNCTION inbox._valid_provider_name(text), inbox._external_id_limit(),
    inbox._event_row_valid(text, timestamptz, text), inbox._id_pattern_error(text) FROM PUBLIC;

-- Issue 13: kept plans that cannot degrade. The functions whose statements
-- are planned once per connection run with enable_seqscan = off, so every
-- lookup stays an index probe however small the table was when the plan was
-- made (sql/src/10_ingest.sql, 20_queue.sql).
ALTER FUNCTION inbox.ingest(text, text, jsonb, jsonb, text) SET enable_seqscan = off;
ALTER FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text) SET enable_seqscan = off;
ALTER FUNCTION inbox.complete(bigint, uuid) SET enable_seqscan = off;
ALTER FUNCTION inbox.complete_batch(bigint[], uuid[]) SET enable_seqscan = off;
ALTER FUNCTION inbox.fail(bigint, uuid, text, interval) SET enable_seqscan = off;

-- Issue 9: alerts (sql/src/73_alerts.sql; inbox._check_transition in
-- sql/src/71_checks.sql writes the alert row).
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

-- The one place a check changes state: opens or closes its anomaly.
-- (Alerts, issue 9, are written here, in the same transaction.)
CREATE OR REPLACE FUNCTION inbox._check_transition(check_name text, provider text, started boolean, as_of timestamptz,
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

-- What 85_dump.sql and 90_privileges.sql do for a fresh install.
SELECT pg_catalog.pg_extension_config_dump('inbox.alerts_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.alerts', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.alert_claims', '');
REVOKE ALL ON inbox.alerts, inbox.alert_claims FROM PUBLIC;
REVOKE ALL ON SEQUENCE inbox.alerts_id_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION inbox.alert_key(text, text, text), inbox._write_alert(bigint, text),
                       inbox.recent_alerts(interval, int), inbox.claim_alert(text, interval),
                       inbox.status_report() FROM PUBLIC;

-- Issue 11 (checks see dead messages): dead outbox messages are counted by
-- inbox.refresh_stats as provider 'outbox:<topic>' (its last definition, in
-- the Issue 12 delivery-log block below), fire outbox_dead_new and show in
-- inbox.health.
CREATE INDEX outbox_delivery_dead_idx ON inbox.outbox_delivery (processed_at) WHERE status = 'dead';
CREATE OR REPLACE FUNCTION inbox._check_definitions()
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
CREATE OR REPLACE FUNCTION inbox._check_values(as_of timestamptz)
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
CREATE OR REPLACE VIEW inbox.health AS
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

-- Issue 8: tail listing. A firing sequence_tail_silence makes the backfill
-- worker list the ids after the highest one received (sql/src/74_tail_listing.sql);
-- the listing windows share their code (sql/src/62_list_windows.sql), and so do
-- the id checks of add_listed and raise_sequence_high (sql/src/40_gaps.sql);
-- scan_gaps never lowers a high mark raised meanwhile (extension/gaps_scan.cpp).

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
CREATE OR REPLACE FUNCTION inbox.claim_list_window(provider text, every interval)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM inbox._require_provider(provider);
    RETURN inbox._claim_list_window('list:' || provider, inbox._list_window(every));
END
$$;
REVOKE ALL ON FUNCTION inbox._list_window(interval), inbox._claim_list_window(text, timestamptz) FROM PUBLIC;

-- Ids a provider's list API reported, as inbox.add_listed and
-- inbox.raise_sequence_high take them: at most 10000 per call, each a
-- non-empty string within the external id limit.
CREATE FUNCTION inbox._require_listed_ids(external_ids text[])
RETURNS void LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF cardinality(external_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 ids per call, got %', cardinality(external_ids)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(external_ids) x
               WHERE x IS NULL OR x = '' OR octet_length(x) > inbox._external_id_limit()) THEN
        RAISE EXCEPTION 'external_ids must be non-empty strings of at most % bytes',
            inbox._external_id_limit() USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- Loads ids a provider's list API reported into the staging table of a
-- `listed` source. Returns how many were new.
CREATE OR REPLACE FUNCTION inbox.add_listed(provider text, external_ids text[], listed_at timestamptz DEFAULT now())
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    added int;
BEGIN
    IF provider IS NULL OR external_ids IS NULL OR listed_at IS NULL THEN
        RAISE EXCEPTION 'provider, external_ids and listed_at must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM inbox.gap_sources s WHERE s.provider = add_listed.provider AND s.kind = 'listed') THEN
        RAISE EXCEPTION 'provider "%" has no listed id source', provider
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT inbox.set_id_source(provider, ''listed'');';
    END IF;
    PERFORM inbox._require_listed_ids(external_ids);
    INSERT INTO inbox.listed_ids (provider, external_id, listed_at)
    SELECT DISTINCT add_listed.provider, x, add_listed.listed_at FROM unnest(external_ids) x
    ON CONFLICT ON CONSTRAINT listed_ids_provider_external_id_key DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;
REVOKE ALL ON FUNCTION inbox._require_listed_ids(text[]) FROM PUBLIC;

-- The id of a number ('ord-{n:8}', 42: 'ord-00000042'), and the number of
-- an id (NULL when it is not of the pattern: another prefix, not digits,
-- fewer digits than the width, over 18), with the grammar the scans use
-- (extension/gaps_ids.cpp).
CREATE FUNCTION inbox._sequence_id(pattern text, number bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_sequence_id'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION inbox._sequence_number(pattern text, external_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'inbox_sequence_number'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- When the provider's sequence_tail_silence check is firing: one row with the
-- highest number received and its external id, for the one caller that
-- claims the provider's tail-listing window of length `every` (job
-- 'list-tail:<provider>' in inbox.job_windows). No row otherwise: no firing
-- check, no sequence source or nothing received yet (no window is used up),
-- or another replica claimed this window.
CREATE FUNCTION inbox.claim_tail_listing(provider text, every interval)
RETURNS TABLE (high_number bigint, after_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 1 AS $$
DECLARE
    this_window timestamptz;
    s inbox.gap_sources;
BEGIN
    PERFORM inbox._require_provider(provider);
    this_window := inbox._list_window(every);
    SELECT * INTO s FROM inbox.gap_sources g
     WHERE g.provider = claim_tail_listing.provider AND g.kind = 'sequence' AND g.high_number IS NOT NULL
       AND EXISTS (SELECT 1 FROM inbox.anomalies a
                    WHERE a.check_name = 'sequence_tail_silence' AND a.provider = claim_tail_listing.provider
                      AND a.resolved_at IS NULL);
    IF NOT FOUND OR NOT inbox._claim_list_window('list-tail:' || provider, this_window) THEN
        RETURN;
    END IF;
    high_number := s.high_number;
    after_id := inbox._sequence_id(s.pattern, s.high_number);
    RETURN NEXT;
END
$$;

-- Raises the high mark of a sequence source to the highest of
-- `external_ids` (ids the provider's list API reported), never lowers it.
-- Ids not of the source's pattern (another prefix, not digits, over 18
-- digits) and numbers over 1,000,000 above the current high mark (a list
-- API gone wrong must not make the scans record a billion gaps) are ignored
-- and counted. Returns the high mark after the call and how many ids were
-- ignored.
CREATE FUNCTION inbox.raise_sequence_high(provider text, external_ids text[])
RETURNS TABLE (high_number bigint, ignored int)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 1 AS $$
DECLARE
    s inbox.gap_sources;
    top bigint;
BEGIN
    IF provider IS NULL OR external_ids IS NULL THEN
        RAISE EXCEPTION 'provider and external_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM inbox._require_provider(provider);
    PERFORM inbox._require_listed_ids(external_ids);
    -- Locked: a concurrent raise waits, and so does a scan saving its progress.
    SELECT * INTO s FROM inbox.gap_sources g WHERE g.provider = raise_sequence_high.provider FOR UPDATE;
    IF NOT FOUND OR s.kind <> 'sequence' THEN
        RAISE EXCEPTION 'provider "%" has no sequence id source', provider
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT inbox.set_id_source(provider, ''sequence'', ''evt_{n}'');';
    END IF;
    SELECT max(n.number) FILTER (WHERE n.number <= s.high_number + 1000000 OR s.high_number IS NULL),
           count(*) FILTER (WHERE n.number IS NULL OR n.number > s.high_number + 1000000)
      INTO top, ignored
      FROM (SELECT inbox._sequence_number(s.pattern, x) AS number FROM unnest(external_ids) x) n;
    IF top > s.high_number OR (s.high_number IS NULL AND top IS NOT NULL) THEN
        UPDATE inbox.gap_sources g SET high_number = top WHERE g.provider = s.provider;
        s.high_number := top;
    END IF;
    high_number := s.high_number;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION inbox._sequence_id(text, bigint), inbox._sequence_number(text, text),
    inbox.claim_tail_listing(text, interval),
    inbox.raise_sequence_high(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.claim_tail_listing(text, interval), inbox.raise_sequence_high(text, text[])
  TO inbox_worker;

-- Issue 12: version checks (sql/src/27_ordering.sql, docs/ordering.md): events
-- carry entity_key, version and held_reason (00_schema.sql); providers get
-- ordering pointers and presets; inbox.advance compares and sets the applied
-- version of each entity. claim (queue.cpp) fills the columns and holds events
-- whose transition is invalid.
ALTER TABLE inbox.events
    ADD COLUMN entity_key text,
    ADD COLUMN version numeric,
    ADD COLUMN held_reason text;

-- claim runs the 0.2.0 statement (extension/queue.cpp); the symbol 0.1.0
-- bound keeps running 0.1.0's until this update.
CREATE OR REPLACE FUNCTION inbox.claim(
    max_rows int DEFAULT 50,
    lease interval DEFAULT NULL,
    provider text DEFAULT NULL)
RETURNS SETOF inbox.events
AS 'MODULE_PATHNAME', 'inbox_claim_0_2'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
ROWS 50;


-- How a provider's events are ordered. The pointers as given, and compiled:
-- a payload pointer as a path for #>, a header as its lower-case name (the
-- receiver stores header names in lower case in inbox.events.headers).
CREATE TABLE inbox.provider_ordering (
    provider        text PRIMARY KEY REFERENCES inbox.providers (name) ON DELETE CASCADE,
    entity_pointer  text NOT NULL,
    version_pointer text NOT NULL,
    state_pointer   text,
    -- {"from state": ["to state", ...], "*": [...]}; NULL: no transition rules
    transitions     jsonb,
    preset          text,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    entity_path     text[],
    entity_header   text,
    version_path    text[],
    version_header  text,
    state_path      text[],
    state_header    text,
    CONSTRAINT provider_ordering_transitions_need_state
      CHECK (transitions IS NULL OR state_pointer IS NOT NULL)
);
COMMENT ON TABLE inbox.provider_ordering IS
  'entity, version and state pointers of a provider (inbox.configure_ordering, inbox.apply_preset)';

-- What was applied last for each entity: advance's compare-and-set.
CREATE TABLE inbox.entity_versions (
    provider   text NOT NULL,
    entity_key text NOT NULL,
    version    numeric NOT NULL,
    event_id   bigint NOT NULL,
    state      text,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, entity_key)
);
COMMENT ON TABLE inbox.entity_versions IS
  'per entity, the newest version inbox.advance answered apply for (and its event and state)';

-- Settings known to fit the providers the receiver verifies: built in, a
-- function and a view like the checks (71_checks.sql), so a dump never
-- carries them. The lead's retention work reads retry_window (dedup must
-- outlast the retries).
CREATE FUNCTION inbox._preset_definitions()
RETURNS TABLE (name text, entity_pointer text, version_pointer text, state_pointer text,
               retry_window interval, on_lease_expiry text, note text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT * FROM (VALUES
  ('stripe', '/data/object/id', '/created', '/data/object/status', interval '3 days', 'hold',
   'created is the event''s creation time in whole seconds: two events of one object in the same second '
   'tie, and the second one advanced is stale (fetch the object when that matters). Objects without a '
   'status carry no state. Stripe retries for up to 3 days in live mode. Money moves: hold expired leases.'),
  ('github_issues', '/issue/id', '/issue/updated_at', '/issue/state', '3 days', 'reclaim',
   'issues and issue_comment events, ordered by the issue''s updated_at (whole seconds: same-second edits '
   'tie). Other event families carry no /issue and are never stale. GitHub does not retry on its own; '
   'failed deliveries can be redelivered for 3 days.'),
  ('github_pull_requests', '/pull_request/id', '/pull_request/updated_at', '/pull_request/state', '3 days',
   'reclaim',
   'pull_request and pull_request_review events, ordered by the pull request''s updated_at (whole seconds). '
   'Other event families are never stale. Failed deliveries can be redelivered for 3 days.'),
  ('shopify', '/admin_graphql_api_id', 'header:X-Shopify-Triggered-At', NULL, '48 hours', 'hold',
   'The resource''s global id (gid://shopify/Order/1, unique across resource kinds) ordered by the time '
   'Shopify triggered the webhook (fractional seconds). Resources without admin_graphql_api_id are never '
   'stale. Shopify documents 8 retries over 4 hours (formerly 19 over 48 hours): the window keeps 48 hours. '
   'Orders and payments: hold expired leases.'),
  ('slack', NULL, NULL, NULL, '1 hour', 'reclaim',
   'Events API events are facts (a message, a reaction), not updates of one entity: nothing to order, and '
   'no pointers are set. Slack retries 3 times within about an hour.'),
  ('standard', NULL, '/timestamp', NULL, '28 hours', 'reclaim',
   'Standard Webhooks payloads carry the event time in /timestamp, but the entity is the sender''s own: '
   'set entity_pointer with inbox.configure_ordering (for example /data/id). Not the webhook-timestamp '
   'header: it is the time of the attempt, not of the event. The spec fixes no retry schedule; Svix''s '
   'spans about 27 hours.')
) v
$$;

CREATE VIEW inbox.provider_presets AS SELECT * FROM inbox._preset_definitions();
COMMENT ON VIEW inbox.provider_presets IS
  'ordering pointers, retry window and lease policy per provider kind (inbox.apply_preset)';

-- A pointer as claim evaluates it: NULL for NULL, else a payload path or a
-- header name. Raises on anything else.
--   /a/b~1c/0      RFC 6901 JSON pointer into the payload (~1 is "/", ~0 is "~")
--   header:Name    a request header (matched case-insensitively)
CREATE FUNCTION inbox._compile_pointer(pointer text, what text, OUT path text[], OUT header text)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    token text;
BEGIN
    IF pointer IS NULL THEN
        RETURN;
    END IF;
    IF pointer = '' OR octet_length(pointer) > 256 THEN
        RAISE EXCEPTION '% must be 1 to 256 bytes, not %', what, octet_length(pointer)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pointer LIKE 'header:%' THEN
        header := substr(pointer, 8);
        IF header !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]{1,64}$' THEN
            RAISE EXCEPTION '% names no valid header: %', what, quote_literal(pointer)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A header is named like header:X-Shopify-Triggered-At.';
        END IF;
        header := lower(header);
        RETURN;
    END IF;
    IF left(pointer, 1) <> '/' THEN
        RAISE EXCEPTION '% must be a JSON pointer or header:Name, not %', what, quote_literal(pointer)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A JSON pointer starts with "/": /data/object/id, not data.object.id.';
    END IF;
    IF pointer ~ '~([^01]|$)' THEN
        RAISE EXCEPTION '% is a malformed JSON pointer: % (~ must be followed by 0 or 1)',
            what, quote_literal(pointer) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    path := '{}';
    FOREACH token IN ARRAY string_to_array(substr(pointer, 2), '/') LOOP
        path := path || replace(replace(token, '~1', '/'), '~0', '~');
    END LOOP;
    IF cardinality(path) > 32 THEN
        RAISE EXCEPTION '% is deeper than 32 levels', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The text a pointer found, when it is a string or a number of at most 255
-- bytes; NULL for anything else (missing, null, an object, too long).
CREATE FUNCTION inbox._pointer_scalar(value jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_pointer_scalar'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The version a pointer found: a JSON number as it is; a string holding a
-- decimal as that number, or an RFC 3339 timestamp as its Unix epoch in
-- seconds (every fractional digit kept); NULL for anything else.
CREATE FUNCTION inbox._version_of(value jsonb)
RETURNS numeric
AS 'MODULE_PATHNAME', 'inbox_version_of'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Whether a state may follow another: always when there are no rules, when
-- either state is unknown or when the state does not change; otherwise the
-- rules must list it under the from state or under "*".
CREATE FUNCTION inbox._transition_allowed(transitions jsonb, from_state text, to_state text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT transitions IS NULL OR from_state IS NULL OR to_state IS NULL OR from_state = to_state
        OR coalesce(transitions -> from_state, '[]') ? to_state
        OR coalesce(transitions -> '*', '[]') ? to_state
$$;

-- Why claim must hold an event rather than hand it out: its state does not
-- follow the applied state of its entity, and it is newer (so advance would
-- raise). NULL when it may be handed out. Only for providers with rules.
CREATE FUNCTION inbox._held_transition(e inbox.events, o inbox.provider_ordering)
RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format('invalid transition from %s to %s', quote_literal(v.state), quote_literal(s.state))
      FROM (SELECT inbox._pointer_scalar(coalesce(e.payload #> o.entity_path, e.headers -> o.entity_header)) AS entity_key,
                   inbox._version_of(coalesce(e.payload #> o.version_path, e.headers -> o.version_header)) AS version,
                   inbox._pointer_scalar(coalesce(e.payload #> o.state_path, e.headers -> o.state_header)) AS state) s
      JOIN inbox.entity_versions v ON v.provider = e.provider AND v.entity_key = s.entity_key
     WHERE (v.version < s.version OR v.event_id = e.id)
       AND NOT inbox._transition_allowed(o.transitions, v.state, s.state)
$$;

-- Sets (or, with entity_pointer and version_pointer NULL, removes) how a
-- provider's events are ordered. Keeps its transition rules.
CREATE FUNCTION inbox.configure_ordering(
    provider text,
    entity_pointer text,
    version_pointer text,
    state_pointer text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    entity record;
    version record;
    state record;
BEGIN
    PERFORM inbox._require_provider(provider);
    entity := inbox._compile_pointer(entity_pointer, 'entity_pointer');
    version := inbox._compile_pointer(version_pointer, 'version_pointer');
    state := inbox._compile_pointer(state_pointer, 'state_pointer');
    IF (entity_pointer IS NULL) <> (version_pointer IS NULL) THEN
        RAISE EXCEPTION 'entity_pointer and version_pointer go together'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set both, or both NULL to stop ordering the provider''s events.';
    END IF;
    IF entity_pointer IS NULL THEN
        IF state_pointer IS NOT NULL THEN
            RAISE EXCEPTION 'state_pointer needs entity_pointer and version_pointer'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        DELETE FROM inbox.provider_ordering o WHERE o.provider = configure_ordering.provider;
        RETURN;
    END IF;
    INSERT INTO inbox.provider_ordering AS o
           (provider, entity_pointer, version_pointer, state_pointer, entity_path, entity_header,
            version_path, version_header, state_path, state_header)
    VALUES (configure_ordering.provider, configure_ordering.entity_pointer,
            configure_ordering.version_pointer, configure_ordering.state_pointer,
            entity.path, entity.header, version.path, version.header, state.path, state.header)
    ON CONFLICT ON CONSTRAINT provider_ordering_pkey DO UPDATE
       SET entity_pointer = EXCLUDED.entity_pointer, version_pointer = EXCLUDED.version_pointer,
           state_pointer = EXCLUDED.state_pointer, entity_path = EXCLUDED.entity_path,
           entity_header = EXCLUDED.entity_header, version_path = EXCLUDED.version_path,
           version_header = EXCLUDED.version_header, state_path = EXCLUDED.state_path,
           state_header = EXCLUDED.state_header, preset = NULL, updated_at = now();
EXCEPTION WHEN check_violation THEN
    RAISE EXCEPTION 'provider % has transition rules: they need a state_pointer', provider
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Remove them first: SELECT inbox.set_transitions(provider, NULL);';
END
$$;

-- Sets (or, with NULL, removes) the allowed transitions of a provider's
-- states: {"active": ["past_due", "canceled"], "*": ["canceled"]}.
CREATE FUNCTION inbox.set_transitions(provider text, transitions jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    from_state text;
    targets jsonb;
BEGIN
    PERFORM inbox._require_provider(provider);
    IF transitions IS NOT NULL THEN
        IF jsonb_typeof(transitions) <> 'object' OR transitions = '{}' THEN
            RAISE EXCEPTION 'transitions must be a non-empty JSON object of arrays'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'For example {"active": ["past_due", "canceled"]}; NULL removes the rules.';
        END IF;
        IF octet_length(transitions::text) > 65536 THEN
            RAISE EXCEPTION 'transitions must be at most 64 kB' USING ERRCODE = 'program_limit_exceeded';
        END IF;
        FOR from_state, targets IN SELECT * FROM jsonb_each(transitions) LOOP
            IF from_state = '' OR octet_length(from_state) > 255 OR jsonb_typeof(targets) <> 'array'
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(targets) t
                           WHERE jsonb_typeof(t) <> 'string' OR t #>> '{}' = ''
                              OR octet_length(t #>> '{}') > 255) THEN
                RAISE EXCEPTION 'transitions from % must be an array of states (1 to 255 bytes each)',
                    quote_literal(from_state) USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    UPDATE inbox.provider_ordering o SET transitions = set_transitions.transitions, updated_at = now()
     WHERE o.provider = set_transitions.provider AND o.state_pointer IS NOT NULL;
    IF NOT FOUND AND transitions IS NOT NULL THEN
        RAISE EXCEPTION 'provider % has no state_pointer', provider
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set one first: inbox.configure_ordering(provider, entity, version, state).';
    END IF;
END
$$;

-- Applies a preset: its pointers (or none) and its lease policy.
CREATE FUNCTION inbox.apply_preset(provider text, preset text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p inbox.provider_presets;
BEGIN
    PERFORM inbox._require_provider(provider);
    SELECT * INTO p FROM inbox.provider_presets pp WHERE pp.name = preset;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown preset %', coalesce(quote_literal(preset), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'One of: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM inbox.provider_presets);
    END IF;
    IF p.entity_pointer IS NULL THEN
        -- Nothing to order by (slack), or an entity only the user knows (standard):
        -- keep what the user configured.
        UPDATE inbox.provider_ordering o SET preset = p.name, updated_at = now()
         WHERE o.provider = apply_preset.provider;
    ELSE
        PERFORM inbox.configure_ordering(provider, p.entity_pointer, p.version_pointer, p.state_pointer);
        UPDATE inbox.provider_ordering o SET preset = p.name WHERE o.provider = apply_preset.provider;
    END IF;
    UPDATE inbox.providers pr SET on_lease_expiry = p.on_lease_expiry WHERE pr.name = provider;
END
$$;

CREATE FUNCTION inbox.advance(id bigint, lease_token uuid)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_advance'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.advance(bigint, uuid) IS
  'In the worker''s transaction: apply (newer than what was applied for its entity, recorded), stale, or lost';

-- What 85_dump.sql and 90_privileges.sql do for a fresh install.
SELECT pg_catalog.pg_extension_config_dump('inbox.provider_ordering', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.entity_versions', '');
REVOKE ALL ON inbox.provider_ordering, inbox.entity_versions, inbox.provider_presets FROM PUBLIC;
REVOKE ALL ON FUNCTION inbox._preset_definitions(), inbox._compile_pointer(text, text),
                       inbox._pointer_scalar(jsonb), inbox._version_of(jsonb),
                       inbox._transition_allowed(jsonb, text, text),
                       inbox._held_transition(inbox.events, inbox.provider_ordering),
                       inbox.configure_ordering(text, text, text, text),
                       inbox.set_transitions(text, jsonb), inbox.apply_preset(text, text),
                       inbox.advance(bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.advance(bigint, uuid) TO inbox_worker;

-- Issue 12: delivery log (sql/src/15_delivery_log.sql, repeated here
-- verbatim). ingest and ingest_batch take the raw body's digest and the
-- signature scheme (new trailing parameters with defaults: old callers keep
-- working) and keep the payload of an event being processed; run_job and
-- schedule() learn the seal_log job; refresh_stats counts changed payloads
-- from the log. Then what 85_dump.sql and 90_privileges.sql do for a fresh
-- install, and the new job for a database that had the jobs scheduled.
DROP FUNCTION inbox.ingest(text, text, jsonb, jsonb, text);
DROP FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text);
CREATE FUNCTION inbox.ingest(
    provider text,
    external_id text,
    payload jsonb,
    headers jsonb DEFAULT NULL,
    source text DEFAULT 'webhook',
    body_sha256 bytea DEFAULT NULL,
    signature_scheme text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_ingest'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.ingest(text, text, jsonb, jsonb, text, bytea, text) IS
  'Store one delivery: inserted (first), updated (re-delivery, not yet processed), duplicate (already processed)';

CREATE FUNCTION inbox.ingest_batch(
    providers text[],
    external_ids text[],
    payloads jsonb[],
    headers jsonb[] DEFAULT NULL,
    source text DEFAULT 'webhook',
    body_sha256s bytea[] DEFAULT NULL,
    signature_schemes text[] DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'inbox_ingest_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text, bytea[], text[]) IS
  'Store many deliveries in one statement; one outcome per element, in input order';

-- The delivery log (issue 12): every delivery that inbox.ingest /
-- inbox.ingest_batch saw, stored as one append-only row per call
-- (inbox.delivery_batches; the view inbox.deliveries has one row per
-- delivery), hash-chained so that an edit, a deletion or a reordering is
-- detectable (docs/delivery-log.md).
--
-- Concurrency: one chain would serialise every ingest transaction until its
-- commit. The log is cut into kLogStripes independent chains ("stripes").
-- An ingest transaction takes a free stripe (a transaction-level advisory
-- lock, tried without waiting: a base stripe, or while another transaction
-- waits for stripe 0, an overflow one; else it waits for stripe 0),
-- appends after the stripe's last row (a backward probe of the primary
-- key) and keeps the stripe until it ends: an abort takes its rows
-- with it, a commit leaves them for the next holder. The primary key
-- (stripe, seq) makes a fork impossible: two rows cannot share a place.

-- The number of stripes: kLogStripes of extension/delivery_log.hpp, the one
-- definition.
CREATE FUNCTION inbox._log_stripes()
RETURNS int
AS 'MODULE_PATHNAME', 'inbox_log_stripes'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- The shape of a row of inbox.delivery_batches: its arrays are parallel
-- (one dimension, the same length, not empty). In C: a CHECK expression is
-- parsed and planned again at every insert, and the cardinality() version
-- of this was an eighth of a single-event ingest.
CREATE FUNCTION inbox._log_arrays_aligned(bigint[], int[], text[], boolean[], boolean[], text[],
                                          text[], text[], text[], bytea[], bytea[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_log_arrays_aligned'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Storage: one row per ingest / ingest_batch call (a "batch"), the call's
-- deliveries as parallel arrays. One heap tuple and one primary-key entry per
-- call instead of per delivery: what brought the log's cost under the
-- target (bench/README.md). inbox.deliveries, the view below, gives one row
-- per delivery.
CREATE TABLE inbox.delivery_batches (
    stripe            smallint NOT NULL,
    seq               bigint NOT NULL CHECK (seq > 0),
    received_at       timestamptz NOT NULL,
    source            text NOT NULL,
    event_ids         bigint[] NOT NULL,   -- an element NULL when the event's row was already gone
    deliveries        int[] NOT NULL,      -- the event's 1st, 2nd, ... delivery
    outcomes          text[] NOT NULL,     -- inserted, updated, duplicate
    payload_kept      boolean[] NOT NULL,  -- the event was processing: payload and headers unchanged
    payload_differs   boolean[] NOT NULL,  -- ... and this body differs from the one kept
    differing         int NOT NULL,        -- how many elements of payload_differs are true
    providers         text[] NOT NULL,
    external_ids      text[] NOT NULL,
    body_hashed       text[] NOT NULL,     -- raw, jsonb
    signature_schemes text[] NOT NULL,
    body_sha256       bytea[] NOT NULL,
    headers_sha256    bytea[] NOT NULL,
    hash              bytea NOT NULL,
    CONSTRAINT delivery_batches_pkey PRIMARY KEY (stripe, seq),
    CONSTRAINT delivery_batches_shape CHECK (inbox._log_arrays_aligned(
        event_ids, deliveries, outcomes, payload_kept, payload_differs, providers, external_ids,
        body_hashed, signature_schemes, body_sha256, headers_sha256))
);
-- What the rollups count: calls with a body that differed from the one a
-- worker held (one entry per such call, none for the others).
CREATE INDEX delivery_batches_differs_idx ON inbox.delivery_batches (received_at) WHERE differing > 0;
-- A batch's row is about 10 kB of arrays, past the TOAST threshold: every
-- insert compresses it. pglz was a quarter of the log's CPU on a batch of
-- 100; lz4, where the server was built with it, costs a fraction of that
-- (bench/README.md, "The log row's compression").
DO $lz4$
DECLARE
    columns text;
BEGIN
    IF EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        SELECT string_agg(format('ALTER COLUMN %I SET COMPRESSION lz4', a.attname), ', ' ORDER BY a.attnum)
          INTO columns
          FROM pg_attribute a
         WHERE a.attrelid = 'inbox.delivery_batches'::regclass AND a.attnum > 0 AND a.attstorage = 'x';
        EXECUTE 'ALTER TABLE inbox.delivery_batches ' || columns;
    END IF;
END
$lz4$;
COMMENT ON TABLE inbox.delivery_batches IS
  'the delivery log''s storage: one append-only, hash-chained row per inbox.ingest/ingest_batch call; read it through inbox.deliveries';

-- The number a duplicate (a delivery of a processed event, which changes
-- nothing in inbox.events) gets: the event's delivery_count plus its
-- duplicates so far. One row per event that had duplicates, not one index
-- entry per delivery; the upsert also orders concurrent duplicates of one
-- event. Not part of the chain (the numbers it hands out are).
CREATE TABLE inbox.delivery_duplicates (
    event_id   bigint PRIMARY KEY,
    duplicates int NOT NULL CHECK (duplicates > 0)
);
COMMENT ON TABLE inbox.delivery_duplicates IS
  'per event, the deliveries after it was processed (duplicates): how ingest numbers the next one';

-- One row per delivery, in call order.
CREATE VIEW inbox.deliveries AS
SELECT b.stripe, b.seq, t.item::int AS item, t.event_id, t.delivery, b.received_at, t.payload_kept,
       t.payload_differs, t.outcome, t.provider, t.external_id, b.source, t.body_hashed,
       t.signature_scheme, t.body_sha256, t.headers_sha256, b.hash
  FROM inbox.delivery_batches b
 CROSS JOIN LATERAL unnest(b.event_ids, b.deliveries, b.outcomes, b.payload_kept, b.payload_differs,
                           b.providers, b.external_ids, b.body_hashed, b.signature_schemes,
                           b.body_sha256, b.headers_sha256)
       WITH ORDINALITY AS t(event_id, delivery, outcome, payload_kept, payload_differs, provider,
                            external_id, body_hashed, signature_scheme, body_sha256, headers_sha256, item);
COMMENT ON VIEW inbox.deliveries IS
  'one row per delivery seen by inbox.ingest/ingest_batch (stored per call in inbox.delivery_batches); inbox.verify_log checks it';
COMMENT ON COLUMN inbox.deliveries.item IS 'the delivery''s place in its call (1, 2, ...): (stripe, seq, item) is unique';
COMMENT ON COLUMN inbox.deliveries.body_sha256 IS
  'SHA-256 of the raw body when the caller passed it (body_hashed = raw), else of the stored jsonb as text';
COMMENT ON COLUMN inbox.deliveries.headers_sha256 IS 'SHA-256 of the headers jsonb as text; NULL without headers';
COMMENT ON COLUMN inbox.deliveries.hash IS 'the hash of the call''s row (the chain links calls, not deliveries)';

-- Periodic seals: every stripe's last (seq, hash) at one moment, chained
-- too. Export them (docs/delivery-log.md): a copy kept elsewhere is what
-- proves the log was not rewritten after the seal.
CREATE TABLE inbox.log_seals (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sealed_at timestamptz NOT NULL,
    seqs      bigint[] NOT NULL,  -- per stripe 0..n-1: its last seq (0: empty)
    hashes    bytea[] NOT NULL,   -- per stripe: that row's hash (zeros: empty)
    hash      bytea NOT NULL      -- SHA-256 over the previous seal's hash and this seal
);
COMMENT ON TABLE inbox.log_seals IS
  'the heads of the delivery log at intervals (inbox.seal_log); export them and keep them elsewhere';

-- Append-only, even for the owner: UPDATE, DELETE and TRUNCATE are refused.
-- (A superuser can disable the triggers; inbox.verify_log detects what they
-- change, up to a rewrite of everything after the last exported seal.)
CREATE FUNCTION inbox._refuse_log_change()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER delivery_batches_append_only BEFORE UPDATE OR DELETE ON inbox.delivery_batches
    FOR EACH ROW EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER delivery_batches_no_truncate BEFORE TRUNCATE ON inbox.delivery_batches
    FOR EACH STATEMENT EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER log_seals_append_only BEFORE UPDATE OR DELETE ON inbox.log_seals
    FOR EACH ROW EXECUTE FUNCTION inbox._refuse_log_change();
CREATE TRIGGER log_seals_no_truncate BEFORE TRUNCATE ON inbox.log_seals
    FOR EACH STATEMENT EXECUTE FUNCTION inbox._refuse_log_change();

-- A text field of a hashed message: its length in bytes, ':', its bytes;
-- '~' for NULL. Unambiguous whatever the text holds.
CREATE FUNCTION inbox._log_field(value text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(octet_length(value) || ':' || value, '~')
$$;

-- The bytes a call's hash covers after the previous hash: one line per
-- delivery, joined by newlines. The same encoding as batch_message() in
-- extension/log_chain.cpp (verify_log proves they agree on every row
-- ingest wrote).
CREATE FUNCTION inbox._batch_message(b inbox.delivery_batches)
RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_to(string_agg(concat_ws('|', b.stripe, b.seq, t.n, coalesce(t.event_id::text, '~'),
                                           coalesce(t.delivery::text, '~'),
                                           (extract(epoch FROM b.received_at) * 1000000)::bigint,
                                           inbox._log_field(t.provider), inbox._log_field(t.external_id),
                                           inbox._log_field(b.source), t.outcome,
                                           CASE WHEN t.kept THEN 't' ELSE 'f' END,
                                           CASE WHEN t.differs THEN 't' ELSE 'f' END,
                                           encode(t.body_sha256, 'hex'), t.body_hashed,
                                           inbox._log_field(t.scheme),
                                           coalesce(encode(t.headers_sha256, 'hex'), '~')),
                                 E'\n' ORDER BY t.n),
                      pg_catalog.getdatabaseencoding())
      FROM unnest(b.event_ids, b.deliveries, b.outcomes, b.payload_kept, b.payload_differs,
                  b.providers, b.external_ids, b.body_hashed, b.signature_schemes,
                  b.body_sha256, b.headers_sha256)
           WITH ORDINALITY AS t(event_id, delivery, outcome, kept, differs, provider, external_id,
                                body_hashed, scheme, body_sha256, headers_sha256, n)
$$;

-- A seal's hash: over the previous seal's hash, its id, time and heads.
CREATE FUNCTION inbox._seal_hash(prev bytea, id bigint, sealed_at timestamptz, seqs bigint[], hashes bytea[])
RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(prev || convert_to(concat_ws('|', id, (extract(epoch FROM sealed_at) * 1000000)::bigint,
                                               array_to_string(seqs, ','),
                                               (SELECT string_agg(encode(h, 'hex'), ',' ORDER BY k)
                                                  FROM unnest(hashes) WITH ORDINALITY AS x(h, k))),
                                     'UTF8'))
$$;

-- Seals the log: every stripe's last row, when anything was appended since
-- the last seal. Returns the seal's id, or NULL when nothing changed.
CREATE FUNCTION inbox.seal_log()
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last inbox.log_seals;
    heads_seqs bigint[];
    heads_hashes bytea[];
    new_id bigint;
    at timestamptz := clock_timestamp();
BEGIN
    -- One seal at a time, or two would chain to the same predecessor.
    PERFORM pg_advisory_xact_lock(1885957740, -1);
    SELECT array_agg(coalesce(h.seq, 0) ORDER BY s), array_agg(coalesce(h.hash, decode(repeat('00', 32), 'hex')) ORDER BY s)
      INTO heads_seqs, heads_hashes
      FROM generate_series(0, inbox._log_stripes() - 1) s
      LEFT JOIN LATERAL (SELECT d.seq, d.hash FROM inbox.delivery_batches d
                          WHERE d.stripe = s ORDER BY d.seq DESC LIMIT 1) h ON true;
    SELECT * INTO last FROM inbox.log_seals l ORDER BY l.id DESC LIMIT 1;
    IF last.seqs IS NOT DISTINCT FROM heads_seqs THEN
        RETURN NULL;
    END IF;
    new_id := nextval(pg_get_serial_sequence('inbox.log_seals', 'id'));
    INSERT INTO inbox.log_seals (id, sealed_at, seqs, hashes, hash)
    OVERRIDING SYSTEM VALUE
    VALUES (new_id, at, heads_seqs, heads_hashes,
            inbox._seal_hash(coalesce(last.hash, decode(repeat('00', 32), 'hex')), new_id, at,
                             heads_seqs, heads_hashes));
    RETURN new_id;
END
$$;
COMMENT ON FUNCTION inbox.seal_log() IS
  'seal the delivery log (scheduled by inbox.schedule); the new seal''s id, NULL when nothing was appended';

-- Checks the log between two times and returns its first broken link, or no
-- row. The range is widened to seals: it starts at the last seal at or
-- before from_time (NULL: the beginning) and ends at the first seal at or
-- after to_time (NULL: the last row). Checked: every link of every stripe
-- in the range (hash over the previous hash and the row; no missing seq),
-- then every seal in the range against the seal before it and the rows it
-- sealed (so a tail truncated below the last seal is found).
CREATE FUNCTION inbox.verify_log(from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL)
RETURNS TABLE (stripe int, seq bigint, seal_id bigint, problem text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    zeros CONSTANT bytea := decode(repeat('00', 32), 'hex');
    stripes CONSTANT int := inbox._log_stripes();
    first_seal inbox.log_seals;
    end_seal inbox.log_seals;
    s record;
    k int;
    lo bigint;
    lo_hash bytea;
    hi bigint;
    got record;
BEGIN
    IF from_time > to_time THEN
        RAISE EXCEPTION 'from_time % is after to_time %', from_time, to_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF from_time IS NOT NULL THEN
        SELECT * INTO first_seal FROM inbox.log_seals l WHERE l.sealed_at <= from_time ORDER BY l.id DESC LIMIT 1;
    END IF;
    IF to_time IS NOT NULL THEN
        SELECT * INTO end_seal FROM inbox.log_seals l WHERE l.sealed_at >= to_time ORDER BY l.id LIMIT 1;
    END IF;

    FOR k IN 0 .. stripes - 1 LOOP
        lo := coalesce(first_seal.seqs[k + 1], 0);
        lo_hash := coalesce(first_seal.hashes[k + 1], zeros);
        hi := end_seal.seqs[k + 1];
        -- Every link of the range: the hash over the previous one, no gap,
        -- and the count the rollups read agreeing with the flags it counts.
        SELECT x.seq, x.expected_seq INTO got
          FROM (SELECT d.seq, d.hash, d.differing,
                       (SELECT count(*) FROM unnest(d.payload_differs) f WHERE f) AS counted,
                       coalesce(lag(d.seq) OVER w, lo) + 1 AS expected_seq,
                       sha256(coalesce(lag(d.hash) OVER w, lo_hash) || inbox._batch_message(d)) AS computed
                  FROM inbox.delivery_batches d
                 WHERE d.stripe = k AND d.seq > lo AND (hi IS NULL OR d.seq <= hi)
                WINDOW w AS (ORDER BY d.seq)) x
         WHERE x.seq <> x.expected_seq OR x.computed IS DISTINCT FROM x.hash OR x.counted <> x.differing
         ORDER BY x.seq LIMIT 1;
        IF FOUND THEN
            IF got.seq <> got.expected_seq THEN
                RETURN QUERY SELECT k, got.expected_seq, NULL::bigint,
                                    format('rows %s to %s are missing', got.expected_seq, got.seq - 1);
            ELSE
                RETURN QUERY SELECT k, got.seq, NULL::bigint,
                                    'the row does not match its hash or the row before it'::text;
            END IF;
            RETURN;
        END IF;
    END LOOP;

    -- The seals of the range: each chained to the one before it, and the
    -- row each sealed still there, unchanged (a truncated tail shows here).
    FOR s IN SELECT l.*, (SELECT p.hash FROM inbox.log_seals p WHERE p.id < l.id
                           ORDER BY p.id DESC LIMIT 1) AS prev_hash
               FROM inbox.log_seals l
              WHERE l.id >= coalesce(first_seal.id, 0) AND (end_seal.id IS NULL OR l.id <= end_seal.id)
              ORDER BY l.id LOOP
        IF cardinality(s.seqs) <> stripes OR cardinality(s.hashes) <> stripes
           OR s.hash IS DISTINCT FROM inbox._seal_hash(coalesce(s.prev_hash, zeros), s.id, s.sealed_at,
                                                       s.seqs, s.hashes) THEN
            RETURN QUERY SELECT NULL::int, NULL::bigint, s.id,
                                'the seal does not match its contents or the seal before it'::text;
            RETURN;
        END IF;
        FOR k IN 0 .. stripes - 1 LOOP
            IF s.seqs[k + 1] > 0 AND NOT EXISTS (SELECT 1 FROM inbox.delivery_batches d
                                                  WHERE d.stripe = k AND d.seq = s.seqs[k + 1]
                                                    AND d.hash = s.hashes[k + 1]) THEN
                RETURN QUERY SELECT k, s.seqs[k + 1], s.id,
                                    'the row this seal sealed is missing or changed: rows were removed or rewritten'::text;
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION inbox.verify_log(timestamptz, timestamptz) IS
  'the first broken link of the delivery log between two times (widened to seals), or no row';

CREATE OR REPLACE FUNCTION inbox.refresh_stats()
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    started timestamptz := clock_timestamp();
    this_minute timestamptz := date_trunc('minute', now());
    st inbox.stats_state;
    prev_at timestamptz;
    low bigint;
    new_low bigint;
    hist_low bigint;
    new_hist bigint;
    candidates bigint;
    ref inbox.references;
    chunk_rows int;
    chunk_orphans int;
    chunk_last text;
    cron_failed int;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1885957733, 1) THEN
        RETURN jsonb_build_object('skipped', 'busy');
    END IF;
    SELECT * INTO st FROM inbox.stats_state;
    IF NOT FOUND THEN
        -- First refresh: the last hour, read backwards along the primary key.
        prev_at := now() - interval '1 hour';
        low := coalesce((SELECT e.id FROM inbox.events e WHERE e.first_received_at < prev_at
                          ORDER BY e.id DESC LIMIT 1), 0);
        hist_low := coalesce((SELECT h.id FROM inbox.event_history h WHERE h.recorded_at < prev_at
                               ORDER BY h.id DESC LIMIT 1), 0);
    ELSE
        prev_at := st.refreshed_at;
        low := st.event_watermark;
        hist_low := st.history_watermark;
    END IF;

    -- Every candidate as it is now, beside what it was at the last refresh.
    -- (Everything later statements need from an event is copied here, read
    -- once by id: no statement below joins the events table, whatever the
    -- planner would think of a temp table without statistics.)
    IF to_regclass('pg_temp.inbox_stats_diff') IS NULL THEN
        CREATE TEMP TABLE inbox_stats_diff (
            id bigint, provider text, external_id text, status text, attempts int, delivery_count int,
            received_at timestamptz, first_received_at timestamptz, processed_at timestamptz,
            source text, last_error text, payload_md5 text, new_event boolean,
            body_md5 text, skew float8,
            s_status text, s_attempts int, s_delivery_count int, s_payload_md5 text
        ) ON COMMIT DELETE ROWS;
    END IF;
    TRUNCATE inbox_stats_diff;
    INSERT INTO inbox_stats_diff
    SELECT e.id, e.provider, e.external_id, e.status, e.attempts, e.delivery_count, e.received_at,
           e.first_received_at, e.processed_at, e.source, e.last_error,
           NULL,  -- payload_md5: unused since the delivery log counts changed payloads
           s.id IS NULL,
           -- new events: the body, for replays (64 bytes or more), and the provider's clock
           CASE WHEN s.id IS NULL AND octet_length(e.payload::text) >= 64 THEN md5(e.payload::text) END,
           CASE WHEN s.id IS NULL THEN abs(extract(epoch FROM e.first_received_at)
                                           - inbox._provider_epoch(e.headers, e.payload)) END,
           s.status, s.attempts, s.delivery_count, s.payload_md5
      FROM (SELECT c.id FROM inbox.events c WHERE c.id > low
            UNION SELECT x.id FROM inbox.stats_seen x) ids
      CROSS JOIN LATERAL (SELECT * FROM inbox.events ev WHERE ev.id = ids.id) e
      LEFT JOIN inbox.stats_seen s ON s.id = e.id;
    GET DIAGNOSTICS candidates = ROW_COUNT;

    -- Counters, each added to the minute it happened in.
    WITH facts AS (
        SELECT d.provider, date_trunc('minute', d.first_received_at) AS minute,
               1 AS arrivals, (d.source = 'backfill')::int AS backfilled,
               0 AS redeliveries, 0 AS claims, 0 AS first_claims, 0 AS processed, 0 AS dead,
               0 AS payload_changed, NULL::bigint AS max_seq,
               d.skew,
               NULL::int AS latency_bucket, NULL::int AS claim_bucket
          FROM inbox_stats_diff d
         WHERE d.new_event
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.received_at), 0, 0,
               d.delivery_count - coalesce(d.s_delivery_count, 1), 0, 0, 0, 0,
               0,  -- payload_changed: counted from inbox.deliveries below
               NULL, NULL, NULL, NULL
          FROM inbox_stats_diff d
         WHERE d.delivery_count > coalesce(d.s_delivery_count, 1)
        UNION ALL
        SELECT d.provider, this_minute, 0, 0, 0, d.attempts - coalesce(d.s_attempts, 0),
               (coalesce(d.s_attempts, 0) = 0)::int, 0, 0, 0, NULL, NULL, NULL,
               CASE WHEN coalesce(d.s_attempts, 0) = 0 THEN inbox._hist_bucket(
                   least(extract(epoch FROM coalesce(d.processed_at, now()) - d.first_received_at),
                         greatest(extract(epoch FROM prev_at - d.first_received_at), 0))) END
          FROM inbox_stats_diff d
         WHERE d.attempts > coalesce(d.s_attempts, 0)
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.processed_at), 0, 0, 0, 0, 0,
               (d.status = 'done')::int, (d.status = 'dead')::int, 0, NULL, NULL,
               CASE WHEN d.status = 'done' THEN
                   inbox._hist_bucket(extract(epoch FROM d.processed_at - d.first_received_at)) END,
               NULL
          FROM inbox_stats_diff d
         WHERE d.status IN ('done', 'dead') AND d.status IS DISTINCT FROM d.s_status
        UNION ALL
        SELECT d.provider, date_trunc('minute', d.first_received_at), 0, 0, 0, 0, 0, 0, 0, 0,
               substr(d.id_text, length(g.prefix) + 1)::bigint, NULL, NULL, NULL
          FROM (SELECT x.provider, x.first_received_at, x.external_id AS id_text
                  FROM inbox_stats_diff x WHERE x.new_event) d
          JOIN (SELECT s.provider, split_part(s.pattern, '{', 1) AS prefix
                  FROM inbox.gap_sources s WHERE s.kind = 'sequence') g ON g.provider = d.provider
         WHERE left(d.id_text, length(g.prefix)) = g.prefix
           AND substr(d.id_text, length(g.prefix) + 1) ~ '^[0-9]{1,18}$'
    )
    INSERT INTO inbox.stats_minute AS m
           (provider, minute, arrivals, backfilled, redeliveries, claims, first_claims, processed,
            dead, payload_changed, max_seq, skew_max_s, latency_hist, claim_hist)
    SELECT f.provider, f.minute, sum(f.arrivals), sum(f.backfilled), sum(f.redeliveries),
           sum(f.claims), sum(f.first_claims), sum(f.processed), sum(f.dead),
           sum(f.payload_changed), max(f.max_seq), max(f.skew),
           inbox._hist_of(array_agg(f.latency_bucket) FILTER (WHERE f.latency_bucket IS NOT NULL)),
           inbox._hist_of(array_agg(f.claim_bucket) FILTER (WHERE f.claim_bucket IS NOT NULL))
      FROM facts f
     GROUP BY f.provider, f.minute
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET arrivals = m.arrivals + EXCLUDED.arrivals,
           backfilled = m.backfilled + EXCLUDED.backfilled,
           redeliveries = m.redeliveries + EXCLUDED.redeliveries,
           claims = m.claims + EXCLUDED.claims,
           first_claims = m.first_claims + EXCLUDED.first_claims,
           processed = m.processed + EXCLUDED.processed,
           dead = m.dead + EXCLUDED.dead,
           payload_changed = m.payload_changed + EXCLUDED.payload_changed,
           max_seq = greatest(m.max_seq, EXCLUDED.max_seq),
           skew_max_s = greatest(m.skew_max_s, EXCLUDED.skew_max_s),
           latency_hist = inbox._hist_add(m.latency_hist, EXCLUDED.latency_hist),
           claim_hist = inbox._hist_add(m.claim_hist, EXCLUDED.claim_hist);

    -- Replays: new events whose payload another new event of the window has.
    -- Bodies under 64 bytes ({} from a test button) say nothing: a real
    -- event body carries its own ids and times.
    INSERT INTO inbox.stats_minute AS m (provider, minute, replay_suspects)
    SELECT r.provider, this_minute, sum(r.n - 1)
      FROM (SELECT d.provider, count(*) AS n FROM inbox_stats_diff d
             WHERE d.body_md5 IS NOT NULL
             GROUP BY d.provider, d.body_md5 HAVING count(*) > 1) r
     GROUP BY r.provider
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE SET replay_suspects = m.replay_suspects + EXCLUDED.replay_suspects;

    -- Error classes of the attempts that failed in the window.
    INSERT INTO inbox.error_classes AS c (provider, class, first_seen_at, last_seen_at, seen)
    SELECT d.provider, inbox._error_class(d.last_error), now(), now(), count(*)
      FROM inbox_stats_diff d
     WHERE d.last_error IS NOT NULL AND (d.new_event OR d.attempts <> d.s_attempts OR d.status <> d.s_status)
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT error_classes_pkey DO UPDATE SET last_seen_at = now(), seen = c.seen + EXCLUDED.seen;

    -- Reconcile's actions (lease expiries, verify mismatches), by id.
    new_hist := coalesce((SELECT max(h.id) FROM inbox.event_history h WHERE h.id > hist_low), hist_low);
    INSERT INTO inbox.stats_minute AS m (provider, minute, lease_expiries, verify_mismatches)
    SELECT e.provider, date_trunc('minute', h.recorded_at),
           count(*) FILTER (WHERE h.reason IN ('lease_reclaimed', 'lease_held')),
           count(*) FILTER (WHERE h.reason = 'verify_mismatch')
      FROM inbox.event_history h JOIN inbox.events e ON e.id = h.event_id
     WHERE h.id > hist_low AND h.id <= new_hist
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET lease_expiries = m.lease_expiries + EXCLUDED.lease_expiries,
           verify_mismatches = m.verify_mismatches + EXCLUDED.verify_mismatches;

    -- Tombstones and backfill outcomes of the window, through their time indexes.
    INSERT INTO inbox.stats_minute AS m (provider, minute, tombstoned, backfill_fetched,
                                         backfill_not_found, backfill_gave_up)
    SELECT x.provider, x.minute, sum(x.t), sum(x.f), sum(x.nf), sum(x.g)
      FROM (SELECT t.provider, date_trunc('minute', t.created_at) AS minute, 1 AS t, 0 AS f, 0 AS nf, 0 AS g
              FROM inbox.tombstones t WHERE t.created_at > prev_at AND t.created_at <= now()
            UNION ALL
            SELECT b.provider, date_trunc('minute', b.finished_at), 0,
                   (b.status IN ('fetched', 'arrived'))::int, (b.status = 'not_found')::int,
                   (b.status = 'gave_up')::int
              FROM inbox.backfill_requests b WHERE b.finished_at > prev_at AND b.finished_at <= now()) x
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET tombstoned = m.tombstoned + EXCLUDED.tombstoned,
           backfill_fetched = m.backfill_fetched + EXCLUDED.backfill_fetched,
           backfill_not_found = m.backfill_not_found + EXCLUDED.backfill_not_found,
           backfill_gave_up = m.backfill_gave_up + EXCLUDED.backfill_gave_up;

    -- Effect tables: every event done in the window must have its row.
    FOR ref IN SELECT * FROM inbox.references r WHERE r.kind = 'effect' ORDER BY r.id LOOP
        EXECUTE format('INSERT INTO inbox.stats_minute AS m (provider, minute, missing_effects)
                        SELECT $1, date_trunc(''minute'', d.processed_at), count(*)
                          FROM inbox_stats_diff d
                         WHERE d.provider = $1 AND d.status = ''done'' AND d.s_status IS DISTINCT FROM ''done''
                           AND NOT EXISTS (SELECT 1 FROM %s u WHERE u.%I::text = d.external_id)
                         GROUP BY 2
                        ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
                           SET missing_effects = m.missing_effects + EXCLUDED.missing_effects',
                       ref.rel, ref.col) USING ref.provider;
    END LOOP;

    -- Reference tables: 10000 values per refresh, in value order, round and round.
    FOR ref IN SELECT * FROM inbox.references r WHERE r.kind = 'reference' ORDER BY r.id LOOP
        EXECUTE format('SELECT count(*)::int, count(*) FILTER (WHERE NOT EXISTS (
                                SELECT 1 FROM inbox.events e WHERE e.provider = $1 AND e.external_id = v.v)
                              AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t
                                WHERE t.provider = $1 AND t.external_id = v.v))::int, max(v.v)
                          FROM (SELECT u.%1$I::text AS v FROM %2$s u
                                 WHERE u.%1$I IS NOT NULL AND ($2::text IS NULL OR u.%1$I::text > $2)
                                 ORDER BY u.%1$I::text LIMIT 10000) v', ref.col, ref.rel)
          INTO chunk_rows, chunk_orphans, chunk_last USING ref.provider, ref.sweep_cursor;
        IF chunk_rows < 10000 THEN
            UPDATE inbox.references r SET sweep_cursor = NULL, cycle_orphans = 0,
                   last_orphans = ref.cycle_orphans + chunk_orphans WHERE r.id = ref.id;
        ELSE
            UPDATE inbox.references r SET sweep_cursor = chunk_last,
                   cycle_orphans = ref.cycle_orphans + chunk_orphans WHERE r.id = ref.id;
        END IF;
    END LOOP;

    -- Gauges: one row per provider for this minute, from the open set, the
    -- unresolved gaps and the reference sweeps.
    INSERT INTO inbox.stats_minute AS m (provider, minute, backlog, due_unclaimed, oldest_pending_s,
                                         leases_overdue, held, open_gaps, gaps_past_grace,
                                         oldest_gap_s, high_seq, orphans)
    SELECT p.name, this_minute, coalesce(o.backlog, 0), coalesce(o.due_unclaimed, 0), o.oldest_pending_s,
           coalesce(o.leases_overdue, 0), coalesce(o.held, 0), coalesce(g.open_gaps, 0),
           coalesce(g.past_grace, 0), g.oldest_gap_s, gs.high_number, r.orphans
      FROM inbox.providers p
      LEFT JOIN (SELECT e.provider, count(*) AS backlog,
                        count(*) FILTER (WHERE e.status = 'pending' AND e.next_attempt_at < now() - interval '5 minutes') AS due_unclaimed,
                        extract(epoch FROM now() - min(e.first_received_at) FILTER (WHERE e.status = 'pending')) AS oldest_pending_s,
                        count(*) FILTER (WHERE e.status = 'processing' AND e.lease_expires_at < now() - interval '2 minutes'
                                           AND pp.on_lease_expiry = 'reclaim') AS leases_overdue,
                        -- held: an expired lease of a 'hold' provider, or an event a
                        -- transition rule held (issue 12, 27_ordering.sql)
                        count(*) FILTER (WHERE e.status = 'processing'
                                           AND ((e.lease_expires_at <= now() AND pp.on_lease_expiry = 'hold')
                                                OR e.held_reason IS NOT NULL)) AS held
                   FROM inbox.events e JOIN inbox.providers pp ON pp.name = e.provider
                  WHERE e.processed_at IS NULL
                  GROUP BY e.provider) o ON o.provider = p.name
      LEFT JOIN (SELECT gp.provider, count(*) AS open_gaps,
                        count(*) FILTER (WHERE gp.first_seen_at < now() - coalesce(src.grace, interval '1 hour')) AS past_grace,
                        extract(epoch FROM now() - min(gp.first_seen_at)) AS oldest_gap_s
                   FROM inbox.gaps gp LEFT JOIN inbox.gap_sources src ON src.provider = gp.provider
                  WHERE gp.status <> 'resolved'
                  GROUP BY gp.provider) g ON g.provider = p.name
      LEFT JOIN inbox.gap_sources gs ON gs.provider = p.name AND gs.kind = 'sequence'
      LEFT JOIN (SELECT rf.provider, sum(greatest(rf.last_orphans, rf.cycle_orphans))::int AS orphans
                   FROM inbox.references rf WHERE rf.kind = 'reference' GROUP BY rf.provider) r ON r.provider = p.name
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE
       SET backlog = EXCLUDED.backlog, due_unclaimed = EXCLUDED.due_unclaimed,
           oldest_pending_s = EXCLUDED.oldest_pending_s, leases_overdue = EXCLUDED.leases_overdue,
           held = EXCLUDED.held, open_gaps = EXCLUDED.open_gaps, gaps_past_grace = EXCLUDED.gaps_past_grace,
           oldest_gap_s = EXCLUDED.oldest_gap_s, high_seq = EXCLUDED.high_seq, orphans = EXCLUDED.orphans;

    -- The next snapshot: open events, and those past the new watermark (ids
    -- of transactions still in flight are below it only if they have been
    -- open for over two minutes).
    new_low := greatest(low, coalesce((SELECT e.id FROM inbox.events e
                                        WHERE e.id > low AND e.first_received_at < now() - interval '2 minutes'
                                        ORDER BY e.id DESC LIMIT 1), low));
    -- DELETE, not TRUNCATE: its lock would queue the refresh behind a pg_dump.
    DELETE FROM inbox.stats_seen;
    INSERT INTO inbox.stats_seen (id, status, attempts, delivery_count, payload_md5)
    SELECT d.id, d.status, d.attempts, d.delivery_count, d.payload_md5
      FROM inbox_stats_diff d WHERE d.id > new_low
    UNION
    SELECT e.id, e.status, e.attempts, e.delivery_count, NULL
      FROM inbox.events e WHERE e.processed_at IS NULL;

    -- Re-deliveries whose body differed from the payload a worker was
    -- processing (kept: issue 12), from the delivery log's partial index
    -- (calls with such a body). Like the outbox's dead messages below, the
    -- minutes of the last hour are counted again, not added to, so a late
    -- commit is counted once.
    INSERT INTO inbox.stats_minute AS m (provider, minute, payload_changed)
    SELECT t.provider, date_trunc('minute', b.received_at), count(*)
      FROM inbox.delivery_batches b
     CROSS JOIN LATERAL unnest(b.providers, b.payload_differs) AS t(provider, differs)
     WHERE b.differing > 0 AND b.received_at >= date_trunc('minute', now() - interval '1 hour')
       AND t.differs
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE SET payload_changed = EXCLUDED.payload_changed;

    -- Outbox messages that went dead (issue 11): "dead and visible to the
    -- checks". The topic is no provider: rows keyed 'outbox:<topic>' (a
    -- provider name has no colon), read by outbox_dead_new and inbox.health.
    -- The minutes of the last hour are counted again, not added to: a
    -- message whose transaction committed after an earlier refresh is
    -- counted once all the same (a partial index holds dead messages only).
    INSERT INTO inbox.stats_minute AS m (provider, minute, dead)
    SELECT 'outbox:' || d.topic, date_trunc('minute', d.processed_at), count(*)
      FROM inbox.outbox_delivery d
     WHERE d.status = 'dead' AND d.processed_at >= date_trunc('minute', now() - interval '1 hour')
     GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT stats_minute_pkey DO UPDATE SET dead = EXCLUDED.dead;

    -- The watcher's own health.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        EXECUTE 'SELECT count(*)::int FROM cron.job_run_details d JOIN cron.job j ON j.jobid = d.jobid
                  WHERE j.jobname LIKE ''pg\_inbox:%'' AND d.status = ''failed'' AND d.end_time > $1'
           INTO cron_failed USING prev_at;
    END IF;
    INSERT INTO inbox.stats_global AS g (minute, refreshed_at, refresh_ms, last_reconcile_at, last_gap_scan_at,
                                         cron_failures, dead_tuple_ratio, dead_tuples, vacuum_age_s, xid_age)
    SELECT this_minute, now(), extract(epoch FROM clock_timestamp() - started) * 1000,
           (SELECT r.started_at FROM inbox.reconcile_runs r WHERE NOT r.skipped ORDER BY r.started_at DESC LIMIT 1),
           (SELECT min(s.last_scan_at) FROM inbox.gap_sources s),
           cron_failed,
           t.n_dead_tup::float8 / nullif(t.n_live_tup + t.n_dead_tup, 0), t.n_dead_tup,
           extract(epoch FROM now() - greatest(t.last_vacuum, t.last_autovacuum)),
           (SELECT age(d.datfrozenxid) FROM pg_catalog.pg_database d WHERE d.datname = current_database())
      FROM pg_catalog.pg_stat_user_tables t WHERE t.relid = 'inbox.events'::regclass
    ON CONFLICT ON CONSTRAINT stats_global_pkey DO UPDATE
       SET refreshed_at = EXCLUDED.refreshed_at, refresh_ms = EXCLUDED.refresh_ms,
           last_reconcile_at = EXCLUDED.last_reconcile_at, last_gap_scan_at = EXCLUDED.last_gap_scan_at,
           cron_failures = coalesce(g.cron_failures, 0) + coalesce(EXCLUDED.cron_failures, 0),
           dead_tuple_ratio = EXCLUDED.dead_tuple_ratio, dead_tuples = EXCLUDED.dead_tuples,
           vacuum_age_s = EXCLUDED.vacuum_age_s, xid_age = EXCLUDED.xid_age;

    INSERT INTO inbox.stats_state AS s (singleton, refreshed_at, event_watermark, history_watermark)
    VALUES (true, now(), new_low, new_hist)
    ON CONFLICT ON CONSTRAINT stats_state_pkey DO UPDATE
       SET refreshed_at = EXCLUDED.refreshed_at, event_watermark = EXCLUDED.event_watermark,
           history_watermark = EXCLUDED.history_watermark;

    -- Bounded history: 35 days of minutes (four weeks of bands and a margin).
    DELETE FROM inbox.stats_minute m WHERE m.minute < now() - interval '35 days';
    DELETE FROM inbox.stats_global g WHERE g.minute < now() - interval '35 days';
    DELETE FROM inbox.receiver_stats r WHERE r.minute < now() - interval '35 days';

    RETURN jsonb_build_object('since', prev_at, 'candidates', candidates, 'watermark', new_low,
                              'elapsed_ms', round((extract(epoch FROM clock_timestamp() - started) * 1000)::numeric, 1));
END
$$;

SELECT pg_catalog.pg_extension_config_dump('inbox.log_seals_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.delivery_batches', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.delivery_duplicates', '');
SELECT pg_catalog.pg_extension_config_dump('inbox.log_seals', '');
REVOKE ALL ON ALL TABLES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    inbox.ingest(text, text, jsonb, jsonb, text, bytea, text),
    inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text, bytea[], text[])
  TO inbox_receiver;

-- A database that had the jobs scheduled gets seal_log too, paused when
-- the others are paused.
DO $$
DECLARE
    active boolean;
    job bigint;
BEGIN
    IF inbox._cron_missing() IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT bool_or(j.active) INTO active FROM cron.job j
     WHERE j.jobname IN ('pg_inbox:reconcile', 'pg_inbox:scan_gaps');
    IF active IS NULL THEN
        RETURN;
    END IF;
    job := cron.schedule('pg_inbox:seal_log', inbox._cron_expression('5 minutes'),
                         format('SELECT inbox.run_job(%L, %L)', 'seal_log', interval '5 minutes'));
    IF NOT active THEN
        PERFORM cron.alter_job(job, active => false);
    END IF;
END
$$;

-- Issue 12: replay, resolve, retention (sql/src/78_lifecycle.sql, repeated here
-- verbatim), and the purge job (sql/src/60_schedule.sql).
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

-- run_job learns the jobs seal_log and purge; schedule() schedules them.
-- Runs a scheduled job at most once per window of length `every`.
-- Returns the job's result, or {"skipped": "busy"} when another run of the
-- job holds its lock, or {"skipped": "window already claimed"}.
CREATE OR REPLACE FUNCTION inbox.run_job(job text, every interval)
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

-- The command of a scheduled job. purge drains its backlog in short
-- transactions (CALL inbox.purge_all, which commits), for at most 4/5 of its
-- interval; it needs no window claim: its batches take a lock of their own.
CREATE FUNCTION inbox._job_command(job text, every interval)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN job = 'purge'
                THEN format('CALL inbox.purge_all(max_duration => %L)', every * 0.8)
                ELSE format('SELECT inbox.run_job(%L, %L)', job, every) END
$$;

DROP FUNCTION inbox.schedule(interval, interval, interval, interval);
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

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC;

-- A database that had the jobs scheduled gets the purge job too, as
-- inbox.schedule() with its defaults installs it, paused when the others are.
DO $$
DECLARE
    active boolean;
    job bigint;
BEGIN
    IF inbox._cron_missing() IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT bool_or(j.active) INTO active FROM cron.job j
     WHERE j.jobname IN ('pg_inbox:reconcile', 'pg_inbox:scan_gaps');
    IF active IS NULL THEN
        RETURN;
    END IF;
    job := cron.schedule('pg_inbox:purge', inbox._cron_expression('5 minutes'),
                         inbox._job_command('purge', '5 minutes'));
    IF NOT active THEN
        PERFORM cron.alter_job(job, active => false);
    END IF;
END
$$;

-- Issue 13 (the drain): every row keeps room for one more version on its
-- page, so claims are HOT updates (sql/src/00_schema.sql). Pages written
-- before the update keep their density until rewritten; docs/upgrade.md
-- says how to rewrite them, if wanted, and what that locks. Reset and set
-- again in the install script's order, so the table's options read the same
-- as a fresh install's (the upgrade test compares them).
ALTER TABLE inbox.events RESET (fillfactor, autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor,
    autovacuum_vacuum_cost_delay);
ALTER TABLE inbox.events SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 1);

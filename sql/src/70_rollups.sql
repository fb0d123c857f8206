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
    payload_changed    int NOT NULL DEFAULT 0,  -- re-delivered with another body while processing (kept)
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
    payload_md5    text  -- unused (NULL): inbox.deliveries records changed bodies
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
COMMENT ON FUNCTION inbox.refresh_stats() IS
  'Roll up what happened since the last refresh into inbox.stats_minute; cost bounded by the window and the open set';

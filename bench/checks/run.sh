#!/usr/bin/env bash
# Anomaly checks benchmark: refresh + check run against tables of growing
# size, and ingest throughput while they run.
#
#   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... bash bench/checks/run.sh
#   (or: make bench BENCH=checks)
#
# Needs a throwaway cluster with pg_inbox installed in PGDATABASE: it loads
# millions of events. Knobs: SIZES (events in the table, ascending; default
# "10000 1000000", add 10000000 for the 10M point), REPS (timed windows per
# size, default 5), WINDOW (events arriving and processed per refresh window,
# default 1000), INGEST_SECONDS (pgbench run, default 20), EVERY (seconds
# between refresh+checks during ingest, default 5: 12 times the default
# schedule of once a minute), PAIRS (ingest runs, default 3).
set -euo pipefail
cd "$(dirname "$0")"
: "${PGDATABASE:?set PGHOST, PGPORT, PGUSER and PGDATABASE}"
sizes=${SIZES:-"10000 1000000"}
reps=${REPS:-5}
window=${WINDOW:-1000}
ingest_seconds=${INGEST_SECONDS:-20}
every=${EVERY:-5}
work=$(mktemp -d /tmp/pg_inbox-bench-checks.XXXXXX)
trap 'rm -rf "$work"' EXIT

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

psql_q -o /dev/null <<'SQL'
SELECT inbox.register_provider(p) FROM unnest(ARRAY['bench_old', 'bench_live', 'bench_ing']) p;
-- "ms blocks": the statement's execution time and the shared and local
-- buffers it touched (hit or read), nested statements included. The block
-- count does not depend on the machine's load: it is the cost model.
CREATE OR REPLACE FUNCTION public.bench_measure(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || sql INTO plan;
    RETURN format('%s %s', round((plan -> 0 ->> 'Execution Time')::numeric, 1),
                  (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint
                  + (plan -> 0 -> 'Plan' ->> 'Local Hit Blocks')::bigint + (plan -> 0 -> 'Plan' ->> 'Local Read Blocks')::bigint);
END
$$;
SQL

# One window: WINDOW new events, WINDOW claimed and completed, then the
# refresh and the check run, each measured. Prints
# "refresh_ms refresh_blocks checks_ms checks_blocks" per window.
windows() {
  {
    for _ in $(seq "$reps"); do
      echo "SELECT count(*) FROM (SELECT inbox.ingest_batch(array_fill('bench_live'::text, ARRAY[$window]),
              ARRAY(SELECT 'l-' || txid_current() || '-' || g FROM generate_series(1, $window) g),
              array_fill('{\"a\": 1}'::jsonb, ARRAY[$window]))) x \\g /dev/null"
      echo "SELECT count(*) FROM (SELECT inbox.complete_batch(array_agg(id), array_agg(lease_token))
              FROM inbox.claim($window, provider => 'bench_live') HAVING count(*) > 0) x \\g /dev/null"
      echo "SELECT public.bench_measure('SELECT inbox.refresh_stats()') || ' ' || public.bench_measure('SELECT inbox.run_checks()');"
    done
  } | psql -X -q -At -v ON_ERROR_STOP=1
}

echo "== refresh + check run by table size ($reps windows of $window events each; medians)"
# The check run reads only the rollups: its time does not depend on the
# table, so it is the control. refresh/checks against the first size is the
# refresh's growth with the machine's drift between sizes taken out; the
# buffers touched are the same comparison without the machine at all.
printf '%-10s %-9s %11s %11s %9s %11s %9s %9s %10s\n' events size refresh_ms refresh_buf checks_ms checks_buf time_x norm_x buffers_x
base_refresh=""; base_checks=""
for size in $sizes; do
  have=$(psql_q -At -c "SELECT count(*) FROM inbox.events")
  if [ "$have" -lt "$size" ]; then
    # Old, processed events: the history a refresh must not read.
    psql_q -c "INSERT INTO inbox.events (provider, external_id, payload, status, processed_at, attempts,
                                          received_at, first_received_at)
               SELECT 'bench_old', 'o-' || n, jsonb_build_object('n', n, 'pad', repeat('x', 100)), 'done',
                      now() - interval '2 days', 1, now() - interval '2 days', now() - interval '2 days'
                 FROM generate_series($have + 1, $size) n"
    psql_q -c "VACUUM (ANALYZE) inbox.events" -c "CHECKPOINT"
  fi
  # Every size starts from the same state: no rollups, a first refresh.
  psql_q -o /dev/null -c "DELETE FROM inbox.stats_state" -c "DELETE FROM inbox.stats_seen" \
    -c "DELETE FROM inbox.stats_minute" -c "DELETE FROM inbox.check_state" -c "DELETE FROM inbox.check_results" \
    -c "DELETE FROM inbox.anomalies" -c "DELETE FROM inbox.band_samples" \
    -c "SELECT inbox.refresh_stats()"
  windows >"$work/w-$size"
  r=$(awk '{print $1}' "$work/w-$size" | median)
  rb=$(awk '{print $2}' "$work/w-$size" | median)
  c=$(awk '{print $3}' "$work/w-$size" | median)
  cb=$(awk '{print $4}' "$work/w-$size" | median)
  [ -z "$base_refresh" ] && { base_refresh=$r; base_checks=$c; base_blocks=$rb; }
  printf '%-10s %-9s %11s %11s %9s %11s %8sx %8sx %9sx\n' "$(psql_q -At -c "SELECT count(*) FROM inbox.events")" \
    "$(psql_q -At -c "SELECT pg_size_pretty(pg_total_relation_size('inbox.events'))")" "$r" "$rb" "$c" "$cb" \
    "$(calc "$r / $base_refresh")" "$(calc "($r / $c) / ($base_refresh / $base_checks)")" "$(calc "$rb / $base_blocks")"
done

echo
echo "== ingest while refresh + checks run (pgbench, 4 clients, ${ingest_seconds}s per run, every ${every}s)"
# Throughput inside the refresh+check intervals against throughput outside
# them, in the same run: the machine's drift and its neighbours' load hit
# both sides alike (side-by-side alone/during runs swung 0.67-1.08 here).
# At the schedule (once a minute) ingest sees this for the busy share of
# each minute only: the last column.
cat >"$work/ingest.sql" <<'PGB'
\set id random(1, 2000000000)
SELECT inbox.ingest('bench_ing', 'i' || :id || '-' || :client_id, '{"a": 1}');
PGB
psql_q -o /dev/null <<'SQL'
CREATE TABLE IF NOT EXISTS public.bench_watch_runs (started float8, finished float8);
CREATE OR REPLACE PROCEDURE public.bench_watch(seconds int, pause float8)
LANGUAGE plpgsql AS $$
DECLARE
    stop_at timestamptz := clock_timestamp() + make_interval(secs => seconds);
    t0 float8;
BEGIN
    WHILE clock_timestamp() < stop_at LOOP
        t0 := extract(epoch FROM clock_timestamp());
        PERFORM inbox.refresh_stats();
        PERFORM inbox.run_checks();
        INSERT INTO public.bench_watch_runs VALUES (t0, extract(epoch FROM clock_timestamp()));
        COMMIT;
        PERFORM pg_sleep(pause);
    END LOOP;
END
$$;
SQL
for round in $(seq "${PAIRS:-3}"); do
  psql_q -c "TRUNCATE public.bench_watch_runs"
  rm -f "$work"/pgb.*
  psql_q -c "CALL public.bench_watch($ingest_seconds, $every)" & watch_pid=$!
  (cd "$work" && pgbench -n -c 4 -j 2 -T "$ingest_seconds" -f ingest.sql -l --log-prefix=pgb >/dev/null 2>&1)
  wait "$watch_pid"
  psql_q -At -F ' ' -c "SELECT started, finished FROM public.bench_watch_runs ORDER BY started" >"$work/runs.txt"
  cat "$work"/pgb.* | awk '{ printf "%.6f\n", $5 + $6 / 1e6 }' | sort -n >"$work/tx.txt"
  awk -v round="$round" '
    NR == FNR { s[n] = $1; e[n] = $2; n++; next }
    { t[m++] = $1 }
    END {
      first = t[0]; last = t[m - 1]; inside = 0; k = 0; busy = 0
      for (i = 0; i < m; i++) {
        while (k < n && e[k] < t[i]) k++
        if (k < n && s[k] <= t[i]) inside++
      }
      for (j = 0; j < n; j++) {
        a = s[j] < first ? first : s[j]; b = e[j] > last ? last : e[j]
        if (b > a) { busy += b - a; per += e[j] - s[j] }
      }
      if (busy <= 0 || m == 0) { printf "round %d: no refresh overlapped the run\n", round; exit }
      rin = inside / busy; rout = (m - inside) / (last - first - busy); r = rin / rout
      f = (per / n) / 60
      printf "round %d: %3d refresh+check runs (%4.0f ms each), %4.1f%% of the time; ingest %5.0f tps during, %5.0f outside: %.2f; at the schedule (%.2f%% of each minute): %.3f\n",
             round, n, 1000 * per / n, 100 * busy / (last - first), rin, rout, r, 100 * f, 1 - f * (1 - r)
    }' "$work/runs.txt" "$work/tx.txt"
done
psql_q -o /dev/null -c "DROP PROCEDURE public.bench_watch(int, float8)" -c "DROP TABLE public.bench_watch_runs" \
  -c "DROP FUNCTION public.bench_measure(text)"

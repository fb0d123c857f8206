#!/usr/bin/env bash
# Gap scan, reconcile pass and ingest-under-reconcile benchmark.
#
#   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... bash bench/gaps/run.sh
#
# Needs a cluster where pg_inbox is installed in PGDATABASE (a throwaway one:
# it loads 1M events). Everything is measured side by side in one run and
# reported as ratios; bare times on this noisy machine mean little.
# Knobs: ROWS (events loaded, default 1000000), REPS (timed repetitions,
# default 5), INGEST_SECONDS (pgbench duration per side, default 15).
set -euo pipefail
cd "$(dirname "$0")"
: "${PGDATABASE:?set PGHOST, PGPORT, PGUSER and PGDATABASE}"
rows=${ROWS:-1000000}
reps=${REPS:-5}
ingest_seconds=${INGEST_SECONDS:-15}
work=$(mktemp -d /tmp/pg_inbox-bench-gaps.XXXXXX)
trap 'rm -rf "$work"' EXIT

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
calc() { awk "BEGIN { print $1 }"; }

# Median wall time in ms of one statement, run $reps times in one session.
median_ms() {
  { echo '\timing on'; for _ in $(seq "$reps"); do echo "$1"; done; } \
    | psql -X -q -v ON_ERROR_STOP=1 -o /dev/null 2>&1 \
    | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

# Medians in ms of two statements run alternately $reps times each in one
# session ("A B"): a burst of load on the machine hits both alike.
paired_ms() {
  { echo '\timing on'; for _ in $(seq "$reps"); do echo "$1"; echo "$2"; done; } \
    | psql -X -q -v ON_ERROR_STOP=1 -o /dev/null 2>&1 \
    | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' \
    | awk 'NR % 2 == 1 { a[++n] = $1 } NR % 2 == 0 { b[++m] = $1 }
           function median(x, k,   i, j, t) {
             for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
             return x[int((k + 1) / 2)] }
           END { printf "%s %s\n", median(a, n), median(b, m) }'
}

echo "== setup: $rows events numbered from 1000000 (evt_{n}, 1% missing), and 100k numbered from 1"
# About 1% of the numbers are missing (every 100th), a tenth of those
# tombstoned. Numbers start at 1000000 (order numbers often start high), so a
# window of 1M ids has one digit length; bench_small (1..101010) is the worst
# case, a window across five digit lengths of an unpadded sequence.
first=1000000
top=$(( first + rows + rows / 99 - 1 ))
psql_q -o /dev/null <<SQL
DELETE FROM inbox.events WHERE provider IN ('bench_seq', 'bench_small', 'bench_ing');
DELETE FROM inbox.tombstones WHERE provider IN ('bench_seq', 'bench_small');
SELECT inbox.register_provider('bench_seq');
SELECT inbox.register_provider('bench_small');
SELECT inbox.register_provider('bench_ing');
SELECT inbox.set_id_source('bench_seq', 'sequence', 'evt_{n}', $first);
SELECT inbox.set_id_source('bench_small', 'sequence', 'evt_{n}', 1);
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at, attempts)
SELECT 'bench_seq', 'evt_' || n, jsonb_build_object('n', n, 'pad', repeat('x', 100)),
       'done', now(), 1
FROM generate_series($first, $top) n WHERE n % 100 <> 0;
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at, attempts)
SELECT 'bench_small', 'evt_' || n, '{}', 'done', now(), 1
FROM generate_series(1, 101010) n WHERE n % 100 <> 0;
INSERT INTO inbox.tombstones (provider, external_id, reason)
SELECT p, 'evt_' || n, 'bench' FROM generate_series(1000, $top, 1000) n,
       unnest(ARRAY['bench_seq', 'bench_small']) p;
-- A realistic mix for the reconcile pass: a few open, expired and dead rows.
UPDATE inbox.events SET status = 'dead', last_error = 'bench'
 WHERE provider = 'bench_seq' AND id % 97 = 0;
UPDATE inbox.events SET status = 'pending', processed_at = NULL,
       first_received_at = now() - interval '2 hours'
 WHERE provider = 'bench_seq' AND id % 1009 = 0;
UPDATE inbox.events SET status = 'processing', processed_at = NULL, lease_token = gen_random_uuid(),
       lease_expires_at = now() - interval '1 minute'
 WHERE provider = 'bench_seq' AND id % 1013 = 0;
-- A verify function that reads the payload: the pass verifies 1000 done events.
CREATE OR REPLACE FUNCTION public.bench_verify(e inbox.events) RETURNS boolean
LANGUAGE sql STABLE AS \$\$ SELECT (e.payload ->> 'n') IS NOT NULL \$\$;
SELECT inbox.set_verify_function('bench_seq', 'public.bench_verify(inbox.events)');
SQL
psql_q -c "VACUUM (ANALYZE) inbox.events" -c "VACUUM (ANALYZE) inbox.tombstones"
psql_q -At -c "SELECT 'table: ' || count(*) || ' events, ' || pg_size_pretty(pg_total_relation_size('inbox.events')) FROM inbox.events"

echo
echo "== gap scan: inbox.find_gaps (C++ merge over the index) vs SQL NOT EXISTS (median of $reps, alternated, ms)"
printf '%-12s %-8s %-20s %10s %12s %8s %8s\n' provider window range find_gaps not_exists ratio gaps
for spec in "bench_seq 10000 1200001" "bench_seq 100000 1200001" "bench_seq 1000000 1000000" \
            "bench_small 100000 1"; do
  set -- $spec
  provider=$1; size=$2; from=$3; to=$(( from + size - 1 ))
  merge_sql="SELECT count(*) FROM inbox.find_gaps('$provider', $from, $to);"
  sql_sql="SELECT count(*) FROM generate_series($from::bigint, $to) n
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = '$provider' AND e.external_id = 'evt_' || n)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = '$provider' AND t.external_id = 'evt_' || n);"
  gaps_merge=$(psql_q -At -c "$merge_sql")
  gaps_sql=$(psql_q -At -c "$sql_sql")
  [ "$gaps_merge" = "$gaps_sql" ] || { echo "MISMATCH: find_gaps $gaps_merge, NOT EXISTS $gaps_sql" >&2; exit 1; }
  read -r m s < <(paired_ms "$merge_sql" "$sql_sql")
  printf '%-12s %-8s %-20s %10s %12s %7.2fx %8s\n' "$provider" "$size" "$from..$to" "$m" "$s" "$(calc "$s / $m")" "$gaps_merge"
done
echo "NOT EXISTS plan for the 100k window:"
psql_q -At -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM generate_series(1200001::bigint, 1300000) n
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = 'bench_seq' AND e.external_id = 'evt_' || n)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = 'bench_seq' AND t.external_id = 'evt_' || n);" | sed 's/^/  /'

echo
echo "== reconcile pass over the table (median of $reps, ms)"
# The first pass repairs the expired leases; the timed ones find the steady state.
psql_q -At -c "SELECT inbox.reconcile('bench')" | sed 's/^/first pass: /'
full=$(median_ms "SELECT inbox.reconcile('bench');")
sched=$(median_ms "SELECT inbox.reconcile('schedule');")
echo "pass with the dead count (trigger bench):         $full ms"
echo "scheduled pass (dead count reused up to 5 min):   $sched ms"

echo
echo "== ingest while a pass runs (pgbench, 4 clients, ${ingest_seconds}s per run)"
# pgbench logs every transaction's completion time; the passes' start and end
# are in inbox.reconcile_runs. Throughput inside the passes' intervals is
# compared with throughput outside them, in the same run: the machine's
# drift and its neighbours' load hit both sides alike.
cat >"$work/ingest.sql" <<'PGB'
\set id random(1, 2000000000)
SELECT inbox.ingest('bench_ing', 'i' || :id || '-' || :client_id, '{"a": 1}');
PGB
psql_q -o /dev/null <<'SQL'
CREATE OR REPLACE PROCEDURE public.bench_passes(trigger text, seconds int, pause float8)
LANGUAGE plpgsql AS $$
DECLARE
    stop_at timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
    WHILE clock_timestamp() < stop_at LOOP
        PERFORM inbox.reconcile(trigger);
        COMMIT;
        PERFORM pg_sleep(pause);
    END LOOP;
END
$$;
SQL
# during TRIGGER PAUSE: passes with PAUSE seconds between them while pgbench runs.
during() {
  local trigger=$1 pause=$2 since
  since=$(psql_q -At -c "SELECT extract(epoch FROM clock_timestamp())")
  rm -f "$work"/pgb.*
  psql_q -c "CALL public.bench_passes('$trigger', $ingest_seconds, $pause)" & local pid=$!
  (cd "$work" && pgbench -n -c 4 -j 2 -T "$ingest_seconds" -f ingest.sql -l --log-prefix=pgb >/dev/null 2>&1)
  wait "$pid"
  psql_q -At -F ' ' -c "SELECT extract(epoch FROM started_at), extract(epoch FROM finished_at)
    FROM inbox.reconcile_runs WHERE trigger = '$trigger' AND NOT skipped
     AND started_at >= to_timestamp($since) ORDER BY started_at" >"$work/passes.txt"
  cat "$work"/pgb.* | awk '{ printf "%.6f\n", $5 + $6 / 1e6 }' | sort -n >"$work/tx.txt"
  awk -v label="$3" '
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
        if (b > a) busy += b - a
      }
      if (busy <= 0 || m == 0) { printf "%-34s no pass overlapped the run\n", label; exit }
      rin = inside / busy; rout = (m - inside) / (last - first - busy)
      printf "%-34s %4d passes, %5.1f%% of the time; ingest %6.0f tps during, %6.0f tps outside: %5.1f%%\n",
             label, n, 100 * busy / (last - first), rin, rout, 100 * rin / rout
    }' "$work/passes.txt" "$work/tx.txt"
}
for round in 1 2; do
  during bench 1.0 "round $round, full passes, 1 s apart:"
  during schedule 0.1 "round $round, scheduled, 0.1 s apart:"
done

psql_q -c "SELECT inbox.set_verify_function('bench_seq', NULL)" -c "DROP FUNCTION public.bench_verify(inbox.events)" \
  -c "DROP PROCEDURE public.bench_passes(text, int, float8)" >/dev/null

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
# schedule of once a minute).
set -euo pipefail
cd "$(dirname "$0")"
: "${PGDATABASE:?set PGHOST, PGPORT, PGUSER and PGDATABASE}"
sizes=${SIZES:-"10000 1000000"}
reps=${REPS:-5}
window=${WINDOW:-1000}
ingest_seconds=${INGEST_SECONDS:-20}
every=${EVERY:-5}
work=$(mktemp -d /tmp/pg_inbox-bench-checks.XXXXXX)
trap 'rm -rf "$work"; [ -n "${loop_pid:-}" ] && kill "$loop_pid" 2>/dev/null; true' EXIT

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

psql_q -o /dev/null <<'SQL'
SELECT inbox.register_provider(p) FROM unnest(ARRAY['bench_old', 'bench_live', 'bench_ing']) p;
SQL

# One window: WINDOW new events, WINDOW claimed and completed, then the
# refresh and the check run, each timed. Prints "refresh_ms checks_ms" per rep.
windows() {
  {
    echo '\timing on'
    for _ in $(seq "$reps"); do
      echo "SELECT count(*) FROM (SELECT inbox.ingest_batch(array_fill('bench_live'::text, ARRAY[$window]),
              ARRAY(SELECT 'l-' || txid_current() || '-' || g FROM generate_series(1, $window) g),
              array_fill('{\"a\": 1}'::jsonb, ARRAY[$window]))) x;"
      echo "SELECT count(*) FROM (SELECT inbox.complete_batch(array_agg(id), array_agg(lease_token))
              FROM inbox.claim($window, provider => 'bench_live') HAVING count(*) > 0) x;"
      echo "SELECT inbox.refresh_stats();"
      echo "SELECT inbox.run_checks();"
    done
  } | psql -X -q -v ON_ERROR_STOP=1 -o /dev/null 2>&1 \
    | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk 'NR % 4 == 3 { r = $1 } NR % 4 == 0 { print r, $1 }'
}

echo "== refresh + check run by table size ($reps windows of $window events each, median ms)"
printf '%-12s %-10s %10s %10s %14s %14s\n' events size refresh checks refresh_ratio checks_ratio
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
    psql_q -c "VACUUM (ANALYZE) inbox.events"
  fi
  # Every size starts from the same state: no rollups, a first refresh.
  psql_q -o /dev/null -c "DELETE FROM inbox.stats_state" -c "DELETE FROM inbox.stats_seen" \
    -c "DELETE FROM inbox.stats_minute" -c "DELETE FROM inbox.check_state" -c "DELETE FROM inbox.check_results" \
    -c "DELETE FROM inbox.anomalies" -c "DELETE FROM inbox.band_samples" \
    -c "SELECT inbox.refresh_stats()"
  windows >"$work/w-$size"
  r=$(awk '{print $1}' "$work/w-$size" | median)
  c=$(awk '{print $2}' "$work/w-$size" | median)
  [ -z "$base_refresh" ] && { base_refresh=$r; base_checks=$c; }
  printf '%-12s %-10s %10s %10s %13sx %13sx\n' "$(psql_q -At -c "SELECT count(*) FROM inbox.events")" \
    "$(psql_q -At -c "SELECT pg_size_pretty(pg_total_relation_size('inbox.events'))")" "$r" "$c" \
    "$(calc "$r / $base_refresh")" "$(calc "$c / $base_checks")"
done

echo
echo "== ingest alone vs while refresh + checks run every ${every}s (pgbench, 4 clients, ${ingest_seconds}s per run)"
cat >"$work/ingest.sql" <<'PGB'
\set id random(1, 2000000000)
SELECT inbox.ingest('bench_ing', 'i' || :id || '-' || :client_id, '{"a": 1}');
PGB
tps() { (cd "$work" && pgbench -n -c 4 -j 2 -T "$ingest_seconds" -f ingest.sql 2>/dev/null) \
          | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'; }
loop() { while true; do psql_q -o /dev/null -c "SELECT inbox.refresh_stats()" -c "SELECT inbox.run_checks()"; sleep "$every"; done; }
printf '%-6s %10s %10s %8s\n' pair alone during ratio
for pair in 1 2; do
  alone=$(tps)
  loop & loop_pid=$!
  during=$(tps)
  kill "$loop_pid"; wait "$loop_pid" 2>/dev/null || true; loop_pid=""
  printf '%-6s %10.0f %10.0f %8s\n' "$pair" "$alone" "$during" "$(calc "$during / $alone")"
done

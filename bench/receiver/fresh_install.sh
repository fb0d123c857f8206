#!/usr/bin/env bash
# Issue 13's W5 row: the receiver started on an EMPTY inbox.events (what a
# fresh install meets) beside the same receiver started on a table of
# BENCH_FILLED_ROWS (200000) rows; 32 connections, pre-signed deliveries,
# group commit, every 200 a committed row. Each start opens new connections,
# so the receiver's statements are planned on the table as it is then.
# Autovacuum is off on the table while the receiver runs: no ANALYZE may
# re-plan mid-run, the plans must hold by construction. Empty and filled
# alternate, BENCH_FRESH_ROUNDS (2) rounds of BENCH_SECONDS (10).
#
#   make bench BENCH=receiver        (runs this after run.sh's own rounds)
#   INBOX_BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/db bench/receiver/fresh_install.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${INBOX_BENCH_DATABASE_URL:?set INBOX_BENCH_DATABASE_URL to a superuser URL of a database with pg_inbox}"
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_FRESH_ROUNDS:-2}
filled_rows=${BENCH_FILLED_ROWS:-200000}
source bench/receiver/common.sh

# Empties or fills the table, analyzes it (what a fresh install's or a
# running system's statistics say) and turns autovacuum off on it.
prepare() {  # empty|filled
  sql "TRUNCATE inbox.events CASCADE"
  [ "$1" = filled ] && sql "INSERT INTO inbox.events (provider, external_id, payload)
    SELECT 'bench', 'filled-$run_id-' || g, jsonb_build_object('n', g, 'pad', repeat('x', 500))
      FROM generate_series(1, $filled_rows) g"
  sql "ANALYZE inbox.events"
  sql "ALTER TABLE inbox.events SET (autovacuum_enabled = off)"
  sql "CHECKPOINT"
}

echo "receiver started on an empty table (a fresh install) and on $filled_rows rows:" \
  "$rounds rounds, ${seconds}s, 32 connections"
printf "%-6s %-22s %10s %8s %8s %8s %12s\n" round "table at start" "events/s" "p50 ms" "p99 ms" non-2xx "rows after"
warm_up
declare -A rps
for r in $(seq "$rounds"); do
  for table in empty filled; do
    prepare "$table"
    start_receiver new
    events_for "fresh-$table-$r" $((seconds * 40000 > 50000 ? seconds * 40000 : 50000))
    read -r x a b bad _ < <(run_wrk 32 "$seconds")
    stop_receiver
    rps[$table-$r]=$x
    printf "%-6s %-22s %10s %8s %8s %8s %12s\n" "$r" "$table" "$x" "$a" "$b" "$bad" \
      "$(sql "SELECT count(*) FROM inbox.events")"
  done
done
sql "ALTER TABLE inbox.events RESET (autovacuum_enabled)"
sql "TRUNCATE inbox.events CASCADE"
for r in $(seq "$rounds"); do
  awk -v e="${rps[empty-$r]}" -v f="${rps[filled-$r]}" -v r="$r" \
    'BEGIN { printf "round %d: started empty / started on a filled table %.2fx\n", r, e / f }'
done

#!/usr/bin/env bash
# What inbox.events' fillfactor costs ingest: batches of 100 at 8 clients and
# single events at 32, at fillfactor 80 and at the installed one (50), beside
# the raw upsert, alternating; the delivery log off (PGOPTIONS) so that only
# the table differs from raw SQL. Restores the installed fillfactor.
#
#   bash bench/core/fillfactor.sh        (PGHOST/PGPORT/PGUSER/PGDATABASE set)
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-8}
rounds=${BENCH_ROUNDS:-3}
other=${BENCH_OTHER_FILLFACTOR:-80}
source ./events_fillfactor.sh
installed=$(events_fillfactor)
trap 'psql -X -q -c "ALTER TABLE inbox.events SET (fillfactor = $installed)" -c "TRUNCATE inbox.events CASCADE" >/dev/null' EXIT
psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null
export PGOPTIONS="-c pg_inbox.delivery_log=off"

run() {  # fillfactor script clients -> rows/s
  psql -X -q -c "TRUNCATE inbox.events CASCADE" -c "TRUNCATE bench.raw_events" \
    -c "ALTER TABLE inbox.events SET (fillfactor = $1)" -c "CHECKPOINT" >/dev/null
  local tps
  tps=$(pgbench -n -c "$3" -j 2 -T "$seconds" -f "$2" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  echo "$tps * $4" | bc -l
}

printf '%-28s %6s %10s %10s %10s %9s %9s %9s\n' workload round "ff $other" "ff $installed" raw \
  "$installed/$other" "$other/raw" "$installed/raw"
for round in $(seq "$rounds"); do
  for w in "batches of 100, 8 clients:ingest_batch.sql:raw_ingest_batch.sql:8:100" \
           "single events, 32 clients:ingest_one.sql:raw_ingest_one.sql:32:1"; do
    IFS=: read -r label ours raw clients rows <<<"$w"
    a=$(run "$other" "$ours" "$clients" "$rows")
    b=$(run "$installed" "$ours" "$clients" "$rows")
    r=$(run "$installed" "$raw" "$clients" "$rows")
    printf '%-28s %6d %10.0f %10.0f %10.0f %9.2f %9.2f %9.2f\n' "$label" "$round" "$a" "$b" "$r" \
      "$(echo "$b / $a" | bc -l)" "$(echo "$a / $r" | bc -l)" "$(echo "$b / $r" | bc -l)"
  done
done

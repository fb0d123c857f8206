#!/usr/bin/env bash
# Issue 13's ingest targets in one run: raw SQL, pg_inbox with the delivery
# log off (the same work as the raw upsert) and with it on (as installed),
# alternating (raw, off, on, raw, ...) so machine noise hits all three; for
# single events also raw SQL that writes an audit row per delivery (the
# ceiling a logged ingest can reach). Batches of 100 at 8 clients and single
# events at 32 start each run on emptied tables, as the issue's figures did;
# re-deliveries of pending events run at 8 clients on 200k pending rows.
#
#   bash bench/core/ingest_targets.sh     (PGHOST/PGPORT/PGUSER/PGDATABASE set)
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-8}
rounds=${BENCH_ROUNDS:-3}

psql -X -q -c "ALTER SYSTEM SET max_wal_size = '32GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" \
  -c "SELECT pg_reload_conf()" >/dev/null
trap 'psql -X -q -c "ALTER SYSTEM RESET max_wal_size" -c "ALTER SYSTEM RESET checkpoint_timeout" \
  -c "SELECT pg_reload_conf()" -c "TRUNCATE inbox.events CASCADE" >/dev/null' EXIT
PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null

rows_per_s() {  # log(on|off) script clients rows_per_tx -> rows per second
  psql -X -q -c CHECKPOINT
  local tps
  tps=$(PGOPTIONS="-c pg_inbox.delivery_log=$1" pgbench -n -c "$3" -j 2 -T "$seconds" -f "$2" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  [ -n "$tps" ] || { echo "pgbench failed: $2" >&2; exit 1; }
  echo "$tps * $4" | bc -l
}

empty() { psql -X -q -c "TRUNCATE inbox.events CASCADE" -c "TRUNCATE bench.raw_events, bench.raw_audit" >/dev/null; }

ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

printf '%-34s %5s %9s %9s %9s %9s %8s %8s %8s %10s\n' workload round raw "log off" "log on" \
  "raw+audit" off/raw on/raw on/off on/audited
measure() {  # label ours raw audited(or -) clients rows_per_tx fresh(yes|no) round
  [ "$7" = yes ] && empty
  local r f o a=""
  r=$(rows_per_s on "$3" "$5" "$6")
  [ "$7" = yes ] && empty
  f=$(rows_per_s off "$2" "$5" "$6")
  [ "$7" = yes ] && empty
  o=$(rows_per_s on "$2" "$5" "$6")
  if [ "$4" != - ]; then
    [ "$7" = yes ] && empty
    a=$(rows_per_s on "$4" "$5" "$6")
  fi
  printf '%-34s %5d %9.0f %9.0f %9.0f %9s %8s %8s %8s %10s\n' "$1" "$8" "$r" "$f" "$o" \
    "${a:+$(printf '%.0f' "$a")}" "$(ratio "$f" "$r")" "$(ratio "$o" "$r")" "$(ratio "$o" "$f")" \
    "${a:+$(ratio "$o" "$a")}"
}

for round in $(seq "$rounds"); do
  measure "batches of 100, 8 clients" ingest_batch.sql raw_ingest_batch.sql - 8 100 yes "$round"
  measure "single events, 32 clients" ingest_one.sql raw_ingest_one.sql raw_ingest_one_audited.sql 32 1 yes "$round"
done
empty
psql -X -q -v ON_ERROR_STOP=1 -v backlog=0 -f populate.sql >/dev/null
for round in $(seq "$rounds"); do
  measure "re-delivery of pending, 8 clients" redelivery_pending.sql raw_redelivery_pending.sql - 8 1 no "$round"
done

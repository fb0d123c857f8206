#!/usr/bin/env bash
# Core benchmark: each pg_inbox workload beside its raw SQL equivalent, the
# two alternating in one run (raw, pg_inbox, raw, pg_inbox) so machine noise
# hits both; reports rows/s and the ratio. Needs PGHOST/PGPORT/PGUSER/PGDATABASE.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-8}
clients=${BENCH_CLIENTS:-8}
rounds=${BENCH_ROUNDS:-2}

# At ~30 MB/s of WAL a checkpoint would land in a random 8 s run and decide
# its figure: checkpoint before every run instead, and none during one.
psql -X -q -c "ALTER SYSTEM SET max_wal_size = '32GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" \
  -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null
# Enough backlog that the two claim workloads never run dry.
backlog=$((2 * rounds * seconds * 60000))
[ "${BENCH_CORE:-all}" = log ] && backlog=1000  # no claim workload runs
psql -X -q -v ON_ERROR_STOP=1 -v backlog=$backlog -f populate.sql >/dev/null

tps() {  # script clients -> transactions per second
  psql -X -q -c "CHECKPOINT"
  pgbench -n -c "$2" -j 2 -T "$seconds" -f "$1" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

compare() {  # label script rows_per_tx clients [raw script, default raw_SCRIPT]
  local raw=0 ours=0 raw_script=${5:-raw_$2} r o each=""
  for _ in $(seq $rounds); do
    r=$(tps "$raw_script" "$4")
    o=$(tps "$2" "$4")
    raw=$(echo "$raw + $r" | bc -l)
    ours=$(echo "$ours + $o" | bc -l)
    each="$each $(printf '%.2f' "$(echo "$o / $r" | bc -l)")"
  done
  raw=$(echo "$raw * $3 / $rounds" | bc -l)
  ours=$(echo "$ours * $3 / $rounds" | bc -l)
  printf '%-34s %8d %12.0f %12.0f %7.2f %s\n' "$1" "$4" "$raw" "$ours" "$(echo "$ours / $raw" | bc -l)" "$each"
  eval "rate_$(basename "$2" .sql)_$4=$ours"
}

# The delivery log (issue 12): the same pg_inbox script with the log off
# (pg_inbox.delivery_log, a superuser setting, via PGOPTIONS) and on,
# alternating like the rest. BENCH_CORE=log runs only these. "with digests"
# passes the raw bodies' SHA-256 as the receiver does; without, the
# database hashes each stored payload's text.
compare_log() {  # label script rows_per_tx clients
  local off=0 on=0 f n each=""
  for _ in $(seq $rounds); do
    f=$(PGOPTIONS="-c pg_inbox.delivery_log=off" tps "$2" "$4")
    n=$(tps "$2" "$4")
    off=$(echo "$off + $f" | bc -l)
    on=$(echo "$on + $n" | bc -l)
    each="$each $(printf '%.2f' "$(echo "$n / $f" | bc -l)")"
  done
  printf '%-34s %8d %12.0f %12.0f %7.2f %s\n' "$1 (log)" "$4" "$(echo "$off * $3 / $rounds" | bc -l)" \
    "$(echo "$on * $3 / $rounds" | bc -l)" "$(echo "$on / $off" | bc -l)" "$each"
}
if [ "${BENCH_CORE:-all}" = log ]; then
  printf '%-34s %8s %12s %12s %7s  %s\n' workload clients "log off r/s" "log on r/s" ratio "each round"
  compare_log "ingest_batch, 100 per transaction" ingest_batch.sql 100 "$clients"
  compare_log "ingest_batch, 100, with digests" ingest_batch_digests.sql 100 "$clients"
  [ -n "${BENCH_LOG_BATCH_ONLY:-}" ] || compare_log "ingest, 1 per transaction" ingest_one.sql 1 "$clients"
  [ -n "${BENCH_LOG_BATCH_ONLY:-}" ] || compare_log "duplicate storm (processed ids)" duplicate_storm.sql 1 "$clients"
  psql -X -q -c "DROP SCHEMA bench CASCADE" -c "TRUNCATE inbox.events" -c "DELETE FROM inbox.providers WHERE name = 'bench'" \
    -c "ALTER SYSTEM RESET max_wal_size" -c "ALTER SYSTEM RESET checkpoint_timeout" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
  exit 0
fi

printf '%-34s %8s %12s %12s %7s  %s\n' workload clients "raw rows/s" "inbox rows/s" ratio "each round"
compare "ingest, 1 per transaction" ingest_one.sql 1 1
compare "ingest, 1 per transaction" ingest_one.sql 1 "$clients"
compare "ingest, 1 per transaction" ingest_one.sql 1 32
compare "ingest_batch, 100 per transaction" ingest_batch.sql 100 "$clients"
compare "claim 100 + complete each" claim_complete.sql 100 "$clients"
compare "claim 100 + complete_batch" claim_complete_batch.sql 100 "$clients" raw_claim_complete.sql
compare "duplicate storm (processed ids)" duplicate_storm.sql 1 1
compare "duplicate storm (processed ids)" duplicate_storm.sql 1 "$clients"
compare "re-delivery of pending ids" redelivery_pending.sql 1 "$clients"
printf '\n%-34s %8s %12s %12s %7s  %s\n' "delivery log" clients "log off r/s" "log on r/s" ratio "each round"
compare_log "ingest_batch, 100 per transaction" ingest_batch.sql 100 "$clients"
compare_log "ingest_batch, 100, with digests" ingest_batch_digests.sql 100 "$clients"
compare_log "ingest, 1 per transaction" ingest_one.sql 1 "$clients"
compare_log "duplicate storm (processed ids)" duplicate_storm.sql 1 "$clients"

dup_n=rate_duplicate_storm_$clients ins_n=rate_ingest_one_$clients
printf '\nduplicate storm vs first inserts (pg_inbox, same clients): 1 client %.2fx, %d clients %.2fx\n' \
  "$(echo "$rate_duplicate_storm_1 / $rate_ingest_one_1" | bc -l)" "$clients" \
  "$(echo "${!dup_n} / ${!ins_n}" | bc -l)"
psql -X -At -c "SELECT format('HOT updates on inbox.events: %s of %s (%s%%)', n_tup_hot_upd, n_tup_upd,
                  round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)))
                FROM pg_stat_user_tables WHERE relid = 'inbox.events'::regclass"

# Cold start: what every new install meets. Both tables emptied, then new
# connections (plans made on the empty table) ingest batches of 100 until the
# table holds cold_rows rows. Autovacuum is off on both tables meanwhile: no
# ANALYZE may come to the rescue by re-planning, the plans must hold by
# construction (autovacuum can lag for minutes on a busy server). The rate
# while the table held 10k-200k rows against the rate over its last fifth
# (pgbench -P 1 intervals), raw and pg_inbox alternating, two rounds: a plan
# frozen on the empty table shows as a collapse; an index probe holds.
cold_rows=${BENCH_COLD_ROWS:-1000000}
cold() {  # script table -> "early late" rows/s
  psql -X -q -c "TRUNCATE $2" -c "ALTER TABLE $2 SET (autovacuum_enabled = off)" -c "CHECKPOINT"
  pgbench -n -c "$clients" -j 2 -t $((cold_rows / 100 / clients)) -P 1 -f "$1" 2>&1 >/dev/null |
    awk -v rows="$cold_rows" '/^progress:/ {
        r = $4 * 100; start = cum; cum += r
        if (start < 200000 && cum > 10000) { early += r; ne++ }
        if (start >= 0.8 * rows) { late += r; nl++ } }
      END { printf "%.0f %.0f\n", ne ? early / ne : 0, nl ? late / nl : 0 }'
  psql -X -q -c "ALTER TABLE $2 RESET (autovacuum_enabled)"
}
printf '\ncold start: %d clients, batches of 100, empty table to %d rows\n' "$clients" "$cold_rows"
printf '%-10s %6s %16s %16s %11s\n' "" round "rows/s 10k-200k" "rows/s last 20%" "late/early"
for round in $(seq $rounds); do
  for side in "raw raw_ingest_batch.sql bench.raw_events" "pg_inbox ingest_batch.sql inbox.events"; do
    set -- $side
    read -r early late < <(cold "$2" "$3")
    printf '%-10s %6d %16d %16d %11.2f\n' "$1" "$round" "$early" "$late" \
      "$(echo "$late / ($early + 0.001)" | bc -l)"
  done
done

# Leave the database as we found it for the next suite.
psql -X -q -c "DROP SCHEMA bench CASCADE" -c "TRUNCATE inbox.events" -c "DELETE FROM inbox.providers WHERE name = 'bench'" \
  -c "ALTER SYSTEM RESET max_wal_size" -c "ALTER SYSTEM RESET checkpoint_timeout" -c "SELECT pg_reload_conf()" >/dev/null 2>&1

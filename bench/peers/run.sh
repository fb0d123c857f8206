#!/usr/bin/env bash
# Peers benchmark (`make bench BENCH=peers`): pg_inbox beside pgmq (its
# SQL-only install, vendored in pgmq/ with its licence), pg-boss (npm, pinned
# in pgboss/package-lock.json, driven through its Node API) and the raw SQL
# of bench/core, on one cluster, in interleaved rounds (raw, pgmq, pg-boss,
# pg_inbox, raw, ...). Prints events/s per side (mean of the rounds) and each
# side's ratio to raw SQL per round. Needs PGHOST/PGPORT/PGUSER/PGDATABASE
# and INBOX_BENCH_DATABASE_URL (scripts/bench.sh sets them).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-8}
rounds=${BENCH_ROUNDS:-3}
core=../core

psql -X -q -c "ALTER SYSTEM SET max_wal_size = '32GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" \
  -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -f "$core/setup.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -c "DROP SCHEMA IF EXISTS pgmq CASCADE" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -f pgmq/pgmq.sql >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -c "SELECT pgmq.create('bench')" >/dev/null
[ -d pgboss/node_modules ] || (cd pgboss && npm ci --no-audit --no-fund >/dev/null)
psql -X -q -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS pgboss CASCADE" >/dev/null
node pgboss/drive.mjs setup >/dev/null

tps() {  # script clients -> transactions per second
  psql -X -q -c "CHECKPOINT"
  pgbench -n -c "$2" -j 2 -T "$seconds" -f "$1" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

boss() {  # workload clients -> events per second (pg-boss's Node API)
  psql -X -q -c "CHECKPOINT"
  node pgboss/drive.mjs "$1" "$seconds" "$2"
}

printf '%-42s %7s %9s %9s %9s %9s  %s\n' workload clients raw pgmq pg-boss pg_inbox \
  "pgmq/raw pg-boss/raw pg_inbox/raw, per round"
peers() {  # label clients rows_per_tx raw pgmq boss_workload inbox
  local raw=0 mq=0 bo=0 ours=0 r m b o each=""
  for _ in $(seq "$rounds"); do
    r=$(echo "$(tps "$4" "$2") * $3" | bc -l); m=$(echo "$(tps "$5" "$2") * $3" | bc -l)
    b=$(boss "$6" "$2"); o=$(echo "$(tps "$7" "$2") * $3" | bc -l)
    raw=$(echo "$raw + $r" | bc -l); mq=$(echo "$mq + $m" | bc -l)
    bo=$(echo "$bo + $b" | bc -l); ours=$(echo "$ours + $o" | bc -l)
    each="$each $(printf '%#.3g/%#.3g/%#.3g' "$(echo "$m / $r" | bc -l)" "$(echo "$b / $r" | bc -l)" \
      "$(echo "$o / $r" | bc -l)")"
  done
  printf '%-42s %7d %9.0f %9.0f %9.0f %9.0f %s\n' "$1" "$2" "$(echo "$raw / $rounds" | bc -l)" \
    "$(echo "$mq / $rounds" | bc -l)" "$(echo "$bo / $rounds" | bc -l)" \
    "$(echo "$ours / $rounds" | bc -l)" "$each"
}

peers "W1 batched ingest, 100 per transaction" 8 100 \
  "$core/raw_ingest_batch.sql" pgmq_send_batch.sql w1 "$core/ingest_batch.sql"
peers "W2 one event per transaction" 32 1 \
  "$core/raw_ingest_one.sql" pgmq_send.sql w2 "$core/ingest_one.sql"
# The drain needs a backlog none of the rounds can empty: 4 workers.
psql -X -q -v ON_ERROR_STOP=1 -v backlog=$((rounds * seconds * 40000)) -f populate.sql >/dev/null
# Plus what W1 and W2 left pending; pg-boss's fetch sorts all of it (README).
psql -X -At -F ' ' -c "SELECT 'W4 pending at start: raw', (SELECT count(*) FROM bench.raw_events WHERE status = 'pending'),
  'pgmq', (SELECT count(*) FROM pgmq.q_bench), 'pg-boss', (SELECT count(*) FROM pgboss.job WHERE name = 'bench' AND state < 'active'),
  'pg_inbox', (SELECT count(*) FROM inbox.events WHERE status = 'pending')"
peers "W4 drain: claim 100 + complete, 4 workers" 4 100 \
  "$core/raw_claim_complete.sql" pgmq_drain.sql w4 "$core/claim_complete_batch.sql"
# pgmq keeping what it drained, as pg_inbox and raw SQL do: read + archive
# (the message moves to pgmq's archive table instead of being deleted).
peers "W4a drain, pgmq archiving (keeps messages)" 4 100 \
  "$core/raw_claim_complete.sql" pgmq_drain_archive.sql w4 "$core/claim_complete_batch.sql"
# The drain again, every side on a fresh backlog of its own (W4 drains
# unequal tables: what W1 and W2 left differs by side). pg-boss is left out:
# its drain is bound by its sort of the backlog (README).
echo
BENCH_SECONDS=$seconds BENCH_ROUNDS=$rounds bash drain.sh
# What finishing a leased event costs a table that keeps it, against
# pgmq's delete: the floor under every drain that keeps its events.
echo
BENCH_ROUNDS=$rounds bash drain_floor.sh

psql -X -q -c "SET client_min_messages = warning" -c "DROP SCHEMA bench CASCADE" -c "DROP SCHEMA pgmq CASCADE" -c "DROP SCHEMA pgboss CASCADE" \
  -c "TRUNCATE inbox.events" \
  -c "DELETE FROM inbox.providers WHERE name = 'bench'" \
  -c "ALTER SYSTEM RESET max_wal_size" -c "ALTER SYSTEM RESET checkpoint_timeout" \
  -c "SELECT pg_reload_conf()" >/dev/null 2>&1

#!/usr/bin/env bash
# Ingest with the delivery log on (the default) of this checkout beside an
# earlier commit's and beside raw SQL, alternating (base, this, raw, base,
# ...) so machine noise hits all three: one event per transaction at 32
# clients, batches of 100, re-deliveries of pending events and of processed
# ones (duplicates) at BENCH_CLIENTS; then single events beside raw SQL that
# also writes an audit row per delivery. The base runs on a cluster of its own,
# built from its own tree (its SQL differs, not only its library); this
# checkout and raw SQL on the cluster of PGHOST/PGPORT/PGUSER/PGDATABASE (as
# make bench makes one).
#
#   BENCH_BASE=0b99416 bash bench/core/ingest_versions.sh
set -euo pipefail
cd "$(dirname "$0")"
base=${BENCH_BASE:?set BENCH_BASE to the commit to compare with}
seconds=${BENCH_SECONDS:-8}
clients=${BENCH_CLIENTS:-8}
rounds=${BENCH_ROUNDS:-3}
scripts=$(cd ../../scripts && pwd)

work=$(mktemp -d /tmp/pg_inbox-ingest.XXXXXX)
chmod 755 "$work"  # the server runs as postgres when we are root
finish() {
  bash "$scripts/cluster.sh" stop "$work/cluster" >/dev/null 2>&1 || true
  git -C ../.. worktree remove --force "$work/src" 2>/dev/null || true
  rm -rf "$work"
}
trap finish EXIT
git -C ../.. worktree add -q --detach "$work/src" "$base"
base_bindir=$(bash "$work/src/scripts/pg-tree.sh" "$work/tree")
base_port=$(bash "$scripts/cluster.sh" free-port any)
INBOX_PG_BINDIR=$base_bindir bash "$scripts/cluster.sh" create "$work/cluster" "$base_port" "$PGDATABASE" >/dev/null

on() {  # side psql-args...: psql on that side's cluster
  local side=$1
  shift
  if [ "$side" = base ]; then PGPORT=$base_port psql -X -q "$@"; else psql -X -q "$@"; fi
}
for side in base current; do
  on $side -c "ALTER SYSTEM SET max_wal_size = '32GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" \
    -c "SELECT pg_reload_conf()" >/dev/null
  on $side -v ON_ERROR_STOP=1 -f setup.sql >/dev/null 2>&1
  on $side -v ON_ERROR_STOP=1 -v backlog=1000 -f populate.sql >/dev/null
done

tps() {  # side script clients -> transactions per second
  local port=$PGPORT
  [ "$1" = base ] && port=$base_port
  on "$1" -c CHECKPOINT
  PGPORT=$port pgbench -n -c "$3" -j 2 -T "$seconds" -f "$2" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

compare() {  # label script rows_per_tx clients
  local b=0 c=0 r=0 x y z each=""
  for _ in $(seq "$rounds"); do
    x=$(tps base "$2" "$4")
    y=$(tps current "$2" "$4")
    z=$(tps current "raw_$2" "$4")
    b=$(echo "$b + $x" | bc -l)
    c=$(echo "$c + $y" | bc -l)
    r=$(echo "$r + $z" | bc -l)
    each="$each $(printf '%.2f/%.2f' "$(echo "$y / $x" | bc -l)" "$(echo "$y / $z" | bc -l)")"
  done
  printf '%-34s %7d %10.0f %10.0f %10.0f %7.2f %7.2f %s\n' "$1" "$4" \
    "$(echo "$b * $3 / $rounds" | bc -l)" "$(echo "$c * $3 / $rounds" | bc -l)" \
    "$(echo "$r * $3 / $rounds" | bc -l)" "$(echo "$c / $b" | bc -l)" "$(echo "$c / $r" | bc -l)" "$each"
}

printf 'base %s, delivery log on, %d s runs, %d rounds; rows/s from the means\n' "$base" "$seconds" "$rounds"
printf '%-34s %7s %10s %10s %10s %7s %7s  %s\n' workload clients base this raw this/base this/raw \
  'each round (this/base, this/raw)'
compare "ingest, 1 per transaction" ingest_one.sql 1 32
compare "ingest_batch, 100 per transaction" ingest_batch.sql 100 "$clients"
compare "re-delivery of pending ids" redelivery_pending.sql 1 "$clients"
compare "duplicate storm (processed ids)" duplicate_storm.sql 1 "$clients"
# The ceiling for single events: what raw SQL reaches once it writes an
# audit row per delivery too (raw_ingest_one_audited.sql), alternating with
# this checkout's ingest and the plain raw upsert.
ceiling() {  # clients
  local c=0 r=0 a=0 x y z each=""
  for _ in $(seq "$rounds"); do
    x=$(tps current ingest_one.sql "$1")
    y=$(tps current raw_ingest_one.sql "$1")
    z=$(tps current raw_ingest_one_audited.sql "$1")
    c=$(echo "$c + $x" | bc -l)
    r=$(echo "$r + $y" | bc -l)
    a=$(echo "$a + $z" | bc -l)
    each="$each $(printf '%.2f/%.2f' "$(echo "$z / $y" | bc -l)" "$(echo "$x / $z" | bc -l)")"
  done
  printf '\nsingle events at %d clients: this %.0f, raw %.0f, raw + audit row %.0f rows/s\n' "$1" \
    "$(echo "$c / $rounds" | bc -l)" "$(echo "$r / $rounds" | bc -l)" "$(echo "$a / $rounds" | bc -l)"
  printf 'raw + audit row / raw %.2f, this / (raw + audit row) %.2f; each round:%s\n' \
    "$(echo "$a / $r" | bc -l)" "$(echo "$c / $a" | bc -l)" "$each"
}
ceiling 32
on current -c "DROP SCHEMA bench CASCADE" -c "TRUNCATE inbox.events CASCADE" \
  -c "DELETE FROM inbox.providers WHERE name = 'bench'" -c "ALTER SYSTEM RESET max_wal_size" \
  -c "ALTER SYSTEM RESET checkpoint_timeout" -c "SELECT pg_reload_conf()" >/dev/null 2>&1

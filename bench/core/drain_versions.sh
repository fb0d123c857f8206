#!/usr/bin/env bash
# The drain (claim 100 + complete_batch, BENCH_CLIENTS workers, a fresh
# backlog per run) of this checkout beside an earlier commit's, and beside
# the raw SQL drain, on one cluster, alternating (base, this, raw, base, ...)
# so machine noise hits all three. Also prints each side's share of HOT
# updates and the table's size after the run.
#
#   BENCH_BASE=d75d0b9 bash bench/core/drain_versions.sh
#
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE and INBOX_PG_BINDIR of a private
# installation (scripts/pg-tree.sh, as make bench and make test make one):
# the earlier commit's library is built in a temporary worktree and swapped
# into that installation for its runs (new connections load it). The SQL
# objects stay this checkout's: BENCH_BASE_FILLFACTOR (default 80, what
# 0.2.0 had before issue 13's drain work) stands in for the base's table.
#
# BENCH_COLD=1: the backlog lands on a table with the statistics of a fresh
# install (none: analyzed only while empty; the earlier rounds' are deleted)
# and is drained before any statistics see it (autovacuum off for the table
# during the runs): what a new install's first backlog meets until
# autoanalyze, up to a minute later.
#
# BENCH_ONE_SESSION=1: instead of pgbench's workers, one session drains
# BENCH_TRANSACTIONS (default 300) claims of 100 + complete_batch in a
# procedure, a commit after each, synchronous_commit off: one backend's
# time per event, without client round trips, commit waits or contention,
# which hide a change of CPU cost on this 2-core machine. Raw SQL is skipped
# (its columns print 0).
set -euo pipefail
cd "$(dirname "$0")"
base=${BENCH_BASE:?set BENCH_BASE to the commit to compare with}
base_fillfactor=${BENCH_BASE_FILLFACTOR:-80}
source ./events_fillfactor.sh
fillfactor=$(events_fillfactor)
seconds=${BENCH_SECONDS:-8}
clients=${BENCH_CLIENTS:-4}
rounds=${BENCH_ROUNDS:-3}
backlog=${BENCH_BACKLOG:-300000}
cold=${BENCH_COLD:-0}
one_session=${BENCH_ONE_SESSION:-0}
transactions=${BENCH_TRANSACTIONS:-300}
lib="$(dirname "${INBOX_PG_BINDIR:?the bin directory of a scripts/pg-tree.sh installation}")/lib/pg_inbox.so"

work=$(mktemp -d /tmp/pg_inbox-drain.XXXXXX)
git -C ../.. worktree add -q --detach "$work/base" "$base"
make -s -C "$work/base" extension >/dev/null
cp "$lib" "$work/current.so"
cp "$work/base/pg_inbox.so" "$work/base.so"
use() { cp "$work/$1.so" "$lib.swap" && mv "$lib.swap" "$lib"; }  # a new inode: running backends keep theirs
finish() {
  use current
  psql -X -q -c "ALTER TABLE inbox.events SET (fillfactor = $fillfactor)" \
    -c "ALTER TABLE inbox.events RESET (autovacuum_enabled)" \
    -c "ALTER TABLE IF EXISTS bench.raw_events RESET (autovacuum_enabled)" \
    -c "DROP SCHEMA IF EXISTS bench CASCADE" -c "TRUNCATE inbox.events CASCADE" \
    -c "DELETE FROM inbox.providers WHERE name = 'bench'" >/dev/null 2>&1 || true
  git -C ../.. worktree remove --force "$work/base" || true
  rm -rf "$work"
}
trap finish EXIT

psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE PROCEDURE bench.drain_one_session(transactions int) LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    tokens uuid[];
BEGIN
    FOR i IN 1..transactions LOOP
        SELECT array_agg(id), array_agg(lease_token) INTO ids, tokens FROM inbox.claim(100, '5 minutes');
        PERFORM inbox.complete_batch(ids, tokens);
        COMMIT;
    END LOOP;
END
$$;
SQL

# side: base | current | raw -> "events/s hot/updates size"
run() {
  [ "$one_session" = 1 ] && [ "$1" = raw ] && { echo "0 - -"; return; }
  local table=inbox.events script=claim_complete_batch.sql
  case $1 in
    base) use base; psql -X -q -c "ALTER TABLE inbox.events SET (fillfactor = $base_fillfactor)" ;;
    current) use current; psql -X -q -c "ALTER TABLE inbox.events SET (fillfactor = $fillfactor)" ;;
    raw) table=bench.raw_events script=raw_claim_complete.sql ;;
  esac
  local before_load="SELECT" after_load="VACUUM ANALYZE $table"
  if [ "$cold" = 1 ]; then
    before_load="DELETE FROM pg_statistic WHERE starelid = '$table'::regclass; ANALYZE $table"
    after_load="ALTER TABLE $table SET (autovacuum_enabled = off)"
  fi
  psql -X -q -v ON_ERROR_STOP=1 -c "TRUNCATE $table CASCADE" -c "$before_load" \
    -c "INSERT INTO $table (provider, external_id, payload)
        SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, $backlog) g" \
    -c "$after_load" -c "CHECKPOINT" >/dev/null
  local before tps
  before=$(psql -X -At -c "SELECT pg_stat_get_tuples_updated('$table'::regclass) || ' ' ||
                                  pg_stat_get_tuples_hot_updated('$table'::regclass)")
  if [ "$one_session" = 1 ]; then
    local ms
    ms=$(psql -X -At -c "SET synchronous_commit = off" -c '\timing on' \
      -c "CALL bench.drain_one_session($transactions)" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1)
    tps=$(echo "$transactions * 1000 / $ms" | bc -l)
  else
    tps=$(pgbench -n -c "$clients" -j 2 -T "$seconds" -f "$script" 2>/dev/null |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  fi
  sleep 1  # the statistics of the last transactions reach the views
  psql -X -At -c "SELECT round($tps * 100) || ' ' ||
                         round(100.0 * (pg_stat_get_tuples_hot_updated('$table'::regclass) - ${before#* })
                               / nullif(pg_stat_get_tuples_updated('$table'::regclass) - ${before% *}, 0)) || ' ' ||
                         pg_size_pretty(pg_relation_size('$table'))"
}

printf 'drain: claim 100 + complete_batch, %s, %d pending at the start of each run\n' \
  "$([ "$one_session" = 1 ] && echo "one session, $transactions transactions" || echo "$clients workers")" "$backlog"
printf 'base %s at fillfactor %s; this checkout at fillfactor %s%s\n\n' "$base" "$base_fillfactor" "$fillfactor" \
  "$([ "$cold" = 1 ] && echo '; cold: no statistics, as on a fresh install')"
printf '%6s %10s %10s %10s %11s %11s %8s %8s %8s\n' round base/s this/s raw/s this/base this/raw \
  "HOT% b" "HOT% t" "HOT% raw"
for round in $(seq "$rounds"); do
  read -r b bh bs < <(run base)
  read -r t th ts < <(run current)
  read -r r rh rs < <(run raw)
  printf '%6d %10d %10d %10d %11.2f %11.2f %8s %8s %8s   sizes %s / %s / %s\n' "$round" "$b" "$t" "$r" \
    "$(echo "$t / $b" | bc -l)" "$([ "$r" = 0 ] && echo 0 || echo "$t / $r" | bc -l)" "$bh" "$th" "$rh" "$bs" "$ts" "$rs"
done

#!/usr/bin/env bash
# Where a drained event's CPU goes: one backend claims BENCH_EVENTS events
# of a fresh backlog of BENCH_BACKLOG (claims of 100, a commit after each,
# synchronous_commit off), then another completes them (complete_batch of
# 100); the same for pgmq's read, then delete. Each phase is measured
# apart as its backend's CPU (utime + stime from /proc): the server must
# run on this machine. Nothing is completed between claims, so every claim
# walks past the events leased before it (so does every read).
# Then the whole drain in one backend, claim 100 + complete (read 100 +
# delete) in one transaction and in two (the claim committed first, as
# workers run): CPU and WAL bytes per event.
#
#   BENCH_ROUNDS=4 bash bench/peers/drain_split.sh
#
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE, bench/core/setup.sql and pgmq with
# a queue named bench (run.sh installs both).
set -euo pipefail
cd "$(dirname "$0")"
source ./backlog.sh
rounds=${BENCH_ROUNDS:-3}
backlog=${BENCH_BACKLOG:-100000}
batches=$((${BENCH_EVENTS:-30000} / 100))

source ../backend_cpu.sh
cpu_ms() { backend_cpu_ms "SET synchronous_commit = off; $1" "$2"; }  # setup sql, measured sql
claim=$(lease_sql inbox.events "$batches")
complete="CREATE TEMP TABLE leased AS
  SELECT (row_number() OVER (ORDER BY id) - 1) / 100 AS n, id, lease_token FROM inbox.events WHERE status = 'processing';
CREATE TEMP TABLE batches AS
  SELECT n, array_agg(id ORDER BY id) AS ids, array_agg(lease_token ORDER BY id) AS tokens FROM leased GROUP BY n;"
complete_run="DO \$\$ DECLARE b record; BEGIN FOR b IN SELECT ids, tokens FROM batches ORDER BY n LOOP
  PERFORM inbox.complete_batch(b.ids, b.tokens); COMMIT; END LOOP; END \$\$;"
read=$(lease_sql pgmq.q_bench "$batches")
delete="CREATE TEMP TABLE batches AS
  SELECT n, array_agg(msg_id ORDER BY msg_id) AS ids
    FROM (SELECT (row_number() OVER (ORDER BY msg_id) - 1) / 100 AS n, msg_id FROM pgmq.q_bench WHERE read_ct > 0) s GROUP BY n;"
delete_run="DO \$\$ DECLARE b record; BEGIN FOR b IN SELECT ids FROM batches ORDER BY n LOOP
  PERFORM pgmq.delete('bench', b.ids); COMMIT; END LOOP; END \$\$;"

events=$((batches * 100))
printf '%-6s %10s %12s %9s %10s  (CPU ms for %d events)\n' round claim complete read delete $events
for round in $(seq "$rounds"); do
  fresh_backlog inbox.events "$backlog"
  c=$(cpu_ms "" "$claim"); psql -X -q -c CHECKPOINT
  k=$(cpu_ms "$complete" "$complete_run")
  fresh_backlog pgmq.q_bench "$backlog"
  r=$(cpu_ms "" "$read"); psql -X -q -c CHECKPOINT
  d=$(cpu_ms "$delete" "$delete_run")
  printf '%-6s %10s %12s %9s %10s\n' "$round" "$c" "$k" "$r" "$d"
done

# form side -> "CPU ms, WAL bytes per event" for the whole drain
drain() {
  local commit="" lsn
  [ "$1" = two ] && commit="COMMIT;"
  if [ "$2" = pg_inbox ]; then
    fresh_backlog inbox.events "$backlog"
    body="SELECT array_agg(id), array_agg(lease_token) INTO ids, tokens FROM inbox.claim(100, '5 minutes'); $commit
          PERFORM inbox.complete_batch(ids, tokens);"
  else
    fresh_backlog pgmq.q_bench "$backlog"
    body="SELECT array_agg(msg_id) INTO ids FROM pgmq.read('bench', 300, 100); $commit PERFORM pgmq.delete('bench', ids);"
  fi
  lsn=$(psql -X -At -c "SELECT pg_current_wal_insert_lsn()")
  local ms
  ms=$(cpu_ms "" "DO \$\$ DECLARE ids bigint[]; tokens uuid[]; BEGIN FOR i IN 1..$batches LOOP $body COMMIT; END LOOP; END \$\$;")
  echo "$ms $(psql -X -At -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn') / $events)")"
}
echo
printf '%-6s %-28s %-28s  (CPU ms for %d events, WAL bytes per event)\n' round \
  "one transaction: inbox, pgmq" "two: inbox, pgmq" $events
for round in $(seq "$rounds"); do
  printf '%-6s %-28s %-28s\n' "$round" "$(drain one pg_inbox), $(drain one pgmq)" "$(drain two pg_inbox), $(drain two pgmq)"
done

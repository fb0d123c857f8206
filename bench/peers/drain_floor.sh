#!/usr/bin/env bash
# The floor under a drain that keeps its events. One backend's CPU to
# finish BENCH_EVENTS leased events of a backlog of BENCH_BACKLOG (600-byte
# payloads; batches of 100, a commit after each), on five sides:
#
#   pgmq        pgmq.delete: the message is gone, nothing is left to
#               deduplicate a late re-delivery against
#   keep        UPDATE to done on a table of inbox.events' columns with a
#               primary key and the open-events partial index only
#   keep+dedup  the same, plus the unique index of the dedup key
#               (provider, external_id)
#   copy        the same UPDATE on a copy of inbox.events (all its
#               indexes and its CHECK), no lease token checked
#   pg_inbox    inbox.complete_batch on inbox.events (tokens checked)
#
# An UPDATE keeps the row, so it writes a new row version, and it cannot be
# HOT: the row leaves the open-events index, whose predicate reads the
# column it changes; every other index then takes an entry. A delete only
# marks the row. The "keep" sides give what any SQL design pays for keeping
# an event as its own dedup key, before the work pg_inbox adds.
#
#   BENCH_ROUNDS=3 bash bench/peers/drain_floor.sh
#
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE, bench/core/setup.sql and pgmq with
# a queue named bench (run.sh installs both); the server on this machine.
set -euo pipefail
cd "$(dirname "$0")"
source ./backlog.sh
source ../backend_cpu.sh
rounds=${BENCH_ROUNDS:-3}
backlog=${BENCH_BACKLOG:-100000}
batches=$((${BENCH_EVENTS:-30000} / 100))

cpu_ms() { backend_cpu_ms "SET synchronous_commit = off; $1" "$2"; }

# keeping_table NAME EXTRA_DDL: bench.NAME with the backlog, its first
# BENCH_EVENTS rows leased as a claim leaves them, vacuumed.
keeping_table() {
  psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench.$1;
$2
INSERT INTO bench.$1 (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, $backlog) g;
VACUUM ANALYZE bench.$1;
UPDATE bench.$1 SET status = 'processing', attempts = 1, lease_token = gen_random_uuid(),
                    lease_expires_at = now() + interval '1 hour'
 WHERE id IN (SELECT id FROM bench.$1 ORDER BY id LIMIT $((batches * 100)));
VACUUM ANALYZE bench.$1;
CHECKPOINT;
SQL
}
bare_table() {  # NAME EXTRA_INDEX_DDL
  keeping_table "$1" "CREATE TABLE bench.$1 (LIKE inbox.events INCLUDING DEFAULTS INCLUDING IDENTITY)
    WITH (fillfactor = 50);
  ALTER TABLE bench.$1 ADD PRIMARY KEY (id);
  CREATE INDEX ON bench.$1 (id) WHERE processed_at IS NULL;
  $2"
}
finish_by_update() {  # NAME -> CPU ms
  cpu_ms "CREATE TEMP TABLE batches AS
    SELECT (row_number() OVER (ORDER BY id) - 1) / 100 AS n, id FROM bench.$1 WHERE status = 'processing';" \
    "DO \$\$ DECLARE b record; BEGIN
     FOR b IN SELECT array_agg(id) AS ids FROM batches GROUP BY n ORDER BY n LOOP
       UPDATE bench.$1 SET status = 'done', processed_at = now(), lease_expires_at = NULL
        WHERE id = ANY (b.ids) AND status = 'processing';
       COMMIT;
     END LOOP; END \$\$;"
}
# leased_backlog TABLE: TABLE (inbox.events or pgmq.q_bench) with a fresh
# backlog whose first BENCH_EVENTS are taken as workers take them, vacuumed.
leased_backlog() {
  fresh_backlog "$1" "$backlog"
  psql -X -q -v ON_ERROR_STOP=1 >/dev/null -c "$(lease_sql "$1" "$batches")" \
    -c "VACUUM ANALYZE $1" -c CHECKPOINT
}
finish_pg_inbox() {
  leased_backlog inbox.events
  cpu_ms "CREATE TEMP TABLE batches AS
    SELECT (row_number() OVER (ORDER BY id) - 1) / 100 AS n, id, lease_token FROM inbox.events WHERE status = 'processing';" \
    "DO \$\$ DECLARE b record; BEGIN
     FOR b IN SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM batches GROUP BY n ORDER BY n LOOP
       PERFORM inbox.complete_batch(b.ids, b.tokens);
       COMMIT;
     END LOOP; END \$\$;"
}
finish_pgmq() {
  leased_backlog pgmq.q_bench
  cpu_ms "CREATE TEMP TABLE batches AS
    SELECT (row_number() OVER (ORDER BY msg_id) - 1) / 100 AS n, msg_id FROM pgmq.q_bench WHERE read_ct > 0;" \
    "DO \$\$ DECLARE b record; BEGIN
     FOR b IN SELECT array_agg(msg_id) AS ids FROM batches GROUP BY n ORDER BY n LOOP
       PERFORM pgmq.delete('bench', b.ids);
       COMMIT;
     END LOOP; END \$\$;"
}

events=$((batches * 100))
printf '%-6s %7s %7s %11s %7s %9s  (CPU ms to finish %d leased events; /pgmq)\n' \
  round pgmq keep keep+dedup copy pg_inbox "$events"
for round in $(seq "$rounds"); do
  q=$(finish_pgmq)
  bare_table floor_keep ""
  k=$(finish_by_update floor_keep)
  bare_table floor_dedup "ALTER TABLE bench.floor_dedup ADD UNIQUE (provider, external_id);"
  d=$(finish_by_update floor_dedup)
  keeping_table floor_copy "CREATE TABLE bench.floor_copy (LIKE inbox.events INCLUDING ALL) WITH (fillfactor = 50);"
  c=$(finish_by_update floor_copy)
  i=$(finish_pg_inbox)
  ratios="-"  # the clock ticks in 10 ms: a tiny run can measure 0
  [ "$q" -gt 0 ] && ratios=$(echo "scale=2; $k / $q; $d / $q; $c / $q; $i / $q" | bc | paste -sd' ')
  printf '%-6s %7s %7s %11s %7s %9s  %s\n' "$round" "$q" "$k" "$d" "$c" "$i" "$ratios"
done
psql -X -q -c "DROP TABLE bench.floor_keep, bench.floor_dedup, bench.floor_copy" >/dev/null

#!/usr/bin/env bash
# The delivery log's CPU cost, without WAL flushes or other sessions in the
# figure: one backend ingests BATCHES batches of 100 (600-byte payloads) in
# one transaction, log off then on, ROUNDS times; prints the backend's own
# CPU time (utime + stime from /proc) for each. Needs bench/core/setup.sql
# applied and the server on this machine. Usage: log_cpu.sh [ROUNDS] [BATCHES]
set -euo pipefail
source "$(dirname "$0")/../backend_cpu.sh"
rounds=${1:-3}
batches=${2:-300}
run() {  # log digests(yes|no) -> CPU ms
  local digests=""
  [ "$2" = yes ] && digests=", NULL, 'webhook', array_fill(sha256('x'), ARRAY[100]), array_fill('stripe'::text, ARRAY[100])"
  PGOPTIONS="-c pg_inbox.delivery_log=$1" backend_cpu_ms \
    "CREATE TEMP TABLE pl AS SELECT array_agg(bench.payload(g)) AS p FROM generate_series(1, 100) g;" \
    "DO \$\$ DECLARE n bigint; p jsonb[] := (SELECT p FROM pl); BEGIN
FOR i IN 1..$batches LOOP
  n := (random() * 1e15)::bigint;
  PERFORM inbox.ingest_batch(array_fill('bench'::text, ARRAY[100]),
                             ARRAY(SELECT 'c-' || n || '-' || g FROM generate_series(1, 100) g), p$digests);
END LOOP; END \$\$;"
}
printf '%-12s %6s %10s %10s %7s\n' digests round "off ms" "on ms" "off/on"
for digests in ${DIGESTS:-no yes}; do
  for round in $(seq "$rounds"); do
    off=$(run off $digests); on=$(run on $digests)
    printf '%-12s %6d %10d %10d %7.2f\n' $digests "$round" "$off" "$on" "$(echo "$off / $on" | bc -l)"
  done
done

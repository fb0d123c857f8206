#!/usr/bin/env bash
# Retention benchmark: ingest throughput while inbox.purge_all removes a
# million old events, against ingest alone, side by side in one run.
#
#   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... bash bench/retention/run.sh
#   (or: make bench BENCH=retention)
#
# Loads EVENTS old processed events (default 1000000): half past the default
# dedup horizon (90 days: the rows are deleted), half past the payload
# horizon only (30 days: payload and headers removed, the row kept as the
# dedup key). Then alternates ingest runs of WINDOW seconds (default 15,
# pgbench, CLIENTS clients, default 4, 20 events per ingest_batch): "alone",
# and "purging" with CALL inbox.purge_all(max_duration => WINDOW, throttle =>
# THROTTLE, default 3 as in the job) running beside it, in the order AB BA AB ... until nothing is
# left to purge (at most MAX_PAIRS pairs, default 30). The ratio is the
# ingest of the purging runs over that of the runs alone, counting the pairs
# whose purge was busy the whole window (its last batch still had more).
set -euo pipefail
cd "$(dirname "$0")"
: "${PGDATABASE:?set PGHOST, PGPORT, PGUSER and PGDATABASE}"
events=${EVENTS:-1000000}
window=${WINDOW:-15}
clients=${CLIENTS:-4}
throttle=${THROTTLE:-3}
max_pairs=${MAX_PAIRS:-30}
work=$(mktemp -d /tmp/pg_inbox-bench-retention.XXXXXX)
trap 'rm -rf "$work"' EXIT
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }

psql_q -o /dev/null <<SQL
SELECT inbox.register_provider(p) FROM unnest(ARRAY['bench_old', 'bench_ing']) p;
DELETE FROM inbox.events WHERE provider IN ('bench_old', 'bench_ing');
INSERT INTO inbox.events (provider, external_id, payload, headers, status, attempts,
                          received_at, first_received_at, processed_at)
SELECT 'bench_old', 'o-' || n, jsonb_build_object('n', n, 'pad', repeat('x', 400)),
       '{"stripe-signature": "t=1,v1=abc"}', 'done', 1, t, t, t
  FROM generate_series(1, $events) n,
       LATERAL (SELECT now() - CASE WHEN n % 2 = 0 THEN interval '100 days' ELSE interval '40 days' END
                       - n * interval '1 second' AS t) x;
SQL
psql_q -c "VACUUM (ANALYZE) inbox.events" -c "CHECKPOINT"
left() {
  psql_q -At -c "SELECT count(*) FILTER (WHERE processed_at < now() - interval '90 days')
                        + count(*) FILTER (WHERE purged_at IS NULL AND processed_at < now() - interval '30 days'
                                             AND processed_at >= now() - interval '90 days')
                   FROM inbox.events WHERE provider = 'bench_old'"
}
echo "== ingest alone vs while purging $events old events (window ${window}s, $clients clients, 20 events per batch, throttle $throttle)"
echo "   to purge: $(left) row deletions + payload removals"
ingest() {  # prints pgbench's tps (batches per second)
  pgbench -n -c "$clients" -j 2 -T "$window" -f ingest.sql 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
purging() {  # ingest while purge_all runs; prints "tps rows_deleted payloads_purged more"
  psql -X -At -c "CALL inbox.purge_all(max_duration => '$window seconds', throttle => $throttle)" >"$work/purge" &
  local purger=$! tps
  tps=$(ingest)
  wait "$purger"
  echo "$tps $(psql_q -At -c "SELECT concat_ws(' ', r->>'rows_deleted', r->>'payloads_purged', r->>'more')
                                FROM (SELECT \$\$$(cat "$work/purge")\$\$::jsonb AS r) x")"
}
printf '%-5s %12s %14s %8s %13s %16s\n' pair alone_tps purging_tps ratio rows_deleted payloads_purged
sum_a=0; sum_b=0; full=0; total_rows=0; total_payloads=0
for pair in $(seq "$max_pairs"); do
  if [ $((pair % 2)) -eq 1 ]; then a=$(ingest); read -r b rows payloads more <<<"$(purging)"
  else read -r b rows payloads more <<<"$(purging)"; a=$(ingest); fi
  total_rows=$((total_rows + rows)); total_payloads=$((total_payloads + payloads))
  printf '%-5s %12s %14s %8s %13s %16s%s\n' "$pair" "$a" "$b" "$(calc "$b / $a")" "$rows" "$payloads" \
    "$([ "$more" = true ] && echo "" || echo "  (purge finished within the window)")"
  if [ "$more" = true ]; then sum_a=$(calc "$sum_a + $a"); sum_b=$(calc "$sum_b + $b"); full=$((full + 1)); fi
  [ "$more" = true ] || break
done
echo "purged: $total_rows rows deleted, $total_payloads payloads removed; left: $(left)"
echo "purge rate while ingesting: $(calc "($total_rows + $total_payloads) / ($full * $window + ($full < $pair ? $window : 0))") rows/s (throttle $throttle)"
echo "ingest ratio, purging / alone, over the $full pairs the purge was busy throughout: $(calc "$sum_b / $sum_a") (target >= 0.9)"

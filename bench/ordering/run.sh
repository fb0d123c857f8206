#!/usr/bin/env bash
# Version checks (issue 12): what claim costs for a provider with ordering
# pointers and for one without, against the claim of 0.1.0, and what advance
# adds to a worker's transaction. Workloads alternate in one run (noise hits
# all alike); figures are ratios to the 0.1.0 claim of the same run: of the
# sums, and the median of the rounds' ratios (robust to bursts of load from
# other processes). Each transaction claims 100 events and completes them
# with complete_batch.
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE of a database with pg_inbox 0.2.0.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-2}
clients=${BENCH_CLIENTS:-2}
rounds=${BENCH_ROUNDS:-10}
# name:script:ordering (off, or on: the Stripe preset's entity, version and
# state pointers on the payload)
# claim_any claims from every provider while another one has pointers.
workloads=(claim_010:claim_010:off claim_plain:claim:off claim_any_plain:claim_any:off
           claim_ordered:claim:on advance_plain:claim_advance:off advance_ordered:claim_advance:on)
set_ordering() {
  if [ "$1" = on ]; then
    psql -X -q -c "SELECT inbox.configure_ordering('bench', '/data/object/id', '/created', '/data/object/status')" >/dev/null
  else
    psql -X -q -c "SELECT inbox.configure_ordering('bench', NULL, NULL)" >/dev/null
  fi
}
psql -X -q -v ON_ERROR_STOP=1 -v backlog="${BENCH_BACKLOG:-1000000}" -f setup.sql >/dev/null
# Before each round, enough pending events that no workload runs dry: a
# round takes up to 6 x 2 s x 20,000 events here (an emptied queue fails
# complete_batch's empty array and ends the run).
per_round=${BENCH_PER_ROUND:-400000}
top_up() {
  psql -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO inbox.events (provider, external_id, payload)
    SELECT 'bench', 'evt_' || n, bench.payload(n)
      FROM (SELECT max(id) AS top, count(*) FILTER (WHERE status = 'pending') AS pending
              FROM inbox.events) s,
           generate_series(s.top + 1, s.top + greatest(0, $per_round - s.pending)) n" \
    -c "ANALYZE inbox.events" >/dev/null
}
declare -A sum ratios
for _ in $(seq "$rounds"); do
  top_up
  for spec in "${workloads[@]}"; do
    IFS=: read -r w script ordering <<<"$spec"
    set_ordering "$ordering"
    psql -X -q -c "CHECKPOINT"
    t=$(pgbench -n -c "$clients" -j 2 -T "$seconds" -f "$script.sql" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    [ -n "$t" ] || { echo "bench/ordering: pgbench failed on $w (ran out of pending events?)" >&2; exit 1; }
    sum[$w]=$(echo "${sum[$w]:-0} + $t" | bc -l)
    [ "$w" = claim_010 ] && base_t=$t
    ratios[$w]="${ratios[$w]:-} $(echo "$t / $base_t" | bc -l)"
    printf '%s %s tps\n' "$w" "$t" >&2
  done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=${sum[claim_010]}
printf '%-24s %12s %9s %9s\n' workload "events/s" "vs 0.1.0" "median"
for spec in "${workloads[@]}"; do
  w=${spec%%:*}
  printf '%-24s %12.0f %9.2f %9.2f\n' "$w" "$(echo "${sum[$w]} * 100 / $rounds" | bc -l)" \
    "$(echo "${sum[$w]} / $base" | bc -l)" "$(echo "${ratios[$w]}" | median)"
done
psql -X -At -c "SELECT 'left unclaimed: ' || count(*) FROM inbox.events WHERE status = 'pending'"

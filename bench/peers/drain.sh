#!/usr/bin/env bash
# The drain on a fresh backlog per run: raw SQL, pgmq (read + delete, and
# read + archive) and pg_inbox, each run starting on BENCH_BACKLOG pending
# events of its own, vacuumed and analyzed, after a checkpoint, in
# interleaved rounds. run.sh's W4 drains what W1 and W2 left on top of a
# shared backlog, so its sides start on different tables; here they start
# alike. Two forms (BENCH_FORMS, default both):
#   one  W4b: claim (read) and complete (delete, archive) in one transaction,
#        the scripts run.sh's W4 uses;
#   two  W4c: as workers run, the claim committed before the complete (the
#        same scripts without their BEGIN and COMMIT: each statement commits).
# Prints events/s per side (mean of the rounds) and, per round, pg_inbox
# over each of the others.
#
#   BENCH_ROUNDS=5 bash bench/peers/drain.sh
#
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE, bench/core/setup.sql and pgmq
# installed with a queue named bench (run.sh does both and then calls this).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${BENCH_SECONDS:-8}
rounds=${BENCH_ROUNDS:-3}
backlog=${BENCH_BACKLOG:-300000}
forms=${BENCH_FORMS:-one two}
core=../core
source ./backlog.sh
work=$(mktemp -d /tmp/pg_inbox-drain.XXXXXX)
trap 'rm -rf "$work"' EXIT

# side form -> events/s
drain() {
  local table script
  case $1 in
    raw) table=bench.raw_events script=$core/raw_claim_complete.sql ;;
    pgmq-delete) table=pgmq.q_bench script=pgmq_drain.sql ;;
    pgmq-archive) table=pgmq.q_bench script=pgmq_drain_archive.sql ;;
    pg_inbox) table=inbox.events script=$core/claim_complete_batch.sql ;;
  esac
  if [ "$2" = two ]; then
    grep -v -x -e 'BEGIN;' -e 'COMMIT;' "$script" >"$work/$1.sql"
    script=$work/$1.sql
  fi
  fresh_backlog "$table" "$backlog"
  local tps
  tps=$(pgbench -n -c 4 -j 2 -T "$seconds" -f "$script" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  echo "$tps * 100" | bc -l
}

sides=(raw pgmq-delete pgmq-archive pg_inbox)
declare -A total rate
printf '%-50s %9s %12s %13s %9s  %s\n' "drain on a fresh backlog of $backlog, 4 workers" raw pgmq-delete pgmq-archive pg_inbox \
  "per round, pg_inbox over raw/pgmq-delete/pgmq-archive"
for form in $forms; do
  for side in "${sides[@]}"; do total[$side]=0; done
  each=""
  for _ in $(seq "$rounds"); do
    for side in "${sides[@]}"; do
      rate[$side]=$(drain "$side" "$form")
      total[$side]=$(echo "${total[$side]} + ${rate[$side]}" | bc -l)
    done
    each+=$(printf ' %.2f/%.2f/%.2f' "$(echo "${rate[pg_inbox]} / ${rate[raw]}" | bc -l)" \
      "$(echo "${rate[pg_inbox]} / ${rate[pgmq-delete]}" | bc -l)" \
      "$(echo "${rate[pg_inbox]} / ${rate[pgmq-archive]}" | bc -l)")
  done
  case $form in
    one) label="W4b claim 100 + complete, one transaction" ;;
    two) label="W4c claim 100, commit, complete, commit" ;;
  esac
  printf '%-50s %9.0f %12.0f %13.0f %9.0f %s\n' "$label" \
    "$(echo "${total[raw]} / $rounds" | bc -l)" "$(echo "${total[pgmq-delete]} / $rounds" | bc -l)" \
    "$(echo "${total[pgmq-archive]} / $rounds" | bc -l)" "$(echo "${total[pg_inbox]} / $rounds" | bc -l)" "$each"
done

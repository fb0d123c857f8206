#!/usr/bin/env bash
# `make bench`: builds, starts a throwaway cluster, runs every
# bench/*/run.sh against it (or only those named: `make bench BENCH=core`).
# bench/peers (pgmq, pg-boss) is optional: only `make bench BENCH=peers`.
# Each prints its figures; results also land in bench/results/.
set -euo pipefail
source "$(dirname "$0")/throwaway-cluster.sh" bench 55532 inbox_bench
export INBOX_BENCH_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/inbox_bench"
mkdir -p bench/results
for suite in ${BENCH:-$(cd bench && ls -d */ | tr -d / | grep -vx peers)}; do
  [ -x "bench/$suite/run.sh" ] || [ -f "bench/$suite/run.sh" ] || continue
  echo "== bench/$suite"
  bash "bench/$suite/run.sh" | tee "bench/results/$suite.txt"
done

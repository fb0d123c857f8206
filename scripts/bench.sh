#!/usr/bin/env bash
# `make bench`: builds and installs, starts a throwaway cluster, runs every
# bench/*/run.sh against it (or only those named: `make bench BENCH=core`).
# Each prints its figures; results also land in bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/deps.sh
make -s   # the extension and the receiver

tmp=$(mktemp -d /tmp/pg_inbox-bench.XXXXXX)
chmod 755 "$tmp"
# A private installation holding this checkout's build: no root, no sudo, and
# no other checkout's `make install` can change it under the tests.
export INBOX_PG_BINDIR
INBOX_PG_BINDIR=$(bash scripts/pg-tree.sh "$tmp/install")
port=$(bash scripts/cluster.sh free-port 55532)
cleanup() { bash "$root/scripts/cluster.sh" stop "$tmp" || true; rm -rf "$tmp"; }
trap cleanup EXIT
bash scripts/cluster.sh create "$tmp" "$port" inbox_bench

export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=inbox_bench
export INBOX_BENCH_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/inbox_bench"
mkdir -p bench/results
for suite in ${BENCH:-$(cd bench && ls -d */ | tr -d /)}; do
  [ -x "bench/$suite/run.sh" ] || [ -f "bench/$suite/run.sh" ] || continue
  echo "== bench/$suite"
  bash "bench/$suite/run.sh" | tee "bench/results/$suite.txt"
done

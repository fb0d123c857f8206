#!/usr/bin/env bash
# `make bench`: builds and installs, starts a throwaway cluster, runs every
# bench/*/run.sh against it (or only those named: `make bench BENCH=core`).
# Each prints its figures; results also land in bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/deps.sh
make -s
if [ -f CMakeLists.txt ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j2
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
exec 9>/tmp/pg_inbox-test.lock
flock 9
$sudo make -s install >/dev/null

tmp=$(mktemp -d /tmp/pg_inbox-bench.XXXXXX)
chmod 755 "$tmp"
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

#!/usr/bin/env bash
# Receiver benchmark (issue 10), everything side by side in one run:
#   - the receiver as built now (Boost.Beast listener),
#   - the receiver before the listener change (cpp-httplib 0.11.4's server),
#     built from git into build-bench-old/ (kept between runs),
#   - Postgres' own one-row-per-commit upsert (pgbench, same row shape),
# at 32 connections (clients), durable events/s and p99; then the receivers'
# peak RSS under 64 connections. Every 200 is a committed row (the receiver
# answers after commit; fsync and synchronous_commit on).
#
#   make bench BENCH=receiver
#   INBOX_BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/db bench/receiver/run.sh
#
# Knobs: BENCH_SECONDS (10), BENCH_ROUNDS (2), BENCH_OLD_REF (default: the
# last commit with receiver/http_server.cpp at the top level, i.e. before the
# wings and the Beast listener). BENCH_RECEIVERS ("new old"): the receivers
# each round runs, in order; new@N is the new one with [http] threads = N
# (e.g. "new@1 new@2 old"). BENCH_RECEIVERS_ONLY=1: no pgbench, no RSS runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
: "${INBOX_BENCH_DATABASE_URL:?set INBOX_BENCH_DATABASE_URL to a superuser URL of a database with pg_inbox}"
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-2}
command -v pgbench >/dev/null || PATH=$PATH:$(pg_config --bindir)
source bench/receiver/common.sh

# The old receiver, built once per commit.
old_ref=${BENCH_OLD_REF:-$(git rev-parse "$(git rev-list -1 HEAD -- receiver/http_server.cpp)^")}
old_dir=$root/build-bench-old/$(git rev-parse --short "$old_ref")
old_bin=$old_dir/build/inbox-receiver
if [ ! -x "$old_bin" ]; then
  echo "building the receiver at $(git rev-parse --short "$old_ref") (cpp-httplib listener) into $old_dir (1-3 min)"
  rm -rf "$old_dir" && mkdir -p "$old_dir"
  git archive "$old_ref" CMakeLists.txt receiver | tar -x -C "$old_dir"
  cmake -S "$old_dir" -B "$old_dir/build" -DCMAKE_BUILD_TYPE=Release -DINBOX_RECEIVER_TESTS=OFF >/dev/null
  cmake --build "$old_dir/build" -j2 --target inbox-receiver >/dev/null
fi

# Where the CPU goes (issue 10: what bounds the ratio). Clock ticks of
# processes, from /proc; the database must be on this machine (make bench).
hz=$(getconf CLK_TCK)
ticks() { local t=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }  # busy idle
backend_pids() { sql "SELECT pid FROM pg_stat_activity WHERE usename = 'inbox_bench_receiver'"; }
# The machine while the load runs (wrk reads its events first: not counted):
# from the receiver's first busy moment, for seconds - 1. Prints the busy
# share of all cores and the share the receiver and its backends took.
sample_load() {  # $1 = receiver pid, $2 = seconds
  local t0 a b m0 i0 m1 i1 pids
  t0=$(ticks "$1")
  for _ in $(seq 300); do sleep 0.2; [ "$(ticks "$1")" -gt $((t0 + 2)) ] && break; done
  pids="$1 $(backend_pids | tr '\n' ' ')"
  a=$(ticks $pids); read -r m0 i0 < <(machine_ticks)
  sleep $(($2 - 1))
  b=$(ticks $pids); read -r m1 i1 < <(machine_ticks)
  awk -v busy=$((m1 - m0)) -v idle=$((i1 - i0)) -v own=$((b - a)) \
    'BEGIN { printf "%3.0f%% %3.0f%%", 100 * busy / (busy + idle), 100 * own / (busy + idle) }'
}

# pgbench: one INSERT .. ON CONFLICT per transaction into a table shaped like
# inbox.events' hot columns, with the benchmark's own body as payload.
sql "CREATE TABLE IF NOT EXISTS bench_upsert (
       provider text NOT NULL, external_id text NOT NULL, payload jsonb NOT NULL, headers jsonb,
       status text NOT NULL DEFAULT 'pending', delivery_count int NOT NULL DEFAULT 1,
       received_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (provider, external_id))"
start_receiver new
events_for probe 1
stop_receiver
body=$(cut -f1 "$work/events.tsv" | head -1 | sed "s/'/''/g")
cat >"$work/upsert.sql" <<SQL
\set n random(1, 2000000000)
INSERT INTO bench_upsert (provider, external_id, payload, headers)
VALUES ('bench', 'pg-$run_id-' || :client_id || '-' || :n, '$body', '{"content-type": "application/json"}')
ON CONFLICT (provider, external_id) DO UPDATE
  SET payload = EXCLUDED.payload, delivery_count = bench_upsert.delivery_count + 1, received_at = now();
SQL
run_pgbench() {  # prints "tps p50_ms p99_ms"
  rm -f "$work"/pgb*
  pgbench -n -c 32 -j 2 -T "$seconds" -f "$work/upsert.sql" -l --log-prefix="$work/pgb" \
    "$INBOX_BENCH_DATABASE_URL" >"$work/pgbench.txt" 2>&1
  local tps
  tps=$(awk '/^tps = / { printf "%.0f", $3 }' "$work/pgbench.txt")
  # Per-transaction log: the third column is the latency in microseconds.
  cat "$work"/pgb* | awk '{ print $3 }' | sort -n | awk -v tps="$tps" \
    '{ v[NR] = $1 } END { printf "%s %.2f %.2f\n", tps, v[int(NR * 0.5)] / 1000, v[int(NR * 0.99)] / 1000 }'
}

echo "receiver benchmark: $rounds rounds, ${seconds}s per run, 32 connections, $(nproc) cores, loopback"
echo "old receiver: $(git rev-parse --short "$old_ref") (cpp-httplib 0.11.4 server); new: $(git rev-parse --short HEAD) (Boost.Beast)"
printf "%-6s %-30s %10s %8s %8s %8s %s\n" round what "events/s" "p50 ms" "p99 ms" non-2xx \
  "  CPU us/event: receiver, its Postgres backends; all cores: busy, of it receiver + backends"
warm_up
declare -A rps p99
for r in $(seq "$rounds"); do
  for who in ${BENCH_RECEIVERS:-new old}; do
    start_receiver "$who"
    events_for "$who-$r" $(( seconds * 40000 > 50000 ? seconds * 40000 : 50000 ))
    # The backends are the receiver's own (new at each start): their whole
    # CPU time counts; the receiver's from here on.
    r0=$(ticks "$receiver_pid")
    sample_load "$receiver_pid" "$seconds" >"$work/load.txt" &
    sampler=$!
    read -r x a b bad ok < <(run_wrk 32 "$seconds")
    r1=$(ticks "$receiver_pid"); pg=$(ticks $(backend_pids))
    wait "$sampler" || true
    rps[$who-$r]=$x; p99[$who-$r]=$b
    printf "%-6s %-30s %10s %8s %8s %8s %s   %s\n" "$r" "receiver $who" "$x" "$a" "$b" "$bad" \
      "$(awk -v n=$((bad + ok)) -v hz="$hz" -v rc=$((r1 - r0)) -v pg="$pg" \
         'BEGIN { printf "  %5.0f %5.0f", rc * 1e6 / hz / n, pg * 1e6 / hz / n }')" "$(cat "$work/load.txt")"
    stop_receiver
  done
  [ -n "${BENCH_RECEIVERS_ONLY:-}" ] && continue
  read -r x a b < <(run_pgbench)
  rps[pg-$r]=$x; p99[pg-$r]=$b
  printf "%-6s %-30s %10s %8s %8s %8s\n" "$r" "pgbench upsert, 32 clients" "$x" "$a" "$b" "-"
done
echo
ratio() { awk -v n="$2" -v d="$3" -v what="$1" 'BEGIN { printf ", %s %.2fx", what, n / d }'; }
for r in $(seq "$rounds"); do
  line="round $r"
  for who in ${BENCH_RECEIVERS:-new old}; do
    [ "$who" = old ] && continue
    [ -n "${rps[old-$r]:-}" ] && line+=$(ratio "$who / old receiver" "${rps[$who-$r]}" "${rps[old-$r]}")
    [ -n "${rps[pg-$r]:-}" ] && line+=$(ratio "$who / pgbench upsert" "${rps[$who-$r]}" "${rps[pg-$r]}")
  done
  echo "$line"
done
[ -n "${BENCH_RECEIVERS_ONLY:-}" ] && { sql "DROP TABLE bench_upsert"; exit 0; }

# Memory under 64 connections: the peak resident set of each receiver.
echo
for who in new old; do
  start_receiver "$who"
  before=$(awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$receiver_pid/status")
  events_for "rss-$who" $(( seconds * 40000 > 50000 ? seconds * 40000 : 50000 ))
  read -r x a b bad _ < <(run_wrk 64 "$seconds")
  printf "64 connections, receiver %s: %s events/s, p99 %s ms, RSS %s MB idle, %s MB peak\n" \
    "$who" "$x" "$b" "$before" "$(peak_rss_mb)"
  stop_receiver
done
sql "DROP TABLE bench_upsert"
[ "${BENCH_FRESH_ROUNDS:-2}" = 0 ] || { echo; bash bench/receiver/fresh_install.sh; }

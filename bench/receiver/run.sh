#!/usr/bin/env bash
# Receiver benchmark: wrk against build/inbox-receiver with pre-signed unique
# events, batching on (group commit) and off (one transaction per request),
# at 1, 8 and 32 connections, then a 100% duplicate storm. Every 200 is an
# event committed in Postgres (the receiver answers after commit).
#
#   INBOX_BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/db bench/receiver/run.sh
#
# Needs: the pg_inbox extension in that database, wrk, build/inbox-receiver.
# Knobs: BENCH_SECONDS (10), BENCH_CONNECTIONS ("1 8 32"), and the database
# pool per mode, each at the size that served it best in trial runs here:
# BENCH_POOL_ON (2: group commit wants few, big transactions) and
# BENCH_POOL_OFF (8: one transaction per request wants more connections).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
: "${INBOX_BENCH_DATABASE_URL:?set INBOX_BENCH_DATABASE_URL to a superuser URL of a database with pg_inbox}"
seconds=${BENCH_SECONDS:-10}
connections=${BENCH_CONNECTIONS:-"1 8 32"}
pool_on=${BENCH_POOL_ON:-2}
pool_off=${BENCH_POOL_OFF:-8}
bin=$root/build/inbox-receiver
[ -x "$bin" ] || { echo "build/inbox-receiver missing: cmake -S . -B build && cmake --build build" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk missing (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d /tmp/inbox-bench-receiver.XXXXXX)
receiver_pid=
cleanup() {
  [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null && wait "$receiver_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

sql() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$INBOX_BENCH_DATABASE_URL" -c "$1"; }
sql "DO \$\$ BEGIN CREATE ROLE inbox_bench_receiver LOGIN IN ROLE inbox_receiver;
     EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
sql "SELECT inbox.register_provider('bench')" >/dev/null
# The receiver connects as the least-privileged role, like in production.
receiver_url=$(psql -X -At -d "$INBOX_BENCH_DATABASE_URL" -c "SELECT
  format('host=%s port=%s dbname=%s user=inbox_bench_receiver',
         coalesce(inet_server_addr()::text, '127.0.0.1'), inet_server_port(), current_database())")
receiver_url=${receiver_url%/*}   # inet text of an address has no mask, but be safe
run_id=$(date +%s)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=18080
while ! port_free $port; do port=$((port + 1)); done

start_receiver() {  # $1 = true|false (batching)
  cat >"$work/receiver.toml" <<TOML
listen = "127.0.0.1:$port"
database_url = "$receiver_url"
[http]
threads = 0
[database]
pool_size = $([ "$1" = true ] && echo "$pool_on" || echo "$pool_off")
[batching]
enabled = $1
max_events = 64
max_wait_us = 200
[[provider]]
name = "bench"
scheme = "github"
secrets = ["bench-secret"]
TOML
  "$bin" serve --config "$work/receiver.toml" --quiet >"$work/receiver.log" 2>&1 &
  receiver_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "receiver did not become ready:" >&2; cat "$work/receiver.log" >&2; exit 1
}

stop_receiver() {
  kill -TERM "$receiver_pid"; wait "$receiver_pid" || true; receiver_pid=
}

# Enough distinct events for the run at ~30k/s, at least 50k.
events_for() {  # $1 = label, $2 = count
  "$bin" sign --config "$work/receiver.toml" --provider bench --id "b$run_id-$1" \
    --format tsv --count "$2" >"$work/events.tsv"
}

# wrk; prints "rps p50_ms p99_ms non2xx replays answered_2xx".
run_wrk() {  # $1 = connections, $2 = seconds
  local c=$1 t=2
  [ "$c" -lt 2 ] && t=1
  wrk -t"$t" -c"$c" -d"${2}s" --latency -s bench/receiver/events.lua \
    "http://127.0.0.1:$port" -- "$work/events.tsv" /webhooks/bench "$t" >"$work/wrk.txt" 2>&1
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx/ { bad = $5 }
    /^replays:/ { replays = $2 }
    / requests in / { total = $1 }
    END { printf "%.0f %.2f %.2f %d %d %d\n", rps, p50, p99, bad + 0, replays + 0, total - bad }' "$work/wrk.txt"
}

declare -A rps p50 p99
acked=0
echo "receiver benchmark: ${seconds}s per run, pool_size on=$pool_on off=$pool_off, $(nproc) cores, loopback"
printf "%-10s %5s %12s %9s %9s %8s\n" mode conns "events/s" "p50 ms" "p99 ms" non-2xx
# Warm-up (not reported): a fresh cluster first pays for new WAL segments and
# cold caches, which would otherwise land on whichever run comes first.
start_receiver true
events_for warmup 100000
run_wrk 8 5 >/dev/null
stop_receiver
# Off and on side by side at each level, so drift on a shared machine hits both.
for c in $connections; do
  for mode in off on; do
    start_receiver "$([ $mode = on ] && echo true || echo false)"
    events_for "$mode-$c" $(( seconds * 30000 > 50000 ? seconds * 30000 : 50000 ))
    read -r r a b bad replays ok < <(run_wrk "$c" "$seconds")
    acked=$((acked + ok))
    rps[$mode-$c]=$r; p50[$mode-$c]=$a; p99[$mode-$c]=$b
    printf "%-10s %5s %12s %9s %9s %8s%s\n" "batch-$mode" "$c" "$r" "$a" "$b" "$bad" \
      "$([ "$replays" -gt 0 ] && echo "  (events replayed: $replays)")"
    stop_receiver
  done
done

# Duplicate storm (batching on): 20k events delivered once, marked processed,
# then delivered again and again; every answer is 200 {"status":"duplicate"}.
c=${connections##* }
start_receiver true
events_for dup 20000
run_wrk "$c" 3 >/dev/null
sql "UPDATE inbox.events SET status = 'done', processed_at = now()
     WHERE provider = 'bench' AND external_id LIKE 'b$run_id-dup-%' AND status <> 'done'"
read -r r a b bad replays ok < <(run_wrk "$c" "$seconds")
printf "%-10s %5s %12s %9s %9s %8s\n" "duplicates" "$c" "$r" "$a" "$b" "$bad"
dup=$r
stop_receiver

echo
for c in $connections; do
  awk -v c="$c" -v on="${rps[on-$c]}" -v off="${rps[off-$c]}" \
    'BEGIN { printf "batching on/off at %2d connections: %.2fx\n", c, on / off }'
done
awk -v d="$dup" -v f="${rps[on-$c]}" -v c="$c" \
  'BEGIN { printf "duplicate storm / first deliveries at %d connections: %.2fx\n", c, d / f }'
# Every 200 of the unique-event runs must be a committed row. Rows can exceed
# the 200s by at most the requests in flight when wrk stopped each run.
rows=$(sql "SELECT count(*) FROM inbox.events WHERE provider = 'bench' AND external_id LIKE 'b$run_id-%'
            AND external_id NOT LIKE 'b$run_id-dup-%' AND external_id NOT LIKE 'b$run_id-warmup-%'")
total_conns=0; for c in $connections; do total_conns=$((total_conns + 2 * c)); done
echo "unique-event runs: $acked answered 200, $rows rows stored (in flight at the ends: at most $total_conns)"

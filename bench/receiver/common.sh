# What the receiver benchmarks share (sourced from the repository's root,
# after INBOX_BENCH_DATABASE_URL is set; old_bin for `start_receiver old`):
# the receiver as built and wrk, a work directory, the least-privileged role
# the receiver connects as, a free port, starting and stopping a receiver
# with group commit on, pre-signed deliveries and wrk.
source scripts/wait-http.sh
new_bin=$PWD/build/inbox-receiver
[ -x "$new_bin" ] || { echo "build/inbox-receiver missing: make receiver" >&2; exit 1; }
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
         coalesce(host(inet_server_addr()), '127.0.0.1'), inet_server_port(), current_database())")
run_id=$(date +%s)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=18080
while ! port_free $port; do port=$((port + 1)); done

# $1 = new|old. Same settings; the old one's threads are its own default (64:
# a thread per keep-alive connection), the new one's are I/O threads.
start_receiver() {  # $1 = new|new@THREADS|old
  local bin=$new_bin threads=0
  [ "$1" = old ] && bin=$old_bin threads=64
  [[ $1 == new@* ]] && threads=${1#new@}
  cat >"$work/receiver.toml" <<TOML
listen = "127.0.0.1:$port"
database_url = "$receiver_url"
[http]
threads = $threads
[database]
pool_size = 2
[batching]
enabled = true
max_events = 64
max_wait_us = 200
[[provider]]
name = "bench"
scheme = "github"
secrets = ["bench-secret"]
TOML
  "$bin" serve --config "$work/receiver.toml" --quiet >"$work/receiver.log" 2>&1 &
  receiver_pid=$!
  wait_http "http://127.0.0.1:$port/readyz" "$receiver_pid" && return 0
  echo "receiver did not become ready:" >&2; cat "$work/receiver.log" >&2; exit 1
}
stop_receiver() { kill -TERM "$receiver_pid"; wait "$receiver_pid" || true; receiver_pid=; }
peak_rss_mb() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$receiver_pid/status"; }

events_for() {  # $1 = label, $2 = count
  "$new_bin" sign --config "$work/receiver.toml" --provider bench --id "b$run_id-$1" \
    --format tsv --count "$2" >"$work/events.tsv"
}

# wrk; prints "rps p50_ms p99_ms non2xx answered_2xx".
run_wrk() {  # $1 = connections, $2 = seconds
  wrk -t2 -c"$1" -d"${2}s" --latency -s bench/receiver/events.lua \
    "http://127.0.0.1:$port" -- "$work/events.tsv" /webhooks/bench 2 >"$work/wrk.txt" 2>&1
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx/ { bad = $5 }
    / requests in / { total = $1 }
    END { printf "%.0f %.2f %.2f %d %d\n", rps, p50, p99, bad + 0, total - bad }' "$work/wrk.txt"
}

# Not reported: new WAL segments and cold caches.
warm_up() {
  start_receiver new
  events_for warmup 100000
  run_wrk 8 5 >/dev/null
  stop_receiver
}

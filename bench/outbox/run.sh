#!/usr/bin/env bash
# Outbox benchmark, every figure a ratio measured side by side in one run:
#  1. publish: a transaction that writes an order row and publishes a receipt
#     (inbox.publish) beside the same transaction without the publish
#     (pgbench, alternating baseline / outbox, 2 rounds);
#  2. forwarder: `inbox-receiver forward --once` delivering M messages to a
#     local consumer beside a plain loop POSTing the same M rows from a table
#     to the same consumer (build/outbox_plain_loop), same thread count,
#     alternating, 2 rounds; the loop once bare and once marking each row sent.
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE (superuser) or INBOX_BENCH_DATABASE_URL,
# node with test/forward/node_modules (scripts/deps-node.sh), build/.
# Knobs: BENCH_SECONDS (8), BENCH_CLIENTS (8), BENCH_OUTBOX_MESSAGES (5000),
# BENCH_OUTBOX_THREADS (4).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=${BENCH_SECONDS:-8}
clients=${BENCH_CLIENTS:-8}
messages=${BENCH_OUTBOX_MESSAGES:-5000}
threads=${BENCH_OUTBOX_THREADS:-4}
rounds=2
db_url=${INBOX_BENCH_DATABASE_URL:-"postgresql://${PGUSER:-postgres}@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/${PGDATABASE:-postgres}"}
export PGDATABASE PGHOST PGPORT PGUSER
sql() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$db_url" -c "$1"; }

work=$(mktemp -d /tmp/inbox-bench-outbox.XXXXXX)
consumer_pid=
cleanup() {
  [ -n "$consumer_pid" ] && kill "$consumer_pid" 2>/dev/null && wait "$consumer_pid" 2>/dev/null
  rm -rf "$work"
  sql "DROP SCHEMA IF EXISTS bench_outbox CASCADE" >/dev/null 2>&1 || true
  sql "TRUNCATE inbox.outbox, inbox.outbox_delivery, inbox.outbox_attempts" >/dev/null 2>&1 || true
}
trap cleanup EXIT

sql "DROP SCHEMA IF EXISTS bench_outbox CASCADE; CREATE SCHEMA bench_outbox;
     CREATE TABLE bench_outbox.orders (id bigserial PRIMARY KEY, customer text, amount bigint, note text,
                                       created_at timestamptz DEFAULT now());
     CREATE TABLE bench_outbox.plain (id bigint PRIMARY KEY, payload jsonb NOT NULL, sent_at timestamptz)" >/dev/null

# --- 1. publish inside a transaction -----------------------------------------
tps() {  # script clients
  sql "CHECKPOINT" >/dev/null
  pgbench -n -c "$2" -j 2 -T "$seconds" -f "bench/outbox/$1" -d "$db_url" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
printf '%-44s %8s %12s %12s %7s\n' workload clients "base tx/s" "outbox tx/s" ratio
compare() {  # label script clients
  local base=0 ours=0
  for _ in $(seq $rounds); do
    base=$(echo "$base + $(tps order_only.sql "$3")" | bc -l)
    ours=$(echo "$ours + $(tps "$2" "$3")" | bc -l)
  done
  printf '%-44s %8d %12.0f %12.0f %7.2f\n' "$1" "$3" "$(echo "$base / $rounds" | bc -l)" \
    "$(echo "$ours / $rounds" | bc -l)" "$(echo "$ours / $base" | bc -l)"
}
compare "order + publish (keyed) vs order alone" order_publish.sql 1
compare "order + publish (keyed) vs order alone" order_publish.sql "$clients"
compare "order + publish (no key) vs order alone" order_publish_nokey.sql "$clients"
sql "TRUNCATE inbox.outbox, inbox.outbox_delivery, inbox.outbox_attempts" >/dev/null

# --- 2. forwarder vs a plain loop ---------------------------------------------
secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
node test/forward/consumer.js "$secret" 0 --no-verify --quiet >"$work/consumer.out" &
consumer_pid=$!
for _ in $(seq 100); do grep -q port "$work/consumer.out" 2>/dev/null && break; sleep 0.1; done
consumer_port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$work/consumer.out")
url="http://127.0.0.1:$consumer_port/hooks"
cat >"$work/forward.toml" <<TOML
database_url = "$db_url"
[forward]
poll_interval_ms = 50
[[route]]
name = "bench"
topics = ["bench.forward"]
url = "$url"
secret = "$secret"
concurrency = $threads
batch_size = 50
timeout_ms = 2000
lease_s = 120
TOML
payload="jsonb_build_object('customer', 'cus_' || i, 'amount', i, 'note', repeat('x', 500))"
now() { date +%s.%N; }
forward_rate() {
  sql "TRUNCATE inbox.outbox, inbox.outbox_delivery, inbox.outbox_attempts;
       SELECT count(inbox.publish('bench.forward', NULL, $payload)) FROM generate_series(1, $messages) i;
       CHECKPOINT" >/dev/null
  local t0; t0=$(now)
  build/inbox-receiver forward --once --quiet --config "$work/forward.toml" >/dev/null
  local t1; t1=$(now)
  local done; done=$(sql "SELECT count(*) FROM inbox.outbox_delivery WHERE status = 'done'")
  [ "$done" = "$messages" ] || { echo "forwarder delivered $done of $messages" >&2; exit 1; }
  echo "$messages / ($t1 - $t0)" | bc -l
}
loop_rate() {  # [--mark]
  sql "TRUNCATE bench_outbox.plain; INSERT INTO bench_outbox.plain (id, payload)
       SELECT i, $payload FROM generate_series(1, $messages) i; CHECKPOINT" >/dev/null
  build/outbox_plain_loop "$db_url" "$url" "$threads" "$@" | sed -n 's/.* rate \([0-9.]*\)$/\1/p'
}
printf '\n%-44s %8s %12s %12s %7s\n' "delivery of $messages messages" threads "loop msg/s" "fwd msg/s" ratio
for mode in "" --mark; do
  base=0 ours=0
  for _ in $(seq $rounds); do
    base=$(echo "$base + $(loop_rate $mode)" | bc -l)
    ours=$(echo "$ours + $(forward_rate)" | bc -l)
  done
  printf '%-44s %8d %12.0f %12.0f %7.2f\n' "forwarder vs plain loop ${mode:-(bare)}" "$threads" \
    "$(echo "$base / $rounds" | bc -l)" "$(echo "$ours / $rounds" | bc -l)" "$(echo "$ours / $base" | bc -l)"
done

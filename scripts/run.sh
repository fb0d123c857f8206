#!/usr/bin/env bash
# `make run`: the whole stack on this machine, on the embedded default:
#   - a private PostgreSQL 15 cluster under .local/pg (pg_cron preloaded),
#   - the pg_inbox and pg_cron extensions in database `inbox`,
#   - the example providers registered and two login roles for the sidecars,
#   - inbox-receiver serving examples/receiver.toml (when it is built),
# then one signed test delivery through it, and how to go on from there.
# Ctrl-C stops the receiver and the cluster. INBOX_RUN_DETACH=1 returns
# after start-up and leaves both running (`make stop` ends them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/deps.sh
make -s   # the extension and the receiver
# Under the project folder, unless the server user cannot reach it (a
# checkout in /root, say): then a fixed folder of this checkout's own.
dir=$root/.local/pg
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$root"; then
  dir=/var/tmp/pg_inbox-$(echo "$root" | md5sum | cut -c1-8)
fi
port=${INBOX_PGPORT:-54329}
# The server runs from a private installation holding this build (no sudo,
# nothing written outside the project): rebuilt each run, so restart.
bash scripts/cluster.sh stop "$dir" 2>/dev/null || true
mkdir -p "$dir"
export INBOX_PG_BINDIR
INBOX_PG_BINDIR=$(bash scripts/pg-tree.sh "$dir/install")
if [ -f "$dir/data/postgresql.conf" ]; then
  port=$(sed -n 's/^port = \([0-9]*\)/\1/p' "$dir/data/postgresql.conf" | tail -1)
  bash scripts/cluster.sh start "$dir"
else
  port=$(bash scripts/cluster.sh free-port "$port")
  bash scripts/cluster.sh create "$dir" "$port" inbox
fi
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=inbox
echo "$dir" > "$root/.local/cluster-dir" 2>/dev/null || { mkdir -p "$root/.local"; echo "$dir" > "$root/.local/cluster-dir"; }

# Login roles for the sidecars: members of the group roles the extension made.
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'inbox_receiver_app') THEN
    CREATE ROLE inbox_receiver_app LOGIN IN ROLE inbox_receiver;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'inbox_worker_app') THEN
    CREATE ROLE inbox_worker_app LOGIN IN ROLE inbox_worker;
  END IF;
  -- The providers of examples/receiver.toml.
  PERFORM inbox.register_provider(name)
     FROM unnest(ARRAY['github', 'stripe', 'shopify', 'slack', 'standard', 'hmac']) AS name;
END $$;
SQL

cat <<INFO

pg_inbox is running.
  cluster:  $dir (port $port)
  psql:     psql -h 127.0.0.1 -p $port -U postgres inbox
  try:      SELECT inbox.ingest('stripe', 'evt_1', '{"type": "invoice.paid"}');
            SELECT id, external_id, lease_token FROM inbox.claim(10);
            SELECT inbox.complete(<id>, '<lease_token>');
INFO

receiver_pid=""
stop_all() {
  trap - EXIT INT TERM   # once, whichever signal came first
  [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null && wait "$receiver_pid" 2>/dev/null
  bash "$root/scripts/cluster.sh" stop "$dir"
  echo "stopped"
}
if [ -x build/inbox-receiver ] && [ -f examples/receiver.toml ]; then
  export INBOX_DATABASE_URL="postgresql://inbox_receiver_app@127.0.0.1:$port/inbox"
  if [ "${INBOX_RUN_DETACH:-0}" = 1 ]; then
    build/inbox-receiver serve --config examples/receiver.toml >"$root/.local/receiver.log" 2>&1 &
  else
    build/inbox-receiver serve --config examples/receiver.toml &
  fi
  receiver_pid=$!
  echo "$receiver_pid" > "$root/.local/receiver.pid"
  for _ in $(seq 50); do curl -sf http://127.0.0.1:8080/readyz >/dev/null && break; sleep 0.1; done
  bash scripts/demo-delivery.sh
  cat <<INFO

inbox-receiver is serving examples/receiver.toml on http://127.0.0.1:8080
  sign a delivery:  build/inbox-receiver sign --config examples/receiver.toml --provider github --url http://127.0.0.1:8080
  metrics:          curl -s http://127.0.0.1:8080/metrics
INFO
fi

[ "${INBOX_RUN_DETACH:-0}" = 1 ] && exit 0
trap stop_all EXIT INT TERM
echo "Ctrl-C stops everything."
if [ -n "$receiver_pid" ]; then wait "$receiver_pid"; else while sleep 3600; do :; done; fi

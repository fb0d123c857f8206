#!/usr/bin/env bash
# `make run`: the whole stack on this machine, on the embedded default:
#   - a private PostgreSQL 15 cluster under .local/pg (pg_cron preloaded),
#   - the pg_inbox and pg_cron extensions in database `inbox`, the jobs
#     scheduled (inbox.schedule()),
#   - the example providers registered and two login roles for the sidecars,
#   - inbox-receiver serving examples/receiver.toml (on the chosen port),
# then one signed test delivery through it, and how to go on from there.
#
# Ports: INBOX_PGPORT (default 54329, or the port the cluster had last time)
# and INBOX_HTTP_PORT (default 8080). A port given is used, or refused when
# taken; a default that is taken moves to the next free one. Nothing is
# installed outside the project (but the packages of scripts/deps.sh).
#
# Ctrl-C (or `make stop` from another terminal) stops the receiver and the
# cluster. INBOX_RUN_DETACH=1 returns after start-up and leaves both running
# (`make stop` ends them). A second `make run` while one runs changes
# nothing: it says what runs and how to stop it.
set -euo pipefail
source "$(dirname "$0")/run-state.sh"
source "$(dirname "$0")/wait-http.sh"
cd "$root"
mkdir -p "$state"
detach=${INBOX_RUN_DETACH:-0}

# One start at a time per checkout: a second `make run` waits until the first
# has started, then finds it running. Daemons never inherit the lock (9>&-).
exec 9>"$state/run.lock"
if ! flock -n 9; then
  echo "make run: another make run of this checkout is starting; waiting for it"
  flock -w 900 9 || { echo "make run: gave up waiting for the other make run" >&2; exit 1; }
fi
running_dir=$(cat "$state/cluster-dir" 2>/dev/null || echo "$cluster_dir")
if pid_running "$state/run.pid" scripts/run.sh || pid_running "$state/receiver.pid" inbox-receiver \
   || cluster_running "$running_dir"; then
  PGPORT=?; HTTP_PORT=""
  [ -f "$state/ports" ] && source "$state/ports"
  echo "pg_inbox is already running from this checkout; this make run changed nothing."
  echo "  cluster:  $running_dir (port $PGPORT)"
  [ -n "$HTTP_PORT" ] && echo "  receiver: http://127.0.0.1:$HTTP_PORT"
  echo "Stop it with: make stop   (or Ctrl-C in the terminal of a foreground make run)"
  [ -n "${INBOX_PGPORT:-}${INBOX_HTTP_PORT:-}" ] && echo "The ports asked for (INBOX_PGPORT, INBOX_HTTP_PORT) apply to the next start."
  exit 0
fi

# From here on, a failure or a signal stops what this run started.
dir=$cluster_dir
receiver_pid=""
cluster_started=0
stop_all() {
  trap - EXIT INT TERM   # once, whichever came first
  if [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null; then
    wait "$receiver_pid" || echo "inbox-receiver exited with status $?"
  fi
  [ "$cluster_started" = 1 ] && bash "$root/scripts/cluster.sh" stop "$dir"
  rm -f "$state/run.pid" "$state/receiver.pid" "$state/ports"
  echo "stopped"
}
trap stop_all EXIT
trap 'exit 0' INT TERM   # Ctrl-C or `make stop`: the EXIT trap stops everything
echo $$ > "$state/run.pid"
echo "$dir" > "$state/cluster-dir"   # before it starts, so `make stop` finds it

bash scripts/deps.sh
echo "building the extension"
make -s --no-print-directory extension
make -s --no-print-directory receiver RECEIVER_TESTS=OFF   # the binary only, not its tests

# port_free PORT: nobody listens on PORT. pick_port NAME WANTED DEFAULT:
# WANTED (given by the user) or else the first free port from DEFAULT.
port_free() { [ "$(bash scripts/cluster.sh free-port "$1")" = "$1" ]; }
pick_port() {
  if [ -n "$2" ]; then
    port_free "$2" || { echo "make run: port $2 ($1) is in use: choose another $1" >&2; return 1; }
    echo "$2"
  else
    bash scripts/cluster.sh free-port "$3"
  fi
}

http_port=$(pick_port INBOX_HTTP_PORT "${INBOX_HTTP_PORT:-}" 8080)

# The server runs from a private installation holding this build (no sudo,
# nothing written outside the project), rebuilt each run.
mkdir -p "$dir"
export INBOX_PG_BINDIR
INBOX_PG_BINDIR=$(bash scripts/pg-tree.sh "$dir/install")
if [ -f "$dir/data/postgresql.conf" ]; then
  was=$(sed -n 's/^port = \([0-9]*\)/\1/p' "$dir/data/postgresql.conf" | tail -1)
  port=$(pick_port INBOX_PGPORT "${INBOX_PGPORT:-}" "$was")
  sed -i "s/^port = .*/port = $port/" "$dir/data/postgresql.conf"
  cluster_started=1
  bash scripts/cluster.sh start "$dir" 9>&-
else
  port=$(pick_port INBOX_PGPORT "${INBOX_PGPORT:-}" 54329)
  cluster_started=1
  cluster_created=1
  bash scripts/cluster.sh create "$dir" "$port" inbox 9>&-
fi
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=inbox
echo "PGPORT=$port" > "$state/ports"

# An existing cluster made by an older checkout: bring its schema forward.
PGOPTIONS='-c client_min_messages=warning' psql -X -q -c "ALTER EXTENSION pg_inbox UPDATE"
# A release under way changes its install script without a new version
# number, which ALTER EXTENSION cannot see: when the script differs from
# the one this demo cluster was made with (unknown for a cluster made
# before this check), the extension is made again
# (this private cluster's events go with it; a released version never
# changes, so real upgrades always go through ALTER EXTENSION above).
script=$(psql -X -At -c "SELECT 'sql/pg_inbox--' || extversion || '.sql' FROM pg_extension WHERE extname = 'pg_inbox'")
script_sum=$(md5sum "$script" 2>/dev/null | cut -d' ' -f1)
if [ -n "${cluster_created:-}" ]; then
  made_with=$script_sum
else
  made_with=$(cat "$dir/extension.md5" 2>/dev/null || echo unknown)
fi
if [ -n "$script_sum" ] && [ "$made_with" != "$script_sum" ]; then
  echo "make run: $script changed since this demo cluster was made: making the extension again (its events are dropped)"
  PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 \
    -c "DROP EXTENSION pg_inbox CASCADE" -c "CREATE EXTENSION pg_inbox"
fi
[ -n "$script_sum" ] && echo "$script_sum" > "$dir/extension.md5"
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
jobs=$(psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT string_agg(format('%s (%s)', j->>'job', j->>'schedule'), ', ')
                                             FROM jsonb_array_elements(inbox.schedule()) j")

cat <<INFO

pg_inbox is running.
  cluster:  $dir (port $port)
  psql:     psql -h 127.0.0.1 -p $port -U postgres inbox
  pg_cron:  scheduled $jobs (SELECT inbox.schedule())
  try:      SELECT inbox.ingest('stripe', 'evt_1', '{"type": "invoice.paid"}');
            SELECT id, external_id, lease_token FROM inbox.claim(10);
            SELECT inbox.complete(<id>, '<lease_token>');
INFO

# The example config with the chosen listen address.
url=http://127.0.0.1:$http_port
config=.local/receiver.toml   # (run.sh works from the checkout root)
{ echo "# Written by make run: examples/receiver.toml listening on 127.0.0.1:$http_port."
  sed "s|^listen = .*|listen = \"127.0.0.1:$http_port\"|" examples/receiver.toml; } >"$config"
echo "HTTP_PORT=$http_port" >> "$state/ports"
export INBOX_DATABASE_URL="postgresql://inbox_receiver_app@127.0.0.1:$port/inbox"
if [ "$detach" = 1 ]; then
  build/inbox-receiver serve --config "$config" >"$state/receiver.log" 2>&1 9>&- &
else
  build/inbox-receiver serve --config "$config" 9>&- &
fi
receiver_pid=$!
echo "$receiver_pid" > "$state/receiver.pid"
if ! wait_http "$url/readyz" "$receiver_pid"; then
  echo "make run: inbox-receiver did not become ready on $url" >&2
  [ "$detach" = 1 ] && tail -20 "$state/receiver.log" >&2
  exit 1
fi
INBOX_RECEIVER_CONFIG=$config INBOX_HTTP_PORT=$http_port bash scripts/demo-delivery.sh
cat <<INFO

inbox-receiver is serving $config on $url
  sign a delivery:  build/inbox-receiver sign --config $config --provider github --url $url | sh
  metrics:          curl -s $url/metrics
INFO

flock -u 9; exec 9>&-
if [ "$detach" = 1 ]; then
  trap - EXIT INT TERM
  rm -f "$state/run.pid"
  echo "Left running (INBOX_RUN_DETACH=1): make stop ends it."
  exit 0
fi
echo "Ctrl-C (or make stop) stops everything."
wait "$receiver_pid" || echo "inbox-receiver exited with status $?"

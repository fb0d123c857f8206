#!/usr/bin/env bash
# The status page in a real browser. Headless Chromium loads /status from
# `inbox-receiver serve` (admin_listen, read as a login with inbox_monitor
# rights only) against a real database, twice:
#   faults:  a dead event (stripe), a gap past its grace period waiting for
#            backfill (github), the checks that fire on them;
#   healthy: everything processed, statistics fresh.
# It asserts on the DOM Chromium rendered (verdicts, reasons, check names,
# numbers) and saves a screenshot of each.
# usage: status_page.sh INBOX_RECEIVER_BIN OUT_DIR   (INBOX_TEST_DATABASE_URL: a superuser URL)
set -euo pipefail
source "$(dirname "$0")/../../scripts/wait-http.sh"
bin=${1:?inbox-receiver binary}
out=${2:?output directory}
if [ -z "${INBOX_TEST_DATABASE_URL:-}" ]; then
  echo "INBOX_TEST_DATABASE_URL is not set: no database to test with"; exit 77
fi
browser=$(command -v chromium || true)
[ -n "$browser" ] || { echo "chromium is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d /tmp/inbox-browser.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

su_url=$INBOX_TEST_DATABASE_URL
port=$(psql "$su_url" -XAtqc "SELECT current_setting('port')")
psql "$su_url" -Xq -v ON_ERROR_STOP=1 <<'SQL'
DO $$ BEGIN CREATE ROLE inbox_monitor_browser LOGIN PASSWORD 'inbox_monitor_browser' IN ROLE inbox_monitor;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DROP DATABASE IF EXISTS inbox_browser_faults;
DROP DATABASE IF EXISTS inbox_browser_ok;
CREATE DATABASE inbox_browser_faults;
CREATE DATABASE inbox_browser_ok;
SQL
db_url() { echo "postgresql://postgres@127.0.0.1:$port/$1"; }

# Faults, made through the extension's own functions.
psql "$(db_url inbox_browser_faults)" -Xq -o /dev/null -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_inbox;
SELECT inbox.register_provider('stripe', max_attempts => 1);
SELECT inbox.register_provider('github');
SELECT inbox.set_id_source('github', 'sequence', 'gh_{n}', 1, grace => '1 second');
SELECT inbox.ingest('stripe', 'evt_' || i, '{"type": "invoice.paid"}') FROM generate_series(1, 20) i;
SELECT inbox.ingest('github', 'gh_' || i, '{"action": "opened"}') FROM generate_series(1, 12) i WHERE i <> 5;
CREATE TEMP TABLE c AS SELECT id, external_id, lease_token FROM inbox.claim(100);
SELECT inbox.fail(id, lease_token, 'HTTP 500 from billing') FROM c WHERE external_id = 'evt_7';
SELECT inbox.complete(id, lease_token) FROM c WHERE external_id <> 'evt_7';
SELECT inbox.scan_gaps('github');
SELECT pg_sleep(1.2);
SELECT inbox.scan_gaps('github');
SELECT inbox.reconcile('browser-test');
SELECT inbox.refresh_stats();
SELECT inbox.configure_check(c, fire_after => 1, window_size => 1) FROM unnest(ARRAY['dead_new', 'gaps_past_grace']) c;
-- Counting checks read whole minutes: evaluate as of the next one.
SELECT inbox.run_checks(now() + interval '1 minute');
SQL

# Healthy: everything arrived and was processed.
psql "$(db_url inbox_browser_ok)" -Xq -o /dev/null -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_inbox;
SELECT inbox.register_provider('stripe');
SELECT inbox.ingest('stripe', 'evt_' || i, '{"type": "invoice.paid"}') FROM generate_series(1, 20) i;
CREATE TEMP TABLE c AS SELECT id, lease_token FROM inbox.claim(100);
SELECT inbox.complete(id, lease_token) FROM c;
SELECT inbox.reconcile('browser-test');
SELECT inbox.refresh_stats();
SELECT inbox.run_checks();
SQL

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve with admin_listen on DATABASE; echoes the admin port.
serve() {
  local db=$1 http admin
  http=$(free_port); admin=$(free_port)
  cat > "$work/$db.toml" <<TOML
listen = "127.0.0.1:$http"
admin_listen = "127.0.0.1:$admin"
database_url = "$(db_url "$db")"
[admin]
database_url = "postgresql://inbox_monitor_browser:inbox_monitor_browser@127.0.0.1:$port/$db"
[[provider]]
name = "stripe"
scheme = "stripe"
secrets = ["whsec_test"]
TOML
  "$bin" serve --config "$work/$db.toml" --quiet > "$work/$db.log" 2>&1 &
  echo $! > "$work/$db.pid"  # serve runs in $(...): the caller picks the pid up
  wait_http "http://127.0.0.1:$admin/healthz" "$(cat "$work/$db.pid")" || true  # the assertions say what failed
  echo "$admin"
}

chrome() {  # chrome PROFILE ARGS...: headless, nothing fetched but the page
  local profile=$1; shift
  "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --disable-extensions --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$profile" "$@" 2>>"$work/chromium.log"
}

failures=0
expect() {  # expect FILE PATTERN WHAT
  if grep -qE -- "$2" "$1"; then echo "ok - $3"; else echo "not ok - $3 (no match for: $2)"; failures=$((failures + 1)); fi
}
refuse() {
  if grep -qE -- "$2" "$1"; then echo "not ok - $3 (found: $2)"; failures=$((failures + 1)); else echo "ok - $3"; fi
}

for case in faults ok; do
  admin=$(serve "inbox_browser_$case")
  pids+=("$(cat "$work/inbox_browser_$case.pid")")
  url="http://127.0.0.1:$admin/status"
  dom="$out/status-$case.dom.html"
  chrome "$work/profile-$case-dom" --dump-dom "$url" > "$dom"
  chrome "$work/profile-$case-shot" --window-size=1200,1250 --screenshot="$out/status-$case.png" "$url" >/dev/null
  expect "$dom" '<title>pg_inbox status</title>' "$case: Chromium rendered the page"
  [ -s "$out/status-$case.png" ] && echo "ok - $case: screenshot $out/status-$case.png" \
    || { echo "not ok - $case: no screenshot"; failures=$((failures + 1)); }
  if [ "$case" = faults ]; then
    expect "$dom" 'data-provider="stripe" data-verdict="losing"' "faults: stripe is losing"
    expect "$dom" 'class="reason">[^<]*1 events went dead in 24 hours' "faults: because an event went dead"
    expect "$dom" 'data-provider="github" data-verdict="losing"' "faults: github is losing"
    expect "$dom" '1 gaps past their grace period' "faults: because of a gap past its grace period"
    expect "$dom" 'data-check="dead_new"' "faults: dead_new is listed as firing"
    expect "$dom" 'data-check="gaps_past_grace"' "faults: gaps_past_grace is listed as firing"
    expect "$dom" 'id="fact-dead">dead in 24 h<b>1</b>' "faults: one dead event waiting for a person"
    expect "$dom" 'id="fact-gaps">open gaps<b>1</b>' "faults: one open gap"
    expect "$dom" 'id="fact-backfill">backfill waiting<b>1</b>' "faults: its backfill request waiting"
    expect "$dom" 'id="headline" data-verdict="losing">Attention: 2 provider\(s\) losing' "faults: the headline"
    expect "$dom" 'id="chart-arrivals".*<polyline' "faults: the arrivals chart is drawn"
    expect "$dom" 'Arrivals <span class="muted">31 in 24 h' "faults: 31 arrivals counted"
    refuse "$dom" 'All accounted for' "faults: not all accounted for"
  else
    expect "$dom" 'data-verdict="ok">All accounted for' "healthy: all accounted for"
    expect "$dom" 'data-provider="stripe" data-verdict="ok"' "healthy: stripe ok"
    expect "$dom" 'id="firing-none"' "healthy: nothing firing"
    expect "$dom" 'Processed <span class="muted">20 in 24 h' "healthy: 20 processed"
    refuse "$dom" 'data-verdict="losing"' "healthy: nothing losing"
  fi
done
if [ "$failures" -gt 0 ]; then
  echo "$failures assertion(s) failed; DOM and screenshots in $out" >&2
  for f in "$work"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done
  exit 1
fi
echo "status page: all assertions passed in $("$browser" --version 2>/dev/null)"

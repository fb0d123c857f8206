#!/usr/bin/env bash
# One signed Stripe-style delivery through the running receiver, sent twice
# (the second is a re-delivery), then the row it left. Used by `make run`,
# and runs as is beside it: INBOX_HTTP_PORT and PGPORT (PGHOST, PGUSER,
# PGDATABASE as usual) default to the ports the running `make run` chose
# (.local/ports), the config to INBOX_RECEIVER_CONFIG or examples/receiver.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
run_port() { if [ -f .local/ports ]; then sed -n "s/^$1=//p" .local/ports; fi; }
pgport=${PGPORT:-$(run_port PGPORT)}
http_port=${INBOX_HTTP_PORT:-$(run_port HTTP_PORT)}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${pgport:-54329} PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-inbox}
url=http://127.0.0.1:${http_port:-8080}
id="evt_demo_$(date +%s)"
request=$(build/inbox-receiver sign --config "${INBOX_RECEIVER_CONFIG:-examples/receiver.toml}" \
            --provider stripe --id "$id" --url "$url")
echo
echo "A signed test delivery (made by: inbox-receiver sign --provider stripe):"
echo "$request" | sed 's/^/    /'
send() { sh -c "$1 -w ' (HTTP %{http_code})'"; }
echo "first delivery  -> $(send "$request")"
echo "re-delivery     -> $(send "$request")"
echo "tampered body   -> $(send "${request/inbox.test/inbox.forged}")   nothing is written"
echo
psql -X -c "SELECT id, provider, external_id, status, delivery_count, source FROM inbox.events WHERE external_id = '$id'"

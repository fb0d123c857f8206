#!/usr/bin/env bash
# One signed Stripe-style delivery through the running receiver, sent twice
# (the second is a re-delivery), then the row it left. Used by `make run`.
# Needs PGHOST/PGPORT/PGUSER/PGDATABASE of the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
id="evt_demo_$(date +%s)"
request=$(build/inbox-receiver sign --config examples/receiver.toml --provider stripe \
            --id "$id" --url http://127.0.0.1:8080)
echo
echo "A signed test delivery (made by: inbox-receiver sign --provider stripe):"
echo "$request" | sed 's/^/    /'
send() { sh -c "$1 -w ' (HTTP %{http_code})'"; }
echo "first delivery  -> $(send "$request")"
echo "re-delivery     -> $(send "$request")"
echo "tampered body   -> $(send "${request/inbox.test/inbox.forged}")   nothing is written"
echo
psql -X -c "SELECT id, provider, external_id, status, delivery_count, source FROM inbox.events WHERE external_id = '$id'"

#!/usr/bin/env bash
# pg_dump + pg_restore keep pg_inbox's rows, ids and outcomes (TAP, run by prove).
# Needs PGHOST/PGPORT/PGUSER of a cluster with the extension available.
set -u
source="inbox_dump_source"; target="inbox_dump_target"; dump=$(mktemp)
trap 'rm -f "$dump"; dropdb --if-exists "$source"; dropdb --if-exists "$target"' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
n=0
check() {  # description, expected, actual
  n=$((n + 1))
  if [ "$2" = "$3" ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; echo "#   want: $2"; echo "#   have: $3"; fi
}

echo "1..12"
dropdb --if-exists "$source"; dropdb --if-exists "$target"
createdb "$source" && createdb "$target"
q "$source" "CREATE EXTENSION pg_inbox" >/dev/null
q "$source" "SELECT inbox.register_provider('stripe')" >/dev/null
q "$source" "SELECT inbox.ingest('stripe', 'evt_' || i, jsonb_build_object('i', i)) FROM generate_series(1, 3) i" >/dev/null
q "$source" "SELECT inbox.complete(id, lease_token) FROM inbox.claim(1)" >/dev/null
# The outbox: messages, delivery states (a foreign key to the messages) and history.
q "$source" "SELECT inbox.publish('receipts', 'k' || i, jsonb_build_object('i', i)) FROM generate_series(1, 5) i" >/dev/null
q "$source" "SELECT inbox.complete_outbox(id, lease_token, 200) FROM inbox.claim_outbox('{receipts}', 2)" >/dev/null
q "$source" "SELECT inbox.seal_log()" >/dev/null
pg_dump -Fc -d "$source" -f "$dump"
pg_restore -d "$target" "$dump" 2>/dev/null

check "the delivery log and its seal survive, unbroken" "3 1 0" \
  "$(q "$target" "SELECT (SELECT count(*) FROM inbox.deliveries) || ' ' || (SELECT count(*) FROM inbox.log_seals)
                          || ' ' || (SELECT count(*) FROM inbox.verify_log())")"
check "events survive a dump and restore" "3" "$(q "$target" "SELECT count(*) FROM inbox.events")"
check "providers survive" "stripe" "$(q "$target" "SELECT string_agg(name, ',') FROM inbox.providers")"
check "a processed event is still a duplicate" "duplicate" "$(q "$target" "SELECT inbox.ingest('stripe', 'evt_1', '{}')")"
check "an open event is still open" "updated" "$(q "$target" "SELECT inbox.ingest('stripe', 'evt_2', '{}')")"
check "the restored log chains on" "5 0" \
  "$(q "$target" "SELECT (SELECT count(*) FROM inbox.deliveries) || ' ' || (SELECT count(*) FROM inbox.verify_log())")"
check "a new event after the restore is inserted" "inserted" "$(q "$target" "SELECT inbox.ingest('stripe', 'evt_new', '{}')")"
check "the identity sequence continued past the restored ids" "t" \
  "$(q "$target" "SELECT id > 3 FROM inbox.events WHERE external_id = 'evt_new'")"
check "outbox messages survive" "5" "$(q "$target" "SELECT count(*) FROM inbox.outbox")"
check "outbox delivery states survive" "done,done,pending,pending,pending" \
  "$(q "$target" "SELECT string_agg(status, ',' ORDER BY message_id) FROM inbox.outbox_delivery")"
check "the outbox history survives" "delivered,delivered" \
  "$(q "$target" "SELECT string_agg(outcome, ',' ORDER BY message_id) FROM inbox.outbox_attempts")"
check "the outbox identity sequence continued past the restored ids" "t" \
  "$(q "$target" "SELECT inbox.publish('receipts', NULL, '{}') > 5")"

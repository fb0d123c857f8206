#!/usr/bin/env bash
# pg_dump + pg_restore keep the outbox: messages, delivery states (the
# foreign key to the messages restores in order), the attempt history, and
# the identity sequence (TAP, run by prove). Needs PGHOST/PGPORT/PGUSER.
set -u
source="inbox_outbox_dump_source"; target="inbox_outbox_dump_target"; dump=$(mktemp)
trap 'rm -f "$dump"; dropdb --if-exists "$source"; dropdb --if-exists "$target"' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
n=0
check() {  # description, expected, actual
  n=$((n + 1))
  if [ "$2" = "$3" ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; echo "#   want: $2"; echo "#   have: $3"; fi
}

echo "1..5"
dropdb --if-exists "$source" 2>/dev/null; dropdb --if-exists "$target" 2>/dev/null
createdb "$source" && createdb "$target"
q "$source" "CREATE EXTENSION pg_inbox" >/dev/null
q "$source" "SELECT inbox.publish('receipts', 'k' || i, jsonb_build_object('i', i)) FROM generate_series(1, 5) i" >/dev/null
q "$source" "SELECT inbox.complete_outbox(id, lease_token, 200) FROM inbox.claim_outbox('{receipts}', 2)" >/dev/null
pg_dump -Fc -d "$source" -f "$dump"
pg_restore -d "$target" "$dump"
check "pg_restore succeeds" "0" "$?"
check "messages survive" "5" "$(q "$target" "SELECT count(*) FROM inbox.outbox")"
check "delivery states survive" "done,done,pending,pending,pending" \
  "$(q "$target" "SELECT string_agg(status, ',' ORDER BY message_id) FROM inbox.outbox_delivery")"
check "the history survives" "delivered,delivered" \
  "$(q "$target" "SELECT string_agg(outcome, ',' ORDER BY message_id) FROM inbox.outbox_attempts")"
check "the identity sequence continued past the restored ids" "t" \
  "$(q "$target" "SELECT inbox.publish('receipts', NULL, '{}') > 5")"

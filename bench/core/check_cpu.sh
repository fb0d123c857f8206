#!/usr/bin/env bash
# What the row CHECKs cost: the CPU of one backend (utime + stime from
# /proc) for CALLS single-event ingests (log off, then on) and CALLS
# publishes in one transaction, with the installed CHECKs (one C call per
# row: inbox._event_row_valid, inbox._outbox_row_valid) and with the SQL
# CHECKs 0.1.0 had and the outbox had before (swapped in NOT VALID for the
# run, the installed ones restored after it), alternating, ROUNDS times.
# On a loaded machine a pgbench rate moves 10% from one run to the next;
# the CPU of one backend doing one thing is the precise A/B.
#
#   bash bench/core/check_cpu.sh [ROUNDS] [CALLS]   (PGHOST/... set; the server on this machine)
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
calls=${2:-10000}
psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null 2>&1

sql_checks() {
  export PGOPTIONS="-c client_min_messages=warning"
  psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
ALTER TABLE inbox.events DROP CONSTRAINT events_row_check,
  ADD CONSTRAINT events_status_check CHECK (status IN ('pending', 'processing', 'done', 'dead')) NOT VALID,
  ADD CONSTRAINT events_terminal_has_processed_at
    CHECK ((status IN ('done', 'dead')) = (processed_at IS NOT NULL)) NOT VALID,
  ADD CONSTRAINT events_external_id_check
    CHECK (octet_length(external_id) BETWEEN 1 AND inbox._external_id_limit()) NOT VALID;
ALTER TABLE inbox.outbox_delivery DROP CONSTRAINT outbox_delivery_row_check,
  ADD CONSTRAINT outbox_delivery_status_check
    CHECK (status IN ('pending', 'processing', 'done', 'rejected', 'dead')) NOT VALID,
  ADD CONSTRAINT outbox_delivery_terminal_has_processed_at
    CHECK ((status IN ('done', 'rejected', 'dead')) = (processed_at IS NOT NULL)) NOT VALID;
SQL
}
installed_checks() {
  export PGOPTIONS="-c client_min_messages=warning"
  psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
ALTER TABLE inbox.events DROP CONSTRAINT IF EXISTS events_status_check,
  DROP CONSTRAINT IF EXISTS events_terminal_has_processed_at,
  DROP CONSTRAINT IF EXISTS events_external_id_check;
ALTER TABLE inbox.outbox_delivery DROP CONSTRAINT IF EXISTS outbox_delivery_status_check,
  DROP CONSTRAINT IF EXISTS outbox_delivery_terminal_has_processed_at;
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM bench.installed_checks s
              WHERE NOT EXISTS (SELECT FROM pg_constraint p WHERE p.conrelid = s.tbl AND p.conname = s.conname) LOOP
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.tbl, c.conname, c.def);
        IF c.note IS NOT NULL THEN
            EXECUTE format('COMMENT ON CONSTRAINT %I ON %s IS %L', c.conname, c.tbl, c.note);
        END IF;
    END LOOP;
END
$$;
SQL
}
# The installed CHECKs as they are, to put back after each swap (and on exit).
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE bench.installed_checks AS
  SELECT conrelid::regclass AS tbl, conname, pg_get_constraintdef(oid) AS def,
         obj_description(oid, 'pg_constraint') AS note
    FROM pg_constraint
   WHERE conrelid IN ('inbox.events'::regclass, 'inbox.outbox_delivery'::regclass) AND contype = 'c'"
trap installed_checks EXIT

source ../backend_cpu.sh
cpu_ms() {  # delivery_log loop_statement -> CPU ms of the backend
  PGOPTIONS="-c pg_inbox.delivery_log=$1 -c client_min_messages=warning" backend_cpu_ms \
    "SELECT inbox.ingest('bench', 'warm-' || random(), '{}'), inbox.publish('bench.warm', NULL, '{}');" \
    "DO \$\$ DECLARE n bigint := (random() * 1e15)::bigint; p jsonb := bench.payload(7); BEGIN
FOR i IN 1..$calls LOOP PERFORM $2; END LOOP; END \$\$;"
}

ingest="inbox.ingest('bench', 'c-' || n || '-' || i, p)"
publish="inbox.publish('bench.cpu', NULL, p)"
printf '%-22s %5s %10s %10s %8s\n' "$calls calls" round "C ms" "SQL ms" "SQL/C"
for round in $(seq "$rounds"); do
  for w in "ingest, log off:off:$ingest" "ingest, log on:on:$ingest" "publish:off:$publish"; do
    IFS=: read -r label log statement <<<"$w"
    c=$(cpu_ms "$log" "$statement")
    sql_checks
    s=$(cpu_ms "$log" "$statement")
    installed_checks
    printf '%-22s %5s %10s %10s %8.2f\n' "$label" "$round" "$c" "$s" "$(echo "$s / $c" | bc -l)"
  done
done
psql -X -q -c "TRUNCATE inbox.events CASCADE" -c "TRUNCATE inbox.outbox CASCADE" >/dev/null 2>&1 || true

#!/usr/bin/env bash
# ALTER EXTENSION pg_inbox UPDATE from 0.1.0 (TAP, run by prove from scripts/test.sh).
#
# Installs the frozen 0.1.0 script in $PGDATABASE (the database where pg_cron
# lives), fills it with data in every state through the 0.1.0 API, schedules
# the jobs, updates, and proves:
#   - the catalog equals a fresh install of the current version: every member
#     object as pg_dump writes it, function definitions and settings, grants,
#     config tables, event triggers;
#   - no row of a 0.1.0 table changed, and leases taken before still work;
#   - the scheduled jobs are the current version's set;
#   - DROP EXTENSION removes the jobs, and a failed drop keeps them.
# Leaves $PGDATABASE with 0.1.0 installed and updated, empty, for the pgTAP suite.
set -u
cd "$(dirname "$0")"
db=$PGDATABASE
fresh=inbox_upgrade_fresh
work=$(mktemp -d)
trap 'rm -rf "$work"; dropdb --if-exists "$fresh" 2>/dev/null' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
n=0
check() {  # description, expected, actual
  n=$((n + 1))
  if [ "$2" = "$3" ]; then echo "ok $n - $1"; else
    echo "not ok $n - $1"; echo "#   want: $2" | head -c 2000; echo; echo "#   have: $3" | head -c 2000; echo
  fi
}
check_same_file() {  # description, file from the upgraded db, file from the fresh one
  n=$((n + 1))
  if diff -U0 "$3" "$2" >"$work/diff"; then echo "ok $n - $1"; else
    echo "not ok $n - $1 (- fresh install, + upgraded)"; grep "^[-+][^-+]" "$work/diff" | head -40 | sed 's/^/#   /'
  fi
}

current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" ../../pg_inbox.control)
echo "1..19"

# --- 0.1.0, filled, scheduled ---
q "$db" "DROP EXTENSION IF EXISTS pg_inbox" >/dev/null
q "$db" "CREATE EXTENSION pg_inbox VERSION '0.1.0'" >/dev/null
check "0.1.0 installs from the frozen script" "0.1.0" "$(q "$db" "SELECT extversion FROM pg_extension WHERE extname = 'pg_inbox'")"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -f fill-0.1.0.sql >"$work/fill.log" 2>&1
check "0.1.0 filled through its own API" "0" "$?" || true
grep -m3 ERROR "$work/fill.log" | sed 's/^/#   /'
# Scheduled, but paused in the same transaction: a job firing during the test
# would change rows between the two snapshots. (Re-scheduling keeps a job paused.)
schedule() { q "$db" "SELECT inbox.schedule(); UPDATE cron.job SET active = false WHERE jobname LIKE 'pg\_inbox:%'" >/dev/null; }
schedule

# Every 0.1.0 table, hashed over its 0.1.0 columns, and every sequence.
cat >"$work/hash.sql" <<'SQL'
SELECT format('SELECT %L || '' '' || count(*) || '' '' || coalesce(md5(string_agg(r, E''\n'' ORDER BY r)), '''') '
              'FROM (SELECT ROW(%s)::text AS r FROM %s) rows;', c.oid::regclass,
              string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum), c.oid::regclass)
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'inbox'::regnamespace AND c.relkind = 'r'
 GROUP BY c.oid ORDER BY c.oid::regclass::text;
SQL
q "$db" "$(cat "$work/hash.sql")" >"$work/hash-queries.sql"
# The 0.1.0 sequences only: sequences the update adds are not 0.1.0 data.
sequences=$(q "$db" "SELECT string_agg(sequencename, ' ') FROM pg_sequences WHERE schemaname = 'inbox'")
hashes() {
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -f "$work/hash-queries.sql"
  q "$db" "SELECT string_agg(sequencename || ' ' || coalesce(last_value::text, '-'), E'\n' ORDER BY sequencename)
             FROM pg_sequences WHERE schemaname = 'inbox'
              AND sequencename = ANY (string_to_array('$sequences', ' '))"
}
hashes >"$work/data-before"
check "every 0.1.0 table is hashed" \
  "$(q "$db" "SELECT count(*) FROM pg_class WHERE relnamespace = 'inbox'::regnamespace AND relkind = 'r'")" \
  "$(grep -c '^inbox\.[a-z_]* [0-9]* \([0-9a-f]\{32\}\)\?$' "$work/data-before")"
states=$(q "$db" "SELECT string_agg(DISTINCT status, ',' ORDER BY status) FROM inbox.events")
check "the filled 0.1.0 database holds events in every state" "dead,done,pending,processing" "$states"
lease=$(q "$db" "SELECT id || ' ' || lease_token FROM inbox.events WHERE status = 'processing' AND provider = 'stripe' LIMIT 1")
tokens_before=$(q "$db" "SELECT count(*) FROM inbox.events WHERE lease_token IS NOT NULL")

# --- update ---
q "$db" "ALTER EXTENSION pg_inbox UPDATE" >"$work/update.log" 2>&1
check "ALTER EXTENSION pg_inbox UPDATE succeeds" "0" "$?"
sed 's/^/#   /' "$work/update.log" | head -20
check "the database is at the current version" "$current" "$(q "$db" "SELECT extversion FROM pg_extension WHERE extname = 'pg_inbox'")"

# --- the catalog equals a fresh install ---
dropdb --if-exists "$fresh" 2>/dev/null; createdb "$fresh"
q "$fresh" "CREATE EXTENSION pg_inbox" >/dev/null
for side in "$db" "$fresh"; do
  pg_dump --schema-only --binary-upgrade -d "$side" | perl normalize-dump.pl >"$work/$side.dump"
done
check_same_file "every member object, as pg_dump writes it, equals a fresh install" "$work/$db.dump" "$work/$fresh.dump"

catalog() {  # one section of the catalog, as text
  case $2 in
    members) q "$1" "SELECT string_agg(d, E'\n' ORDER BY d) FROM (SELECT pg_describe_object(classid, objid, objsubid) AS d
                       FROM pg_depend WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
                        AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_inbox')) m" ;;
    functions) q "$1" "SELECT string_agg(p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '-') || E'\n'
                                         || pg_get_functiondef(p.oid), E'\n' ORDER BY p.oid::regprocedure::text)
                         FROM pg_proc p WHERE p.pronamespace = 'inbox'::regnamespace AND p.prokind IN ('f', 'p', 'w')" ;;
    grants) q "$1" "SELECT string_agg(format('%s %s %s %s', c.relkind, c.oid::regclass, coalesce(c.relacl::text, '-'),
                                             coalesce(c.reloptions::text, '-')), E'\n' ORDER BY c.oid::regclass::text)
                      FROM pg_class c WHERE c.relnamespace = 'inbox'::regnamespace
                     UNION ALL SELECT 'schema ' || nspacl::text FROM pg_namespace WHERE nspname = 'inbox'" ;;
    config) q "$1" "SELECT string_agg(t.cfg::regclass::text || ' ' || coalesce(t.cond, ''), E'\n' ORDER BY t.cfg::regclass::text)
                      FROM pg_extension e, unnest(e.extconfig, e.extcondition) t(cfg, cond) WHERE e.extname = 'pg_inbox'" ;;
    triggers) q "$1" "SELECT string_agg(format('%s %s %s %s %s', evtname, evtevent, evtfoid::regproc, evtenabled,
                                               coalesce(evttags::text, '-')), E'\n' ORDER BY evtname)
                        FROM pg_event_trigger" ;;
  esac
}
for section in members functions grants config triggers; do
  catalog "$db" $section >"$work/$section-upgraded"
  catalog "$fresh" $section >"$work/$section-fresh"
  check_same_file "catalog: $section equal a fresh install" "$work/$section-upgraded" "$work/$section-fresh"
done

# --- the data ---
hashes >"$work/data-after"
check_same_file "no row of a 0.1.0 table and no sequence changed" "$work/data-after" "$work/data-before"
check "every lease token issued before the update is the token _lease_token derives now (C, not SQL)" \
  "$tokens_before true" \
  "$(q "$db" "SELECT count(*) || ' ' || bool_and(inbox._lease_token(id, attempts, first_received_at) = lease_token)
                FROM inbox.events WHERE lease_token IS NOT NULL")"
check "a lease taken before the update still completes" "t" \
  "$(q "$db" "SELECT inbox.complete(${lease% *}, '${lease#* }')")"
check "a processed event is still a duplicate" "duplicate" \
  "$(q "$db" "SELECT inbox.ingest('stripe', external_id, '{}') FROM inbox.events WHERE status = 'done' AND provider = 'stripe' LIMIT 1")"

# --- jobs: the update leaves the current version's set ---
jobs() { q "$db" "SELECT string_agg(jobname || ' ' || schedule || ' ' || command, E'\n' ORDER BY jobname) FROM cron.job WHERE jobname LIKE 'pg\_inbox:%'"; }
jobs_after_update=$(jobs)
schedule
check "the scheduled jobs are what schedule() of the current version installs" "$(jobs)" "$jobs_after_update"

# --- uninstall ---
q "$db" "BEGIN; DROP EXTENSION pg_inbox; ROLLBACK" >/dev/null
check "a rolled-back DROP EXTENSION keeps the jobs" "$jobs_after_update" "$(jobs)"
q "$db" "DROP EXTENSION pg_inbox" >/dev/null
check "DROP EXTENSION removes the jobs it scheduled" "" "$(jobs)"

# For the pgTAP suite: an updated database with nothing in it.
q "$db" "CREATE EXTENSION pg_inbox VERSION '0.1.0'" >/dev/null
q "$db" "ALTER EXTENSION pg_inbox UPDATE" >/dev/null

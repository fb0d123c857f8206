#!/usr/bin/env bash
# `make installcheck`: the pgTAP suite against an installed server, as PGXS
# users expect. The server is the one the usual PG* variables name (PGHOST,
# PGPORT, PGUSER, ...), with pg_inbox installed (`make install`) and pgTAP;
# pg_prove runs the files. The suite runs in a database of its own
# (INSTALLCHECK_DB, default pg_inbox_regression), dropped and created afresh
# and left behind to look at. The scheduling file needs pg_cron created in
# that database (cron.database_name); without it, that file is skipped and
# the reason printed.
set -euo pipefail
cd "$(dirname "$0")/.."
db=${INSTALLCHECK_DB:-pg_inbox_regression}
command -v pg_prove >/dev/null \
  || { echo "installcheck: pg_prove not found (Debian: libtap-parser-sourcehandler-pgtap-perl)" >&2; exit 1; }
psql=(psql -X -q -v ON_ERROR_STOP=1)

PGOPTIONS="-c client_min_messages=warning" "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
"${psql[@]}" -d "$db" -c "CREATE EXTENSION pg_inbox" -c "CREATE EXTENSION pgtap"
tests=(test/pgtap/*.sql)
why=$("${psql[@]}" -At -d "$db" -c "SELECT inbox._cron_missing()")
if [ "$why" = "pg_cron is loaded but not created in this database: run CREATE EXTENSION pg_cron" ]; then
  "${psql[@]}" -d "$db" -c "CREATE EXTENSION pg_cron"
elif [ -n "$why" ]; then
  echo "installcheck: skipping test/pgtap/60_schedule.sql: $why"
  kept=()
  for t in "${tests[@]}"; do [ "$t" = test/pgtap/60_schedule.sql ] || kept+=("$t"); done
  tests=("${kept[@]}")
fi
# 81_boundary.sql needs the test-only module (never part of `make install`).
if [ ! -f "$(pg_config --pkglibdir)/pg_inbox_selftest.so" ]; then
  echo "installcheck: skipping test/pgtap/81_boundary.sql: run make -C test/selftest install first"
  kept=()
  for t in "${tests[@]}"; do [ "$t" = test/pgtap/81_boundary.sql ] || kept+=("$t"); done
  tests=("${kept[@]}")
fi
pg_prove -d "$db" "${tests[@]}"

#!/usr/bin/env bash
# `make test`: builds everything, starts a throwaway cluster and runs every
# suite against it: the upgrade from 0.1.0, pgTAP (pg_prove) on the upgraded
# database, isolation specs (pg_isolation_regress), dump and restore, receiver
# tests (ctest). Exits non-zero when any suite fails.
set -euo pipefail
source "$(dirname "$0")/throwaway-cluster.sh" test any inbox_test
failed=()

echo "== upgrade from 0.1.0"
# Leaves the test database installed at 0.1.0 and updated: the pgTAP suite
# below runs on what users who upgrade have.
prove test/upgrade || failed+=(upgrade)

echo "== pgTAP"
psql -X -q -c "CREATE EXTENSION pgtap"
pg_prove --ext .sql test/pgtap || failed+=(pgtap)

echo "== dump and restore"
prove test/dump || failed+=(dump)

echo "== isolation"
# --use-existing creates no database: make one with the extension.
psql -X -q -c "CREATE DATABASE inbox_isolation"
psql -X -q -d inbox_isolation -c "CREATE EXTENSION pg_inbox"
specs=$(cd test/isolation/specs && ls *.spec | sed 's/\.spec$//')
# shellcheck disable=SC2086
"$(pg_config --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress" \
  --use-existing --host=127.0.0.1 --port="$port" --user=postgres \
  --dbname=inbox_isolation \
  --inputdir=test/isolation --outputdir="$tmp/isolation" $specs \
  || { cat "$tmp/isolation/regression.diffs" 2>/dev/null; failed+=(isolation); }

if [ -f build/CTestTestfile.cmake ]; then
  echo "== receiver"
  export INBOX_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/inbox_test"
  export INBOX_TEST_PG_STOP="bash $root/scripts/cluster.sh stop $tmp"
  export INBOX_TEST_PG_START="bash $root/scripts/cluster.sh start $tmp"
  ctest --test-dir build --output-on-failure || failed+=(receiver)
fi

echo "== fuzz (receiver parsers, ${INBOX_FUZZ_SECONDS:-20} s in all; make fuzz runs longer)"
bash scripts/fuzz.sh "${INBOX_FUZZ_SECONDS:-20}" || failed+=(fuzz)

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED suites: ${failed[*]}" >&2
  exit 1
fi
echo "all suites passed"

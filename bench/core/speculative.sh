#!/usr/bin/env bash
# What ON CONFLICT costs a row that is new: INSERT ... ON CONFLICT DO NOTHING
# (an arbiter probe of the key before each row, a speculative-insertion lock,
# a WAL record confirming the row) beside a plain INSERT in a subtransaction
# (a PL/pgSQL block with an EXCEPTION clause, what ingest_batch does after a
# batch of new ids only), both into bench.raw_events, alternating. Batches of
# 100 at 8 clients and single rows at 32, each run on an emptied table;
# whole-machine CPU per transaction (busy jiffies of /proc/stat) beside the
# rates, as the machine is noisy.
#
#   bash bench/core/speculative.sh [ROUNDS]   (PGHOST/... set; the server on this machine)
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
seconds=${BENCH_SECONDS:-10}
psql -X -q -v ON_ERROR_STOP=1 -f setup.sql >/dev/null 2>&1
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE FUNCTION bench.insert_on_conflict(n bigint, rows int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO bench.raw_events (provider, external_id, payload)
  SELECT 'bench', 's-' || n || '-' || g, bench.payload(g) FROM generate_series(1, rows) g
  ON CONFLICT (provider, external_id) DO NOTHING;
END $$;
CREATE FUNCTION bench.insert_in_subtransaction(n bigint, rows int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    INSERT INTO bench.raw_events (provider, external_id, payload)
    SELECT 'bench', 's-' || n || '-' || g, bench.payload(g) FROM generate_series(1, rows) g;
  EXCEPTION WHEN unique_violation THEN
    RAISE;  -- never here: every id is new
  END;
END $$;
SQL
work=$(mktemp -d)
trap 'rm -rf "$work"; psql -X -q -c "DROP FUNCTION bench.insert_on_conflict, bench.insert_in_subtransaction" \
  -c "TRUNCATE bench.raw_events" >/dev/null' EXIT

busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
run() {  # function rows clients -> "jiffies per 1000 transactions" "tps"
  printf '\\set n random(1, 9000000000000000000)\nSELECT bench.%s(:n, %d);\n' "$1" "$2" >"$work/$1.sql"
  psql -X -q -c "TRUNCATE bench.raw_events" -c CHECKPOINT >/dev/null
  local before after out n
  before=$(busy)
  out=$(pgbench -n -c "$3" -j 2 -T "$seconds" -f "$work/$1.sql" 2>/dev/null)
  after=$(busy)
  n=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
  echo "$(((after - before) * 1000 / n)) $(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
}

printf '%-26s %5s %12s %12s %14s %14s\n' workload round "tps conflict" "tps subxact" "tps sub/conf" \
  "cpu conf/sub"
for round in $(seq "$rounds"); do
  for shape in "batches of 100, 8 clients:100:8" "single rows, 32 clients:1:32"; do
    IFS=: read -r label rows clients <<<"$shape"
    read -r cc ct < <(run insert_on_conflict "$rows" "$clients")
    read -r sc st < <(run insert_in_subtransaction "$rows" "$clients")
    printf '%-26s %5d %12.0f %12.0f %14.2f %14.2f\n' "$label" "$round" "$ct" "$st" \
      "$(echo "$st / $ct" | bc -l)" "$(echo "$cc / $sc" | bc -l)"
  done
done

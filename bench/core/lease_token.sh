#!/usr/bin/env bash
# What a lease token costs: CALLS tokens in one session, from 0.1.0's SQL
# definition and from inbox._lease_token (C), alternating, ROUNDS times;
# microseconds per token, the scan of the inputs included (printed apart).
#
#   bash bench/core/lease_token.sh [ROUNDS] [CALLS]   (PGHOST/... set)
set -euo pipefail
rounds=${1:-3}
calls=${2:-300000}
psql -X -q -v ON_ERROR_STOP=1 <<SQL | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' |
CREATE FUNCTION pg_temp.sql_token(event_id bigint, attempt int, first_received_at timestamptz)
RETURNS uuid LANGUAGE sql STABLE AS
  \$\$ SELECT md5(concat_ws(':', event_id, attempt, extract(epoch FROM first_received_at)))::uuid \$\$;
CREATE TEMP TABLE inputs AS
  SELECT g::bigint AS id, (g % 5)::int AS attempt, now() - g * interval '1.1 s' AS at
    FROM generate_series(1, $calls) g;
\timing on
$(for _ in $(seq "$rounds"); do
    echo "SELECT count(*) FROM inputs;"
    echo "SELECT count(pg_temp.sql_token(id, attempt, at)) FROM inputs;"
    echo "SELECT count(inbox._lease_token(id, attempt, at)) FROM inputs;"
  done)
SQL
  awk -v calls="$calls" '
    { ms[NR % 3] = $1 }
    NR % 3 == 0 { printf "%d tokens: scan %.2f µs, SQL %.2f µs, C %.2f µs per token (scan included), C/SQL %.2f\n",
                  calls, ms[1] * 1000 / calls, ms[2] * 1000 / calls, ms[0] * 1000 / calls, ms[0] / ms[2] }'

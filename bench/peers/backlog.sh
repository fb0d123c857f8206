# fresh_backlog TABLE N: TABLE (inbox.events, bench.raw_events or
# pgmq.q_bench) emptied and filled with N pending events, vacuumed and
# analyzed, after a checkpoint: where drain.sh and drain_split.sh start
# every run. Sourced; needs bench/core/setup.sql (and pgmq for its queue).
fresh_backlog() {
  local load
  if [ "$1" = pgmq.q_bench ]; then
    load="TRUNCATE pgmq.q_bench, pgmq.a_bench;
          INSERT INTO pgmq.q_bench (vt, message) SELECT now(), bench.payload(g) FROM generate_series(1, $2) g"
  else
    load="TRUNCATE $1 CASCADE;
          INSERT INTO $1 (provider, external_id, payload)
          SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, $2) g"
  fi
  psql -X -q -v ON_ERROR_STOP=1 -c "$load" -c "VACUUM ANALYZE $1" -c "CHECKPOINT" >/dev/null
}

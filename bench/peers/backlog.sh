# fresh_backlog TABLE N: TABLE (inbox.events, bench.raw_events or
# pgmq.q_bench) emptied and filled with N pending events, vacuumed and
# analyzed, after a checkpoint: where drain.sh, drain_split.sh and
# drain_floor.sh start every run. Sourced; needs bench/core/setup.sql (and
# pgmq for its queue).
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

# lease_sql TABLE BATCHES: a DO block that takes BATCHES x 100 events of
# TABLE's backlog as workers take them, a commit after each: inbox.claim
# (leases of an hour) for inbox.events, pgmq.read (invisible for an hour)
# for pgmq.q_bench.
lease_sql() {
  local take="inbox.claim(100, '1 hour')"
  [ "$1" = pgmq.q_bench ] && take="pgmq.read('bench', 3600, 100)"
  echo "DO \$\$ BEGIN FOR i IN 1..$2 LOOP PERFORM count(*) FROM $take; COMMIT; END LOOP; END \$\$;"
}

-- The drain's backlog, the same on every side: :backlog pending events.
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
INSERT INTO bench.raw_events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
-- What pgmq.send_batch writes, in one statement.
INSERT INTO pgmq.q_bench (vt, message) SELECT now(), bench.payload(g) FROM generate_series(1, :backlog) g;
-- What pg-boss's insert writes (its own defaults fill the rest).
INSERT INTO pgboss.job (name, data) SELECT 'bench', bench.payload(g) FROM generate_series(1, :backlog) g;
VACUUM ANALYZE inbox.events;
VACUUM ANALYZE bench.raw_events;
VACUUM ANALYZE pgmq.q_bench;
VACUUM ANALYZE pgboss.job;

-- The drain's backlog, the same on every side: :backlog pending events.
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
INSERT INTO bench.raw_events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
-- What pgmq.send_batch writes, in one statement.
INSERT INTO pgmq.q_bench (vt, message) SELECT now(), bench.payload(g) FROM generate_series(1, :backlog) g;
-- What pg-boss's insert() writes for these events: the job id derived from
-- the event id as pgboss/drive.mjs derives it, the queue's policy; the
-- column defaults are the values insert() computes when nothing is set.
INSERT INTO pgboss.job (id, name, data, policy)
SELECT md5('bench/backlog-' || g)::uuid, 'bench', bench.payload(g), 'standard' FROM generate_series(1, :backlog) g;
VACUUM ANALYZE inbox.events;
VACUUM ANALYZE bench.raw_events;
VACUUM ANALYZE pgmq.q_bench;
VACUUM ANALYZE pgboss.job;

-- Already-processed events for the duplicate storm, a backlog to claim, and
-- pending events (after the backlog: claims never reach them) re-delivered.
INSERT INTO inbox.events (provider, external_id, payload, status, processed_at)
SELECT 'bench', 'done-' || g, bench.payload(g), 'done', now() FROM generate_series(1, 200000) g;
INSERT INTO bench.raw_events (provider, external_id, payload, status, processed_at)
SELECT 'bench', 'done-' || g, bench.payload(g), 'done', now() FROM generate_series(1, 200000) g;
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
INSERT INTO bench.raw_events (provider, external_id, payload)
SELECT 'bench', 'backlog-' || g, bench.payload(g) FROM generate_series(1, :backlog) g;
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'bench', 'pending-' || g, bench.payload(g) FROM generate_series(1, 200000) g;
INSERT INTO bench.raw_events (provider, external_id, payload)
SELECT 'bench', 'pending-' || g, bench.payload(g) FROM generate_series(1, 200000) g;
VACUUM ANALYZE inbox.events;
VACUUM ANALYZE bench.raw_events;

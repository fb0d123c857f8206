\set n random(1, 9000000000000000000)
SELECT pgmq.send_batch('bench', ARRAY(SELECT bench.payload(g) FROM generate_series(1, 100) g));

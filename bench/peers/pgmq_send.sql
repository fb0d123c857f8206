\set n random(1, 9000000000000000000)
SELECT pgmq.send('bench', bench.payload(:n));

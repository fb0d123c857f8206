\set n random(1, 9000000000000000000)
SELECT inbox.ingest('bench', 'one-' || :n, bench.payload(:n));

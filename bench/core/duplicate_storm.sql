\set n random(1, 200000)
SELECT inbox.ingest('bench', 'done-' || :n, bench.payload(:n));

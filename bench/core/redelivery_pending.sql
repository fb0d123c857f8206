\set n random(1, 200000)
SELECT inbox.ingest('bench', 'pending-' || :n, bench.payload(:n));

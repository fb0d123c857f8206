\set n random(1, 9000000000000000000)
SELECT inbox.ingest_batch(array_fill('bench'::text, ARRAY[100]),
                          ARRAY(SELECT 'b-' || :n || '-' || g FROM generate_series(1, 100) g),
                          ARRAY(SELECT bench.payload(g) FROM generate_series(1, 100) g));

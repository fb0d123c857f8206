\set n random(1, 9000000000000000000)
SELECT inbox.ingest_batch(array_fill('bench'::text, ARRAY[100]),
                          ARRAY(SELECT 'b-' || :n || '-' || g FROM generate_series(1, 100) g),
                          ARRAY(SELECT bench.payload(g) FROM generate_series(1, 100) g), NULL, 'webhook',
                          array_fill('\x2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae'::bytea, ARRAY[100]),
                          array_fill('stripe'::text, ARRAY[100]));

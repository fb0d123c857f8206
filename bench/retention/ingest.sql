\set n random(1, 9000000000000000000)
SELECT inbox.ingest_batch(array_fill('bench_ing'::text, ARRAY[20]),
                          ARRAY(SELECT 'i-' || :n || '-' || g FROM generate_series(1, 20) g),
                          array_fill('{"type": "invoice.paid", "data": {"object": {"id": "in_1", "amount": 4200, "customer": "cus_1", "lines": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}'::jsonb, ARRAY[20]));

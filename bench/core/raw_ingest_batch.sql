\set n random(1, 9000000000000000000)
INSERT INTO bench.raw_events AS e (provider, external_id, payload)
SELECT 'bench', 'b-' || :n || '-' || g, bench.payload(g) FROM generate_series(1, 100) g
ON CONFLICT (provider, external_id) DO UPDATE
   SET payload = EXCLUDED.payload, delivery_count = e.delivery_count + 1, received_at = now()
 WHERE e.processed_at IS NULL;

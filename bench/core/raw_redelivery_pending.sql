\set n random(1, 200000)
INSERT INTO bench.raw_events AS e (provider, external_id, payload)
VALUES ('bench', 'pending-' || :n, bench.payload(:n))
ON CONFLICT (provider, external_id) DO UPDATE
   SET payload = EXCLUDED.payload, delivery_count = e.delivery_count + 1, received_at = now()
 WHERE e.processed_at IS NULL;

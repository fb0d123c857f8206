BEGIN;
WITH due AS (
    SELECT id FROM bench.raw_events
     WHERE processed_at IS NULL AND status = 'pending' AND next_attempt_at <= now()
     ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE bench.raw_events e
       SET status = 'processing', attempts = e.attempts + 1, lease_token = gen_random_uuid(),
           lease_expires_at = now() + interval '5 minutes'
      FROM due WHERE e.id = due.id
    RETURNING e.id)
SELECT array_agg(id) AS ids FROM claimed \gset
UPDATE bench.raw_events SET status = 'done', processed_at = now(), lease_expires_at = NULL
 WHERE id = ANY (':ids'::bigint[]) AND status = 'processing';
COMMIT;

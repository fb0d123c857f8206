BEGIN;
SELECT array_agg(msg_id) AS ids FROM pgmq.read('bench', 300, 100) \gset
SELECT pgmq.delete('bench', ':ids'::bigint[]);
COMMIT;

BEGIN;
SELECT array_agg(msg_id) AS ids FROM pgmq.read('bench', 300, 100) \gset
SELECT pgmq.archive('bench', ':ids'::bigint[]);
COMMIT;

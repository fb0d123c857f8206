BEGIN;
SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM inbox.claim(100, '5 minutes') \gset
SELECT inbox.complete_batch(':ids'::bigint[], ':tokens'::uuid[]) IS NOT NULL;
COMMIT;

BEGIN;
SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM inbox.claim(100, '5 minutes') \gset
SELECT count(*) FROM unnest(':ids'::bigint[], ':tokens'::uuid[]) AS t(id, token)
 WHERE inbox.complete(id, token);
COMMIT;

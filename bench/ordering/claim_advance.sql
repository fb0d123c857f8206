BEGIN;
SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM inbox.claim(100, '5 minutes', 'bench') \gset
SELECT count(*) FILTER (WHERE inbox.advance(id, token) = 'apply') FROM unnest(':ids'::bigint[], ':tokens'::uuid[]) t(id, token);
SELECT inbox.complete_batch(':ids'::bigint[], ':tokens'::uuid[]) IS NOT NULL;
COMMIT;

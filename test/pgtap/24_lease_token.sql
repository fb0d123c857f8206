-- inbox._lease_token in C: the token 0.1.0 derived in SQL, for every input,
-- so leases taken before an upgrade still complete and a superseded token
-- is still told from one never issued.
BEGIN;
SELECT plan(11);

-- 0.1.0's definition, the reference the C function must equal.
CREATE FUNCTION pg_temp.sql_token(event_id bigint, attempt int, first_received_at timestamptz)
RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT md5(concat_ws(':', event_id, attempt, extract(epoch FROM first_received_at)))::uuid
$$;

SELECT is((SELECT l.lanname::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'inbox._lease_token(bigint,int,timestamptz)'::regprocedure),
          'c', 'the lease token is computed in C');

SELECT is(inbox._lease_token(1, 1, '2026-01-01 00:00:00+00'), '152d0b96-8c22-0249-b9a3-7d0076bc748b'::uuid,
          'a pinned token: md5(''1:1:1767225600.000000'')');
SELECT is(inbox._lease_token(42, 3, '1969-12-31 23:59:59.75+00'), '85d2dfad-f6c3-ceeb-280f-22fd333a5108'::uuid,
          'before 1970 the epoch is negative with six decimals: md5(''42:3:-0.250000'')');
SELECT is(inbox._lease_token(NULL, NULL, NULL), 'd41d8cd9-8f00-b204-e980-0998ecf8427e'::uuid,
          'all NULL: concat_ws skips them, the md5 of an empty string, as in SQL');

-- Edges of every argument, each against the SQL reference (NULLs included:
-- concat_ws skips them).
CREATE TEMP TABLE edge_cases AS
SELECT i, a, t FROM
  (VALUES (1::bigint), (0), (-5), (9223372036854775807), (-9223372036854775808), (NULL)) i(i),
  (VALUES (1), (0), (-1), (2147483647), (-2147483648), (NULL::int)) a(a),
  (VALUES (now()), ('2026-12-02 04:20:41.5+00'::timestamptz), ('1970-01-01 00:00:00+00'),
          ('1969-12-31 23:59:59.5+00'), ('1969-12-31 23:59:59+00'), ('1900-01-01 00:00:00.000001+00'),
          ('2000-01-01 00:00:00+00'), ('4713-01-01 00:00:00+00 BC'), ('294000-01-01+00'),
          -- around the point where PostgreSQL's extract divides in numeric
          ('294247-01-10 04:00:54.775806+00'), ('294247-01-10 04:00:54.775807+00'),
          ('294276-12-31 23:59:59.999999+00'), ('infinity'), ('-infinity'), (NULL::timestamptz)) t(t);
SELECT is((SELECT count(*)::int FROM edge_cases), 540, 'the edge cases are all there');
SELECT is((SELECT count(*)::int FROM edge_cases
            WHERE inbox._lease_token(i, a, t) IS DISTINCT FROM pg_temp.sql_token(i, a, t)), 0,
          'every edge case gives the token 0.1.0 gave');
SELECT is((SELECT count(*)::int FROM generate_series(1, 20000) g,
                  LATERAL (SELECT now() - g * interval '1.234567 s' - (g * g % 100000) * interval '1 day' AS t) v
            WHERE inbox._lease_token(g * 7919, g % 11, v.t) IS DISTINCT FROM pg_temp.sql_token(g * 7919, g % 11, v.t)), 0,
          '20,000 ids, attempts and instants with microseconds give the tokens 0.1.0 gave');

-- The session's clock settings do not change a token (the epoch is a number).
SET LOCAL TimeZone = 'Pacific/Chatham';
SET LOCAL DateStyle = 'SQL, DMY';
SET LOCAL extra_float_digits = -3;
SELECT is(inbox._lease_token(1, 1, '2026-01-01 00:00:00+00'), '152d0b96-8c22-0249-b9a3-7d0076bc748b'::uuid,
          'TimeZone and DateStyle do not change a token');
RESET TimeZone;
RESET DateStyle;
RESET extra_float_digits;

-- The tokens claim hands out are this function's.
SELECT inbox.register_provider('tokens');
SELECT inbox.ingest('tokens', 't' || g, '{}') FROM generate_series(1, 3) g;
CREATE TEMP TABLE claimed AS SELECT * FROM inbox.claim(3, '1 minute', 'tokens');
SELECT is((SELECT count(*)::int FROM claimed
            WHERE lease_token = inbox._lease_token(id, attempts, first_received_at)
              AND lease_token = pg_temp.sql_token(id, attempts, first_received_at)), 3,
          'claim''s tokens are the derived ones');
-- A superseded token is still recognised: complete answers false, not an error.
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second'
 WHERE id = (SELECT min(id) FROM claimed);
SELECT is((SELECT count(*)::int FROM inbox.claim(1, '1 minute', 'tokens')), 1, 'the expired lease is claimed again');
SELECT is(inbox.complete(id, lease_token), false, 'the first token is recognised as superseded')
  FROM claimed WHERE id = (SELECT min(id) FROM claimed);

SELECT * FROM finish();
ROLLBACK;

-- inbox.ingest_batch: malformed calls get a clear error and write nothing.
BEGIN;
SELECT plan(10);

SELECT inbox.register_provider('stripe');

SELECT throws_ok($$ SELECT inbox.ingest_batch(NULL, ARRAY['a'], ARRAY['{}']::jsonb[]) $$,
  '22004', 'providers must not be null');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], NULL, ARRAY['{}']::jsonb[]) $$,
  '22004', 'external_ids must not be null');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a'], NULL) $$,
  '22004', 'payloads must not be null');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a'], ARRAY['{}']::jsonb[], NULL, NULL) $$,
  '22004', 'source must not be null');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY[['stripe']], ARRAY[['a']], ARRAY[['{}']]::jsonb[]) $$,
  '2202E', 'providers must be a one-dimensional array');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a'], ARRAY['{}', '{}']::jsonb[]) $$,
  '2202E', 'providers, external_ids, payloads and headers must have the same length');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a'], ARRAY['{}']::jsonb[], ARRAY['{}', '{}']::jsonb[]) $$,
  '2202E', 'providers, external_ids, payloads and headers must have the same length');
SELECT throws_ok($$ SELECT inbox.ingest_batch(array_fill('stripe'::text, ARRAY[10001]),
                                              array_fill('x'::text, ARRAY[10001]),
                                              array_fill('{}'::jsonb, ARRAY[10001])) $$,
  '54000', 'a batch holds at most 10000 events, got 10001');
SELECT throws_ok($$ SELECT inbox.ingest_batch(ARRAY['stripe'], ARRAY['a'], ARRAY['{}']) $$,
  '42883', NULL, 'payloads of the wrong type find no function');
SELECT is((SELECT count(*)::int FROM inbox.events), 0, 'nothing was written');

SELECT * FROM finish();
ROLLBACK;

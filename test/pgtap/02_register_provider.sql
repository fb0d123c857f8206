-- inbox.register_provider: the registry ingest checks against.
BEGIN;
SELECT plan(9);

SELECT lives_ok($$ SELECT inbox.register_provider('stripe') $$, 'registers a provider');
SELECT row_eq($$ SELECT max_attempts, backoff_base, on_lease_expiry FROM inbox.providers WHERE name = 'stripe' $$,
              ROW(NULL::int, NULL::interval, 'reclaim'::text), 'defaults: NULL settings, reclaim');
SELECT lives_ok($$ SELECT inbox.register_provider('stripe', 5, '1 second', '1 minute', 'hold') $$,
  'registering again updates');
SELECT row_eq($$ SELECT max_attempts, backoff_base, backoff_max, on_lease_expiry FROM inbox.providers WHERE name = 'stripe' $$,
              ROW(5, interval '1 second', interval '1 minute', 'hold'::text), 'settings updated');
SELECT throws_ok($$ SELECT inbox.register_provider(NULL) $$, '22023', 'invalid provider name NULL');
SELECT throws_ok($$ SELECT inbox.register_provider('') $$, '22023', 'invalid provider name ''''');
SELECT throws_ok($$ SELECT inbox.register_provider('Has Space') $$, '22023', 'invalid provider name ''Has Space''');
SELECT throws_ok($$ SELECT inbox.register_provider('x', on_lease_expiry => 'maybe') $$, '22023',
  'on_lease_expiry must be ''reclaim'' or ''hold'', not ''maybe''');
SELECT throws_ok($$ SELECT inbox.register_provider('x', max_attempts => 0) $$, '23514', NULL,
  'max_attempts must be positive');

SELECT * FROM finish();
ROLLBACK;

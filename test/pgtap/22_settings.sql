-- pg_inbox.* settings: the defaults providers fall back on, and who may set them.
BEGIN;
SELECT plan(8);

SELECT inbox.register_provider('plain');                    -- every setting NULL
SELECT inbox.register_provider('own', max_attempts => 5);   -- its own max_attempts
SELECT inbox.ingest('plain', 'p' || i, '{}') FROM generate_series(1, 2) i;
SELECT inbox.ingest('own', 'o1', '{}');
CREATE TEMP TABLE leases AS SELECT external_id, id, lease_token FROM inbox.claim(10, '1 minute');

SET pg_inbox.max_attempts = 1;
SET pg_inbox.backoff_base = '1min';
SELECT is(inbox.fail(id, lease_token, 'x'), 'dead', 'pg_inbox.max_attempts applies to a provider without its own')
  FROM leases WHERE external_id = 'p1';
SELECT is(inbox.fail(id, lease_token, 'x'), 'retry', 'a provider''s own max_attempts wins over the setting')
  FROM leases WHERE external_id = 'o1';
SELECT ok(next_attempt_at - now() BETWEEN interval '30 seconds' AND interval '60 seconds',
          'pg_inbox.backoff_base sets the first delay') FROM inbox.events WHERE external_id = 'o1';
RESET pg_inbox.max_attempts;
SET pg_inbox.backoff_base = '1h';
SET pg_inbox.backoff_max = '2min';
SELECT is(inbox.fail(id, lease_token, 'x'), 'retry', 'fails again') FROM leases WHERE external_id = 'p2';
SELECT ok(next_attempt_at - now() BETWEEN interval '1 minute' AND interval '2 minutes',
          'pg_inbox.backoff_max caps the delay') FROM inbox.events WHERE external_id = 'p2';
RESET pg_inbox.backoff_base;
RESET pg_inbox.backoff_max;

SELECT throws_ok($$ SET pg_inbox.default_lease = '-1' $$, '22023', NULL, 'settings are range-checked');
CREATE ROLE inbox_test_nobody;
SET LOCAL ROLE inbox_test_nobody;
SELECT throws_ok($$ SET pg_inbox.max_payload_size = '100MB' $$, '42501', NULL,
  'only a superuser may raise the payload limit');
SELECT lives_ok($$ SET pg_inbox.default_lease = '30s' $$, 'anyone may choose their default lease');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

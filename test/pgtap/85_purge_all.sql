-- inbox.purge_all: the scheduled job's procedure. It commits after every
-- batch, so it runs outside a transaction block (this file has none) and
-- removes what it made at the end.
SELECT plan(9);

SELECT has_function('inbox', 'purge_all', ARRAY['interval', 'integer', 'interval', 'double precision', 'jsonb'],
                    'inbox.purge_all exists');
SELECT inbox.register_provider('t_purge_all');
SELECT inbox.ingest('t_purge_all', 'p' || i, '{}') FROM generate_series(1, 7) i;
SELECT count(inbox.complete(id, lease_token)) FROM inbox.claim(10, '1 hour', 't_purge_all');
UPDATE inbox.events SET processed_at = now() - interval '100 days' WHERE provider = 't_purge_all';

SELECT throws_ok($$CALL inbox.purge_all()$$, '2D000', 'invalid transaction termination',
                 'called where it cannot commit (here: from a function): refused');
SELECT throws_ok($$CALL inbox.purge_all(max_duration => '0 seconds')$$, '22023', 'max_duration must be positive',
                 'purge_all: zero max_duration');
SELECT throws_ok($$CALL inbox.purge_all(throttle => -1)$$, '22023', 'throttle must be between 0 and 100',
                 'purge_all: negative throttle');
SELECT throws_ok($$CALL inbox.purge_all(max_rows => 0)$$, '22023', NULL, 'purge_all: max_rows 0 (from purge)');
CALL inbox.purge_all(max_rows => 3, throttle => 0);
SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 't_purge_all'), 0,
          'batches of 3 until nothing was left: every payload, then every row');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 't_purge_all' AND purged_at IS NULL), 0, 'none kept');

-- Stops after max_duration even when more is left.
SELECT inbox.ingest('t_purge_all', 'q' || i, '{}') FROM generate_series(1, 5) i;
SELECT count(inbox.complete(id, lease_token)) FROM inbox.claim(10, '1 hour', 't_purge_all');
UPDATE inbox.events SET processed_at = now() - interval '40 days' WHERE provider = 't_purge_all';
SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 't_purge_all' AND purged_at IS NULL), 5, 'five to purge');
CALL inbox.purge_all(max_rows => 1, max_duration => '1 microsecond', throttle => 0);
SELECT is((SELECT count(*)::int FROM inbox.events WHERE provider = 't_purge_all' AND purged_at IS NULL), 4,
          'one batch, then max_duration was over');

DELETE FROM inbox.events WHERE provider = 't_purge_all';
DELETE FROM inbox.providers WHERE name = 't_purge_all';
SELECT * FROM finish();

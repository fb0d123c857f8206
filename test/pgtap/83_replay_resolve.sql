-- inbox.replay and inbox.resolve: deliberate re-runs and settlements by a
-- person, each a row of inbox.event_history; bad input refused clearly.
BEGIN;
SELECT plan(56);

SELECT has_function('inbox', 'replay', ARRAY['bigint', 'text'], 'inbox.replay exists');
SELECT has_function('inbox', 'resolve', ARRAY['bigint', 'text', 'text'], 'inbox.resolve exists');
SELECT columns_are('inbox', 'event_history', ARRAY[
  'id', 'event_id', 'run_id', 'reason', 'recorded_at', 'status', 'attempts', 'lease_token',
  'lease_expires_at', 'processed_at', 'last_error', 'payload', 'actor', 'note', 'to_status']);

SELECT inbox.register_provider('stripe', max_attempts => 2);
SELECT inbox.register_provider('money', on_lease_expiry => 'hold');
SELECT inbox.ingest('stripe', 'e' || i, jsonb_build_object('n', i)) FROM generate_series(1, 4) i;
CREATE FUNCTION pg_temp.id(ext text) RETURNS bigint LANGUAGE sql AS
  $$ SELECT id FROM inbox.events WHERE external_id = ext $$;
CREATE FUNCTION pg_temp.token(ext text) RETURNS uuid LANGUAGE sql AS
  $$ SELECT lease_token FROM inbox.events WHERE external_id = ext $$;
CREATE FUNCTION pg_temp.state(ext text) RETURNS text LANGUAGE sql AS
  $$ SELECT concat_ws('/', status, attempts, is_replay, attempts_at_replay) FROM inbox.events WHERE external_id = ext $$;

-- e1 done, e2 dead (two failed attempts), e3 processing, e4 pending.
SELECT count(*) FROM inbox.claim(3, '1 hour', 'stripe');
SELECT inbox.complete(pg_temp.id('e1'), pg_temp.token('e1'));
SELECT inbox.fail(pg_temp.id('e2'), pg_temp.token('e2'), 'boom', '0 seconds');
SELECT count(*) FROM inbox.claim(1, '1 hour', 'stripe');
SELECT is(inbox.fail(pg_temp.id('e2'), pg_temp.token('e2'), 'boom again'), 'dead', 'e2 is dead after 2 attempts');
CREATE TEMP TABLE old_token AS SELECT pg_temp.token('e1') AS token;

-- replay: bad input
SELECT throws_ok($$SELECT inbox.replay(NULL, 'why')$$, '22004', 'id must not be null', 'replay: NULL id');
SELECT throws_ok($$SELECT inbox.replay(pg_temp.id('e1'), NULL)$$, '22004', 'reason must not be null', 'replay: NULL reason');
SELECT throws_ok($$SELECT inbox.replay(pg_temp.id('e1'), '  ')$$, '22023', 'reason must not be empty', 'replay: empty reason');
SELECT throws_ok($$SELECT inbox.replay(pg_temp.id('e1'), repeat('x', 1001))$$, '22001',
                 'reason is 1001 bytes, over the limit of 1000', 'replay: oversized reason');
SELECT throws_ok($$SELECT inbox.replay(-1, 'why')$$, 'P0002', 'event -1 does not exist', 'replay: unknown id');
SELECT throws_ok($$SELECT inbox.replay('abc', 'why')$$, '22P02', NULL, 'replay: id of the wrong type');
SELECT throws_ok(format('SELECT inbox.replay(%s, %L)', pg_temp.id('e3'), 'why'), '55000',
                 format('event %s is processing: only done or dead events can be replayed', pg_temp.id('e3')),
                 'replay: a processing event is refused');
SELECT throws_ok(format('SELECT inbox.replay(%s, %L)', pg_temp.id('e4'), 'why'), '55000',
                 format('event %s is pending: only done or dead events can be replayed', pg_temp.id('e4')),
                 'replay: a pending event is refused');
SELECT is((SELECT count(*)::int FROM inbox.event_history), 0, 'refused calls record nothing');

-- replay of a done event: a new attempt, flagged, recorded.
SELECT is(inbox.replay(pg_temp.id('e1'), 'customer asked for the receipt again'), 2,
          'replay returns the attempt its claim will carry');
SELECT is(pg_temp.state('e1'), 'pending/1/t/1', 'replayed: pending, flagged, attempts kept');
SELECT row_eq($$ SELECT reason, status, to_status, attempts, actor = session_user, note FROM inbox.event_history $$,
              ROW('replay'::text, 'done'::text, 'pending'::text, 1, true,
                  'customer asked for the receipt again'::text), 'the replay is in the history, with who and why');
SELECT throws_ok(format('SELECT inbox.replay(%s, %L)', pg_temp.id('e1'), 'twice'), '55000', NULL,
                 'a replay already queued cannot be replayed again');
SELECT is(inbox.complete(pg_temp.id('e1'), (SELECT token FROM old_token)), false,
          'the old attempt''s token cannot complete the replay');
SELECT is(inbox.ingest('stripe', 'e1', '{"n": 1}'), 'updated', 'a re-delivery of a queued replay refreshes it');
SELECT results_eq($$ SELECT external_id, attempts, is_replay FROM inbox.claim(10, '1 hour', 'stripe') ORDER BY 1 $$,
                  $$ VALUES ('e1'::text, 2, true), ('e4'::text, 1, false) $$,
                  'claim hands out the replay with its attempt number and flag');
SELECT isnt(pg_temp.token('e1'), (SELECT token FROM old_token), 'a new attempt, a new lease token');
-- max_attempts (2) counts from the replay: one failure retries.
SELECT is(inbox.fail(pg_temp.id('e1'), pg_temp.token('e1'), 'x', '0 seconds'), 'retry',
          'after a replay, max_attempts counts the attempts since the replay');
SELECT ok((SELECT next_attempt_at <= now() FROM inbox.events WHERE external_id = 'e1'), 'retry_after 0 is due at once');
SELECT is((SELECT count(*)::int FROM inbox.claim(1, '1 hour', 'stripe')), 1, 'claimed again');
SELECT is(inbox.fail(pg_temp.id('e1'), pg_temp.token('e1'), 'y'), 'dead', 'the second attempt since the replay is the last');
SELECT is(pg_temp.state('e1'), 'dead/3/t/1', 'attempts only grew: 3');

-- replay of a dead event
SELECT is(inbox.replay(pg_temp.id('e2'), 'the bug is fixed'), 3, 'a dead event is replayed');
SELECT is(pg_temp.state('e2'), 'pending/2/t/2', 'dead replayed: pending, flagged');
SELECT is((SELECT last_error FROM inbox.events WHERE external_id = 'e2'), NULL, 'the old error moved to the history');
SELECT is((SELECT last_error FROM inbox.event_history WHERE event_id = pg_temp.id('e2')), 'boom again',
          'the history keeps the error of the dead attempt');

-- resolve: bad input
SELECT throws_ok($$SELECT inbox.resolve(NULL, 'done', 'why')$$, '22004', 'id must not be null', 'resolve: NULL id');
SELECT throws_ok($$SELECT inbox.resolve(1, NULL, 'why')$$, '22004', 'outcome must not be null', 'resolve: NULL outcome');
SELECT throws_ok($$SELECT inbox.resolve(1, 'maybe', 'why')$$, '22023',
                 'outcome must be ''done'', ''dead'' or ''retry'', not ''maybe''', 'resolve: unknown outcome');
SELECT throws_ok($$SELECT inbox.resolve(1, '', 'why')$$, '22023', NULL, 'resolve: empty outcome');
SELECT throws_ok($$SELECT inbox.resolve(1, 'done', NULL)$$, '22004', 'reason must not be null', 'resolve: NULL reason');
SELECT throws_ok($$SELECT inbox.resolve(1, 'done', '')$$, '22023', 'reason must not be empty', 'resolve: empty reason');
SELECT throws_ok($$SELECT inbox.resolve(1, 'done', repeat('é', 501))$$, '22001',
                 'reason is 1002 bytes, over the limit of 1000', 'resolve: oversized reason (bytes, not characters)');
SELECT throws_ok($$SELECT inbox.resolve(-5, 'done', 'why')$$, 'P0002', 'event -5 does not exist', 'resolve: unknown id');

-- Held events of a 'hold' provider.
SELECT inbox.ingest('money', 'm' || i, '{}') FROM generate_series(1, 4) i;
SELECT count(*) FROM inbox.claim(4, '1 hour', 'money');
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('m1'), 'done', 'why'), '55000', NULL,
                 'resolve: an event whose lease runs is refused');
UPDATE inbox.events SET lease_expires_at = now() - interval '1 minute' WHERE provider = 'money';
CREATE TEMP TABLE m1_token AS SELECT pg_temp.token('m1') AS token;
SELECT is(inbox.resolve(pg_temp.id('m1'), 'done', 'the charge went through: checked in the dashboard'), 'done',
          'a held event resolved as done');
SELECT ok((SELECT status = 'done' AND processed_at IS NOT NULL AND lease_expires_at IS NULL
             FROM inbox.events WHERE external_id = 'm1'), 'done, with processed_at');
SELECT is(inbox.complete(pg_temp.id('m1'), (SELECT token FROM m1_token)), true,
          'the late worker''s complete finds it done (true)');
SELECT is(inbox.resolve(pg_temp.id('m2'), 'dead', 'customer cancelled'), 'dead', 'a held event resolved as dead');
SELECT is(inbox.resolve(pg_temp.id('m3'), 'retry', 'the charge never ran'), 'pending', 'a held event sent back');
SELECT results_eq($$ SELECT external_id, attempts FROM inbox.claim(10, '1 hour', 'money') $$,
                  $$ VALUES ('m3'::text, 2) $$, 'the retried event is claimed as the next attempt');
SELECT results_eq($$ SELECT h.reason, h.status, h.to_status, h.note FROM inbox.event_history h
                      JOIN inbox.events e ON e.id = h.event_id WHERE e.provider = 'money' ORDER BY h.id $$,
                  $$ VALUES ('resolve'::text, 'processing'::text, 'done'::text, 'the charge went through: checked in the dashboard'::text),
                            ('resolve', 'processing', 'dead', 'customer cancelled'),
                            ('resolve', 'processing', 'pending', 'the charge never ran') $$,
                  'each resolution is in the history');

-- Dead events: resolved as done; dead or retry are refused (replay runs them again).
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('m2'), 'dead', 'why'), '55000',
                 format('event %s is dead: it can be resolved as done, not dead', pg_temp.id('m2')), 'resolve: dead to dead');
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('m2'), 'retry', 'why'), '55000', NULL,
                 'resolve: dead to retry points to replay');
SELECT is(inbox.resolve(pg_temp.id('m2'), 'done', 'refunded by hand'), 'done', 'a dead event resolved as done');
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('m2'), 'done', 'why'), '55000', NULL,
                 'resolve: a done event is refused');
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('e4'), 'done', 'why'), '55000', NULL,
                 'resolve: a processing event with a running lease is refused');
SELECT throws_ok(format('SELECT inbox.resolve(%s, %L, %L)', pg_temp.id('e2'), 'done', 'why'), '55000',
                 format('event %s is pending: only held and dead events can be resolved', pg_temp.id('e2')),
                 'resolve: a pending event is refused');

-- Only the owner (an administrator) replays, resolves and purges; nobody edits the history.
SET LOCAL ROLE inbox_worker;
SELECT throws_ok($$SELECT inbox.replay(1, 'x')$$, '42501', NULL, 'a worker cannot replay');
SELECT throws_ok($$SELECT inbox.resolve(1, 'done', 'x')$$, '42501', NULL, 'a worker cannot resolve');
SELECT throws_ok($$SELECT inbox.purge()$$, '42501', NULL, 'a worker cannot purge');
SELECT throws_ok($$DELETE FROM inbox.event_history$$, '42501', NULL, 'a worker cannot edit the history');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

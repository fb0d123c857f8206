-- The outbox: publish in the caller's transaction, append-only messages,
-- claim / complete / fail / reject fenced by the lease token, history.
BEGIN;
SELECT plan(71);

SELECT has_table('inbox', 'outbox', 'outbox table');
SELECT has_table('inbox', 'outbox_delivery', 'outbox_delivery table');
SELECT has_table('inbox', 'outbox_attempts', 'outbox_attempts table');
SELECT function_returns('inbox', 'publish', ARRAY['text', 'text', 'jsonb', 'jsonb'], 'bigint');
SELECT is_definer('inbox', 'publish', ARRAY['text', 'text', 'jsonb', 'jsonb']);

-- Publish: the id is the message's, state pending, history empty.
SELECT lives_ok($$ SELECT inbox.publish('receipts', 'inv_1', '{"n": 1}') $$, 'publish with a key');
SELECT is((SELECT count(*)::int FROM inbox.outbox WHERE topic = 'receipts'), 1, 'one message');
SELECT is((SELECT min(classid::bigint) FROM pg_locks
            WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 2
              AND objid = hashtext('inv_1')::oid),
          1885957735::bigint, 'the key is locked to commit in publish''s own class (not the rollups'' or checks'')');
SELECT is(inbox.publish('receipts', NULL, '{"n": 2}', '{"x-tenant": "a"}'),
          (SELECT max(id) + 1 FROM inbox.outbox), 'publish returns the new id (no key, with headers)');
SELECT is((SELECT status FROM inbox.outbox_delivery d JOIN inbox.outbox m ON m.id = d.message_id
            WHERE m.payload = '{"n": 2}'), 'pending', 'a new message is pending');
SELECT is((SELECT headers FROM inbox.outbox WHERE payload = '{"n": 2}'), '{"x-tenant": "a"}'::jsonb,
          'headers are kept');

-- Rolled back: nothing published. Committed: once (see also the isolation spec).
SAVEPOINT before_publish;
SELECT inbox.publish('receipts', 'inv_rb', '{}');
ROLLBACK TO SAVEPOINT before_publish;
SELECT is((SELECT count(*)::int FROM inbox.outbox WHERE key = 'inv_rb'), 0, 'a rolled back publish leaves nothing');
SELECT is((SELECT count(*)::int FROM inbox.outbox_delivery WHERE key = 'inv_rb'), 0, '... and no delivery state');

-- Bad input.
SELECT throws_ok($$ SELECT inbox.publish(NULL, 'k', '{}') $$, '22004', 'topic must not be null', 'NULL topic');
SELECT throws_ok($$ SELECT inbox.publish('', 'k', '{}') $$, '22023', NULL, 'empty topic');
SELECT throws_ok($$ SELECT inbox.publish('Receipts', 'k', '{}') $$, '22023', 'invalid topic ''Receipts''', 'upper case topic');
SELECT throws_ok($$ SELECT inbox.publish('a b', 'k', '{}') $$, '22023', NULL, 'topic with a space');
SELECT throws_ok($$ SELECT inbox.publish(repeat('t', 129), 'k', '{}') $$, '22023', NULL, 'topic over 128 characters');
SELECT throws_ok($$ SELECT inbox.publish('receipts', '', '{}') $$, '22023', 'key must not be empty', 'empty key');
SELECT throws_ok($$ SELECT inbox.publish('receipts', repeat('k', 256), '{}') $$, '22001',
                 'key is 256 bytes, over the limit of 255', 'key over 255 bytes');
SELECT throws_ok($$ SELECT inbox.publish('receipts', 'k', NULL) $$, '22004', 'payload must not be null', 'NULL payload');
SELECT throws_ok($$ SELECT inbox.publish('receipts', 'k', '{}', '[1]') $$, '22023',
                 'headers must be a JSON object, not array', 'headers not an object');
SELECT throws_ok($$ SELECT inbox.publish('receipts', 'k', 'not json') $$, '22P02', NULL, 'payload that is not JSON');
SET LOCAL pg_inbox.max_payload_size = '1kB';
SELECT throws_like($$ SELECT inbox.publish('receipts', 'k', jsonb_build_object('s', repeat('x', 2000))) $$,
                   'payload is % bytes, over pg_inbox.max_payload_size (1 kB)', 'oversized payload');
RESET pg_inbox.max_payload_size;
SELECT is((SELECT count(*)::int FROM inbox.outbox WHERE key = 'k'), 0, 'rejected publishes wrote nothing');

-- A delivery row's rules: one CHECK, in C (as inbox.events'), on direct
-- writes too, a refusal naming the rule.
SELECT is((SELECT array_agg(conname::text) FROM pg_constraint
            WHERE conrelid = 'inbox.outbox_delivery'::regclass AND contype = 'c'),
          ARRAY['outbox_delivery_row_check'], 'outbox_delivery has one CHECK');
SELECT throws_ok($$ UPDATE inbox.outbox_delivery SET status = 'sent' WHERE key = 'inv_1' $$,
  '23514', 'outbox_delivery_row_check: status ''sent'' is not pending, processing, done, rejected or dead',
  'an unknown status is refused');
SELECT throws_ok($$ UPDATE inbox.outbox_delivery SET status = 'rejected' WHERE key = 'inv_1' $$,
  '23514', 'outbox_delivery_row_check: status ''rejected'' needs processed_at',
  'rejected without processed_at is refused');
SELECT throws_ok($$ UPDATE inbox.outbox_delivery SET processed_at = now() WHERE key = 'inv_1' $$,
  '23514', 'outbox_delivery_row_check: status ''pending'' must not have processed_at',
  'pending with processed_at is refused');
SELECT lives_ok($$ UPDATE inbox.outbox_delivery SET status = 'dead', processed_at = now() WHERE key = 'inv_1';
                   UPDATE inbox.outbox_delivery SET status = 'pending', processed_at = NULL WHERE key = 'inv_1' $$,
  'dead with processed_at, and pending again without it, are accepted');
SELECT ok(inbox._outbox_row_valid(NULL, now()) AND inbox._outbox_row_valid('done', now())
            AND inbox._outbox_row_valid('processing', NULL),
  'the function: a valid row or a NULL status passes (NOT NULL refuses a NULL first)');
SELECT throws_ok($$ SELECT inbox._outbox_row_valid('', NULL) $$, '23514',
  'outbox_delivery_row_check: status '''' is not pending, processing, done, rejected or dead',
  'the function itself refuses an empty status');
SELECT is((SELECT status FROM inbox.outbox_delivery WHERE key = 'inv_1'), 'pending',
  'the refused writes changed nothing');

-- Append-only.
SELECT throws_ok($$ UPDATE inbox.outbox SET payload = '{}' $$, '55000', NULL, 'a message cannot be updated');
SELECT throws_ok($$ DELETE FROM inbox.outbox $$, '55000', NULL, 'an undelivered message cannot be deleted');

-- Claim.
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox(NULL) $$, '22004', NULL, 'claim: NULL topics');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox(ARRAY[NULL]::text[]) $$, '22004', NULL, 'claim: a NULL topic');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{}') $$, '22023', 'topics must not be empty', 'claim: no topics');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}', 0) $$, '22023',
                 'max_rows must be between 1 and 10000, not 0', 'claim: max_rows 0');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}', 10, '-1 second') $$, '22023',
                 'lease must be positive', 'claim: negative lease');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}', 10, NULL, NULL) $$, '22004', NULL, 'claim: NULL ordered');
SELECT throws_ok($$ SELECT * FROM inbox.claim_outbox('{receipts}', 10, NULL, false, 'retry') $$, '22023', NULL,
                 'claim: unknown on_lease_expiry');
SELECT is((SELECT count(*)::int FROM inbox.claim_outbox('{unknown.topic}')), 0, 'claim: a topic without messages');

CREATE TEMP TABLE claimed AS SELECT * FROM inbox.claim_outbox('{receipts}', 10, '1 hour', route => 'billing');
SELECT is((SELECT count(*)::int FROM claimed), 2, 'claim takes both receipts');
SELECT ok((SELECT bool_and(attempt = 1) FROM claimed), 'first attempt');
SELECT is((SELECT lease_token FROM claimed WHERE key = 'inv_1'),
          inbox._lease_token((SELECT id FROM claimed WHERE key = 'inv_1'), 1,
                             (SELECT published_at FROM claimed WHERE key = 'inv_1')),
          'the lease token is the queue''s derivation from (id, attempt, published_at)');
SELECT is((SELECT count(*)::int FROM inbox.claim_outbox('{receipts}')), 0, 'leased messages are not claimed again');
SELECT is((SELECT route FROM inbox.outbox_attempts a JOIN claimed c ON c.id = a.message_id WHERE c.key = 'inv_1'),
          'billing', 'the attempt records its route');

-- Complete: true, repeated true; wrong tokens.
SELECT ok(inbox.complete_outbox(id, lease_token, 200, 'ok'), 'complete') FROM claimed WHERE key = 'inv_1';
SELECT ok(inbox.complete_outbox(id, lease_token), 'complete repeated is still true') FROM claimed WHERE key = 'inv_1';
SELECT is((SELECT outcome || ' ' || status_code FROM inbox.outbox_attempts a JOIN claimed c ON c.id = a.message_id
            WHERE c.key = 'inv_1'), 'delivered 200', 'the history keeps the answer');
SELECT throws_ok($$ SELECT inbox.complete_outbox(id, gen_random_uuid()) FROM claimed WHERE key = 'inv_1' $$,
                 '22023', NULL, 'complete with a token never issued');
SELECT throws_ok($$ SELECT inbox.complete_outbox(-1, gen_random_uuid()) $$, 'P0002',
                 'outbox message -1 does not exist', 'complete of a message that does not exist');
SELECT throws_ok($$ SELECT inbox.complete_outbox(NULL, gen_random_uuid()) $$, '22004', 'id must not be null', 'complete: NULL id');
SELECT throws_ok($$ SELECT inbox.complete_outbox(1, NULL) $$, '22004', 'lease_token must not be null', 'complete: NULL token');
SELECT lives_ok($$ DELETE FROM inbox.outbox WHERE key = 'inv_1' $$, 'a delivered message may be deleted (purge)');

-- Fail: retry with backoff, then dead after max_attempts.
SELECT throws_ok($$ SELECT inbox.fail_outbox(id, lease_token, NULL) FROM claimed WHERE key IS NULL $$,
                 '22004', 'error must not be null', 'fail: NULL error');
SELECT throws_ok($$ SELECT inbox.fail_outbox(id, lease_token, 'x', '-1 second') FROM claimed WHERE key IS NULL $$,
                 '22023', NULL, 'fail: negative retry_after');
SELECT throws_ok($$ SELECT inbox.fail_outbox(id, lease_token, 'x', NULL, 0) FROM claimed WHERE key IS NULL $$,
                 '22023', NULL, 'fail: max_attempts 0');
SELECT is(inbox.fail_outbox(id, lease_token, 'HTTP 503', NULL, 2, '1 minute', '1 hour', 503), 'retry', 'fail: retry')
  FROM claimed WHERE key IS NULL;
SELECT ok((SELECT next_attempt_at BETWEEN now() + interval '30 seconds' AND now() + interval '1 minute'
             FROM inbox.outbox_delivery d JOIN claimed c ON c.id = d.message_id WHERE c.key IS NULL),
          'backoff: base * 2^0 with equal jitter (30 s .. 1 min)');
SELECT is(inbox.fail_outbox(id, lease_token, 'again'), 'lost', 'a second fail with the same token is lost')
  FROM claimed WHERE key IS NULL;
UPDATE inbox.outbox_delivery SET next_attempt_at = now() WHERE status = 'pending';
CREATE TEMP TABLE claimed2 AS SELECT * FROM inbox.claim_outbox('{receipts}', 10, '1 hour');
SELECT is((SELECT attempt FROM claimed2), 2, 'the retry is attempt 2');
SELECT is(inbox.fail_outbox(id, lease_token, 'HTTP 500', NULL, 2), 'dead', 'fail after max_attempts: dead')
  FROM claimed2;
SELECT is((SELECT status || ' ' || (processed_at IS NOT NULL) FROM inbox.outbox_delivery d JOIN claimed2 c ON c.id = d.message_id),
          'dead true', 'a dead message has status dead and processed_at (what the checks count)');
SELECT is((SELECT string_agg(a.attempt || ':' || a.outcome, ',' ORDER BY a.attempt) FROM inbox.outbox_attempts a
            JOIN claimed2 c ON c.id = a.message_id), '1:retry,2:dead', 'the history of both attempts');

-- Reject (410), and an expired lease reclaimed: the history says expired.
SELECT inbox.publish('receipts', 'inv_3', '{}');
CREATE TEMP TABLE claimed3 AS SELECT * FROM inbox.claim_outbox('{receipts}', 10, '1 hour');
UPDATE inbox.outbox_delivery SET lease_expires_at = now() - interval '1 second' WHERE status = 'processing';
SELECT is((SELECT count(*)::int FROM inbox.claim_outbox('{receipts}', 10, NULL, false, 'hold')), 0,
          'hold: an expired lease is not reclaimed');
CREATE TEMP TABLE claimed4 AS SELECT * FROM inbox.claim_outbox('{receipts}', 10, '1 hour');
SELECT is((SELECT attempt FROM claimed4), 2, 'reclaim: attempt 2');
SELECT ok(NOT inbox.complete_outbox(id, lease_token), 'the first holder''s complete is refused (lost)') FROM claimed3;
SELECT is(inbox.reject_outbox(id, lease_token, 'HTTP 410'), 'rejected', 'reject') FROM claimed4;
SELECT is((SELECT string_agg(a.attempt || ':' || a.outcome, ',' ORDER BY a.attempt) FROM inbox.outbox_attempts a
            JOIN claimed4 c ON c.id = a.message_id), '1:expired,2:rejected', 'the history says the lease expired');

SELECT * FROM finish();
ROLLBACK;

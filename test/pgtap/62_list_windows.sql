-- inbox.claim_list_window: one listing per provider and window, whatever the
-- number of replicas asking; bad input refused; callable by inbox_worker only.
BEGIN;
SELECT plan(17);

SELECT has_function('inbox', 'claim_list_window', ARRAY['text', 'interval'], 'inbox.claim_list_window exists');
SELECT function_returns('inbox', 'claim_list_window', ARRAY['text', 'interval'], 'boolean', 'returns boolean');
SELECT is_definer('inbox', 'claim_list_window', ARRAY['text', 'interval'], 'SECURITY DEFINER');

SELECT inbox.register_provider('lw_a');
SELECT inbox.register_provider('lw_b');
DELETE FROM inbox.job_windows WHERE job LIKE 'list:lw\_%';

-- Bad input.
SELECT throws_ok($$SELECT inbox.claim_list_window(NULL, '5 minutes')$$, '22004', 'provider must not be null', 'NULL provider');
SELECT throws_ok($$SELECT inbox.claim_list_window('', '5 minutes')$$, '42704', 'unknown provider ""', 'empty provider');
SELECT throws_ok($$SELECT inbox.claim_list_window(repeat('x', 300), '5 minutes')$$, '42704', NULL, 'oversized provider');
SELECT throws_ok($$SELECT inbox.claim_list_window('lw_nope', '5 minutes')$$, '42704', 'unknown provider "lw_nope"', 'unknown provider');
SELECT throws_ok($$SELECT inbox.claim_list_window('lw_a', NULL)$$, '22004', 'every must not be null', 'NULL interval');
SELECT throws_ok($$SELECT inbox.claim_list_window('lw_a', '0 seconds')$$, '22023',
                 'every must be between 1 second and 7 days', 'zero interval');
SELECT throws_ok($$SELECT inbox.claim_list_window('lw_a', '8 days')$$, '22023', NULL, 'interval over 7 days');

-- Once per provider and window: the first caller, and only the first.
SELECT is(inbox.claim_list_window('lw_a', '1 day'), true, 'first claim in the window');
SELECT is(inbox.claim_list_window('lw_a', '1 day'), false, 'second claim in the same window');
SELECT is(inbox.claim_list_window('lw_b', '1 day'), true, 'another provider has its own window');
-- A window from more than 7 days ago is cleaned up by the next claim.
INSERT INTO inbox.job_windows (job, window_start) VALUES ('list:lw_a', now() - interval '30 days');
SELECT is(inbox.claim_list_window('lw_a', '1 second'), true, 'a new, shorter window is claimable');
SELECT is((SELECT count(*) FROM inbox.job_windows WHERE job = 'list:lw_a' AND window_start < now() - interval '7 days')::int,
          0, 'old windows cleaned up');

-- Least privilege: the worker may call it, the receiver may not.
SELECT ok(has_function_privilege('inbox_worker', 'inbox.claim_list_window(text, interval)', 'EXECUTE'),
          'inbox_worker may claim');
SELECT ok(NOT has_function_privilege('inbox_receiver', 'inbox.claim_list_window(text, interval)', 'EXECUTE'),
          'inbox_receiver may not');

SELECT * FROM finish();
ROLLBACK;

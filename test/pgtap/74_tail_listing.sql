-- Tail listing: inbox.claim_tail_listing hands the highest received id of a
-- sequence source to one worker per window while sequence_tail_silence
-- fires; inbox.raise_sequence_high raises the high mark with the ids the
-- provider's list API reported, so the next scan_gaps records the missing
-- tail. Bad input refused; callable by inbox_worker only.
BEGIN;
SELECT plan(72);

SELECT has_function('inbox', 'claim_tail_listing', ARRAY['text', 'interval'], 'inbox.claim_tail_listing exists');
SELECT is_definer('inbox', 'claim_tail_listing', ARRAY['text', 'interval'], 'claim_tail_listing is SECURITY DEFINER');
SELECT has_function('inbox', 'raise_sequence_high', ARRAY['text', 'text[]'], 'inbox.raise_sequence_high exists');
SELECT is_definer('inbox', 'raise_sequence_high', ARRAY['text', 'text[]'], 'raise_sequence_high is SECURITY DEFINER');

SELECT inbox.register_provider(p) FROM unnest(ARRAY['tl_seq', 'tl_pad', 'tl_wide', 'tl_listed', 'tl_none']) p;
SELECT inbox.set_id_source('tl_seq', 'sequence', 'evt_{n}', grace => '0 seconds');
SELECT inbox.set_id_source('tl_pad', 'sequence', 'ord-{n:8}');
SELECT inbox.set_id_source('tl_wide', 'sequence', 'o{n:2}');
SELECT inbox.set_id_source('tl_listed', 'listed');
SELECT inbox.ingest('tl_seq', 'evt_' || n, '{}') FROM generate_series(1, 10) n;

CREATE FUNCTION pg_temp.fire(p text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO inbox.anomalies (check_name, provider, severity, data_loss, first_seen_at, last_seen_at)
    VALUES ('sequence_tail_silence', p, 'P2', false, now(), now())
$$;
CREATE FUNCTION pg_temp.windows(p text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM inbox.job_windows WHERE job = 'list-tail:' || p
$$;
CREATE FUNCTION pg_temp.high(p text) RETURNS bigint LANGUAGE sql AS $$
    SELECT high_number FROM inbox.gap_sources WHERE provider = p
$$;

-- The ids of a pattern, with the grammar of the scans.
SELECT is(inbox._sequence_id('evt_{n}', 10), 'evt_10', '_sequence_id: no padding');
SELECT is(inbox._sequence_id('ord-{n:8}', 42), 'ord-00000042', '_sequence_id: padded to the width');
SELECT is(inbox._sequence_id('o{n:2}', 12345), 'o12345', '_sequence_id: a wider number is written whole');
SELECT is(inbox._sequence_id('evt_{n}', NULL), NULL, '_sequence_id: NULL in, NULL out');
SELECT throws_ok($$SELECT inbox._sequence_id('evt_', 1)$$, '22023', 'malformed id pattern', '_sequence_id: a malformed pattern');
SELECT throws_ok($$SELECT inbox._sequence_id('evt_{n}', -1)$$, '22003', NULL, '_sequence_id: a negative number');
SELECT is(inbox._sequence_number('ord-{n:8}', 'ord-00000042'), 42::bigint, '_sequence_number: padded');
SELECT is(inbox._sequence_number('ord-{n:8}', 'ord-123456789'), 123456789::bigint, '_sequence_number: wider than the width');
SELECT is(inbox._sequence_number('ord-{n:8}', 'ord-42'), NULL, '_sequence_number: narrower than the width');
SELECT is(inbox._sequence_number('evt_{n}', 'evt_1234567890123456789'), NULL, '_sequence_number: over 18 digits');
SELECT is(inbox._sequence_number('evt_{n}', 'evt_'), NULL, '_sequence_number: no digits');
SELECT is(inbox._sequence_number('évt_{n}', 'évt_7'), 7::bigint, '_sequence_number: a multibyte prefix');
SELECT throws_ok($$SELECT inbox._sequence_number('evt_{n}x', 'evt_1')$$, '22023', 'malformed id pattern',
                 '_sequence_number: a malformed pattern');

-- claim_tail_listing: bad input, checked before anything else.
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing(NULL, '5 minutes')$$, '22004', 'provider must not be null', 'claim: NULL provider');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing('', '5 minutes')$$, '42704', 'unknown provider ""', 'claim: empty provider');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing(repeat('x', 300), '5 minutes')$$, '42704', NULL, 'claim: oversized provider');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing('tl_nope', '5 minutes')$$, '42704', 'unknown provider "tl_nope"', 'claim: unknown provider');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing('tl_none', NULL)$$, '22004', 'every must not be null', 'claim: NULL interval');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing('tl_none', '0 seconds')$$, '22023',
                 'every must be between 1 second and 7 days', 'claim: zero interval');
SELECT throws_ok($$SELECT * FROM inbox.claim_tail_listing('tl_none', '8 days')$$, '22023', NULL, 'claim: interval over 7 days');

-- Nothing to list: no firing check, no sequence source, nothing received yet.
SELECT inbox.scan_gaps('tl_seq');
SELECT is(pg_temp.high('tl_seq'), 10::bigint, 'the scan set the high mark from the events');
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_seq', '1 day')$$, 'no firing check: nothing to list');
SELECT is(pg_temp.windows('tl_seq'), 0, '... and no window is used up');
SELECT pg_temp.fire(p) FROM unnest(ARRAY['tl_listed', 'tl_none', 'tl_pad']) p;
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_listed', '1 day')$$, 'a listed source has no tail to list');
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_none', '1 day')$$, 'no id source: nothing to list');
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_pad', '1 day')$$, 'nothing received yet: nothing to list');
SELECT is(pg_temp.windows('tl_listed') + pg_temp.windows('tl_none') + pg_temp.windows('tl_pad'), 0,
          '... and no window is used up');

-- Firing: one caller per window gets the highest received id.
SELECT pg_temp.fire('tl_seq');
SELECT results_eq($$SELECT * FROM inbox.claim_tail_listing('tl_seq', '1 day')$$,
                  $$VALUES (10::bigint, 'evt_10'::text)$$, 'firing: the first caller gets the highest received id');
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_seq', '1 day')$$, 'the second caller in the window gets nothing');
SELECT is(pg_temp.windows('tl_seq'), 1, 'one window row, job list-tail:<provider>');
SELECT is((SELECT count(*)::int FROM inbox.job_windows WHERE job = 'list:tl_seq'), 0,
          'the tail window is not the listed-source window');
INSERT INTO inbox.job_windows (job, window_start) VALUES ('list-tail:tl_seq', now() - interval '30 days');
SELECT results_eq($$SELECT after_id FROM inbox.claim_tail_listing('tl_seq', '1 second')$$,
                  $$VALUES ('evt_10'::text)$$, 'a new, shorter window is claimable');
SELECT is((SELECT count(*)::int FROM inbox.job_windows
            WHERE job = 'list-tail:tl_seq' AND window_start < now() - interval '7 days'), 0, 'old windows cleaned up');
UPDATE inbox.anomalies SET resolved_at = now() WHERE provider = 'tl_seq';
DELETE FROM inbox.job_windows WHERE job = 'list-tail:tl_seq';
SELECT is_empty($$SELECT * FROM inbox.claim_tail_listing('tl_seq', '1 day')$$, 'a resolved check: nothing to list');

-- The id is written as the pattern writes it: zero-padded, never cut.
UPDATE inbox.gap_sources SET high_number = 42 WHERE provider = 'tl_pad';
SELECT results_eq($$SELECT * FROM inbox.claim_tail_listing('tl_pad', '1 day')$$,
                  $$VALUES (42::bigint, 'ord-00000042'::text)$$, 'padded to the width of the pattern');
UPDATE inbox.gap_sources SET high_number = 12345 WHERE provider = 'tl_wide';
SELECT pg_temp.fire('tl_wide');
SELECT results_eq($$SELECT after_id FROM inbox.claim_tail_listing('tl_wide', '1 day')$$,
                  $$VALUES ('o12345'::text)$$, 'a number wider than the pattern is written whole');

-- raise_sequence_high: bad input.
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high(NULL, ARRAY['evt_1'])$$, '22004', NULL, 'raise: NULL provider');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_seq', NULL)$$, '22004',
                 'provider and external_ids must not be null', 'raise: NULL ids');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('', ARRAY['evt_1'])$$, '42704', NULL, 'raise: empty provider');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_nope', ARRAY['evt_1'])$$, '42704',
                 'unknown provider "tl_nope"', 'raise: unknown provider');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_listed', ARRAY['evt_1'])$$, '42704',
                 'provider "tl_listed" has no sequence id source', 'raise: a listed source');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_none', ARRAY['evt_1'])$$, '42704',
                 'provider "tl_none" has no sequence id source', 'raise: no id source');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_seq', array_fill('evt_1'::text, ARRAY[10001]))$$,
                 '54000', 'at most 10000 ids per call, got 10001', 'raise: too many ids');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_11', NULL])$$, '22023', NULL, 'raise: a NULL id');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_11', ''])$$, '22023', NULL, 'raise: an empty id');
SELECT throws_ok($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_11', 'evt_' || repeat('1', 300)])$$,
                 '22023', NULL, 'raise: an oversized id');
SELECT is(pg_temp.high('tl_seq'), 10::bigint, 'a refused call changes nothing');

-- Raising: to the highest listed number, never down.
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq', '{}')$$, $$VALUES (10::bigint, 0)$$,
                  'no ids: the high mark as it is');
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_11', 'evt_13', 'evt_12', 'evt_13'])$$,
                  $$VALUES (13::bigint, 0)$$, 'raised to the highest listed number');
SELECT is(pg_temp.high('tl_seq'), 13::bigint, '... and stored');
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_5', 'evt_12'])$$,
                  $$VALUES (13::bigint, 0)$$, 'lower numbers never lower it');
-- Ids not of the pattern are ignored and counted.
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq',
                      ARRAY['evt_x14', 'foo_99', 'evt_-20', 'evt_20.5', 'evt_1234567890123456789', 'EVT_30', 'evt_ 40'])$$,
                  $$VALUES (13::bigint, 7)$$, 'ids not of the pattern are ignored and counted');
-- A number far ahead of the high mark is ignored: a list API gone wrong
-- must not make the scans record a million gaps at a time.
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_1000014', 'evt_20'])$$,
                  $$VALUES (20::bigint, 1)$$, 'a number over 1,000,000 above the high mark is ignored');
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_seq', ARRAY['evt_1000020'])$$,
                  $$VALUES (1000020::bigint, 0)$$, 'exactly 1,000,000 above is taken');
UPDATE inbox.gap_sources SET high_number = 13 WHERE provider = 'tl_seq';
-- Zero-padded patterns: at least the width, as the scans read them.
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_pad', ARRAY['ord-00000043', 'ord-44', 'ord-000000045'])$$,
                  $$VALUES (45::bigint, 1)$$, 'padded ids: fewer digits than the width are ignored');
-- A source with no high mark yet takes the highest listed number.
SELECT inbox.set_id_source('tl_pad', 'sequence', 'ord-{n:6}');
SELECT is(pg_temp.high('tl_pad'), NULL::bigint, 'a new pattern starts without a high mark');
SELECT results_eq($$SELECT * FROM inbox.raise_sequence_high('tl_pad', ARRAY['ord-000007'])$$,
                  $$VALUES (7::bigint, 0)$$, 'no high mark yet: the highest listed number');

-- The point of it: the next scan records the missing tail 11..13 as gaps
-- and, past the grace period (0 here), requests their backfill.
SELECT is((inbox.scan_gaps('tl_seq') ->> 'new_gaps')::int, 3, 'the scan after the raise finds the tail');
SELECT results_eq($$SELECT external_id, status FROM inbox.gaps WHERE provider = 'tl_seq' ORDER BY external_id$$,
                  $$VALUES ('evt_11'::text, 'requested'::text), ('evt_12', 'requested'), ('evt_13', 'requested')$$,
                  'gaps evt_11..evt_13, requested');
SELECT is((SELECT count(*)::int FROM inbox.backfill_requests WHERE provider = 'tl_seq' AND status = 'pending'), 3,
          'three backfill requests');
SELECT is(pg_temp.high('tl_seq'), 13::bigint, 'the scan kept the raised high mark');
-- Later events and raises go on from there (the race of a scan with a raise:
-- test/isolation/specs/tail_raise_vs_scan.spec).
SELECT inbox.ingest('tl_seq', 'evt_11', '{}');
SELECT inbox.raise_sequence_high('tl_seq', ARRAY['evt_15']);
SELECT is((inbox.scan_gaps('tl_seq') ->> 'high')::bigint, 15::bigint, 'a later scan reports the raised mark');
SELECT is(pg_temp.high('tl_seq'), 15::bigint, 'and keeps it');

-- Least privilege: the worker may call both, the receiver and PUBLIC may not.
SELECT ok(has_function_privilege('inbox_worker', 'inbox.claim_tail_listing(text, interval)', 'EXECUTE'),
          'inbox_worker may claim tail listings');
SELECT ok(has_function_privilege('inbox_worker', 'inbox.raise_sequence_high(text, text[])', 'EXECUTE'),
          'inbox_worker may raise high marks');
SELECT ok(NOT has_function_privilege('inbox_receiver', 'inbox.claim_tail_listing(text, interval)', 'EXECUTE'),
          'inbox_receiver may not claim');
SELECT ok(NOT has_function_privilege('inbox_receiver', 'inbox.raise_sequence_high(text, text[])', 'EXECUTE'),
          'inbox_receiver may not raise');
SELECT ok(NOT has_function_privilege('public', 'inbox._sequence_number(text, text)', 'EXECUTE'), 'PUBLIC may not call the helpers');

SELECT * FROM finish();
ROLLBACK;

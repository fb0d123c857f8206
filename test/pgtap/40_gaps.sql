-- Gap detection: expected-id sources, find_gaps (the C++ index merge checked
-- against the SQL anti-join), scan_gaps (record, close, promote), listed ids.
BEGIN;
SELECT plan(77);

SELECT has_function('inbox', 'find_gaps', ARRAY['text', 'bigint', 'bigint'], 'find_gaps(text, bigint, bigint)');
SELECT has_function('inbox', 'find_gaps', ARRAY['text', 'timestamp with time zone', 'timestamp with time zone'],
                    'find_gaps(text, timestamptz, timestamptz)');
SELECT has_function('inbox', 'scan_gaps', ARRAY['text'], 'scan_gaps(text)');
SELECT has_table('inbox', 'gaps', 'inbox.gaps exists');

SELECT inbox.register_provider('g_seq');
SELECT inbox.register_provider('g_pad');
SELECT inbox.register_provider('g_list');
SELECT inbox.register_provider('g_none');
SELECT inbox.register_provider('g_wide');

-- set_id_source: bad input.
SELECT throws_ok($$SELECT inbox.set_id_source(NULL, 'sequence', 'e_{n}')$$, '22004',
                 'provider must not be null', 'set_id_source: NULL provider');
SELECT throws_ok($$SELECT inbox.set_id_source('nope', 'sequence', 'e_{n}')$$, '42704',
                 'unknown provider "nope"', 'set_id_source: unknown provider');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'guess')$$, '22023',
                 'id source kind must be ''sequence'' or ''listed'', not ''guess''', 'set_id_source: bad kind');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence')$$, '22023',
                 'malformed id pattern NULL', 'sequence without a pattern');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_')$$, '22023',
                 'malformed id pattern ''evt_''', 'pattern without {n}');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n}_x')$$, '22023', NULL,
                 'pattern with text after {n}');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{x}')$$, '22023', NULL,
                 'pattern with an unknown placeholder');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'e{v}t_{n}')$$, '22023', NULL,
                 'pattern with braces in the prefix');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n:0}')$$, '22023', NULL,
                 'padding width 0');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n:19}')$$, '22023', NULL,
                 'padding width over 18');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n:ab}')$$, '22023', NULL,
                 'padding width not a number');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n:08}')$$, '22023', NULL,
                 'padding width with a leading zero');
-- One grammar, the scans' parser: the prefix limit counts bytes, not characters.
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', repeat('é', 101) || '{n}')$$, '22023',
                 NULL, 'a prefix of 202 bytes (101 characters) is refused');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'listed', 'evt_{n}')$$, '22023',
                 'a listed id source takes no pattern', 'listed source with a pattern');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n}', -1)$$, '22023',
                 'start_at must not be negative', 'negative start_at');
SELECT throws_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n}', 1, '-1 hour')$$, '22023',
                 'grace must not be null or negative', 'negative grace');
SELECT is((SELECT count(*) FROM inbox.gap_sources)::int, 0, 'no source was stored by refused calls');
SELECT lives_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', repeat('é', 100) || '{n}')$$,
                'a prefix of 200 bytes is accepted');

SELECT lives_ok($$SELECT inbox.set_id_source('g_seq', 'sequence', 'evt_{n}', 1, '1 hour')$$, 'sequence source');
SELECT lives_ok($$SELECT inbox.set_id_source('g_pad', 'sequence', 'o-{n:6}', 0)$$, 'padded sequence source');
SELECT lives_ok($$SELECT inbox.set_id_source('g_list', 'listed')$$, 'listed source');
SELECT inbox.set_id_source('g_wide', 'sequence', 'o-{n:6}');

-- find_gaps: bad input.
SELECT throws_ok($$SELECT inbox.find_gaps(NULL, 1, 10)$$, '22004', 'provider must not be null', 'find_gaps: NULL provider');
SELECT throws_ok($$SELECT inbox.find_gaps('', 1, 10)$$, '22023', 'provider must not be empty', 'find_gaps: empty provider');
SELECT throws_ok($$SELECT inbox.find_gaps('nope', 1, 10)$$, '42704', 'unknown provider "nope"', 'find_gaps: unknown provider');
SELECT throws_ok($$SELECT inbox.find_gaps('g_none', 1, 10)$$, '42704', 'provider "g_none" has no id source',
                 'find_gaps: provider without a source');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', NULL, 10)$$, '22004', 'from and to must not be null', 'find_gaps: NULL from');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', 10, 5)$$, '22023', 'from (10) is after to (5)', 'find_gaps: from > to');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', -1, 5)$$, '22023', 'from must not be negative', 'find_gaps: negative from');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', 1, 1000001)$$, '54000',
                 'window of 1000001 ids is over the maximum of 1000000', 'find_gaps: window over the maximum');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', 1, 1000000000000000000)$$, '22023',
                 'to must be at most 999999999999999999', 'find_gaps: to past 18 digits');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', now() - interval '1 day', now())$$, '42809',
                 'provider "g_seq" has a sequence id source: pass numbers', 'find_gaps: timestamps for a sequence');
SELECT throws_ok($$SELECT inbox.find_gaps('g_list', 1, 10)$$, '42809',
                 'provider "g_list" has a listed id source: pass timestamps', 'find_gaps: numbers for a listed source');
SELECT throws_ok($$SELECT inbox.find_gaps('g_seq', 'a', 'b')$$, '42725', NULL, 'find_gaps: untyped strings are ambiguous');
SELECT throws_ok($$SELECT inbox.find_gaps('g_list', now() - interval '32 days', now())$$, '54000',
                 'window is over the maximum of 31 days', 'find_gaps: listed window over the maximum');
SELECT throws_ok($$SELECT inbox.find_gaps('g_list', now(), now() - interval '1 day')$$, '22023',
                 'from is after to', 'find_gaps: listed from > to');

-- Unpadded: 1..30 without 5, 17, 25; longer ids that sort inside the window
-- (evt_100.., evt_1000..), and ids that are not numbers at all.
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'g_seq', 'evt_' || g, '{}'::jsonb FROM generate_series(1, 30) g WHERE g NOT IN (5, 17, 25)
UNION ALL SELECT 'g_seq', 'evt_' || g, '{}'::jsonb FROM generate_series(100, 130) g
UNION ALL SELECT 'g_seq', 'evt_' || g, '{}'::jsonb FROM generate_series(1000, 1300) g
UNION ALL SELECT 'g_seq', x, '{}'::jsonb FROM unnest(ARRAY['evt_12abc', 'evt_x', 'evt_', 'ev', 'evt_-3', 'evt_031']) x;
SELECT is(ARRAY(SELECT inbox.find_gaps('g_seq', 1, 40)),
          ARRAY['evt_5', 'evt_17', 'evt_25', 'evt_31', 'evt_32', 'evt_33', 'evt_34', 'evt_35', 'evt_36',
                'evt_37', 'evt_38', 'evt_39', 'evt_40'],
          'find_gaps: the missing numbers, in order, past interleaved longer ids and junk');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_seq', 7, 7)), '{}'::text[], 'a present id is no gap');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_seq', 31, 31)), ARRAY['evt_31'], 'evt_031 is not evt_31');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_seq', 0, 1)), ARRAY['evt_0'], 'a window of one and zero');

-- The merge against the SQL anti-join over 25000 numbers: more than one
-- fetch chunk, four digit lengths, every 7th id missing.
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'g_seq', 'evt_' || g, '{}'::jsonb FROM generate_series(2000, 27000) g WHERE g % 7 <> 0
ON CONFLICT DO NOTHING;
SELECT inbox.tombstone('g_seq', 'evt_' || g, 'test') FROM generate_series(14, 27000, 1001) g
WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = 'g_seq' AND e.external_id = 'evt_' || g);
SELECT results_eq(
  $$SELECT x FROM inbox.find_gaps('g_seq', 1, 30000) x$$,
  $$SELECT 'evt_' || n FROM generate_series(1, 30000) n
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = 'g_seq' AND e.external_id = 'evt_' || n)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = 'g_seq' AND t.external_id = 'evt_' || n)
    ORDER BY n$$,
  'find_gaps agrees with NOT EXISTS over 30000 ids (tombstones excluded)');

-- A small window across two lengths inside a long stream: one read of its
-- key range would cover nearly every id, so the merge reads per length.
SELECT results_eq(
  $$SELECT x FROM inbox.find_gaps('g_seq', 95, 105) x$$,
  $$SELECT 'evt_' || n FROM generate_series(95, 105) n
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = 'g_seq' AND e.external_id = 'evt_' || n)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = 'g_seq' AND t.external_id = 'evt_' || n)
    ORDER BY n$$,
  'find_gaps agrees with NOT EXISTS on a small window across two lengths');
SELECT results_eq(
  $$SELECT x FROM inbox.find_gaps('g_seq', 9990, 10010) x$$,
  $$SELECT 'evt_' || n FROM generate_series(9990, 10010) n
    WHERE NOT EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = 'g_seq' AND e.external_id = 'evt_' || n)
      AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = 'g_seq' AND t.external_id = 'evt_' || n)
    ORDER BY n$$,
  'and on one across 4 and 5 digits');

-- Padded to 2 digits with 3- and 4-digit ids interleaving: the range reads
-- give way to per-id probes of zero-padded ids.
SELECT inbox.register_provider('g_pad2');
SELECT inbox.set_id_source('g_pad2', 'sequence', 'p{n:2}');
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'g_pad2', 'p' || CASE WHEN g < 100 THEN lpad(g::text, 2, '0') ELSE g::text END, '{}'::jsonb
FROM generate_series(0, 5000) g WHERE g % 7 <> 0;
SELECT results_eq(
  $$SELECT x FROM inbox.find_gaps('g_pad2', 0, 6000) x$$,
  $$SELECT 'p' || CASE WHEN n < 100 THEN lpad(n::text, 2, '0') ELSE n::text END FROM generate_series(0, 6000) n
    WHERE n % 7 = 0 OR n > 5000 ORDER BY n$$,
  'find_gaps agrees with the expected gaps of a padded sequence with longer ids interleaved');

-- Padded, across the width: o-999998 .. o-1000002 (7 digits, unpadded).
INSERT INTO inbox.events (provider, external_id, payload)
SELECT 'g_pad', 'o-' || lpad(g::text, 6, '0'), '{}'::jsonb FROM generate_series(0, 20) g WHERE g % 7 <> 3
UNION ALL SELECT 'g_pad', x, '{}'::jsonb FROM unnest(ARRAY['o-000025', 'o-12', 'o-0000005']) x
UNION ALL SELECT 'g_wide', x, '{}'::jsonb FROM unnest(ARRAY['o-999999', 'o-1000001', 'o-0999998']) x;
SELECT is(ARRAY(SELECT inbox.find_gaps('g_pad', 0, 12)), ARRAY['o-000003', 'o-000010'],
          'padded: zero-padded ids, number zero included');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_wide', 999998, 1000002)), ARRAY['o-999998', 'o-1000000', 'o-1000002'],
          'padded: a window across the padding width');

-- scan_gaps: bad input.
SELECT throws_ok($$SELECT inbox.scan_gaps(NULL)$$, '22004', 'provider must not be null', 'scan_gaps: NULL provider');
SELECT throws_ok($$SELECT inbox.scan_gaps('nope')$$, '42704', 'unknown provider "nope"', 'scan_gaps: unknown provider');
SELECT throws_ok($$SELECT inbox.scan_gaps('g_none')$$, '42704', 'provider "g_none" has no id source',
                 'scan_gaps: provider without a source');

-- scan_gaps on the padded source: window from start_at 0 to the highest number seen.
CREATE TEMP TABLE scan AS SELECT 1 AS n, inbox.scan_gaps('g_pad') AS j;
SELECT is((SELECT (j ->> 'from') || '..' || (j ->> 'to') FROM scan WHERE n = 1), '0..25',
          'first scan: start_at to the highest number seen');
SELECT is((SELECT (j ->> 'new_gaps')::int FROM scan WHERE n = 1),
          (SELECT count(*)::int FROM inbox.find_gaps('g_pad', 0, 25)), 'every gap of the window recorded');
SELECT is((SELECT count(*)::int FROM inbox.gaps WHERE provider = 'g_pad' AND status = 'open'
           AND first_seen_at = now()), (SELECT (j ->> 'new_gaps')::int FROM scan WHERE n = 1),
          'gaps are open with their first-seen time');
-- A late retry arrives; a gap ages past the grace period; one is tombstoned.
SELECT inbox.ingest('g_pad', 'o-000003', '{}');
UPDATE inbox.gaps SET first_seen_at = now() - interval '2 hours' WHERE provider = 'g_pad' AND external_id = 'o-000010';
SELECT inbox.tombstone('g_pad', 'o-000017', 'draft never sent');
INSERT INTO scan SELECT 2, inbox.scan_gaps('g_pad');
SELECT is((SELECT j ->> 'from' FROM scan WHERE n = 2), NULL, 'nothing new to scan');
SELECT is((SELECT (j ->> 'resolved')::int FROM scan WHERE n = 2), 1, 'the late retry resolved its gap (the tombstone closed its own)');
SELECT is((SELECT resolution FROM inbox.gaps WHERE provider = 'g_pad' AND external_id = 'o-000003'), 'arrived',
          'the late retry closed its gap');
SELECT is((SELECT resolution FROM inbox.gaps WHERE provider = 'g_pad' AND external_id = 'o-000017'), 'tombstoned',
          'the tombstone closed its gap');
SELECT is((SELECT (j ->> 'requested')::int FROM scan WHERE n = 2), 1, 'one gap past the grace period requested');
SELECT is((SELECT status FROM inbox.gaps WHERE provider = 'g_pad' AND external_id = 'o-000010'), 'requested',
          'the old gap is requested');
SELECT is((SELECT status FROM inbox.backfill_requests WHERE provider = 'g_pad' AND external_id = 'o-000010'),
          'pending', 'and has a pending backfill request');
-- New events past the high-water mark: the next scan continues from there.
SELECT inbox.ingest('g_pad', 'o-000030', '{}');
INSERT INTO scan SELECT 3, inbox.scan_gaps('g_pad');
SELECT is((SELECT (j ->> 'from') || '..' || (j ->> 'to') || ':' || (j ->> 'new_gaps') FROM scan WHERE n = 3),
          '26..30:4', 'the next scan covers only the new stretch');

-- Listed source.
SELECT throws_ok($$SELECT inbox.add_listed('g_seq', ARRAY['a'])$$, '42704', 'provider "g_seq" has no listed id source',
                 'add_listed: not a listed source');
SELECT throws_ok($$SELECT inbox.add_listed('g_list', ARRAY['a', ''])$$, '22023', NULL, 'add_listed: empty id');
SELECT throws_ok($$SELECT inbox.add_listed('g_list', NULL)$$, '22004', NULL, 'add_listed: NULL ids');
SELECT throws_ok($$SELECT inbox.add_listed('g_list', ARRAY(SELECT 'x' || g FROM generate_series(1, 10001) g))$$,
                 '54000', 'at most 10000 ids per call, got 10001', 'add_listed: over 10000 ids');
SELECT is(inbox.add_listed('g_list', ARRAY['a', 'b', 'c', 'b'], now() - interval '2 hours'), 3, 'add_listed dedups');
SELECT is(inbox.add_listed('g_list', ARRAY['c', 'd'], now() - interval '30 minutes'), 1, 'and skips known ids');
SELECT inbox.ingest('g_list', 'a', '{}');
SELECT inbox.ingest('g_list', 'c', '{}');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_list', now() - interval '1 day', now())), ARRAY['b', 'd'],
          'listed: ids listed but never received');
SELECT is(ARRAY(SELECT inbox.find_gaps('g_list', now() - interval '1 hour', now())), ARRAY['d'],
          'listed: only the window');
SELECT is((SELECT (j ->> 'new_gaps')::int FROM (SELECT inbox.scan_gaps('g_list') AS j) s), 2,
          'scan_gaps records the listed gaps');

-- A multibyte prefix: bytes in the merge, characters in SQL.
SELECT inbox.register_provider('g_utf8');
SELECT inbox.set_id_source('g_utf8', 'sequence', 'événement-{n}');
SELECT inbox.ingest('g_utf8', 'événement-' || g, '{}') FROM generate_series(1, 9) g WHERE g <> 4;
SELECT is(ARRAY(SELECT inbox.find_gaps('g_utf8', 1, 9)), ARRAY['événement-4'], 'find_gaps with a multibyte prefix');
SELECT is((SELECT (j ->> 'from') || '..' || (j ->> 'to') || ':' || (j ->> 'new_gaps')
           FROM (SELECT inbox.scan_gaps('g_utf8') AS j) s), '1..9:1', 'scan_gaps with a multibyte prefix');
SELECT inbox.set_id_source('g_utf8', NULL);

-- scan_all_gaps: one result per provider with a source; removing a source.
SELECT is((SELECT string_agg(r ->> 'provider', ',' ORDER BY r ->> 'provider')
           FROM jsonb_array_elements(inbox.scan_all_gaps()) r), 'g_list,g_pad,g_pad2,g_seq,g_wide',
          'scan_all_gaps scans every provider with a source');
SELECT inbox.set_id_source('g_wide', NULL);
SELECT is((SELECT count(*)::int FROM inbox.gap_sources WHERE provider = 'g_wide'), 0, 'kind NULL removes the source');
SELECT throws_ok($$SELECT inbox.find_gaps('g_wide', 1, 2)$$, '42704', 'provider "g_wide" has no id source',
                 'and find_gaps says so');

SELECT * FROM finish();
ROLLBACK;

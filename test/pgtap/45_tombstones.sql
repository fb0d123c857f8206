-- Tombstones: a confirmed non-event is never flagged as a gap again.
BEGIN;
SELECT plan(21);

SELECT has_table('inbox', 'tombstones', 'inbox.tombstones exists');
SELECT has_function('inbox', 'tombstone', ARRAY['text', 'text', 'text'], 'inbox.tombstone(text, text, text) exists');

SELECT inbox.register_provider('ts');
SELECT inbox.set_id_source('ts', 'sequence', 'n{n}', 1, '0 seconds');
SELECT inbox.ingest('ts', 'n' || g, '{}') FROM generate_series(1, 10) g WHERE g NOT IN (3, 4);

SELECT throws_ok($$SELECT inbox.tombstone(NULL, 'n3', 'x')$$, '22004', NULL, 'NULL provider');
SELECT throws_ok($$SELECT inbox.tombstone('ts', NULL, 'x')$$, '22004', NULL, 'NULL external_id');
SELECT throws_ok($$SELECT inbox.tombstone('ts', 'n3', NULL)$$, '22004', NULL, 'NULL reason');
SELECT throws_ok($$SELECT inbox.tombstone('ts', '', 'x')$$, '22023', 'external_id and reason must not be empty',
                 'empty external_id');
SELECT throws_ok($$SELECT inbox.tombstone('ts', 'n3', '')$$, '22023', 'external_id and reason must not be empty',
                 'empty reason');
SELECT throws_ok($$SELECT inbox.tombstone('ts', repeat('x', 256), 'x')$$, '22001',
                 'external_id is 256 bytes, over the limit of 255', 'external_id over 255 bytes');
SELECT throws_ok($$SELECT inbox.tombstone('nope', 'n3', 'x')$$, '42704', 'unknown provider "nope"', 'unknown provider');
SELECT throws_ok($$SELECT inbox.tombstone('ts', 'n1', 'x')$$, '55006',
                 'event "n1" of provider "ts" exists: it cannot be tombstoned', 'an existing event');
SELECT throws_ok($$SELECT inbox.tombstone('ts', 3, 'x')$$, '42883', NULL, 'wrong type for external_id');
SELECT is((SELECT count(*) FROM inbox.tombstones)::int, 0, 'refused calls wrote nothing');

SELECT is(ARRAY(SELECT inbox.find_gaps('ts', 1, 10)), ARRAY['n3', 'n4'], 'two gaps before');
SELECT is((SELECT (inbox.scan_gaps('ts') ->> 'new_gaps')::int), 2, 'scan records both');
SELECT is(inbox.tombstone('ts', 'n3', 'draft that never fired'), true, 'tombstone: true when new');
SELECT is(inbox.tombstone('ts', 'n3', 'another reason'), false, 'tombstone: false when already there');
SELECT is((SELECT reason FROM inbox.tombstones WHERE provider = 'ts' AND external_id = 'n3'),
          'draft that never fired', 'the first reason stays');
SELECT is(ARRAY(SELECT inbox.find_gaps('ts', 1, 10)), ARRAY['n4'], 'a tombstoned id is no gap');
SELECT is((SELECT status || '/' || resolution FROM inbox.gaps WHERE provider = 'ts' AND external_id = 'n3'),
          'resolved/tombstoned', 'its recorded gap is closed');
SELECT is((SELECT status FROM inbox.backfill_requests WHERE provider = 'ts' AND external_id = 'n3'),
          'not_found', 'its backfill request is closed');
-- A rescan from the start does not flag it again.
UPDATE inbox.gap_sources SET scanned_to = NULL WHERE provider = 'ts';
DELETE FROM inbox.gaps WHERE provider = 'ts';
SELECT inbox.scan_gaps('ts');
SELECT is(ARRAY(SELECT external_id FROM inbox.gaps WHERE provider = 'ts'), ARRAY['n4'], 'never flagged again');

SELECT * FROM finish();
ROLLBACK;

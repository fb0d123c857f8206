-- The installed shape: what users and the receiver rely on.
BEGIN;
SELECT plan(40);

SELECT has_schema('inbox');
SELECT has_table('inbox', 'events', 'events table');
SELECT has_table('inbox', 'providers', 'providers table');
SELECT columns_are('inbox', 'events', ARRAY[
  'id', 'attempts', 'delivery_count', 'received_at', 'first_received_at', 'next_attempt_at',
  'lease_expires_at', 'processed_at', 'lease_token', 'status', 'provider', 'external_id',
  'source', 'last_error', 'headers', 'payload', 'entity_key', 'version', 'held_reason',
  'is_replay', 'attempts_at_replay', 'purged_at']);
SELECT col_is_pk('inbox', 'events', 'id', 'id is the primary key');
SELECT col_is_unique('inbox', 'events', ARRAY['provider', 'external_id'],
  '(provider, external_id) is the identity of an event');
SELECT col_type_is('inbox', 'events', 'payload', 'jsonb', 'payload is jsonb');
SELECT col_type_is('inbox', 'events', 'lease_token', 'uuid', 'lease_token is uuid');

-- Five indexes only: every index costs every non-HOT update. A processed
-- event is in one retention index, not two: complete adds three entries.
SELECT indexes_are('inbox', 'events',
  ARRAY['events_pkey', 'events_provider_external_id_key', 'events_open_idx',
        'events_payload_kept_idx', 'events_purged_idx']);
SELECT is((SELECT array_agg(pg_get_expr(indpred, indrelid) ORDER BY indexrelid::regclass::text) FROM pg_index
            WHERE indexrelid IN ('inbox.events_payload_kept_idx'::regclass, 'inbox.events_purged_idx'::regclass)),
          ARRAY['((processed_at IS NOT NULL) AND (purged_at IS NULL))',
                '((processed_at IS NOT NULL) AND (purged_at IS NOT NULL))'],
          'the retention indexes split processed events by whether the payload is kept');
SELECT is((SELECT pg_get_expr(indpred, indrelid) FROM pg_index
            WHERE indexrelid = 'inbox.events_open_idx'::regclass),
          '(processed_at IS NULL)', 'claim index is partial on open events');
SELECT ok((SELECT reloptions @> ARRAY['fillfactor=50'] FROM pg_class
            WHERE oid = 'inbox.events'::regclass), 'events leaves every row room for one HOT update');

-- A row's rules: one CHECK, in C (sql/src/00_schema.sql says why). Direct
-- writes meet them as the functions' writes do, and a refusal names the rule.
SELECT is((SELECT array_agg(conname::text) FROM pg_constraint
            WHERE conrelid = 'inbox.events'::regclass AND contype = 'c'),
          ARRAY['events_row_check'], 'events has one CHECK: every statement that writes it prepares it');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload, status)
                    VALUES ('p', 'row-1', '{}', 'finished') $$,
  '23514', 'events_row_check: status ''finished'' is not pending, processing, done or dead',
  'an unknown status is refused');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload, status)
                    VALUES ('p', 'row-1', '{}', 'Done') $$,
  '23514', 'events_row_check: status ''Done'' is not pending, processing, done or dead',
  'statuses are case-sensitive');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload, status)
                    VALUES ('p', 'row-1', '{}', repeat('s', 100)) $$,
  '23514', format('events_row_check: status %s is not pending, processing, done or dead',
                  '''' || repeat('s', 40) || '...'''),
  'a long status is cut in the message');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload, status)
                    VALUES ('p', 'row-1', '{}', 'done') $$,
  '23514', 'events_row_check: status ''done'' needs processed_at', 'done without processed_at is refused');
SELECT throws_ok($$ INSERT INTO inbox.events (provider, external_id, payload, processed_at)
                    VALUES ('p', 'row-1', '{}', now()) $$,
  '23514', 'events_row_check: status ''pending'' must not have processed_at',
  'pending with processed_at is refused');
SELECT lives_ok($$ INSERT INTO inbox.events (provider, external_id, payload, status, processed_at)
                   VALUES ('p', 'row-dead', '{}', 'dead', now()),
                          ('p', 'row-processing', '{}', 'processing', NULL) $$,
  'dead with processed_at and processing without it are accepted');
SELECT throws_ok($$ UPDATE inbox.events SET status = 'done' WHERE external_id = 'row-processing' $$,
  '23514', 'events_row_check: status ''done'' needs processed_at', 'an update is checked as an insert is');
SELECT throws_ok($$ UPDATE inbox.events SET status = 'pending' WHERE external_id = 'row-dead' $$,
  '23514', 'events_row_check: status ''pending'' must not have processed_at',
  'reopening without clearing processed_at is refused');
-- Bytes, not characters: 'é' is two.
SELECT lives_ok(format($$ INSERT INTO inbox.events (provider, external_id, payload)
                          VALUES ('p', repeat('é', %s), '{}') $$, inbox._external_id_limit() / 2),
  'an id of multi-byte characters under the byte limit is accepted');
SELECT throws_ok(format($$ INSERT INTO inbox.events (provider, external_id, payload)
                           VALUES ('p', repeat('é', %s), '{}') $$, inbox._external_id_limit() / 2 + 1),
  '23514', format('events_row_check: external_id is %s bytes, not 1 to %s',
                  (inbox._external_id_limit() / 2 + 1) * 2, inbox._external_id_limit()),
  'and one over it is refused though it has fewer characters than the limit');
SELECT ok(inbox._event_row_valid(NULL, NULL, NULL) AND inbox._event_row_valid('done', NULL, NULL)
            AND inbox._event_row_valid(NULL, now(), 'x') AND inbox._event_row_valid('done', now(), 'x'),
  'a valid row or a NULL passes the check, as in SQL: the NOT NULL columns refuse a NULL first');
SELECT throws_ok($$ SELECT inbox._event_row_valid('pending', NULL, '') $$,
  '23514', 'events_row_check: external_id is 0 bytes, not 1 to 255', 'the function itself refuses an empty id');
-- PostgreSQL's own refusal of a CHECK adds "failing row contains (...)":
-- the payload, in the client's error and the server's log. This one does not.
CREATE FUNCTION pg_temp.refusal_text() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    message text;
    detail text;
BEGIN
    INSERT INTO inbox.events (provider, external_id, payload, status)
    VALUES ('p', 'row-secret', '{"card": "4242-secret"}', 'bogus');
    RETURN 'inserted';
EXCEPTION WHEN check_violation THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    RETURN message || ' / ' || coalesce(detail, '');
END
$$;
SELECT is(pg_temp.refusal_text(),
  'events_row_check: status ''bogus'' is not pending, processing, done or dead / ',
  'a refused row''s payload is in neither the message nor the detail');

SELECT has_function('inbox', 'ingest', ARRAY['text', 'text', 'jsonb', 'jsonb', 'text', 'bytea', 'text']);
SELECT has_function('inbox', 'ingest_batch', ARRAY['text[]', 'text[]', 'jsonb[]', 'jsonb[]', 'text', 'bytea[]', 'text[]']);
SELECT has_function('inbox', 'claim', ARRAY['integer', 'interval', 'text']);
SELECT has_function('inbox', 'complete', ARRAY['bigint', 'uuid']);
SELECT has_function('inbox', 'fail', ARRAY['bigint', 'uuid', 'text', 'interval']);
SELECT function_returns('inbox', 'ingest', ARRAY['text', 'text', 'jsonb', 'jsonb', 'text', 'bytea', 'text'], 'text');
SELECT function_returns('inbox', 'claim', ARRAY['integer', 'interval', 'text'], 'setof inbox.events');

SELECT is_definer('inbox', 'ingest', ARRAY['text', 'text', 'jsonb', 'jsonb', 'text', 'bytea', 'text']);
SELECT is_definer('inbox', 'claim', ARRAY['integer', 'interval', 'text']);
SELECT is_definer('inbox', 'complete', ARRAY['bigint', 'uuid']);
SELECT is_definer('inbox', 'fail', ARRAY['bigint', 'uuid', 'text', 'interval']);

-- Every SECURITY DEFINER function pins its search_path.
SELECT is_empty($$
  SELECT p.oid::regprocedure FROM pg_proc p
  WHERE p.pronamespace = 'inbox'::regnamespace AND p.prosecdef
    AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
$$, 'security definer functions have a fixed search_path');

SELECT is((SELECT count(*)::int FROM pg_depend
            WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_inbox')
              AND classid = 'pg_class'::regclass AND deptype = 'e'
              AND objid IN ('inbox.events'::regclass, 'inbox.providers'::regclass)),
          2, 'tables belong to the extension');

SELECT is_empty($$
  SELECT c.oid::regclass FROM pg_class c
  WHERE c.relnamespace = 'inbox'::regnamespace AND c.relkind IN ('r', 'S')
    AND c.oid <> ALL ((SELECT extconfig FROM pg_extension WHERE extname = 'pg_inbox')::oid[])
$$, 'pg_dump keeps the rows of every table and the value of every sequence');

SELECT * FROM finish();
ROLLBACK;

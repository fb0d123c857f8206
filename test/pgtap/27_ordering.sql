-- Version checks (issue 12): ordering pointers, presets, versions, claim
-- filling entity_key/version, inbox.advance and transition rules.
BEGIN;
SELECT plan(129);

SELECT inbox.register_provider('stripe');
SELECT inbox.register_provider('shop');
SELECT inbox.register_provider('plain');
CREATE FUNCTION pg_temp.ev(ext text) RETURNS inbox.events LANGUAGE sql AS
  $$ SELECT * FROM inbox.events WHERE external_id = ext $$;
CREATE FUNCTION pg_temp.adv(ext text) RETURNS text LANGUAGE sql AS
  $$ SELECT inbox.advance(e.id, e.lease_token) FROM inbox.events e WHERE e.external_id = ext $$;
CREATE FUNCTION pg_temp.stripe(ext text, object_id text, created bigint, status text) RETURNS text
LANGUAGE sql AS $$
  SELECT inbox.ingest('stripe', ext, jsonb_build_object('id', ext, 'created', created,
           'data', jsonb_build_object('object', jsonb_build_object('id', object_id, 'status', status))))
$$;

-- configure_ordering: pointers are validated and compiled
SELECT lives_ok($$ SELECT inbox.configure_ordering('shop', '/a~1b/c~0d/0', 'header:X-Shopify-Triggered-At') $$,
  'payload and header pointers are accepted');
SELECT row_eq($$ SELECT entity_path, entity_header, version_path, version_header, state_pointer
                   FROM inbox.provider_ordering WHERE provider = 'shop' $$,
  ROW('{a/b,c~d,0}'::text[], NULL::text, NULL::text[], 'x-shopify-triggered-at'::text, NULL::text),
  'RFC 6901 escapes are decoded, header names are matched in lower case');
SELECT throws_ok($$ SELECT inbox.configure_ordering(NULL, '/id', '/v') $$, '22004',
  'provider must not be null', 'NULL provider');
SELECT throws_ok($$ SELECT inbox.configure_ordering('nope', '/id', '/v') $$, '42704',
  'unknown provider "nope"', 'unknown provider');
SELECT throws_ok($$ SELECT inbox.configure_ordering('', '/id', '/v') $$, '42704', NULL, 'empty provider');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', '', '/v') $$, '22023',
  'entity_pointer must be 1 to 256 bytes, not 0', 'empty pointer');
SELECT throws_ok(format('SELECT inbox.configure_ordering(%L, %L, %L)', 'shop', '/' || repeat('a', 256), '/v'),
  '22023', 'entity_pointer must be 1 to 256 bytes, not 257', 'oversized pointer');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', 'data.object.id', '/v') $$, '22023',
  'entity_pointer must be a JSON pointer or header:Name, not ''data.object.id''', 'dotted path refused');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', '/id', '/a~2b') $$, '22023',
  'version_pointer is a malformed JSON pointer: ''/a~2b'' (~ must be followed by 0 or 1)', 'bad ~ escape');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', '/id', '/a~') $$, '22023', NULL, 'trailing ~');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', 'header:', '/v') $$, '22023',
  'entity_pointer names no valid header: ''header:''', 'header without a name');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', 'header:X Bad', '/v') $$, '22023', NULL,
  'header name with a space');
SELECT throws_ok(format('SELECT inbox.configure_ordering(%L, %L, %L)', 'shop', repeat('/a', 33), '/v'),
  '22023', 'entity_pointer is deeper than 32 levels', 'too deep');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', '/id', NULL) $$, '22023',
  'entity_pointer and version_pointer go together', 'an entity without a version');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', NULL, NULL, '/state') $$, '22023',
  'state_pointer needs entity_pointer and version_pointer', 'a state without an entity');
SELECT throws_ok($$ SELECT inbox.configure_ordering('shop', 1, 2) $$, '42883', NULL, 'pointers of the wrong type');
SELECT is((SELECT entity_pointer FROM inbox.provider_ordering WHERE provider = 'shop'), '/a~1b/c~0d/0',
  'a refused change leaves the settings as they were');
SELECT lives_ok($$ SELECT inbox.configure_ordering('shop', NULL, NULL) $$, 'NULL pointers stop ordering');
SELECT is((SELECT count(*)::int FROM inbox.provider_ordering WHERE provider = 'shop'), 0, '... and remove the row');

-- presets
SELECT set_eq($$ SELECT name FROM inbox.provider_presets $$,
  ARRAY['stripe', 'github_issues', 'github_pull_requests', 'shopify', 'slack', 'standard'],
  'a preset for every scheme the receiver verifies');
SELECT is((SELECT retry_window FROM inbox.provider_presets WHERE name = 'stripe'), interval '3 days',
  'Stripe retries for 3 days');
SELECT is((SELECT count(*)::int FROM inbox.provider_presets p,
                  LATERAL inbox._compile_pointer(p.entity_pointer, 'e') e,
                  LATERAL inbox._compile_pointer(p.version_pointer, 'v') v,
                  LATERAL inbox._compile_pointer(p.state_pointer, 's') s), 6, 'every preset pointer compiles');
SELECT lives_ok($$ SELECT inbox.apply_preset('stripe', 'stripe') $$, 'apply_preset stripe');
SELECT row_eq($$ SELECT o.entity_pointer, o.version_pointer, o.state_pointer, o.preset, p.on_lease_expiry
                   FROM inbox.provider_ordering o JOIN inbox.providers p ON p.name = o.provider
                  WHERE o.provider = 'stripe' $$,
  ROW('/data/object/id'::text, '/created'::text, '/data/object/status'::text, 'stripe'::text, 'hold'::text),
  'the preset sets the pointers and holds expired leases');
SELECT lives_ok($$ SELECT inbox.apply_preset('shop', 'shopify') $$, 'apply_preset shopify');
SELECT lives_ok($$ SELECT inbox.apply_preset('plain', 'slack') $$, 'apply_preset slack');
SELECT is((SELECT count(*)::int FROM inbox.provider_ordering WHERE provider = 'plain'), 0,
  'slack: nothing to order, no pointers');
SELECT throws_ok($$ SELECT inbox.apply_preset('stripe', 'paypal') $$, '42704', 'unknown preset ''paypal''',
  'unknown preset');
SELECT throws_ok($$ SELECT inbox.apply_preset('stripe', NULL) $$, '42704', 'unknown preset NULL', 'NULL preset');
SELECT throws_ok($$ SELECT inbox.apply_preset(NULL, 'stripe') $$, '22004', NULL, 'apply_preset: NULL provider');
SELECT throws_ok($$ SELECT inbox.apply_preset('nope', 'stripe') $$, '42704', NULL, 'apply_preset: unknown provider');

-- versions
SELECT is(inbox._version_of('1700000000'), 1700000000::numeric, 'a JSON number as it is');
SELECT is(inbox._version_of('12.50'), 12.50::numeric, 'a fractional JSON number');
SELECT is(inbox._version_of('"42"'), 42::numeric, 'a decimal string');
SELECT is(inbox._version_of('"2026-12-01T14:00:03.123456Z"'),
          extract(epoch FROM timestamptz '2026-12-01 14:00:03.123456+00'), 'RFC 3339: epoch, microseconds exact');
SELECT is(inbox._version_of('"2023-03-29T18:00:27.877041743-04:00"'), 1680127227.877041743,
  'Shopify''s nanoseconds and offset kept exactly');
SELECT is(inbox._version_of('"2011-01-26 19:01:12+01:00"'), extract(epoch FROM timestamptz '2011-01-26 18:01:12+00'),
  'a space for T, an offset');
SELECT ok(inbox._version_of('"2026-12-01T14:00:03.000000001Z"') > inbox._version_of('"2026-12-01T14:00:03Z"'),
  'one nanosecond later orders later');
SELECT is(inbox._version_of('"1969-12-31T23:59:59.25Z"'), -0.75, 'before 1970');
SELECT is(inbox._version_of('"now"'), NULL, '"now" is no version');
SELECT is(inbox._version_of('"2026-12-01T14:00:03"'), NULL, 'no zone: no version');
SELECT is(inbox._version_of('"2026-02-29T00:00:00Z"'), NULL, 'no such day');
SELECT is(inbox._version_of('"2026-12-31T23:59:60Z"'), NULL, 'a leap second');
SELECT is(inbox._version_of('"12/1/26"'), NULL, 'a loose date');
SELECT is(inbox._version_of(to_jsonb(repeat('1', 65))), NULL, 'more than 64 bytes');
SELECT is(inbox._version_of('""'), NULL, 'empty string');
SELECT is(inbox._version_of('"1e9"'), NULL, 'an exponent in a string');
SELECT is(inbox._version_of('true'), NULL, 'a boolean');
SELECT is(inbox._version_of('{"v": 1}'), NULL, 'an object');
SELECT is(inbox._version_of('null'), NULL, 'JSON null');
SELECT is(inbox._version_of(NULL), NULL, 'SQL NULL');
SELECT is(inbox._pointer_scalar('"sub_1"'), 'sub_1', 'a string key');
SELECT is(inbox._pointer_scalar('123'), '123', 'a number key');
SELECT is(inbox._pointer_scalar(to_jsonb(repeat('k', 256))), NULL, 'a key longer than 255 bytes');
SELECT is(inbox._pointer_scalar('[1]'), NULL, 'an array is no key');

-- claim fills entity_key and version from the payload it hands out
SELECT pg_temp.stripe('evt_a2', 'sub_a', 1700000002, 'canceled');
SELECT pg_temp.stripe('evt_a1', 'sub_a', 1700000001, 'active');
SELECT inbox.ingest('shop', 'sh1', '{"admin_graphql_api_id": "gid://shopify/Order/1"}',
                    '{"x-shopify-triggered-at": "2026-12-01T14:00:03.5Z"}');
SELECT inbox.ingest('plain', 'p1', '{"id": "x", "v": 1}');
SELECT inbox.ingest('stripe', 'evt_nover', '{"data": {"object": {"id": "sub_b"}}}');
CREATE TEMP TABLE claimed AS SELECT * FROM inbox.claim(10, '1 hour');
SELECT set_eq($$ SELECT external_id, entity_key, version FROM claimed $$,
  $$ VALUES ('evt_a2', 'sub_a', 1700000002::numeric), ('evt_a1', 'sub_a', 1700000001),
            ('sh1', 'gid://shopify/Order/1', 1796133603.5), ('p1', NULL, NULL), ('evt_nover', 'sub_b', NULL) $$,
  'claim returns entity_key and version: payload pointers, a header, none');
SELECT is((SELECT count(*)::int FROM inbox.events WHERE entity_key IS NOT NULL), 4, '... and stores them');

-- advance
SELECT is(pg_temp.adv('evt_a2'), 'apply', 'the first version of an entity applies');
SELECT row_eq($$ SELECT version, event_id, state FROM inbox.entity_versions WHERE entity_key = 'sub_a' $$,
  ROW(1700000002::numeric, (pg_temp.ev('evt_a2')).id, 'canceled'::text), 'recorded: version, event, state');
SELECT is(pg_temp.adv('evt_a1'), 'stale', 'an older version is stale');
SELECT is(pg_temp.adv('evt_a2'), 'apply', 'the same event again: apply (idempotent)');
SELECT is((SELECT version FROM inbox.entity_versions WHERE entity_key = 'sub_a'), 1700000002::numeric,
  'the stale event changed nothing');
SELECT is(pg_temp.adv('p1'), 'apply', 'no pointers: apply');
SELECT is(pg_temp.adv('evt_nover'), 'apply', 'no version found: apply');
SELECT is((SELECT count(*)::int FROM inbox.entity_versions), 1, '... and nothing recorded for either');
SELECT is(pg_temp.adv('sh1'), 'apply', 'header versions apply');
SELECT pg_temp.stripe('evt_tie', 'sub_a', 1700000002, 'canceled');
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(pg_temp.adv('evt_tie'), 'stale', 'an equal version from another event is stale');
SELECT pg_temp.stripe('evt_a3', 'sub_a', 1700000003, 'active');
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(pg_temp.adv('evt_a3'), 'apply', 'a newer version applies');
SELECT ok(inbox.complete((pg_temp.ev('evt_a3')).id, (pg_temp.ev('evt_a3')).lease_token), 'then completes');
SELECT is(pg_temp.adv('evt_a3'), 'lost', 'advance after complete: lost (nothing to do)');
-- pointers configured after the claim: advance reads them from the payload
SELECT inbox.ingest('plain', 'p2', '{"id": "x", "v": 5}');
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT inbox.configure_ordering('plain', '/id', '/v');
SELECT is(pg_temp.adv('p2'), 'apply', 'advance reads pointers configured after the claim');
SELECT row_eq($$ SELECT entity_key, version FROM inbox.events WHERE external_id = 'p2' $$,
  ROW('x'::text, 5::numeric), '... and stores what it read');
-- a lost lease
SELECT inbox.ingest('plain', 'p3', '{"id": "y", "v": 1}');
CREATE TEMP TABLE old_lease AS SELECT id, lease_token FROM inbox.claim(10, '1 hour') WHERE external_id = 'p3';
UPDATE inbox.events SET lease_expires_at = now() - interval '1 second' WHERE external_id = 'p3';
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(inbox.advance(id, lease_token), 'lost', 'a reclaimed lease: lost') FROM old_lease;
SELECT is((SELECT count(*)::int FROM inbox.entity_versions WHERE entity_key = 'y'), 0, '... records nothing');
-- bad input
SELECT throws_ok($$ SELECT inbox.advance(NULL, gen_random_uuid()) $$, '22004', 'id must not be null', 'NULL id');
SELECT throws_ok($$ SELECT inbox.advance(1, NULL) $$, '22004', 'lease_token must not be null', 'NULL token');
SELECT throws_ok($$ SELECT inbox.advance(1, 'not-a-uuid') $$, '22P02', NULL, 'token of the wrong type');
SELECT throws_ok($$ SELECT inbox.advance('x', gen_random_uuid()) $$, '22P02', NULL, 'id of the wrong type');
SELECT throws_ok($$ SELECT inbox.advance(-1, gen_random_uuid()) $$, 'P0002', 'event -1 does not exist', 'missing event');
SELECT throws_ok(format('SELECT inbox.advance(%s, gen_random_uuid())', (pg_temp.ev('p3')).id), '22023',
  'lease token was never issued for event ' || (pg_temp.ev('p3')).id, 'a token never issued');
-- non-numeric and oversized versions and keys
SELECT inbox.ingest('plain', 'p4', jsonb_build_object('id', 'z', 'v', 'yesterday'));
SELECT inbox.ingest('plain', 'p5', jsonb_build_object('id', repeat('k', 300), 'v', 1));
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(pg_temp.adv('p4'), 'apply', 'a version that is no number or timestamp: apply, unordered');
SELECT is(pg_temp.adv('p5'), 'apply', 'an oversized entity key: apply, unordered');
SELECT is((SELECT count(*)::int FROM inbox.entity_versions WHERE provider = 'plain'), 1,
  '... neither is recorded');

-- transitions
SELECT throws_ok($$ SELECT inbox.set_transitions('plain', '{"a": ["b"]}') $$, '22023',
  'provider plain has no state_pointer', 'rules need a state_pointer');
SELECT throws_ok($$ SELECT inbox.set_transitions(NULL, '{"a": ["b"]}') $$, '22004', NULL, 'set_transitions: NULL provider');
SELECT throws_ok($$ SELECT inbox.set_transitions('nope', '{"a": ["b"]}') $$, '42704', NULL, 'set_transitions: unknown provider');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '["a"]') $$, '22023',
  'transitions must be a non-empty JSON object of arrays', 'not an object');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '{}') $$, '22023', NULL, 'empty object');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '{"a": "b"}') $$, '22023',
  'transitions from ''a'' must be an array of states (1 to 255 bytes each)', 'not an array');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '{"a": [1]}') $$, '22023', NULL, 'a number as a state');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '{"a": [""]}') $$, '22023', NULL, 'an empty state');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', '{"": ["a"]}') $$, '22023', NULL, 'an empty from state');
SELECT throws_ok(format('SELECT inbox.set_transitions(%L, %L)', 'stripe',
  jsonb_build_object('a', (SELECT jsonb_agg(repeat('s', 200) || i) FROM generate_series(1, 400) i))),
  '54000', 'transitions must be at most 64 kB', 'oversized rules');
SELECT lives_ok($$ SELECT inbox.set_transitions('stripe',
  '{"trialing": ["active"], "active": ["past_due", "canceled"], "past_due": ["active"], "*": ["incomplete_expired"]}') $$,
  'rules set');
SELECT throws_ok($$ SELECT inbox.configure_ordering('stripe', '/data/object/id', '/created') $$, '22023',
  'provider stripe has transition rules: they need a state_pointer', 'a state_pointer with rules cannot go');
SELECT ok(inbox._transition_allowed('{"a": ["b"]}', 'a', 'b'), 'a listed transition');
SELECT ok(NOT inbox._transition_allowed('{"a": ["b"]}', 'b', 'a'), 'an unlisted one');
SELECT ok(inbox._transition_allowed('{"*": ["x"]}', 'q', 'x'), '"*" allows from any state');
SELECT ok(inbox._transition_allowed('{"a": ["b"]}', 'c', 'c'), 'an unchanged state');
SELECT ok(inbox._transition_allowed('{"a": ["b"]}', NULL, 'b'), 'the first state of an entity');

-- sub_a was applied as 'active' (evt_a3). active -> past_due applies.
SELECT pg_temp.stripe('evt_a4', 'sub_a', 1700000004, 'past_due');
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(pg_temp.adv('evt_a4'), 'apply', 'an allowed transition applies');
-- Applied under the claim: a concurrent worker moved sub_a to canceled after
-- evt_a5 was claimed. advance refuses, the worker rolls back and fails it.
SELECT pg_temp.stripe('evt_a5', 'sub_a', 1700000006, 'active');
SELECT count(*) FROM inbox.claim(10, '1 hour');
UPDATE inbox.entity_versions SET version = 1700000005, state = 'canceled' WHERE entity_key = 'sub_a';
SELECT throws_ok($$ SELECT pg_temp.adv('evt_a5') $$, '23514',
  'invalid transition from ''canceled'' to ''active'' for event ' || (pg_temp.ev('evt_a5')).id,
  'an invalid transition raises');
SELECT is(inbox.fail((pg_temp.ev('evt_a5')).id, (pg_temp.ev('evt_a5')).lease_token, 'invalid transition'),
  'retry', 'the worker fails it');
UPDATE inbox.events SET next_attempt_at = now() WHERE external_id = 'evt_a5';
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 hour') WHERE external_id = 'evt_a5'), 0,
  'the next claim does not hand it out');
SELECT row_eq($$ SELECT status, held_reason, lease_expires_at FROM inbox.events WHERE external_id = 'evt_a5' $$,
  ROW('processing'::text, 'invalid transition from ''canceled'' to ''active'''::text, 'infinity'::timestamptz),
  'it is held: the reason, a lease that never expires');
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 hour') WHERE external_id = 'evt_a5'), 0,
  'no later claim takes it');
SELECT is((inbox.reconcile('test') ->> 'leases_reclaimed')::int, 0, 'reconcile does not reclaim it');
SELECT inbox.refresh_stats();
SELECT is((SELECT held FROM inbox.stats_minute WHERE provider = 'stripe' ORDER BY minute DESC LIMIT 1), 1,
  'the rollups count it as held (inbox.health shows it)');
-- A person settles it (inbox.resolve): 'retry' sends it back to claim, which
-- judges the transition afresh; 'done' keeps the reason it was held.
SELECT is(inbox.resolve((pg_temp.ev('evt_a5')).id, 'retry', 'state fixed by hand'), 'pending',
  'resolve settles an event a transition rule held');
SELECT row_eq($$ SELECT status, held_reason, lease_expires_at FROM inbox.events WHERE external_id = 'evt_a5' $$,
  ROW('pending'::text, NULL::text, NULL::timestamptz), 'a retry clears the hold');
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 hour') WHERE external_id = 'evt_a5'), 0,
  'still invalid: the next claim holds it again');
SELECT is(inbox.resolve((pg_temp.ev('evt_a5')).id, 'done', 'handled by hand'), 'done', 'then resolved as done');
SELECT row_eq($$ SELECT status, held_reason FROM inbox.events WHERE external_id = 'evt_a5' $$,
  ROW('done'::text, 'invalid transition from ''canceled'' to ''active'''::text),
  'a settled event keeps why it was held');
SELECT is((SELECT array_agg(to_status ORDER BY id) FROM inbox.event_history
            WHERE event_id = (pg_temp.ev('evt_a5')).id AND reason = 'resolve'), ARRAY['pending', 'done'],
  'both resolutions are in the history');
-- older and invalid: stale wins (nothing to apply, nothing to hold)
SELECT pg_temp.stripe('evt_a0', 'sub_a', 1600000000, 'trialing');
SELECT is((SELECT count(*)::int FROM inbox.claim(10, '1 hour') WHERE external_id = 'evt_a0'), 1,
  'an older event is handed out even when its transition would be invalid');
SELECT is(pg_temp.adv('evt_a0'), 'stale', '... and is stale');
-- "*" rules and a new entity
SELECT pg_temp.stripe('evt_a6', 'sub_a', 1700000007, 'incomplete_expired');
SELECT pg_temp.stripe('evt_c1', 'sub_c', 1700000000, 'past_due');
SELECT count(*) FROM inbox.claim(10, '1 hour');
SELECT is(pg_temp.adv('evt_a6'), 'apply', 'a "*" rule allows from canceled');
SELECT is(pg_temp.adv('evt_c1'), 'apply', 'the first state of an entity is not checked');
SELECT lives_ok($$ SELECT inbox.set_transitions('stripe', NULL) $$, 'NULL removes the rules');
SELECT is((SELECT transitions FROM inbox.provider_ordering WHERE provider = 'stripe'), NULL, '... removed');

-- claim from one provider: its pointers decide the statement
SELECT inbox.ingest('plain', 'p6', '{"id": "q", "v": 1}');
SELECT is((SELECT entity_key FROM inbox.claim(10, '1 hour', 'plain')), 'q',
  'a claim from a provider with pointers fills entity_key');
SELECT inbox.configure_ordering('plain', NULL, NULL);
SELECT inbox.ingest('plain', 'p7', '{"id": "q", "v": 2}');
SELECT row_eq($$ SELECT entity_key, version FROM inbox.claim(10, '1 hour', 'plain') $$, ROW(NULL::text, NULL::numeric),
  'a claim from a provider without pointers leaves them NULL');

-- privileges: workers advance, only the owner configures
SELECT pg_temp.stripe('evt_w', 'sub_w', 1, 'active');
SET LOCAL ROLE inbox_worker;
CREATE TEMP TABLE worker_claim AS SELECT id, lease_token FROM inbox.claim(10, '1 hour');
SELECT is((SELECT count(*)::int FROM worker_claim), 1, 'inbox_worker claims the new event');
SELECT is(inbox.advance(id, lease_token), 'apply', 'inbox_worker can advance') FROM worker_claim;
SELECT throws_ok($$ SELECT inbox.configure_ordering('stripe', '/id', '/v') $$, '42501', NULL,
  'inbox_worker cannot configure ordering');
SELECT throws_ok($$ SELECT inbox.apply_preset('stripe', 'stripe') $$, '42501', NULL, 'nor apply a preset');
SELECT throws_ok($$ SELECT inbox.set_transitions('stripe', NULL) $$, '42501', NULL, 'nor set transitions');
SELECT throws_ok($$ SELECT * FROM inbox.entity_versions $$, '42501', NULL, 'nor read entity_versions');
RESET ROLE;
SET LOCAL ROLE inbox_receiver;
SELECT throws_ok($$ SELECT inbox.advance(1, gen_random_uuid()) $$, '42501', NULL, 'inbox_receiver cannot advance');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

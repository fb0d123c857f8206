-- Version checks (issue 12, docs/ordering.md). Per provider, optional JSON
-- pointers (or headers) name an event's entity, its version and its state.
-- claim fills inbox.events.entity_key and .version from them; a worker calls
-- inbox.advance(id, lease_token) in its transaction and gets 'apply' when the
-- event is newer than what was applied for its entity (compare-and-set on
-- inbox.entity_versions), 'stale' when it is not. Optional allowed
-- transitions of the state; an event whose transition is invalid is held.

-- How a provider's events are ordered. The pointers as given, and compiled:
-- a payload pointer as a path for #>, a header as its lower-case name (the
-- receiver stores header names in lower case in inbox.events.headers).
CREATE TABLE inbox.provider_ordering (
    provider        text PRIMARY KEY REFERENCES inbox.providers (name) ON DELETE CASCADE,
    entity_pointer  text NOT NULL,
    version_pointer text NOT NULL,
    state_pointer   text,
    -- {"from state": ["to state", ...], "*": [...]}; NULL: no transition rules
    transitions     jsonb,
    preset          text,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    entity_path     text[],
    entity_header   text,
    version_path    text[],
    version_header  text,
    state_path      text[],
    state_header    text,
    CONSTRAINT provider_ordering_transitions_need_state
      CHECK (transitions IS NULL OR state_pointer IS NOT NULL)
);
COMMENT ON TABLE inbox.provider_ordering IS
  'entity, version and state pointers of a provider (inbox.configure_ordering, inbox.apply_preset)';

-- What was applied last for each entity: advance's compare-and-set.
CREATE TABLE inbox.entity_versions (
    provider   text NOT NULL,
    entity_key text NOT NULL,
    version    numeric NOT NULL,
    event_id   bigint NOT NULL,
    state      text,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, entity_key)
);
COMMENT ON TABLE inbox.entity_versions IS
  'per entity, the newest version inbox.advance answered apply for (and its event and state)';

-- Settings known to fit the providers the receiver verifies: built in, a
-- function and a view like the checks (71_checks.sql), so a dump never
-- carries them. The lead's retention work reads retry_window (dedup must
-- outlast the retries).
CREATE FUNCTION inbox._preset_definitions()
RETURNS TABLE (name text, entity_pointer text, version_pointer text, state_pointer text,
               retry_window interval, on_lease_expiry text, note text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT * FROM (VALUES
  ('stripe', '/data/object/id', '/created', '/data/object/status', interval '3 days', 'hold',
   'created is the event''s creation time in whole seconds: two events of one object in the same second '
   'tie, and the second one advanced is stale (fetch the object when that matters). Objects without a '
   'status carry no state. Stripe retries for up to 3 days in live mode. Money moves: hold expired leases.'),
  ('github_issues', '/issue/id', '/issue/updated_at', '/issue/state', '3 days', 'reclaim',
   'issues and issue_comment events, ordered by the issue''s updated_at (whole seconds: same-second edits '
   'tie). Other event families carry no /issue and are never stale. GitHub does not retry on its own; '
   'failed deliveries can be redelivered for 3 days.'),
  ('github_pull_requests', '/pull_request/id', '/pull_request/updated_at', '/pull_request/state', '3 days',
   'reclaim',
   'pull_request and pull_request_review events, ordered by the pull request''s updated_at (whole seconds). '
   'Other event families are never stale. Failed deliveries can be redelivered for 3 days.'),
  ('shopify', '/admin_graphql_api_id', 'header:X-Shopify-Triggered-At', NULL, '48 hours', 'hold',
   'The resource''s global id (gid://shopify/Order/1, unique across resource kinds) ordered by the time '
   'Shopify triggered the webhook (fractional seconds). Resources without admin_graphql_api_id are never '
   'stale. Shopify documents 8 retries over 4 hours (formerly 19 over 48 hours): the window keeps 48 hours. '
   'Orders and payments: hold expired leases.'),
  ('slack', NULL, NULL, NULL, '1 hour', 'reclaim',
   'Events API events are facts (a message, a reaction), not updates of one entity: nothing to order, and '
   'no pointers are set. Slack retries 3 times within about an hour.'),
  ('standard', NULL, '/timestamp', NULL, '28 hours', 'reclaim',
   'Standard Webhooks payloads carry the event time in /timestamp, but the entity is the sender''s own: '
   'set entity_pointer with inbox.configure_ordering (for example /data/id). Not the webhook-timestamp '
   'header: it is the time of the attempt, not of the event. The spec fixes no retry schedule; Svix''s '
   'spans about 27 hours.')
) v
$$;

CREATE VIEW inbox.provider_presets AS SELECT * FROM inbox._preset_definitions();
COMMENT ON VIEW inbox.provider_presets IS
  'ordering pointers, retry window and lease policy per provider kind (inbox.apply_preset)';

-- A pointer as claim evaluates it: NULL for NULL, else a payload path or a
-- header name. Raises on anything else.
--   /a/b~1c/0      RFC 6901 JSON pointer into the payload (~1 is "/", ~0 is "~")
--   header:Name    a request header (matched case-insensitively)
CREATE FUNCTION inbox._compile_pointer(pointer text, what text, OUT path text[], OUT header text)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    token text;
BEGIN
    IF pointer IS NULL THEN
        RETURN;
    END IF;
    IF pointer = '' OR octet_length(pointer) > 256 THEN
        RAISE EXCEPTION '% must be 1 to 256 bytes, not %', what, octet_length(pointer)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pointer LIKE 'header:%' THEN
        header := substr(pointer, 8);
        IF header !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]{1,64}$' THEN
            RAISE EXCEPTION '% names no valid header: %', what, quote_literal(pointer)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A header is named like header:X-Shopify-Triggered-At.';
        END IF;
        header := lower(header);
        RETURN;
    END IF;
    IF left(pointer, 1) <> '/' THEN
        RAISE EXCEPTION '% must be a JSON pointer or header:Name, not %', what, quote_literal(pointer)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A JSON pointer starts with "/": /data/object/id, not data.object.id.';
    END IF;
    IF pointer ~ '~([^01]|$)' THEN
        RAISE EXCEPTION '% is a malformed JSON pointer: % (~ must be followed by 0 or 1)',
            what, quote_literal(pointer) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    path := '{}';
    FOREACH token IN ARRAY string_to_array(substr(pointer, 2), '/') LOOP
        path := path || replace(replace(token, '~1', '/'), '~0', '~');
    END LOOP;
    IF cardinality(path) > 32 THEN
        RAISE EXCEPTION '% is deeper than 32 levels', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The text a pointer found, when it is a string or a number of at most 255
-- bytes; NULL for anything else (missing, null, an object, too long).
CREATE FUNCTION inbox._pointer_scalar(value jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_pointer_scalar'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The version a pointer found: a JSON number as it is; a string holding a
-- decimal as that number, or an RFC 3339 timestamp as its Unix epoch in
-- seconds (every fractional digit kept); NULL for anything else.
CREATE FUNCTION inbox._version_of(value jsonb)
RETURNS numeric
AS 'MODULE_PATHNAME', 'inbox_version_of'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Whether a state may follow another: always when there are no rules, when
-- either state is unknown or when the state does not change; otherwise the
-- rules must list it under the from state or under "*".
CREATE FUNCTION inbox._transition_allowed(transitions jsonb, from_state text, to_state text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT transitions IS NULL OR from_state IS NULL OR to_state IS NULL OR from_state = to_state
        OR coalesce(transitions -> from_state, '[]') ? to_state
        OR coalesce(transitions -> '*', '[]') ? to_state
$$;

-- Why claim must hold an event rather than hand it out: its state does not
-- follow the applied state of its entity, and it is newer (so advance would
-- raise). NULL when it may be handed out. Only for providers with rules.
CREATE FUNCTION inbox._held_transition(e inbox.events, o inbox.provider_ordering)
RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format('invalid transition from %s to %s', quote_literal(v.state), quote_literal(s.state))
      FROM (SELECT inbox._pointer_scalar(coalesce(e.payload #> o.entity_path, e.headers -> o.entity_header)) AS entity_key,
                   inbox._version_of(coalesce(e.payload #> o.version_path, e.headers -> o.version_header)) AS version,
                   inbox._pointer_scalar(coalesce(e.payload #> o.state_path, e.headers -> o.state_header)) AS state) s
      JOIN inbox.entity_versions v ON v.provider = e.provider AND v.entity_key = s.entity_key
     WHERE (v.version < s.version OR v.event_id = e.id)
       AND NOT inbox._transition_allowed(o.transitions, v.state, s.state)
$$;

-- Sets (or, with entity_pointer and version_pointer NULL, removes) how a
-- provider's events are ordered. Keeps its transition rules.
CREATE FUNCTION inbox.configure_ordering(
    provider text,
    entity_pointer text,
    version_pointer text,
    state_pointer text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    entity record;
    version record;
    state record;
BEGIN
    PERFORM inbox._require_provider(provider);
    entity := inbox._compile_pointer(entity_pointer, 'entity_pointer');
    version := inbox._compile_pointer(version_pointer, 'version_pointer');
    state := inbox._compile_pointer(state_pointer, 'state_pointer');
    IF (entity_pointer IS NULL) <> (version_pointer IS NULL) THEN
        RAISE EXCEPTION 'entity_pointer and version_pointer go together'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set both, or both NULL to stop ordering the provider''s events.';
    END IF;
    IF entity_pointer IS NULL THEN
        IF state_pointer IS NOT NULL THEN
            RAISE EXCEPTION 'state_pointer needs entity_pointer and version_pointer'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        DELETE FROM inbox.provider_ordering o WHERE o.provider = configure_ordering.provider;
        RETURN;
    END IF;
    INSERT INTO inbox.provider_ordering AS o
           (provider, entity_pointer, version_pointer, state_pointer, entity_path, entity_header,
            version_path, version_header, state_path, state_header)
    VALUES (configure_ordering.provider, configure_ordering.entity_pointer,
            configure_ordering.version_pointer, configure_ordering.state_pointer,
            entity.path, entity.header, version.path, version.header, state.path, state.header)
    ON CONFLICT ON CONSTRAINT provider_ordering_pkey DO UPDATE
       SET entity_pointer = EXCLUDED.entity_pointer, version_pointer = EXCLUDED.version_pointer,
           state_pointer = EXCLUDED.state_pointer, entity_path = EXCLUDED.entity_path,
           entity_header = EXCLUDED.entity_header, version_path = EXCLUDED.version_path,
           version_header = EXCLUDED.version_header, state_path = EXCLUDED.state_path,
           state_header = EXCLUDED.state_header, preset = NULL, updated_at = now();
EXCEPTION WHEN check_violation THEN
    RAISE EXCEPTION 'provider % has transition rules: they need a state_pointer', provider
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Remove them first: SELECT inbox.set_transitions(provider, NULL);';
END
$$;

-- Sets (or, with NULL, removes) the allowed transitions of a provider's
-- states: {"active": ["past_due", "canceled"], "*": ["canceled"]}.
CREATE FUNCTION inbox.set_transitions(provider text, transitions jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    from_state text;
    targets jsonb;
BEGIN
    PERFORM inbox._require_provider(provider);
    IF transitions IS NOT NULL THEN
        IF jsonb_typeof(transitions) <> 'object' OR transitions = '{}' THEN
            RAISE EXCEPTION 'transitions must be a non-empty JSON object of arrays'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'For example {"active": ["past_due", "canceled"]}; NULL removes the rules.';
        END IF;
        IF octet_length(transitions::text) > 65536 THEN
            RAISE EXCEPTION 'transitions must be at most 64 kB' USING ERRCODE = 'program_limit_exceeded';
        END IF;
        FOR from_state, targets IN SELECT * FROM jsonb_each(transitions) LOOP
            IF from_state = '' OR octet_length(from_state) > 255 OR jsonb_typeof(targets) <> 'array'
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(targets) t
                           WHERE jsonb_typeof(t) <> 'string' OR t #>> '{}' = ''
                              OR octet_length(t #>> '{}') > 255) THEN
                RAISE EXCEPTION 'transitions from % must be an array of states (1 to 255 bytes each)',
                    quote_literal(from_state) USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    UPDATE inbox.provider_ordering o SET transitions = set_transitions.transitions, updated_at = now()
     WHERE o.provider = set_transitions.provider AND o.state_pointer IS NOT NULL;
    IF NOT FOUND AND transitions IS NOT NULL THEN
        RAISE EXCEPTION 'provider % has no state_pointer', provider
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set one first: inbox.configure_ordering(provider, entity, version, state).';
    END IF;
END
$$;

-- Applies a preset: its pointers (or none) and its lease policy.
CREATE FUNCTION inbox.apply_preset(provider text, preset text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p inbox.provider_presets;
BEGIN
    PERFORM inbox._require_provider(provider);
    SELECT * INTO p FROM inbox.provider_presets pp WHERE pp.name = preset;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown preset %', coalesce(quote_literal(preset), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'One of: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM inbox.provider_presets);
    END IF;
    IF p.entity_pointer IS NULL THEN
        -- Nothing to order by (slack), or an entity only the user knows (standard):
        -- keep what the user configured.
        UPDATE inbox.provider_ordering o SET preset = p.name, updated_at = now()
         WHERE o.provider = apply_preset.provider;
    ELSE
        PERFORM inbox.configure_ordering(provider, p.entity_pointer, p.version_pointer, p.state_pointer);
        UPDATE inbox.provider_ordering o SET preset = p.name WHERE o.provider = apply_preset.provider;
    END IF;
    UPDATE inbox.providers pr SET on_lease_expiry = p.on_lease_expiry WHERE pr.name = provider;
END
$$;

CREATE FUNCTION inbox.advance(id bigint, lease_token uuid)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_advance'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.advance(bigint, uuid) IS
  'In the worker''s transaction: apply (newer than what was applied for its entity, recorded), stale, or lost';

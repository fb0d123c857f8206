-- Least privilege. Two group roles (NOLOGIN; grant them to login roles),
-- created in 00_schema.sql so every part may grant to them:
--   inbox_receiver  may only ingest;
--   inbox_worker    may only claim, complete, fail and advance, and drain
--                   the backfill queue (the backfill worker's functions).
-- Neither touches a table directly: every function they call is SECURITY
-- DEFINER with a fixed search_path.

REVOKE ALL ON SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA inbox FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC;

-- inbox_worker first: 0.1.0 granted it before inbox_receiver, and an upgraded
-- database must keep the same ACL as a fresh install.
GRANT USAGE ON SCHEMA inbox TO inbox_worker, inbox_receiver;
GRANT EXECUTE ON FUNCTION
    inbox.ingest(text, text, jsonb, jsonb, text, bytea, text),
    inbox.ingest_batch(text[], text[], jsonb[], jsonb[], text, bytea[], text[])
  TO inbox_receiver;
GRANT EXECUTE ON FUNCTION
    inbox.claim(int, interval, text),
    inbox.complete(bigint, uuid),
    inbox.complete_batch(bigint[], uuid[]),
    inbox.fail(bigint, uuid, text, interval),
    inbox.claim_backfill(int, interval, text),
    inbox.backfill_fetched(bigint, uuid, jsonb, jsonb),
    inbox.backfill_not_found(bigint, uuid, text),
    inbox.backfill_failed(bigint, uuid, text, interval, int),
    inbox.add_listed(text, text[], timestamptz),
    inbox.advance(bigint, uuid)
  TO inbox_worker;

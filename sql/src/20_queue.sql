-- Processing: claim with a lease, then complete or fail, fenced by the lease token.
-- complete, complete_batch and fail keep their plans like ingest and run with
-- enable_seqscan = off for the same reason (10_ingest.sql); claim sets its
-- own settings per statement (a claim naming a provider is planned per
-- call, to see the provider and the limit). How claim and complete_batch hold
-- while the statistics have not seen the table grow: extension/queue.cpp.

CREATE FUNCTION inbox.claim(
    max_rows int DEFAULT 50,
    lease interval DEFAULT NULL,
    provider text DEFAULT NULL)
RETURNS SETOF inbox.events
AS 'MODULE_PATHNAME', 'inbox_claim_0_2'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
ROWS 50;
COMMENT ON FUNCTION inbox.claim(int, interval, text) IS
  'Lease up to max_rows due events (oldest first, not ordered); lease NULL = pg_inbox.default_lease';

CREATE FUNCTION inbox.complete(id bigint, lease_token uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'inbox_complete'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.complete(bigint, uuid) IS
  'Mark a leased event done; false when the lease was lost to another claim';

CREATE FUNCTION inbox.complete_batch(ids bigint[], lease_tokens uuid[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'inbox_complete_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.complete_batch(bigint[], uuid[]) IS
  'complete() for many events in one statement; one result per element, in input order';

CREATE FUNCTION inbox.fail(
    id bigint,
    lease_token uuid,
    error text,
    retry_after interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_fail'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off;
COMMENT ON FUNCTION inbox.fail(bigint, uuid, text, interval) IS
  'Record a failed attempt: retry (with backoff), dead (attempts used up) or lost (lease lost)';

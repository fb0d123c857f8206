-- Tail listing (docs/receiver/backfill.md#tail-listing-for-sequence-sources).
-- Gap detection of a sequence source sees only the numbers below the highest
-- one received: a tail that never arrived is invisible to it. The check
-- sequence_tail_silence notices that the high mark stopped rising; while it
-- fires, the backfill worker asks the provider's list API for the ids after
-- the highest one received and raises the source's high mark with what the
-- provider reports. The next inbox.scan_gaps then records the missing tail
-- as gaps, and backfill fetches them like any other gap.

-- The id of a number ('ord-{n:8}', 42: 'ord-00000042'), and the number of
-- an id (NULL when it is not of the pattern: another prefix, not digits,
-- fewer digits than the width, over 18), with the grammar the scans use
-- (extension/gaps_ids.cpp).
CREATE FUNCTION inbox._sequence_id(pattern text, number bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'inbox_sequence_id'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION inbox._sequence_number(pattern text, external_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'inbox_sequence_number'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- When the provider's sequence_tail_silence check is firing: one row with the
-- highest number received and its external id, for the one caller that
-- claims the provider's tail-listing window of length `every` (job
-- 'list-tail:<provider>' in inbox.job_windows). No row otherwise: no firing
-- check, no sequence source or nothing received yet (no window is used up),
-- or another replica claimed this window.
CREATE FUNCTION inbox.claim_tail_listing(provider text, every interval)
RETURNS TABLE (high_number bigint, after_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 1 AS $$
DECLARE
    this_window timestamptz;
    s inbox.gap_sources;
BEGIN
    PERFORM inbox._require_provider(provider);
    this_window := inbox._list_window(every);
    SELECT * INTO s FROM inbox.gap_sources g
     WHERE g.provider = claim_tail_listing.provider AND g.kind = 'sequence' AND g.high_number IS NOT NULL
       AND EXISTS (SELECT 1 FROM inbox.anomalies a
                    WHERE a.check_name = 'sequence_tail_silence' AND a.provider = claim_tail_listing.provider
                      AND a.resolved_at IS NULL);
    IF NOT FOUND OR NOT inbox._claim_list_window('list-tail:' || provider, this_window) THEN
        RETURN;
    END IF;
    high_number := s.high_number;
    after_id := inbox._sequence_id(s.pattern, s.high_number);
    RETURN NEXT;
END
$$;

-- Raises the high mark of a sequence source to the highest of
-- `external_ids` (ids the provider's list API reported), never lowers it.
-- Ids not of the source's pattern (another prefix, not digits, over 18
-- digits) and numbers over 1,000,000 above the current high mark (a list
-- API gone wrong must not make the scans record a billion gaps) are ignored
-- and counted. Returns the high mark after the call and how many ids were
-- ignored.
CREATE FUNCTION inbox.raise_sequence_high(provider text, external_ids text[])
RETURNS TABLE (high_number bigint, ignored int)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp ROWS 1 AS $$
DECLARE
    s inbox.gap_sources;
    top bigint;
BEGIN
    IF provider IS NULL OR external_ids IS NULL THEN
        RAISE EXCEPTION 'provider and external_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM inbox._require_provider(provider);
    PERFORM inbox._require_listed_ids(external_ids);
    -- Locked: a concurrent raise waits, and so does a scan saving its progress.
    SELECT * INTO s FROM inbox.gap_sources g WHERE g.provider = raise_sequence_high.provider FOR UPDATE;
    IF NOT FOUND OR s.kind <> 'sequence' THEN
        RAISE EXCEPTION 'provider "%" has no sequence id source', provider
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT inbox.set_id_source(provider, ''sequence'', ''evt_{n}'');';
    END IF;
    SELECT max(n.number) FILTER (WHERE n.number <= s.high_number + 1000000 OR s.high_number IS NULL),
           count(*) FILTER (WHERE n.number IS NULL OR n.number > s.high_number + 1000000)
      INTO top, ignored
      FROM (SELECT inbox._sequence_number(s.pattern, x) AS number FROM unnest(external_ids) x) n;
    IF top > s.high_number OR (s.high_number IS NULL AND top IS NOT NULL) THEN
        UPDATE inbox.gap_sources g SET high_number = top WHERE g.provider = s.provider;
        s.high_number := top;
    END IF;
    high_number := s.high_number;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION inbox._sequence_id(text, bigint), inbox._sequence_number(text, text),
    inbox.claim_tail_listing(text, interval),
    inbox.raise_sequence_high(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.claim_tail_listing(text, interval), inbox.raise_sequence_high(text, text[])
  TO inbox_worker;

-- A gap source that was never scanned: the check run works, and
-- gap_scan_stale sees the scan as infinitely old (out of range), not an error.
BEGIN;
SELECT plan(3);

SELECT inbox.register_provider('t_never_scanned');
SELECT inbox.set_id_source('t_never_scanned', 'listed');
SELECT inbox.refresh_stats();

SELECT lives_ok($$SELECT inbox.run_checks()$$, 'run_checks works while a gap source was never scanned');
SELECT is((SELECT value FROM inbox.check_results WHERE check_name = 'gap_scan_stale'
            ORDER BY evaluated_at DESC LIMIT 1), 'Infinity'::float8, 'the scan counts as infinitely old');
SELECT ok((SELECT out_of_range FROM inbox.check_results WHERE check_name = 'gap_scan_stale'
            ORDER BY evaluated_at DESC LIMIT 1), 'and out of range');

SELECT * FROM finish();
ROLLBACK;

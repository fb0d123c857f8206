-- Learned bands: the C++ math (band, hysteresis step, histograms) on its own,
-- then the three learned checks in both directions, the same-hour-of-week
-- preference, the 7-day fallback, the sample minimum and the overrides.
BEGIN;
SELECT plan(46);

-- The band: median +- k * max(1.4826 * MAD, sqrt(median), 1).
SELECT is(inbox._check_band(ARRAY[10, 10, 10, 10, 10]::float8[], 2, 3), ARRAY[10 - 2 * sqrt(10), 10 + 2 * sqrt(10), 10]::float8[],
          'a flat history: the Poisson floor, not a zero-width band');
SELECT is(ARRAY(SELECT round(x::numeric, 6) FROM unnest(inbox._check_band(ARRAY[100, 110, 90, 100, 130, 70, 100]::float8[], 3, 3)) x),
          ARRAY[55.522, 144.478, 100]::numeric[], 'a noisy history: median 100, MAD 10, so 100 +- 3 * 14.826');
SELECT is(inbox._check_band(ARRAY[1, 2]::float8[], 3, 3), NULL, 'fewer samples than the minimum: no band');
SELECT is(inbox._check_band(ARRAY[1, NULL, 'NaN', 3]::float8[], 3, 3), NULL, 'NULL and NaN samples do not count');
SELECT is(inbox._check_band('{}'::float8[], 3, 1), NULL, 'no samples: no band');
SELECT is(inbox._check_band(ARRAY[5]::float8[], NULL, 1), NULL, 'NULL k: NULL');
SELECT throws_ok($$SELECT inbox._check_band(ARRAY[1]::float8[], 3, 0)$$, '22023', 'min_samples must be at least 1', 'band: min_samples 0');
SELECT throws_ok($$SELECT inbox._check_band(array_fill(1::float8, ARRAY[100001]), 3, 1)$$, '54000', NULL, 'band: oversized history');
SELECT throws_ok($$SELECT inbox._check_band(ARRAY[[1, 2], [3, 4]]::float8[], 3, 1)$$, '2202E', NULL, 'band: two dimensions');

-- The step: {firing, ok_streak, started, resolved}.
SELECT is(inbox._check_step(false, ARRAY[false, false, true], 0, 2, 3), ARRAY[0, 0, 0, 0], '1 of 3 out: not firing (M=2)');
SELECT is(inbox._check_step(false, ARRAY[true, false, true], 0, 2, 3), ARRAY[1, 0, 1, 0], '2 of 3 out: starts firing');
SELECT is(inbox._check_step(false, ARRAY[true, true, false], 0, 2, 3), ARRAY[0, 1, 0, 0], 'not while this one is in range');
SELECT is(inbox._check_step(true, ARRAY[true, false], 1, 2, 3), ARRAY[1, 2, 0, 0], 'firing, 2 in range of K=3: still firing');
SELECT is(inbox._check_step(true, ARRAY[false], 2, 2, 3), ARRAY[0, 3, 0, 1], '3 in range: resolved');
SELECT is(inbox._check_step(true, ARRAY[false, true], 2, 2, 3), ARRAY[1, 0, 0, 0], 'an out-of-range one restarts the count');
SELECT throws_ok($$SELECT inbox._check_step(false, ARRAY[true], 0, 0, 3)$$, '22023', NULL, 'step: M 0');
SELECT throws_ok($$SELECT inbox._check_step(false, array_fill(true, ARRAY[65]), 0, 1, 3)$$, '54000', NULL, 'step: 65 evaluations');
SELECT is(inbox._check_step(NULL, ARRAY[true], 0, 1, 1), NULL, 'step: NULL state is NULL');

-- Histograms: four buckets per doubling of milliseconds.
SELECT is(inbox._hist_bucket(0), 1, 'zero lands in the first bucket');
SELECT is(inbox._hist_bucket(1.0), 40, 'one second: bucket 40 (below 2^10 ms)');
SELECT is(inbox._hist_bucket(1e12), 120, 'forever lands in the last bucket');
SELECT is(round(inbox._hist_percentile(ARRAY[0, 0, 10], 0.5)::numeric, 9), round((2 ^ 0.75 / 1000)::numeric, 9), 'percentile: upper edge of its bucket');
SELECT is(round(inbox._hist_percentile(ARRAY[90, 0, 10], 0.95)::numeric, 9), round((2 ^ 0.75 / 1000)::numeric, 9), 'p95 of 90 fast and 10 slow is slow');
SELECT is(round(inbox._hist_percentile(ARRAY[95, 0, 5], 0.95)::numeric, 9), round((2 ^ 0.25 / 1000)::numeric, 9), 'p95 of 95 fast and 5 slow is fast');
SELECT is(inbox._hist_percentile(ARRAY[0, 0], 0.5), NULL, 'an empty histogram has no percentile');
SELECT throws_ok($$SELECT inbox._hist_percentile(ARRAY[1], 0)$$, '22023', 'q must be in (0, 1]', 'percentile: q 0');
SELECT throws_ok($$SELECT inbox._hist_percentile(array_fill(1, ARRAY[121]), 0.5)$$, '54000', NULL, 'percentile: 121 buckets');
SELECT is(inbox._hist_add(ARRAY[1, 2], ARRAY[1, 1, 1]), ARRAY[2, 3, 1], 'histograms add bucket by bucket');
SELECT is(inbox._hist_add(NULL, ARRAY[1]), ARRAY[1], 'a missing histogram adds nothing');
SELECT throws_ok($$SELECT inbox._hist_add(array_fill(1, ARRAY[121]), ARRAY[1])$$, '54000', NULL, 'hist_add: 121 buckets');
SELECT throws_ok($$SELECT inbox._hist_add(ARRAY[2147483647], ARRAY[1])$$, '22003', NULL, 'hist_add: overflow');
SELECT is((SELECT inbox._hist_sum(h) FROM (VALUES (ARRAY[1, 0]), (ARRAY[0, 2]), (NULL)) v(h)), ARRAY[1, 2],
          'the sum of a window');
SELECT throws_ok($$SELECT inbox._check_samples('x', 'payload', now(), 1)$$, '22023', 'no samples for payload',
                 'samples of a column that is not a learnable metric');

-- Eight days of history: 8..12 arrivals and processed a minute, 20 waiting.
CREATE FUNCTION pg_temp.history(p text, t timestamptz, days int) RETURNS void LANGUAGE sql AS $$
    SELECT inbox.register_provider(p);
    INSERT INTO inbox.stats_minute (provider, minute, arrivals, processed, backlog)
    SELECT p, t - m * interval '1 minute', 8 + m % 5, 8 + m % 5, 20
      FROM generate_series(0, days * 1440) m;
$$;
SELECT pg_temp.history(name, '2026-01-05 12:00:00+00', 8)
  FROM unnest(ARRAY['steady', 'silent', 'spike', 'stalled', 'fixed', 'wide']) name;
SELECT pg_temp.history('young', '2026-01-05 12:00:00+00', 0);
UPDATE inbox.stats_minute SET arrivals = 2
 WHERE provider IN ('silent', 'fixed', 'wide') AND minute >= '2026-01-05 11:45:00+00';
UPDATE inbox.stats_minute SET arrivals = 100 WHERE provider = 'spike' AND minute >= '2026-01-05 11:45:00+00';
UPDATE inbox.stats_minute SET processed = 0, backlog = 500 WHERE provider = 'stalled' AND minute >= '2026-01-05 11:45:00+00';
SELECT inbox.configure_check(name, fire_after => 1, window_size => 1, resolve_after => 1) FROM inbox.checks;
SELECT inbox.configure_check('arrivals_low', 'fixed', mode => 'fixed', min_value => 1);
SELECT inbox.configure_check('arrivals_low', 'wide', k => 100);
SELECT inbox.run_checks('2026-01-05 12:00:00+00');

CREATE FUNCTION pg_temp.state(c text, p text) RETURNS text LANGUAGE sql AS $$
    SELECT state FROM inbox.check_state WHERE check_name = c AND provider = p
$$;
SELECT is(pg_temp.state('arrivals_low', 'steady'), 'ok', 'arrivals_low: quiet on steady traffic');
SELECT is(pg_temp.state('arrivals_spike', 'steady'), 'ok', 'arrivals_spike: quiet on steady traffic');
SELECT is(pg_temp.state('processing_rate_drop', 'steady'), 'ok', 'processing_rate_drop: quiet on steady traffic');
SELECT is(pg_temp.state('arrivals_low', 'silent'), 'firing', 'arrivals_low: fires when arrivals fall below the band');
SELECT is(pg_temp.state('arrivals_spike', 'silent'), 'ok', '... and arrivals_spike does not');
SELECT is(pg_temp.state('arrivals_spike', 'spike'), 'firing', 'arrivals_spike: fires on ten times the usual');
SELECT is(pg_temp.state('arrivals_low', 'spike'), 'ok', '... and arrivals_low does not');
SELECT is(pg_temp.state('processing_rate_drop', 'stalled'), 'firing', 'processing_rate_drop: fires when processing stops');
SELECT is(pg_temp.state('arrivals_low', 'young'), 'no_data', 'an hour of history is too little to learn from');
SELECT is(pg_temp.state('arrivals_low', 'fixed'), 'ok', 'a fixed range overrides the learned one for a provider');
SELECT is(pg_temp.state('arrivals_low', 'wide'), 'ok', 'so does a wider k');
SELECT ok((SELECT range_lo FROM inbox.check_state WHERE check_name = 'arrivals_low' AND provider = 'steady')
          BETWEEN 100 AND 150, 'the learned lower bound sits below the usual 150 a window');

-- Same hour of the week beats the last 7 days: a provider busy every
-- Monday noon is not a spike on a Monday noon.
SELECT inbox.register_provider('weekly');
INSERT INTO inbox.stats_minute (provider, minute, arrivals)
SELECT 'weekly', m, CASE WHEN extract(isodow FROM m) = 1 AND extract(hour FROM m) BETWEEN 11 AND 12 THEN 100 ELSE 10 END
  FROM generate_series(timestamptz '2026-01-05 12:00:00+00' - interval '29 days', '2026-01-05 12:00:00+00', interval '1 minute') m;
SELECT inbox.run_checks('2026-01-05 12:01:00+00');
SELECT is(pg_temp.state('arrivals_spike', 'weekly'), 'ok', 'the usual Monday noon rush is not a spike');

SELECT * FROM finish();
ROLLBACK;

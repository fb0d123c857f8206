-- Data in every state a 0.1.0 installation can hold, written through the
-- 0.1.0 API only: the upgrade must leave all of it exactly as it was.
SELECT inbox.register_provider('stripe', max_attempts => 2);
SELECT inbox.register_provider('github', on_lease_expiry => 'hold');
SELECT inbox.register_provider('seq');

-- pending, re-delivered, processing (leased), done, dead, failed-and-retrying
SELECT inbox.ingest('stripe', 'evt_' || i, jsonb_build_object('i', i), '{"h": "v"}')
  FROM generate_series(1, 12) i;
SELECT inbox.ingest('stripe', 'evt_1', '{"i": 1, "again": true}');
SELECT inbox.complete(id, lease_token) FROM inbox.claim(3, '1 hour', 'stripe');
SELECT inbox.fail(id, lease_token, 'HTTP 500 from the mailer', '1 second') FROM inbox.claim(2, '1 hour', 'stripe');
SELECT count(*) FROM inbox.claim(2, '1 hour', 'stripe');          -- left processing, leases live
UPDATE inbox.events SET next_attempt_at = now() - interval '1 minute' WHERE status = 'pending';
SELECT inbox.fail(id, lease_token, 'gone') FROM inbox.claim(1, '1 hour', 'stripe')
 WHERE attempts >= 1;                                               -- may reach dead at max_attempts 2
SELECT inbox.complete_batch(array_agg(id), array_agg(lease_token)) FROM inbox.claim(1, '1 hour', 'stripe');

-- an expired lease of a 'hold' provider, recorded by reconcile
SELECT inbox.ingest('github', 'gh_' || i, jsonb_build_object('i', i)) FROM generate_series(1, 3) i;
SELECT count(*) FROM inbox.claim(1, '1 second', 'github');
SELECT pg_sleep(1.1);
SELECT inbox.reconcile('upgrade-test');

-- gaps, tombstones, backfill requests, listed ids
SELECT inbox.set_id_source('seq', 'sequence', pattern => 'evt_{n}', start_at => 1, grace => '0 seconds');
SELECT inbox.ingest('seq', 'evt_' || i, '{}') FROM generate_series(1, 20) i WHERE i % 4 <> 0;
SELECT inbox.tombstone('seq', 'evt_8', 'draft, never sent');
SELECT inbox.scan_gaps('seq');
SELECT inbox.scan_gaps('seq');
SELECT inbox.set_id_source('github', 'listed');
SELECT inbox.add_listed('github', ARRAY['gh_1', 'gh_9']);
SELECT inbox.run_job('scan_gaps', '5 minutes');

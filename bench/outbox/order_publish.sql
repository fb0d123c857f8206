\set n random(1, 1000000)
BEGIN;
INSERT INTO bench_outbox.orders (customer, amount, note) VALUES ('cus_' || :n, :n, repeat('x', 500));
SELECT inbox.publish('bench.receipts', 'cus_' || :n,
                     jsonb_build_object('customer', 'cus_' || :n, 'amount', :n, 'note', repeat('x', 500)));
COMMIT;

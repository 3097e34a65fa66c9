-- pgbench: the rows of one create (the nonce, the payment, an outbox row) in one
-- transaction, through the real schema (its triggers included).
\set n random(1, 2000000000)
BEGIN;
INSERT INTO nonces (project_id, nonce, expires_at) VALUES ('bench', 'n-' || :client_id || '-' || :n || '-' || random(), 0);
INSERT INTO payments (id, project_id, merchant_payment_id, flow, status, amount, initial_amount, currency, geo_code, payment_method, is_intrabank, created_at, updated_at, expires_at, version, fingerprint, due_at) VALUES (gen_random_uuid()::text, 'bench', 'o-' || :client_id || '-' || :n || '-' || random(), 'runtime_live', 'created', '1500', '1500', 'RUB', 'RU', 'sbp', false, 1, 1, 1, 1, '{"amount":"1500"}', 1);
INSERT INTO outbox_events (event_id, payment_id, project_id, status, kind, body, created_at, destination, state, attempts, max_attempts, next_attempt_at) VALUES (gen_random_uuid()::text, 'p', 'bench', 'created', 'automatic', '\x7b7d'::bytea, 1, 'https://merchant.example/cb', 'pending', 0, 3, 1);
COMMIT;

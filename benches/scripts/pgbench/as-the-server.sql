-- pgbench: the same writes as the server's create: the nonce and the payment in one
-- statement, then the payment's update to processing (two durable commits).
\set n random(1, 2000000000)
WITH n AS (INSERT INTO nonces (project_id, nonce, expires_at) VALUES ('bench', 'n-' || :client_id || '-' || :n, 0) ON CONFLICT DO NOTHING RETURNING 1) INSERT INTO payments (id, project_id, merchant_payment_id, flow, status, amount, initial_amount, currency, geo_code, payment_method, is_intrabank, created_at, updated_at, expires_at, version, fingerprint, due_at) SELECT 'b-' || :client_id || '-' || :n, 'bench', 'o-' || :client_id || '-' || :n, 'runtime_live', 'created', '1500', '1500', 'RUB', 'RU', 'sbp', false, 1, 1, 1, 1, '{"amount":"1500"}', 1 FROM n ON CONFLICT DO NOTHING;
UPDATE payments SET status = 'processing', version = 2, requisite = '2200123456789010', holder_name = 'I. I.', course = '92.5', fee_percent = '2.5' WHERE id = 'b-' || :client_id || '-' || :n AND version = 1;

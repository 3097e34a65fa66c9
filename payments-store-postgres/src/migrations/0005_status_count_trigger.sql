-- Schema version 5: the payment status counts' trigger, cheaper (an expand migration: the
-- counts, their table and their meaning stay; nodes of the previous build keep running).
--
-- Version 2's trigger fired for every UPDATE that names `status` (every payment update does)
-- and called an SQL function once per changed count. Measured on PostgreSQL 15, the counting
-- cost about 100 us of the database's CPU per create, half of what the create's own rows
-- cost (about 200 us; docs/performance.md). Now:
-- * the UPDATE trigger fires only when the status really changes (a WHEN condition, so no
--   PL/pgSQL call at all otherwise), which needs one trigger per event;
-- * the function upserts the counts itself (its plans are cached per backend), and a status
--   change moves both counts in one statement, in status order as before, so that two
--   opposite transitions never wait on each other.
-- Replacing the trigger in this migration's transaction locks the table against writes until
-- it commits: no change is counted twice or missed.

CREATE OR REPLACE FUNCTION payments_count() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_shard SMALLINT := (pg_backend_pid() % 16)::SMALLINT;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO payment_status_counts AS c (status, shard, n)
            VALUES (NEW.status, my_shard, 1)
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + 1;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO payment_status_counts AS c (status, shard, n)
            VALUES (OLD.status, my_shard, -1)
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n - 1;
    ELSIF OLD.status <> NEW.status THEN
        INSERT INTO payment_status_counts AS c (status, shard, n)
            SELECT v.s, my_shard, v.d
            FROM (VALUES (OLD.status, -1::BIGINT), (NEW.status, 1::BIGINT)) AS v (s, d)
            ORDER BY v.s
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER payments_count ON payments;
CREATE TRIGGER payments_count_insert AFTER INSERT ON payments
    FOR EACH ROW EXECUTE FUNCTION payments_count();
CREATE TRIGGER payments_count_update AFTER UPDATE OF status ON payments
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payments_count();
CREATE TRIGGER payments_count_delete AFTER DELETE ON payments
    FOR EACH ROW EXECUTE FUNCTION payments_count();

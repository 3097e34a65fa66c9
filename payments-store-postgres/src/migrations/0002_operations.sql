-- Schema version 2: what operations need (docs/operations.md). Expand only: a node of the
-- previous build keeps working on it (min_reader stays 1).

-- A failed event answered by a manual resend names the resend; the failed list and its
-- metric show only unanswered failures, through a partial index.
ALTER TABLE outbox_events ADD COLUMN resent_by TEXT;
CREATE INDEX outbox_events_failed ON outbox_events (seq)
    WHERE state = 'failed' AND resent_by IS NULL;
CREATE INDEX outbox_events_failed_payment ON outbox_events (payment_id)
    WHERE state = 'failed' AND resent_by IS NULL;
-- The age of the oldest pending event (a metric), and retention of finished events.
CREATE INDEX outbox_events_pending_age ON outbox_events (created_at) WHERE state = 'pending';
CREATE INDEX outbox_events_finished ON outbox_events (created_at, seq) WHERE state <> 'pending';
-- Retention of the audit trail.
CREATE INDEX audit_at ON audit (at, seq);

-- The start of the receiver's response to an attempt (at most 512 bytes).
ALTER TABLE delivery_attempts ADD COLUMN response_excerpt TEXT;

-- Payments per status, kept by a trigger as payments are written, so a metrics scrape sums a
-- few rows instead of counting every payment. One status has several counter rows (shards,
-- picked by the writing connection's backend process id), so that concurrent creates on
-- different connections do not queue on one row lock until they commit; the count of a
-- status is the sum of its rows.
CREATE TABLE payment_status_counts (
    status TEXT     NOT NULL,
    shard  SMALLINT NOT NULL,
    n      BIGINT   NOT NULL,
    PRIMARY KEY (status, shard)
);

CREATE FUNCTION payment_status_count_add(s TEXT, d BIGINT) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO payment_status_counts (status, shard, n)
        VALUES (s, (pg_backend_pid() % 16)::SMALLINT, d)
        ON CONFLICT (status, shard) DO UPDATE SET n = payment_status_counts.n + EXCLUDED.n;
$$;

CREATE FUNCTION payments_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM payment_status_count_add(NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM payment_status_count_add(OLD.status, -1);
    ELSIF OLD.status <> NEW.status THEN
        -- Both rows in status order: two opposite transitions never wait on each other.
        IF OLD.status < NEW.status THEN
            PERFORM payment_status_count_add(OLD.status, -1);
            PERFORM payment_status_count_add(NEW.status, 1);
        ELSE
            PERFORM payment_status_count_add(NEW.status, 1);
            PERFORM payment_status_count_add(OLD.status, -1);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

-- The trigger first: creating it locks the table against writes until this migration
-- commits, so the counts taken next miss no payment and count none twice.
CREATE TRIGGER payments_count AFTER INSERT OR DELETE OR UPDATE OF status ON payments
    FOR EACH ROW EXECUTE FUNCTION payments_count();
INSERT INTO payment_status_counts (status, shard, n)
    SELECT status, 0, count(*) FROM payments GROUP BY status;

-- Named operator tokens (the single token of version 1 lives on in settings until replaced).
CREATE TABLE operator_tokens (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id         TEXT   NOT NULL PRIMARY KEY,
    name       TEXT   NOT NULL,
    hash       BYTEA  NOT NULL UNIQUE,
    prefix     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);

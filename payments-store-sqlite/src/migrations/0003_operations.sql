-- v3: what operations need (docs/operations.md).

-- A failed event answered by a manual resend names the resend; the failed list and its
-- metric show only unanswered failures, through a partial index.
ALTER TABLE outbox_events ADD COLUMN resent_by TEXT;
CREATE INDEX outbox_events_failed ON outbox_events (seq)
    WHERE state = 'failed' AND resent_by IS NULL;
-- The age of the oldest pending event (a metric), and retention of finished events.
CREATE INDEX outbox_events_pending_age ON outbox_events (created_at) WHERE state = 'pending';
CREATE INDEX outbox_events_finished ON outbox_events (created_at) WHERE state <> 'pending';
-- Retention of the audit trail.
CREATE INDEX audit_at ON audit (at);

-- Payments per status, kept by triggers as payments are written, so a metrics scrape reads
-- six rows instead of counting every payment.
CREATE TABLE payment_status_counts (
    status TEXT    NOT NULL PRIMARY KEY,
    n      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO payment_status_counts (status, n)
    SELECT status, count(*) FROM payments GROUP BY status;
CREATE TRIGGER payments_count_insert AFTER INSERT ON payments BEGIN
    INSERT INTO payment_status_counts (status, n) VALUES (NEW.status, 1)
        ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER payments_count_update AFTER UPDATE OF status ON payments
    WHEN OLD.status <> NEW.status BEGIN
    UPDATE payment_status_counts SET n = n - 1 WHERE status = OLD.status;
    INSERT INTO payment_status_counts (status, n) VALUES (NEW.status, 1)
        ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER payments_count_delete AFTER DELETE ON payments BEGIN
    UPDATE payment_status_counts SET n = n - 1 WHERE status = OLD.status;
END;

-- Named operator tokens (the single token of v1 and v2 lives on in settings until replaced).
CREATE TABLE operator_tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,
    prefix     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER
);

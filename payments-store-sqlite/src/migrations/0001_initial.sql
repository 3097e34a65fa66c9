-- Schema version 1. Ids are lower-case hyphenated UUID text, times are unix milliseconds,
-- amounts and other decimals are decimal text (never floats).

CREATE TABLE payments (
    id                  TEXT    NOT NULL PRIMARY KEY,
    project_id          TEXT    NOT NULL,
    merchant_payment_id TEXT    NOT NULL,
    flow                TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    amount              TEXT    NOT NULL,
    initial_amount      TEXT    NOT NULL,
    currency            TEXT    NOT NULL,
    geo_code            TEXT    NOT NULL,
    payment_method      TEXT    NOT NULL,
    is_intrabank        INTEGER NOT NULL,
    bank_code           TEXT,
    callback_url        TEXT,
    requisite           TEXT,
    holder_name         TEXT,
    requisite_bank      TEXT,
    qrcode_link         TEXT,
    deeplink_url        TEXT,
    course              TEXT,
    fee_percent         TEXT,
    error_code          TEXT,
    error_comment       TEXT,
    appeal_from         TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    version             INTEGER NOT NULL,
    fingerprint         TEXT    NOT NULL,
    -- Payment::due_at(), written with every insert and update.
    due_at              INTEGER
);
-- The idempotency key: decides concurrent inserts.
CREATE UNIQUE INDEX payments_merchant_id ON payments (project_id, merchant_payment_id);
-- The sweeper's schedule: only payments that are due at all are indexed.
CREATE INDEX payments_due ON payments (due_at, id) WHERE due_at IS NOT NULL;

CREATE TABLE nonces (
    project_id TEXT    NOT NULL,
    nonce      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, nonce)
) WITHOUT ROWID;
CREATE INDEX nonces_expiry ON nonces (expires_at);

CREATE TABLE outbox_events (
    -- Queueing order: breaks ties between equal next_attempt_at.
    seq             INTEGER PRIMARY KEY,
    event_id        TEXT    NOT NULL UNIQUE,
    payment_id      TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    -- The frozen JSON body, byte for byte what every attempt sends.
    body            BLOB    NOT NULL,
    created_at      INTEGER NOT NULL,
    destination     TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    next_attempt_at INTEGER
);
CREATE INDEX outbox_events_due ON outbox_events (next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX outbox_events_payment ON outbox_events (payment_id, seq);

CREATE TABLE delivery_attempts (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    http_status INTEGER,
    error       TEXT,
    success     INTEGER NOT NULL
);
CREATE INDEX delivery_attempts_event ON delivery_attempts (event_id, seq);

CREATE TABLE merchants (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    paused       INTEGER NOT NULL,
    callback_url TEXT,
    created_at   INTEGER NOT NULL
);

CREATE TABLE projects (
    id                 TEXT    NOT NULL PRIMARY KEY,
    merchant_id        TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    active             INTEGER NOT NULL,
    test_mode          INTEGER NOT NULL,
    lifetime_secs      INTEGER NOT NULL,
    lifetime_nanos     INTEGER NOT NULL,
    -- {"currencies": [..], "methods": [{"method", "min_amount", "max_amount", "fee_percent"}]}
    contract           TEXT    NOT NULL,
    callback_url       TEXT,
    -- JSON array of strings.
    ip_allow_list      TEXT    NOT NULL,
    signature_required INTEGER NOT NULL,
    rate_per_second    INTEGER NOT NULL,
    rate_burst         INTEGER NOT NULL,
    created_at         INTEGER NOT NULL
);

CREATE TABLE tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    project_id TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,
    prefix     TEXT    NOT NULL,
    -- Scope wire names separated by single spaces.
    scopes     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX tokens_project ON tokens (project_id);

CREATE TABLE signing_keys (
    project_id TEXT    NOT NULL,
    keyid      TEXT    NOT NULL,
    public_key BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    PRIMARY KEY (project_id, keyid)
);

CREATE TABLE callback_secrets (
    seq        INTEGER PRIMARY KEY,
    project_id TEXT    NOT NULL,
    secret     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revealed   INTEGER NOT NULL
);
CREATE INDEX callback_secrets_project ON callback_secrets (project_id, seq);

CREATE TABLE settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE audit (
    seq    INTEGER PRIMARY KEY,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    action TEXT    NOT NULL,
    target TEXT    NOT NULL,
    before_state TEXT,
    after_state  TEXT
);

-- Schema version 1 (the SQLite layout of schema version 3, in PostgreSQL types). Ids are
-- lower-case hyphenated UUID text, times are unix milliseconds (BIGINT), amounts and other
-- decimals are decimal text (never floats), so the scale is kept as received.

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
    is_intrabank        BOOLEAN NOT NULL,
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
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL,
    expires_at          BIGINT  NOT NULL,
    version             BIGINT  NOT NULL,
    fingerprint         TEXT    NOT NULL,
    -- Payment::due_at(), written with every insert and update.
    due_at              BIGINT,
    -- The idempotency key: decides concurrent inserts, on any node.
    CONSTRAINT payments_merchant_id UNIQUE (project_id, merchant_payment_id)
);
-- The sweeper's schedule: only payments that are due at all are indexed.
CREATE INDEX payments_due ON payments (due_at, id) WHERE due_at IS NOT NULL;

CREATE TABLE nonces (
    project_id TEXT   NOT NULL,
    nonce      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, nonce)
);
CREATE INDEX nonces_expiry ON nonces (expires_at);

CREATE TABLE outbox_events (
    -- Queueing order: breaks ties between equal next_attempt_at.
    seq             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        TEXT    NOT NULL UNIQUE,
    payment_id      TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    -- The frozen JSON body, byte for byte what every attempt sends.
    body            BYTEA   NOT NULL,
    created_at      BIGINT  NOT NULL,
    destination     TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    next_attempt_at BIGINT,
    -- The lease fencing token: incremented by every claim.
    lease_token     BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX outbox_events_due ON outbox_events (next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX outbox_events_payment ON outbox_events (payment_id, seq);

CREATE TABLE delivery_attempts (
    seq         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  BIGINT  NOT NULL,
    duration_ms BIGINT  NOT NULL,
    http_status INTEGER,
    error       TEXT,
    success     BOOLEAN NOT NULL
);
CREATE INDEX delivery_attempts_event ON delivery_attempts (event_id, seq);

CREATE TABLE merchants (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    paused       BOOLEAN NOT NULL,
    callback_url TEXT,
    created_at   BIGINT  NOT NULL
);

CREATE TABLE projects (
    id                 TEXT    NOT NULL PRIMARY KEY,
    merchant_id        TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    active             BOOLEAN NOT NULL,
    test_mode          BOOLEAN NOT NULL,
    lifetime_secs      BIGINT  NOT NULL,
    lifetime_nanos     INTEGER NOT NULL,
    -- {"currencies": [..], "methods": [{"method", "min_amount", "max_amount", "fee_percent"}]}
    contract           TEXT    NOT NULL,
    callback_url       TEXT,
    -- JSON array of strings.
    ip_allow_list      TEXT    NOT NULL,
    signature_required BOOLEAN NOT NULL,
    rate_per_second    BIGINT  NOT NULL,
    rate_burst         BIGINT  NOT NULL,
    created_at         BIGINT  NOT NULL,
    paused             BOOLEAN NOT NULL DEFAULT false
);

CREATE TABLE tokens (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id         TEXT   NOT NULL PRIMARY KEY,
    project_id TEXT   NOT NULL,
    hash       BYTEA  NOT NULL UNIQUE,
    prefix     TEXT   NOT NULL,
    -- Scope wire names separated by single spaces.
    scopes     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX tokens_project ON tokens (project_id, seq);

CREATE TABLE signing_keys (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    project_id TEXT   NOT NULL,
    keyid      TEXT   NOT NULL,
    public_key BYTEA  NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    PRIMARY KEY (project_id, keyid)
);
CREATE INDEX signing_keys_keyid ON signing_keys (keyid);

CREATE TABLE callback_secrets (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id TEXT    NOT NULL,
    secret     TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    revealed   BOOLEAN NOT NULL
);
CREATE INDEX callback_secrets_project ON callback_secrets (project_id, seq);

CREATE TABLE settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE audit (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           BIGINT NOT NULL,
    actor        TEXT   NOT NULL,
    action       TEXT   NOT NULL,
    target       TEXT   NOT NULL,
    before_state TEXT,
    after_state  TEXT
);

-- The global per-project rate limit: one theoretical arrival time (GCRA, microseconds) per
-- project. UNLOGGED: no WAL, no flush at commit; after a crash of the database it is empty,
-- which only hands every project one fresh burst.
CREATE UNLOGGED TABLE rate_limits (
    project_id TEXT   NOT NULL PRIMARY KEY,
    tat        BIGINT NOT NULL
);

-- Turns of periodic background work shared by the nodes (sweeper, nonce purge): a task runs
-- on the node that took its turn until `until`.
CREATE TABLE task_turns (
    task  TEXT   NOT NULL PRIMARY KEY,
    until BIGINT NOT NULL
);

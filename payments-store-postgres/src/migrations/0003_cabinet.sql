-- Schema version 3: the web cabinet (users, TOTP, recovery codes, sessions, invitations,
-- sign-in failures, its audit log, token use) and what its pages list: a project's payments
-- and callback events newest first. Expand only (min_reader stays 1).

CREATE INDEX payments_project_created ON payments (project_id, created_at, id);
CREATE INDEX outbox_events_project_created ON outbox_events (project_id, created_at, event_id);

CREATE TABLE cabinet_users (
    id                TEXT    NOT NULL PRIMARY KEY,
    -- Lower-case; the sign-in name.
    email             TEXT    NOT NULL UNIQUE,
    -- 'merchant' (with merchant_id) or 'support'.
    role              TEXT    NOT NULL CHECK (role IN ('merchant', 'support')),
    merchant_id       TEXT,
    -- argon2id PHC string.
    password_hash     TEXT,
    -- Sealed like callback secrets.
    totp_secret       TEXT,
    totp_confirmed_at BIGINT,
    -- The last TOTP time step used to sign in: moved forward only.
    totp_last_step    BIGINT,
    disabled          BOOLEAN NOT NULL,
    created_at        BIGINT  NOT NULL,
    CHECK ((role = 'merchant') = (merchant_id IS NOT NULL))
);

CREATE TABLE cabinet_recovery_codes (
    user_id   TEXT  NOT NULL,
    -- SHA-256 of the code.
    code_hash BYTEA NOT NULL,
    PRIMARY KEY (user_id, code_hash)
);

CREATE TABLE cabinet_sessions (
    id           TEXT   NOT NULL PRIMARY KEY,
    -- SHA-256 of the cookie; the cookie itself is never stored.
    token_hash   BYTEA  NOT NULL UNIQUE,
    user_id      TEXT   NOT NULL,
    stage        TEXT   NOT NULL CHECK (stage IN ('password', 'full')),
    created_at   BIGINT NOT NULL,
    signed_in_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    address      TEXT,
    user_agent   TEXT
);
CREATE INDEX cabinet_sessions_user ON cabinet_sessions (user_id, created_at);
CREATE INDEX cabinet_sessions_last_seen ON cabinet_sessions (last_seen_at);
CREATE INDEX cabinet_sessions_signed_in ON cabinet_sessions (signed_in_at);

CREATE TABLE cabinet_invites (
    token_hash BYTEA  NOT NULL PRIMARY KEY,
    user_id    TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX cabinet_invites_user ON cabinet_invites (user_id);

CREATE TABLE cabinet_failures (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key TEXT   NOT NULL,
    at  BIGINT NOT NULL
);
CREATE INDEX cabinet_failures_key ON cabinet_failures (key, at);
CREATE INDEX cabinet_failures_at ON cabinet_failures (at);

CREATE TABLE cabinet_audit (
    seq         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          BIGINT  NOT NULL,
    user_id     TEXT,
    email       TEXT    NOT NULL,
    address     TEXT,
    merchant_id TEXT,
    project_id  TEXT,
    action      TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    success     BOOLEAN NOT NULL,
    detail      TEXT
);
CREATE INDEX cabinet_audit_merchant ON cabinet_audit (merchant_id, seq);

CREATE TABLE token_use (
    token_id     TEXT   NOT NULL PRIMARY KEY,
    last_used_at BIGINT NOT NULL
);

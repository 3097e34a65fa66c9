-- v6: the hosted payer page. A project turns it on and picks its language; each payment gets
-- one link, looked up by the SHA-256 of its token. The token is kept beside it so that the
-- payment's GET can carry the link again (it opens a read-only view of what the payments
-- table holds in clear anyway).
ALTER TABLE projects ADD COLUMN payer_page INTEGER NOT NULL DEFAULT 0 CHECK (payer_page IN (0, 1));
ALTER TABLE projects ADD COLUMN payer_language TEXT NOT NULL DEFAULT 'ru'
    CHECK (payer_language IN ('ru', 'en'));

CREATE TABLE payment_pages (
    payment_id TEXT NOT NULL PRIMARY KEY,
    token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    token TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

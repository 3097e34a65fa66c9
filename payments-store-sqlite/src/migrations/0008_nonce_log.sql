-- v8: request nonces as an append-only log. The table keyed by (project_id, nonce) put every
-- nonce, a random string, on a random page of its B-tree: each create dirtied a page of its
-- own, and the commit wrote that page to the WAL (and a checkpoint to the database again) for
-- a row of about 80 bytes. Rows of this log are appended in order, so the nonces of one group
-- commit share a page or two. Whether a nonce is used is answered by an index the writer
-- connection keeps in its temporary database, filled from this log when the store opens and
-- brought up to date from it whenever another connection has committed (see nonces.rs).
--
-- `nonces` stays, for keys kept longer than an hour (the upstream's notification ids, 30
-- days): few, and not worth the memory. Rows already in it stay there until they expire.
--
-- A new row's seq is max(seq) + 1, and the purge never deletes the newest row, so a sequence
-- number is never reused and "rows after the last one seen" finds every row another
-- connection appended. No expiry index: the purge deletes from the oldest end.
CREATE TABLE nonce_log (
    seq        INTEGER PRIMARY KEY,
    project_id TEXT    NOT NULL,
    nonce      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);

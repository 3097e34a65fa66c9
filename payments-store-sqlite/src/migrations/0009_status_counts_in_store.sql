-- v9: the per-status payment counts are kept by the store's two statements that write
-- payments (the insert and the versioned update, payments.rs), no longer by triggers. A trigger
-- makes the payment's INSERT (and a status-changing UPDATE) a statement that writes two
-- tables and may fail halfway, so SQLite gives it a statement journal: a copy of every page
-- it touches, written to a temporary file once one statement of the transaction has passed
-- 64 KiB. That was about 1.3 `pwrite` per create and 10 % of the create rate.
--
-- The delete trigger stays: the store never deletes a payment, and one removed by hand is
-- still uncounted. A payment inserted or changed by hand (or by a server of schema 8 still
-- running while this migration is applied) is not counted: docs/runbooks/restore.md gives
-- the statement that counts them all again.
DROP TRIGGER IF EXISTS payments_count_insert;
DROP TRIGGER IF EXISTS payments_count_update;

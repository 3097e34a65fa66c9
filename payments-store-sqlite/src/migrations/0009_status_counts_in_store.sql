-- v9: the per-status payment counts are kept by the store's two statements that write
-- payments (the insert and the versioned update, payments.rs), no longer by triggers. A trigger
-- makes the payment's INSERT (and a status-changing UPDATE) a statement that writes two
-- tables and may fail halfway, so SQLite gives it a statement journal: a copy of every page
-- it touches, written to a temporary file once one statement of the transaction has passed
-- 64 KiB. That was about 1.3 `pwrite` per create and 10 % of the create rate.
--
-- The delete trigger stays: the store never deletes a payment, and one removed by hand is
-- still uncounted.
DROP TRIGGER payments_count_insert;
DROP TRIGGER payments_count_update;

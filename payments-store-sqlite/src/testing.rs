//! Test support (feature `testing`): the way back to an early schema for upgrade tests. Not for
//! production code.

/// Takes a migrated database back to version 2, the schema of the first releases: what every
/// later migration adds is dropped. Every new migration extends it (the upgrade tests of this
/// crate and of the server run it, then open the store or run `payments-server migrate`).
pub const DOWNGRADE_TO_VERSION_2: &str = "
    DROP INDEX payments_project_mpid_key; ALTER TABLE payments DROP COLUMN merchant_payment_id_key;
    ALTER TABLE payments DROP COLUMN requisite_digest;
    DROP INDEX payments_project_amount_key; ALTER TABLE payments DROP COLUMN amount_key;
    DROP TABLE appeal_receipts; DROP TABLE appeals;
    DROP TABLE payment_history;
    DROP TRIGGER payments_metadata_insert; DROP TABLE payment_metadata;
    DROP INDEX outbox_events_project_state;
    ALTER TABLE tokens DROP COLUMN expires_at; ALTER TABLE tokens DROP COLUMN name;
    DROP TABLE request_log_writes; DROP TABLE request_log;
    DROP INDEX payments_project_last4;
    ALTER TABLE payments DROP COLUMN requisite_last4; ALTER TABLE projects DROP COLUMN return_url;
    DROP TABLE cabinet_slots;
    DROP TABLE ledger_entries; DROP TABLE ledger_balances;
    ALTER TABLE payments DROP COLUMN route_reason; ALTER TABLE payments DROP COLUMN provider;
    ALTER TABLE payments DROP COLUMN metadata;
    DROP INDEX payments_project_status; DROP INDEX payments_project_method;
    DROP INDEX payments_project_flow;
    INSERT INTO nonces (project_id, nonce, expires_at)
        SELECT project_id, nonce, max(expires_at) FROM nonce_log
        WHERE true GROUP BY project_id, nonce
        ON CONFLICT (project_id, nonce)
        DO UPDATE SET expires_at = max(nonces.expires_at, excluded.expires_at);
    DROP TABLE nonce_log;
    DROP TRIGGER merchants_version_insert; DROP TRIGGER merchants_version_update;
    DROP TRIGGER merchants_version_delete; DROP TRIGGER projects_version_insert;
    DROP TRIGGER projects_version_update; DROP TRIGGER projects_version_delete;
    DROP TRIGGER tokens_version_insert; DROP TRIGGER tokens_version_update;
    DROP TRIGGER tokens_version_delete; DROP TRIGGER signing_keys_version_insert;
    DROP TRIGGER signing_keys_version_update; DROP TRIGGER signing_keys_version_delete;
    DROP TABLE directory_version;
    DROP TABLE payment_pages; ALTER TABLE projects DROP COLUMN payer_page;
    ALTER TABLE projects DROP COLUMN payer_language;
    DROP TABLE token_use; DROP TABLE cabinet_audit; DROP TABLE cabinet_failures;
    DROP TABLE cabinet_invites; DROP TABLE cabinet_sessions;
    DROP TABLE cabinet_recovery_codes; DROP TABLE cabinet_users;
    DROP INDEX payments_project_created; DROP INDEX outbox_events_project_created;
    ALTER TABLE delivery_attempts DROP COLUMN response_excerpt;
    DROP TRIGGER payments_count_delete; DROP TABLE payment_status_counts;
    DROP TABLE operator_tokens; DROP INDEX outbox_events_failed;
    DROP INDEX outbox_events_pending_age; DROP INDEX outbox_events_finished;
    DROP INDEX audit_at; ALTER TABLE outbox_events DROP COLUMN resent_by;
    ALTER TABLE outbox_events DROP COLUMN lease_token;
    PRAGMA user_version = 2;";

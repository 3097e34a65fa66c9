//! The statements both engines run, written once (see [`crate::sql`] for the dialect seam).
//! A statement that only one engine runs, or whose SQL really differs, lives in its backend.

use payments_cabinet::store::{
    CabinetAuditRecord, InviteRecord, SessionProof, SessionRecord, SlotRecord, UserRecord,
};
use payments_core::clock::Timestamp;
use payments_core::event::{DeliveryAttempt, OutboxEvent};
use payments_core::history::StatusChange;
use payments_core::ids::{EventId, UserId};
use payments_core::payer::PaymentPageRecord;
use payments_core::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use payments_core::store::{AttemptRecorded, LeaseToken, StoreError};

use crate::record::{
    Record, ATTEMPT_ROW_COLUMNS, PAYMENT_COLUMNS, PAYMENT_IMMUTABLE, PAYMENT_NCOLS,
    SECRET_ROW_COLUMNS,
};
use crate::sealing::SEALED_COLUMNS;
use crate::sql::{insert, list, select, upsert, Dialect, Sql};
use crate::value::SqlValue;

// --- merchants and projects ------------------------------------------------------------------

/// Inserts or replaces a merchant: [`Merchant::values`](Record::values).
pub static MERCHANT_PUT: Sql = Sql::new(|_| upsert("merchants", Merchant::COLUMNS, "id"));
/// A merchant by id (`$1`).
pub static MERCHANT: Sql = Sql::new(|_| select(Merchant::COLUMNS, "merchants", "WHERE id = $1"));
/// Every merchant by id.
pub static MERCHANTS: Sql = Sql::new(|_| select(Merchant::COLUMNS, "merchants", "ORDER BY id"));
/// Inserts or replaces a project.
pub static PROJECT_PUT: Sql = Sql::new(|_| upsert("projects", Project::COLUMNS, "id"));
/// A project by id (`$1`).
pub static PROJECT: Sql = Sql::new(|_| select(Project::COLUMNS, "projects", "WHERE id = $1"));
/// Every project by id.
pub static PROJECTS: Sql = Sql::new(|_| select(Project::COLUMNS, "projects", "ORDER BY id"));

// --- tokens and keys -------------------------------------------------------------------------

/// Stores a token.
pub static TOKEN_INSERT: Sql = Sql::new(|_| insert("tokens", TokenRecord::COLUMNS));
/// A token by hash (`$1`).
pub static TOKEN_BY_HASH: Sql =
    Sql::new(|_| select(TokenRecord::COLUMNS, "tokens", "WHERE hash = $1"));
/// A project's (`$1`) tokens in issue order.
pub static TOKENS: Sql = Sql::new(|d| {
    select(
        TokenRecord::COLUMNS,
        "tokens",
        &format!("WHERE project_id = $1 ORDER BY {}", d.insertion_order()),
    )
});
/// Revokes token `$2` of project `$3` at `$1`, keeping the first revocation time.
pub static TOKEN_REVOKE: Sql = Sql::new(|_| {
    "UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2 AND project_id = $3"
        .to_string()
});
/// Registers a key.
pub static KEY_INSERT: Sql = Sql::new(|_| insert("signing_keys", KeyRecord::COLUMNS));
/// Project `$1`'s key `$2`.
pub static KEY: Sql = Sql::new(|_| {
    select(
        KeyRecord::COLUMNS,
        "signing_keys",
        "WHERE project_id = $1 AND keyid = $2",
    )
});
/// A project's (`$1`) keys in registration order.
pub static KEYS: Sql = Sql::new(|d| {
    select(
        KeyRecord::COLUMNS,
        "signing_keys",
        &format!("WHERE project_id = $1 ORDER BY {}", d.insertion_order()),
    )
});
/// The projects holding an unrevoked key with id `$1`.
pub static ACTIVE_KEY_PROJECTS: Sql = Sql::new(|_| {
    "SELECT project_id FROM signing_keys WHERE keyid = $1 AND revoked_at IS NULL".to_string()
});
/// Revokes project `$2`'s key `$3` at `$1`, keeping the first revocation time.
pub static KEY_REVOKE: Sql = Sql::new(|_| {
    "UPDATE signing_keys SET revoked_at = coalesce(revoked_at, $1) \
     WHERE project_id = $2 AND keyid = $3"
        .to_string()
});

// --- callback secrets ------------------------------------------------------------------------

/// A project's (`$1`) secrets, newest first.
pub static SECRETS: Sql = Sql::new(|_| {
    select(
        SecretRecord::COLUMNS,
        "callback_secrets",
        "WHERE project_id = $1 ORDER BY seq DESC",
    )
});
/// Adds a secret: [`crate::record::secret_values`].
pub static SECRET_INSERT: Sql = Sql::new(|_| insert("callback_secrets", SECRET_ROW_COLUMNS));
/// Deletes all but project `$1`'s two newest secrets.
pub static SECRET_TRIM: Sql = Sql::new(|_| {
    "DELETE FROM callback_secrets WHERE project_id = $1 AND seq NOT IN \
     (SELECT seq FROM callback_secrets WHERE project_id = $1 ORDER BY seq DESC LIMIT 2)"
        .to_string()
});
/// Replaces project `$1`'s secret stored as `$2` with `$3`.
pub static SECRET_REPLACE: Sql = Sql::new(|_| {
    "UPDATE callback_secrets SET secret = $3 WHERE project_id = $1 AND secret = $2".to_string()
});

// --- operator tokens, settings, the audit trail ----------------------------------------------

/// Stores an operator token.
pub static OPERATOR_TOKEN_INSERT: Sql =
    Sql::new(|_| insert("operator_tokens", OperatorTokenRecord::COLUMNS));
/// An operator token by hash (`$1`).
pub static OPERATOR_TOKEN_BY_HASH: Sql = Sql::new(|_| {
    select(
        OperatorTokenRecord::COLUMNS,
        "operator_tokens",
        "WHERE hash = $1",
    )
});
/// Every operator token in issue order.
pub static OPERATOR_TOKENS: Sql = Sql::new(|d| {
    select(
        OperatorTokenRecord::COLUMNS,
        "operator_tokens",
        &format!("ORDER BY {}", d.insertion_order()),
    )
});
/// Ends operator token `$2` at `$1` unless it ends earlier already.
pub static OPERATOR_TOKEN_EXPIRE: Sql = Sql::new(|d| {
    format!(
        "UPDATE operator_tokens SET expires_at = {}(coalesce(expires_at, $1), $1) WHERE id = $2",
        d.least()
    )
});
/// A setting's (`$1`) value.
pub static SETTING: Sql = Sql::new(|_| "SELECT value FROM settings WHERE name = $1".to_string());
/// Sets setting `$1` to `$2`.
pub static SETTING_PUT: Sql = Sql::new(|_| upsert("settings", &["name", "value"], "name"));
/// Appends an audit record.
pub static AUDIT_INSERT: Sql = Sql::new(|_| insert("audit", AuditRecord::COLUMNS));
/// Appends an entry of a payment's status history (in its change's transaction). Its key,
/// `(payment_id, version)`, refuses a second entry for one version: a second check of the
/// payment's version beside the update's.
pub static HISTORY_INSERT: Sql = Sql::new(|_| insert("payment_history", StatusChange::COLUMNS));

/// [`HISTORY_INSERT`], or with the planted bug `unchecked-status-version` (feature
/// `planted-bugs`) an insert that skips an entry whose version is taken: the bug is a lost
/// update, and the history's key would otherwise refuse the second writer's change.
pub fn history_insert() -> &'static Sql {
    #[cfg(feature = "planted-bugs")]
    if payments_core::planted::active(payments_core::planted::Bug::UncheckedStatusVersion) {
        return &HISTORY_INSERT_PLANTED;
    }
    &HISTORY_INSERT
}

/// The history insert of the planted bug `unchecked-status-version`.
#[cfg(feature = "planted-bugs")]
static HISTORY_INSERT_PLANTED: Sql = Sql::new(|_| {
    format!(
        "{} ON CONFLICT DO NOTHING",
        insert("payment_history", StatusChange::COLUMNS)
    )
});
/// Payment `$1`'s recorded status changes, oldest first (its primary key's order).
pub static HISTORY_OF_PAYMENT: Sql = Sql::new(|_| {
    select(
        StatusChange::COLUMNS,
        "payment_history",
        "WHERE payment_id = $1 ORDER BY version",
    )
});
/// The newest `$1` audit records, newest first.
pub static AUDIT_NEWEST: Sql =
    Sql::new(|_| select(AuditRecord::COLUMNS, "audit", "ORDER BY seq DESC LIMIT $1"));
/// The next `$2` audit records after sequence number `$1` (`seq`, `before_state`,
/// `after_state`), in order: what `callback-secret reseal` reads to mask requisites that
/// records written before masking copied in clear.
pub static AUDIT_STATES_PAGE: Sql = Sql::new(|_| {
    "SELECT seq, before_state, after_state FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2"
        .to_string()
});
/// Sets audit record `$1`'s states to `$2` (before) and `$3` (after).
pub static AUDIT_STATES_MASK: Sql =
    Sql::new(|_| "UPDATE audit SET before_state = $2, after_state = $3 WHERE seq = $1".to_string());
/// Deletes at most `$2` of the oldest audit records written before `$1` (rows another purge
/// holds are skipped).
pub static AUDIT_PURGE: Sql = Sql::new(|d| {
    format!(
        "DELETE FROM audit WHERE seq IN \
         (SELECT seq FROM audit WHERE at < $1 ORDER BY at, seq LIMIT $2{})",
        d.skip_locked()
    )
});

// --- payments --------------------------------------------------------------------------------

/// Inserts a payment ([`crate::record::payment_values`]) unless its `(project_id,
/// merchant_payment_id)` is taken: then it changes no row.
///
/// On SQLite `OR FAIL`: a failure inside the statement keeps what the statement wrote before
/// it instead of undoing it, so SQLite keeps no statement journal for it (the metadata
/// trigger makes the insert write more than one row, and an undoable statement copies every
/// page it touches into that journal; docs/performance.md, "Cores", has what that cost).
/// Nothing of a failed insert stays: its job fails and the writer rolls the job back (the whole
/// pass, or the job's savepoint), and a full disk inside the statement rolls back the whole
/// transaction (SQLite does so for a statement without that journal; every job of the batch
/// is answered `disk full`).
pub static PAYMENT_INSERT: Sql = Sql::new(|d| {
    let insert = insert("payments", &PAYMENT_COLUMNS);
    let insert = match d {
        Dialect::Sqlite => insert.replacen("INSERT INTO", "INSERT OR FAIL INTO", 1),
        Dialect::Postgres => insert,
    };
    format!("{insert} ON CONFLICT (project_id, merchant_payment_id) DO NOTHING")
});

/// [`PAYMENT_INSERT`], or with the planted bug `duplicate-merchant-payment-id` (feature
/// `planted-bugs`) a plain insert: the store dropped the unique index it names.
pub fn payment_insert() -> &'static Sql {
    #[cfg(feature = "planted-bugs")]
    if payments_core::planted::active(payments_core::planted::Bug::DuplicateMerchantPaymentId) {
        return &PAYMENT_INSERT_PLANTED;
    }
    &PAYMENT_INSERT
}

/// The insert of the planted bug `duplicate-merchant-payment-id`: without a conflict clause.
#[cfg(feature = "planted-bugs")]
static PAYMENT_INSERT_PLANTED: Sql = Sql::new(|_| insert("payments", &PAYMENT_COLUMNS));

/// With the planted bug `duplicate-merchant-payment-id` (feature `planted-bugs`), the
/// statements that drop the `(project_id, merchant_payment_id)` unique index, run by a store
/// when it opens; none otherwise.
pub fn planted_schema(d: Dialect) -> Option<&'static str> {
    #[cfg(feature = "planted-bugs")]
    if payments_core::planted::active(payments_core::planted::Bug::DuplicateMerchantPaymentId) {
        return Some(match d {
            Dialect::Sqlite => "DROP INDEX IF EXISTS payments_merchant_id",
            Dialect::Postgres => {
                "ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_merchant_id"
            }
        });
    }
    let _ = d;
    None
}

/// Updates a payment's mutable columns, only at the expected version (`$N+1`, N = [`PAYMENT_NCOLS`]) and only if the
/// columns fixed at creation ([`PAYMENT_IMMUTABLE`]) are unchanged: they are matched, not set,
/// so a change to one of them is refused (no row matches) rather than dropped silently, and
/// SQLite leaves the `(project_id, merchant_payment_id)` unique index alone. Parameters are
/// [`crate::record::payment_values`], then the expected version.
pub static PAYMENT_UPDATE: Sql =
    Sql::new(|d| payment_update_sql(d, &format!("version = ${}", PAYMENT_NCOLS + 1)));

/// [`PAYMENT_UPDATE`], or with the planted bug `unchecked-status-version` (feature
/// `planted-bugs`) the same update whatever the version stored.
pub fn payment_update() -> &'static Sql {
    #[cfg(feature = "planted-bugs")]
    if payments_core::planted::active(payments_core::planted::Bug::UncheckedStatusVersion) {
        return &PAYMENT_UPDATE_PLANTED;
    }
    &PAYMENT_UPDATE
}

/// The update of the planted bug `unchecked-status-version`.
#[cfg(feature = "planted-bugs")]
static PAYMENT_UPDATE_PLANTED: Sql =
    Sql::new(|d| payment_update_sql(d, &format!("(version = ${} OR TRUE)", PAYMENT_NCOLS + 1)));

/// [`PAYMENT_UPDATE`]'s text with `version` as the condition on the version column (the
/// planted bug's matches any version, its parameter still named so that both take the same
/// parameters).
fn payment_update_sql(d: Dialect, version: &str) -> String {
    let (mut sets, mut same) = (Vec::new(), Vec::new());
    for (i, col) in PAYMENT_COLUMNS.iter().enumerate().skip(1) {
        if PAYMENT_IMMUTABLE.contains(col) {
            same.push(format!(" AND {col} {} ${}", d.is_same(), i + 1));
        } else {
            sets.push(format!("{col} = ${}", i + 1));
        }
    }
    format!(
        "UPDATE payments SET {} WHERE id = $1 AND {version}{}",
        sets.join(", "),
        same.concat()
    )
}

/// A payment by id (`$1`).
pub static PAYMENT: Sql = Sql::new(|_| payments_where("id = $1"));

/// A payment by project (`$1`) and merchant payment id (`$2`).
pub static PAYMENT_BY_MERCHANT_ID: Sql =
    Sql::new(|_| payments_where("project_id = $1 AND merchant_payment_id = $2"));

/// At most `$2` payments due at `$1`, earliest first, through the partial `due_at` index.
pub static PAYMENTS_DUE: Sql = Sql::new(|_| {
    payments_where("due_at IS NOT NULL AND due_at <= $1 ORDER BY due_at, id LIMIT $2")
});

/// The sealed requisite columns ([`SEALED_COLUMNS`]) of at most `$2` payments with
/// requisites whose id sorts after `$1`, by id: a re-seal's page.
pub static REQUISITES_PAGE: Sql = Sql::new(|_| {
    format!(
        "SELECT id, {} FROM payments WHERE requisite IS NOT NULL AND id > $1 ORDER BY id LIMIT $2",
        list(&SEALED_COLUMNS)
    )
});

/// How many payments hold requisites sealed under each key id (`key_id`, `n`): what a server
/// checks before it creates a missing key (a new key could not open them). A full scan.
pub static REQUISITE_KEYS: Sql = Sql::new(|_| {
    "SELECT substr(requisite, 4, 8) AS key_id, count(*) AS n FROM payments \
     WHERE requisite LIKE 'v1.%' GROUP BY substr(requisite, 4, 8)"
        .to_string()
});

/// Sets payment `$1`'s sealed requisite columns to `$2..$5` only while they still hold
/// `$6..$9` (a payment rewritten meanwhile is left to the next re-seal).
pub static REQUISITES_RESEAL: Sql = Sql::new(|d| {
    let n = SEALED_COLUMNS.len();
    let sets: Vec<String> = SEALED_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = ${}", i + 2))
        .collect();
    let same: String = SEALED_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!(" AND {c} {} ${}", d.is_same(), i + 2 + n))
        .collect();
    format!(
        "UPDATE payments SET {} WHERE id = $1{same}",
        sets.join(", ")
    )
});

/// The id, stored (sealed) requisite and last four digits of at most `$2` payments with a
/// requisite but no `requisite_last4` (written before schema 16) or no `requisite_digest`
/// (before schema 25) whose id sorts after `$1`, by id: a page of the last-four backfill
/// ([`crate::sealing::Last4Backfill`]).
pub static LAST4_MISSING_PAGE: Sql = Sql::new(|_| {
    "SELECT id, requisite, requisite_last4 FROM payments \
     WHERE requisite IS NOT NULL AND (requisite_last4 IS NULL OR requisite_digest IS NULL) \
     AND id > $1 ORDER BY id LIMIT $2"
        .to_string()
});

/// Sets payment `$1`'s `requisite_last4` to `$2` and, given one (`$4`), its
/// `requisite_digest`, only while it lacks one it is given and its stored requisite is still
/// `$3` (a payment rewritten meanwhile wrote its own).
pub static LAST4_SET: Sql = Sql::new(|_| {
    "UPDATE payments SET requisite_last4 = $2, \
     requisite_digest = COALESCE(CAST($4 AS TEXT), requisite_digest) \
     WHERE id = $1 AND requisite = $3 AND (requisite_last4 IS NULL \
     OR (requisite_digest IS NULL AND CAST($4 AS TEXT) IS NOT NULL))"
        .to_string()
});

/// `SELECT` every payment column `FROM payments WHERE` `condition` (with `$n` placeholders).
pub fn payments_where(condition: &str) -> String {
    format!(
        "SELECT {} FROM payments WHERE {condition}",
        list(&PAYMENT_COLUMNS)
    )
}

// --- the outbox ------------------------------------------------------------------------------

/// Queues an event: [`OutboxEvent::values`](Record::values).
pub static EVENT_INSERT: Sql = Sql::new(|_| insert("outbox_events", OutboxEvent::COLUMNS));

/// A payment's (`$1`) events in queueing order.
pub static EVENTS_OF_PAYMENT: Sql = Sql::new(|_| {
    select(
        OutboxEvent::COLUMNS,
        "outbox_events",
        "WHERE payment_id = $1 ORDER BY seq",
    )
});

/// Event `$1`'s current lease token, as `lease_token`, the row held until the transaction ends.
pub static EVENT_LEASE: Sql = Sql::new(|d| {
    format!(
        "SELECT lease_token FROM outbox_events WHERE event_id = $1{}",
        d.for_update()
    )
});

/// Event `$4`'s next step after an attempt: attempts at least `$1`, state `$2`, next attempt at
/// `$3` ([`attempt_step`]).
pub static EVENT_STEP: Sql = Sql::new(|d| {
    format!(
        "UPDATE outbox_events SET attempts = {}(attempts, $1), state = $2, \
         next_attempt_at = $3 WHERE event_id = $4",
        d.greatest()
    )
});

/// What recording `attempt` under `lease` does to an event whose current lease token is
/// `current` ([`EVENT_LEASE`]): with the current lease, [`AttemptRecorded::Applied`] and the
/// values of [`EVENT_STEP`] (the event's next step, [`DeliveryAttempt::next_step`]); with an
/// older one, [`AttemptRecorded::Stale`] and no change to the event. The attempt's own row
/// ([`ATTEMPT_INSERT`]) is written either way.
pub fn attempt_step(
    event: EventId,
    lease: LeaseToken,
    current: i64,
    attempt: &DeliveryAttempt,
    next_attempt_at: Option<Timestamp>,
) -> (AttemptRecorded, Option<Vec<SqlValue>>) {
    if u64::try_from(current).ok() != Some(lease.get()) {
        return (AttemptRecorded::Stale, None);
    }
    let (state, next) = attempt.next_step(next_attempt_at);
    let values = vec![
        SqlValue::Int(i64::from(attempt.attempt)),
        SqlValue::text(state.as_str()),
        next.map_or(SqlValue::Null, |t| SqlValue::Int(t.unix_millis())),
        SqlValue::text(event.to_string()),
    ];
    (AttemptRecorded::Applied, Some(values))
}

/// Records an attempt: [`crate::record::attempt_values`].
pub static ATTEMPT_INSERT: Sql = Sql::new(|_| insert("delivery_attempts", ATTEMPT_ROW_COLUMNS));

/// An event's (`$1`) attempts in order.
pub static ATTEMPTS: Sql = Sql::new(|_| {
    select(
        DeliveryAttempt::COLUMNS,
        "delivery_attempts",
        "WHERE event_id = $1 ORDER BY seq",
    )
});

/// An event's (`$1`) last attempt.
pub static LAST_ATTEMPT: Sql = Sql::new(|_| {
    select(
        DeliveryAttempt::COLUMNS,
        "delivery_attempts",
        "WHERE event_id = $1 ORDER BY seq DESC LIMIT 1",
    )
});

// --- the web cabinet: users and recovery codes ----------------------------------------------

/// Stores a user: [`UserRecord::values`](Record::values).
pub static USER_INSERT: Sql = Sql::new(|_| insert("cabinet_users", UserRecord::COLUMNS));
/// Replaces user `$1`'s columns with [`UserRecord::values`](Record::values).
pub static USER_UPDATE: Sql = Sql::new(|_| {
    let sets = UserRecord::COLUMNS
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, c)| format!("{c} = ${}", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    format!("UPDATE cabinet_users SET {sets} WHERE id = $1")
});
/// A user by id (`$1`).
pub static USER: Sql = Sql::new(|_| select(UserRecord::COLUMNS, "cabinet_users", "WHERE id = $1"));
/// A user by email (`$1`).
pub static USER_BY_EMAIL: Sql =
    Sql::new(|_| select(UserRecord::COLUMNS, "cabinet_users", "WHERE email = $1"));
/// Every user by email.
pub static USERS: Sql =
    Sql::new(|_| select(UserRecord::COLUMNS, "cabinet_users", "ORDER BY email"));
/// Accepts TOTP step `$2` for user `$1` only if it is later than the last accepted one.
pub static TOTP_STEP_ACCEPT: Sql = Sql::new(|_| {
    "UPDATE cabinet_users SET totp_last_step = $2 \
     WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2)"
        .to_string()
});
/// Confirms user `$1`'s TOTP enrolment at `$2` with step `$3`, only while it is unconfirmed.
pub static TOTP_CONFIRM: Sql = Sql::new(|_| {
    "UPDATE cabinet_users SET totp_confirmed_at = $2, totp_last_step = $3 \
     WHERE id = $1 AND totp_confirmed_at IS NULL AND totp_secret IS NOT NULL"
        .to_string()
});
/// Deletes user `$1`'s recovery codes.
pub static RECOVERY_CODES_DELETE: Sql =
    Sql::new(|_| "DELETE FROM cabinet_recovery_codes WHERE user_id = $1".to_string());
/// Uses (deletes) user `$1`'s recovery code with hash `$2`; one row if it was held.
pub static RECOVERY_CODE_USE: Sql = Sql::new(|_| {
    "DELETE FROM cabinet_recovery_codes WHERE user_id = $1 AND code_hash = $2".to_string()
});
/// The statement that proves a sign-in step in the database, with its values: the step is proved
/// when it changes exactly one row (a TOTP step later than the user's last one, a recovery code
/// the user holds, an enrolment not yet confirmed). `None` for [`SessionProof::None`], which
/// needs no proof. An enrolment's recovery codes are stored by the caller once it is proved.
pub fn session_proof(
    user: UserId,
    proof: &SessionProof,
) -> Result<Option<(&'static Sql, Vec<SqlValue>)>, StoreError> {
    let user = SqlValue::text(user.to_string());
    Ok(match proof {
        SessionProof::None => None,
        SessionProof::TotpStep(step) => Some((
            &TOTP_STEP_ACCEPT,
            vec![user, SqlValue::uint(*step, "totp step")?],
        )),
        SessionProof::RecoveryCode(hash) => Some((
            &RECOVERY_CODE_USE,
            vec![user, SqlValue::blob(hash.to_vec())],
        )),
        SessionProof::Enrolment { step, at, .. } => Some((
            &TOTP_CONFIRM,
            vec![
                user,
                SqlValue::Int(at.unix_millis()),
                SqlValue::uint(*step, "totp step")?,
            ],
        )),
    })
}

/// How many recovery codes user `$1` has left, as `n`.
pub static RECOVERY_CODES_LEFT: Sql =
    Sql::new(|_| "SELECT count(*) AS n FROM cabinet_recovery_codes WHERE user_id = $1".to_string());

// --- the web cabinet: sessions and invitations ----------------------------------------------

/// Stores a session.
pub static SESSION_INSERT: Sql = Sql::new(|_| insert("cabinet_sessions", SessionRecord::COLUMNS));
/// A session by its token's hash (`$1`).
pub static SESSION_BY_TOKEN: Sql = Sql::new(|_| {
    select(
        SessionRecord::COLUMNS,
        "cabinet_sessions",
        "WHERE token_hash = $1",
    )
});
/// Moves session `$1`'s last use to `$2` unless it is later already.
pub static SESSION_TOUCH: Sql = Sql::new(|d| {
    format!(
        "UPDATE cabinet_sessions SET last_seen_at = {}(last_seen_at, $2) WHERE id = $1",
        d.greatest()
    )
});
/// Deletes session `$1`.
pub static SESSION_DELETE: Sql =
    Sql::new(|_| "DELETE FROM cabinet_sessions WHERE id = $1".to_string());
/// User `$1`'s sessions, oldest first.
pub static USER_SESSIONS: Sql = Sql::new(|_| {
    select(
        SessionRecord::COLUMNS,
        "cabinet_sessions",
        "WHERE user_id = $1 ORDER BY created_at, id",
    )
});
/// Deletes user `$1`'s sessions but `$2` (`NULL`: all).
pub static USER_SESSIONS_DELETE: Sql = Sql::new(|d| {
    format!(
        "DELETE FROM cabinet_sessions WHERE user_id = $1 AND id {} $2",
        d.is_not_same()
    )
});
/// Deletes sessions idle since before `$1` or signed in before `$2`.
pub static SESSIONS_PURGE: Sql = Sql::new(|_| {
    "DELETE FROM cabinet_sessions WHERE last_seen_at < $1 OR signed_in_at < $2".to_string()
});
/// Deletes user `$1`'s invitations.
pub static INVITES_DELETE: Sql =
    Sql::new(|_| "DELETE FROM cabinet_invites WHERE user_id = $1".to_string());
/// Stores an invitation.
pub static INVITE_INSERT: Sql = Sql::new(|_| insert("cabinet_invites", InviteRecord::COLUMNS));
/// The invitation with token hash `$1`, unexpired at `$2`.
pub static INVITE: Sql = Sql::new(|_| {
    select(
        InviteRecord::COLUMNS,
        "cabinet_invites",
        "WHERE token_hash = $1 AND expires_at > $2",
    )
});
/// Deletes the invitation with token hash `$1` and returns it.
pub static INVITE_TAKE: Sql = Sql::new(|_| {
    format!(
        "DELETE FROM cabinet_invites WHERE token_hash = $1 RETURNING {}",
        list(InviteRecord::COLUMNS)
    )
});

/// Stores a one-time slot.
pub static SLOT_INSERT: Sql = Sql::new(|_| insert("cabinet_slots", SlotRecord::COLUMNS));
/// Deletes and returns the slot with id hash `$1` if owner `$2` owns it and it is live at
/// `$3`: one statement, so of concurrent takes exactly one deletes the row.
pub static SLOT_TAKE: Sql = Sql::new(|_| {
    format!(
        "DELETE FROM cabinet_slots WHERE id_hash = $1 AND owner = $2 AND expires_at > $3 \
         RETURNING {}",
        list(SlotRecord::COLUMNS)
    )
});
/// Deletes the slots of owner `$1` but the newest `$2` (by `created_at`).
pub static SLOT_TRIM: Sql = Sql::new(|_| {
    "DELETE FROM cabinet_slots WHERE owner = $1 AND id_hash NOT IN (\
     SELECT id_hash FROM cabinet_slots WHERE owner = $1 \
     ORDER BY created_at DESC, id_hash DESC LIMIT $2)"
        .to_string()
});
/// Deletes the slots expired at `$1`.
pub static SLOTS_PURGE: Sql =
    Sql::new(|_| "DELETE FROM cabinet_slots WHERE expires_at <= $1".to_string());
/// Deletes the slots beyond the `$1` that expire last.
pub static SLOTS_OVER: Sql = Sql::new(|d| {
    let all = match d {
        Dialect::Sqlite => "LIMIT -1",
        Dialect::Postgres => "LIMIT ALL",
    };
    format!(
        "DELETE FROM cabinet_slots WHERE id_hash IN (SELECT id_hash FROM cabinet_slots \
         ORDER BY expires_at DESC, id_hash DESC {all} OFFSET $1)"
    )
});

// --- the web cabinet: failures, audit, token use, payer pages -------------------------------

/// Records a failure under key `$1` at `$2`.
pub static FAILURE_INSERT: Sql =
    Sql::new(|_| "INSERT INTO cabinet_failures (key, at) VALUES ($1, $2)".to_string());
/// At most `$3` failure times under key `$1` since `$2`, oldest first.
pub static FAILURES_SINCE: Sql = Sql::new(|_| {
    "SELECT at FROM cabinet_failures WHERE key = $1 AND at >= $2 ORDER BY at, seq LIMIT $3"
        .to_string()
});
/// Forgets key `$1`'s failures.
pub static FAILURES_CLEAR: Sql =
    Sql::new(|_| "DELETE FROM cabinet_failures WHERE key = $1".to_string());
/// Forgets the newest failure under key `$1` recorded at `$2`.
pub static FAILURE_FORGET_ONE: Sql = Sql::new(|_| {
    "DELETE FROM cabinet_failures WHERE seq = (SELECT seq FROM cabinet_failures \
     WHERE key = $1 AND at = $2 ORDER BY seq DESC LIMIT 1)"
        .to_string()
});
/// Deletes failures before `$1`.
pub static FAILURES_PURGE: Sql =
    Sql::new(|_| "DELETE FROM cabinet_failures WHERE at < $1".to_string());
/// Appends a cabinet audit record.
pub static CABINET_AUDIT_INSERT: Sql =
    Sql::new(|_| insert("cabinet_audit", CabinetAuditRecord::COLUMNS));
/// Retention of the cabinet audit log: deletes, among the oldest `$3` records, those made
/// before `$1` or that fall outside the newest `$2` by sequence number.
pub static CABINET_AUDIT_PURGE: Sql = Sql::new(|_| {
    "DELETE FROM cabinet_audit WHERE seq IN \
     (SELECT seq FROM cabinet_audit ORDER BY seq LIMIT $3) \
     AND (at < $1 OR seq <= (SELECT COALESCE(MAX(seq), 0) FROM cabinet_audit) - $2)"
        .to_string()
});
/// Records token `$1`'s use at `$2`, keeping the latest.
pub static TOKEN_USE: Sql = Sql::new(|d| {
    format!(
        "INSERT INTO token_use (token_id, last_used_at) VALUES ($1, $2) \
         ON CONFLICT (token_id) DO UPDATE SET \
         last_used_at = {}(token_use.last_used_at, excluded.last_used_at)",
        d.greatest()
    )
});
/// Token `$1`'s last use.
pub static TOKEN_LAST_USED: Sql =
    Sql::new(|_| "SELECT last_used_at FROM token_use WHERE token_id = $1".to_string());
/// Stores a payment's page link unless the payment has one.
pub static PAGE_INSERT: Sql = Sql::new(|_| {
    format!(
        "{} ON CONFLICT (payment_id) DO NOTHING",
        insert("payment_pages", PaymentPageRecord::COLUMNS)
    )
});
/// Payment `$1`'s page link.
pub static PAGE: Sql = Sql::new(|_| {
    select(
        PaymentPageRecord::COLUMNS,
        "payment_pages",
        "WHERE payment_id = $1",
    )
});
/// The page link with token hash `$1`.
pub static PAGE_BY_HASH: Sql = Sql::new(|_| {
    select(
        PaymentPageRecord::COLUMNS,
        "payment_pages",
        "WHERE token_hash = $1",
    )
});

//! Each stored aggregate's columns, its decoding from a row and its encoding into values, in
//! one place for both engines.
//!
//! The column list of a record is the one every statement names (never `*`), in the order of
//! [`Record::values`]. The invariants between columns (a pair stored both-or-none, a column
//! required by another) are checked here, when a row is decoded, so that both stores refuse
//! the same damaged rows.

use std::time::Duration;

use payments_cabinet::store::{
    CabinetAuditRecord, InviteRecord, Role, SessionRecord, SessionStage, SlotRecord, TeamRole,
    UserRecord,
};
use payments_core::bank::CountryCode;
use payments_core::event::{CallbackEvent, DeliveryAttempt, DeliveryState, EventKind, OutboxEvent};
use payments_core::history::{ChangeSource, StatusChange};
use payments_core::ids::KeyId;
use payments_core::payer::PaymentPageRecord;
use payments_core::payment::{
    Currency, MerchantPaymentId, Metadata, Payment, PaymentErrorCode, PaymentFailure,
    PaymentStatus, Requisites,
};
use payments_core::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, RateLimit, SecretRecord,
    TokenRecord,
};
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::store::StoreError;

use crate::codec::{self, corrupt};
use crate::row::Cols;
use crate::sealing::RequisiteSealing;
use crate::value::SqlValue;
use payments_core::payment::ProviderRoute;
use payments_core::provider::ProviderName;

/// A stored aggregate: its table's columns, and the conversions between it and a row.
pub trait Record: Sized {
    /// The columns this record is written to and read from, in [`Record::values`] order.
    const COLUMNS: &'static [&'static str];

    /// The record from a row that holds at least [`Record::COLUMNS`].
    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError>;

    /// The record's values, one per column of [`Record::COLUMNS`], in that order.
    fn values(&self) -> Result<Vec<SqlValue>, StoreError>;
}

// --- merchants and projects ------------------------------------------------------------------

impl Record for Merchant {
    const COLUMNS: &'static [&'static str] =
        &["id", "name", "paused", "callback_url", "created_at"];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(Merchant {
            id: c.parsed("id")?,
            name: c.text("name")?,
            paused: c.flag("paused")?,
            callback_url: c.opt_url("callback_url")?,
            created_at: c.ts("created_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::text(self.name.as_str()),
            SqlValue::flag(self.paused),
            SqlValue::opt_text(self.callback_url.as_ref().map(|u| u.as_str())),
            SqlValue::ts(self.created_at),
        ])
    }
}

impl Record for Project {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "merchant_id",
        "name",
        "active",
        "test_mode",
        "lifetime_secs",
        "lifetime_nanos",
        "contract",
        "callback_url",
        "ip_allow_list",
        "signature_required",
        "rate_per_second",
        "rate_burst",
        "created_at",
        "paused",
        "payer_page",
        "payer_language",
        "return_url",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let ip_allow_list = c.text("ip_allow_list")?;
        Ok(Project {
            id: c.parsed("id")?,
            merchant_id: c.parsed("merchant_id")?,
            name: c.text("name")?,
            active: c.flag("active")?,
            test_mode: c.flag("test_mode")?,
            lifetime: Duration::new(c.num("lifetime_secs")?, c.num("lifetime_nanos")?),
            contract: codec::parse_contract(&c.text("contract")?)?,
            callback_url: c.opt_url("callback_url")?,
            ip_allow_list: serde_json::from_str(&ip_allow_list)
                .map_err(|_| corrupt("ip_allow_list", ip_allow_list))?,
            signature_required: c.flag("signature_required")?,
            paused: c.flag("paused")?,
            rate_limit: RateLimit {
                per_second: c.num("rate_per_second")?,
                burst: c.num("rate_burst")?,
            },
            payer_page: c.flag("payer_page")?,
            payer_language: {
                let l = c.text("payer_language")?;
                l.parse().map_err(|_| corrupt("payer_language", l))?
            },
            return_url: c
                .opt_text("return_url")?
                .map(|u| {
                    payments_core::payer::ReturnUrl::parse(&u).map_err(|_| corrupt("return_url", u))
                })
                .transpose()?,
            created_at: c.ts("created_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::display(self.merchant_id),
            SqlValue::text(self.name.as_str()),
            SqlValue::flag(self.active),
            SqlValue::flag(self.test_mode),
            SqlValue::uint(self.lifetime.as_secs(), "lifetime")?,
            SqlValue::from(self.lifetime.subsec_nanos()),
            SqlValue::text(codec::contract_json(&self.contract)),
            SqlValue::opt_text(self.callback_url.as_ref().map(|u| u.as_str())),
            SqlValue::text(
                serde_json::to_string(&self.ip_allow_list)
                    .expect("a list of strings always serialises"),
            ),
            SqlValue::flag(self.signature_required),
            SqlValue::from(self.rate_limit.per_second),
            SqlValue::from(self.rate_limit.burst),
            SqlValue::ts(self.created_at),
            SqlValue::flag(self.paused),
            SqlValue::flag(self.payer_page),
            SqlValue::text(self.payer_language.as_str()),
            SqlValue::opt_text(self.return_url.as_ref().map(|u| u.as_str())),
        ])
    }
}

// --- credentials -----------------------------------------------------------------------------

impl Record for TokenRecord {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "project_id",
        "hash",
        "prefix",
        "scopes",
        "created_at",
        "revoked_at",
        "name",
        "expires_at",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(TokenRecord {
            id: c.parsed("id")?,
            project_id: c.parsed("project_id")?,
            hash: c.bytes32("hash")?,
            prefix: c.text("prefix")?,
            scopes: codec::parse_scopes(&c.text("scopes")?)?,
            created_at: c.ts("created_at")?,
            revoked_at: c.opt_ts("revoked_at")?,
            name: c.opt_text("name")?,
            expires_at: c.opt_ts("expires_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::display(self.project_id),
            SqlValue::blob(self.hash),
            SqlValue::text(self.prefix.as_str()),
            SqlValue::text(codec::scopes_text(&self.scopes)),
            SqlValue::ts(self.created_at),
            SqlValue::opt_ts(self.revoked_at),
            SqlValue::opt_text(self.name.as_deref()),
            SqlValue::opt_ts(self.expires_at),
        ])
    }
}

impl Record for KeyRecord {
    const COLUMNS: &'static [&'static str] = &[
        "project_id",
        "keyid",
        "public_key",
        "created_at",
        "revoked_at",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(KeyRecord {
            keyid: KeyId::new(c.text("keyid")?),
            project_id: c.parsed("project_id")?,
            public_key: c.bytes32("public_key")?,
            created_at: c.ts("created_at")?,
            revoked_at: c.opt_ts("revoked_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.project_id),
            SqlValue::text(self.keyid.as_str()),
            SqlValue::blob(self.public_key),
            SqlValue::ts(self.created_at),
            SqlValue::opt_ts(self.revoked_at),
        ])
    }
}

/// A callback secret is stored with its project, which [`SecretRecord`] does not hold: its
/// [`Record::values`] leave the first column, `project_id`, to the caller
/// ([`secret_values`]), and reading needs only the rest.
impl Record for SecretRecord {
    const COLUMNS: &'static [&'static str] = &["secret", "created_at", "revealed"];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(SecretRecord {
            secret: c.text("secret")?.into(),
            created_at: c.ts("created_at")?,
            revealed: c.flag("revealed")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::text(self.secret.expose()),
            SqlValue::ts(self.created_at),
            SqlValue::flag(self.revealed),
        ])
    }
}

/// The columns of a stored callback secret: its project, then [`SecretRecord::COLUMNS`].
pub const SECRET_ROW_COLUMNS: &[&str] = &["project_id", "secret", "created_at", "revealed"];

/// A secret's values for [`SECRET_ROW_COLUMNS`].
pub fn secret_values(
    project: payments_core::ids::ProjectId,
    s: &SecretRecord,
) -> Result<Vec<SqlValue>, StoreError> {
    let mut v = vec![SqlValue::display(project)];
    v.extend(s.values()?);
    Ok(v)
}

impl Record for OperatorTokenRecord {
    const COLUMNS: &'static [&'static str] =
        &["id", "name", "hash", "prefix", "created_at", "expires_at"];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(OperatorTokenRecord {
            id: c.parsed("id")?,
            name: c.text("name")?,
            hash: c.bytes32("hash")?,
            prefix: c.text("prefix")?,
            created_at: c.ts("created_at")?,
            expires_at: c.opt_ts("expires_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::text(self.name.as_str()),
            SqlValue::blob(self.hash),
            SqlValue::text(self.prefix.as_str()),
            SqlValue::ts(self.created_at),
            SqlValue::opt_ts(self.expires_at),
        ])
    }
}

impl Record for AuditRecord {
    const COLUMNS: &'static [&'static str] = &[
        "at",
        "actor",
        "action",
        "target",
        "before_state",
        "after_state",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(AuditRecord {
            at: c.ts("at")?,
            actor: c.text("actor")?,
            action: c.text("action")?,
            target: c.text("target")?,
            before: c.opt_text("before_state")?,
            after: c.opt_text("after_state")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::ts(self.at),
            SqlValue::text(self.actor.as_str()),
            SqlValue::text(self.action.as_str()),
            SqlValue::text(self.target.as_str()),
            SqlValue::opt_text(self.before.as_deref()),
            SqlValue::opt_text(self.after.as_deref()),
        ])
    }
}

impl Record for StatusChange {
    const COLUMNS: &'static [&'static str] = &[
        "payment_id",
        "version",
        "from_status",
        "to_status",
        "amount",
        "at",
        "cause",
        "source",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(StatusChange {
            payment_id: c.parsed("payment_id")?,
            version: c.num("version")?,
            from: c.opt_parsed("from_status")?,
            to: c.parsed("to_status")?,
            amount: c.amount("amount")?,
            at: c.ts("at")?,
            cause: c.parsed("cause")?,
            source: c.opt_parsed("source")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::text(self.payment_id.to_string()),
            SqlValue::uint(self.version, "version")?,
            SqlValue::opt_text(self.from.map(PaymentStatus::as_str)),
            SqlValue::text(self.to.as_str()),
            SqlValue::display(self.amount),
            SqlValue::ts(self.at),
            SqlValue::text(self.cause.as_str()),
            SqlValue::opt_text(self.source.map(ChangeSource::as_str)),
        ])
    }
}

// --- payments --------------------------------------------------------------------------------

/// The number of payment columns.
pub const PAYMENT_NCOLS: usize = 36;

/// The payment columns fixed at creation: an update never writes them, and a change that
/// would alter them is refused as [`StoreError::Conflict`] (the store's `commit_change`
/// compares them in its `WHERE`).
pub const PAYMENT_IMMUTABLE: [&str; 13] = [
    "project_id",
    "merchant_payment_id",
    "flow",
    "initial_amount",
    "currency",
    "geo_code",
    "payment_method",
    "is_intrabank",
    "bank_code",
    "callback_url",
    "created_at",
    "fingerprint",
    "metadata",
];

/// Every payment column, in [`payment_values`] order.
pub const PAYMENT_COLUMNS: [&str; PAYMENT_NCOLS] = [
    "id",
    "project_id",
    "merchant_payment_id",
    "flow",
    "status",
    "amount",
    "initial_amount",
    "currency",
    "geo_code",
    "payment_method",
    "is_intrabank",
    "bank_code",
    "callback_url",
    "requisite",
    "holder_name",
    "requisite_bank",
    "qrcode_link",
    "deeplink_url",
    "course",
    "fee_percent",
    "error_code",
    "error_comment",
    "appeal_from",
    "created_at",
    "updated_at",
    "expires_at",
    "version",
    "fingerprint",
    "due_at",
    "metadata",
    "provider",
    "route_reason",
    "requisite_last4",
    "amount_key",
    "merchant_payment_id_key",
    "requisite_digest",
];

/// A payment's values, one per [`PAYMENT_COLUMNS`] entry (a fixed-size array: the payment is
/// written on every create and change), its requisites sealed by `sealing`
/// ([`crate::sealing`]).
pub fn payment_values(
    p: &Payment,
    sealing: &RequisiteSealing,
) -> Result<[SqlValue; PAYMENT_NCOLS], StoreError> {
    let req = sealing.seal_payment(p)?;
    let req = req.as_ref();
    let pricing = p.pricing.as_ref();
    let failure = p.failure.as_ref();
    Ok([
        SqlValue::display(p.id),
        SqlValue::display(p.project_id),
        SqlValue::text(p.merchant_payment_id.as_str()),
        SqlValue::text(p.flow.as_str()),
        SqlValue::text(p.status.as_str()),
        // Decimal text keeps the scale as received (`100.50`).
        SqlValue::display(p.amount),
        SqlValue::display(p.initial_amount),
        SqlValue::text(p.currency.as_str()),
        SqlValue::text(p.geo_code.as_str()),
        SqlValue::text(p.payment_method.as_str()),
        SqlValue::flag(p.is_intrabank),
        SqlValue::opt_text(p.bank_code.as_deref()),
        SqlValue::opt_text(p.callback_url.as_ref().map(|u| u.as_str())),
        SqlValue::opt_text(req.map(|r| r.requisite.as_str())),
        SqlValue::opt_text(req.map(|r| r.holder_name.as_str())),
        SqlValue::opt_text(req.and_then(|r| r.bank.as_deref())),
        SqlValue::opt_text(req.and_then(|r| r.qrcode_link.as_deref())),
        SqlValue::opt_text(req.and_then(|r| r.deeplink_url.as_deref())),
        SqlValue::opt_display(pricing.map(|x| x.course.as_decimal())),
        SqlValue::opt_display(pricing.map(|x| x.fee_percent.as_decimal())),
        SqlValue::opt_text(failure.map(|f| f.code.as_str())),
        SqlValue::opt_text(failure.map(|f| f.comment.as_str())),
        SqlValue::opt_text(p.appeal_from.map(|s| s.as_str())),
        SqlValue::ts(p.created_at),
        SqlValue::ts(p.updated_at),
        SqlValue::ts(p.expires_at),
        SqlValue::uint(p.version, "version")?,
        SqlValue::text(p.fingerprint.as_str()),
        SqlValue::opt_ts(p.due_at()),
        SqlValue::opt_text(p.metadata.to_json_text().as_deref()),
        SqlValue::opt_text(p.route.as_ref().map(|r| r.provider.as_str())),
        SqlValue::opt_text(p.route.as_ref().map(|r| r.reason.as_str())),
        // In clear beside the sealed requisite: what the search finds it by (schema 16).
        SqlValue::opt_text(p.requisite_last4().as_deref()),
        // The amount's shortest text (`100.50` -> `100.5`): what the list's `amount` filter
        // compares, written with every amount (schema 23).
        SqlValue::Text(p.amount.normalized()),
        // The id's letters in lower case: what the cabinet's search finds it by in any case
        // (schema 25).
        SqlValue::Text(p.merchant_payment_id.key()),
        // The keyed digest of the requisite's digits under the current sealing key: what a
        // search by the full card number compares, never the number (schema 25).
        SqlValue::opt_text(sealing.digest_requisite(p).as_deref()),
    ])
}

/// A payment read from a row of [`PAYMENT_COLUMNS`], its requisites opened by `sealing`.
/// (Not a [`Record`]: decoding a payment always needs the store's sealing.)
pub fn payment_from_row(c: &Cols<'_>, sealing: &RequisiteSealing) -> Result<Payment, StoreError> {
    let mut payment = payment_as_stored(c)?;
    sealing.open_payment(&mut payment)?;
    Ok(payment)
}

fn payment_as_stored(c: &Cols<'_>) -> Result<Payment, StoreError> {
    {
        let requisites = match c.opt_text("requisite")? {
            None => None,
            Some(requisite) => Some(Requisites {
                requisite,
                holder_name: c
                    .opt_text("holder_name")?
                    .ok_or_else(|| corrupt("holder_name", "missing"))?,
                bank: c.opt_text("requisite_bank")?,
                qrcode_link: c.opt_text("qrcode_link")?,
                deeplink_url: c.opt_text("deeplink_url")?,
            }),
        };
        let pricing = match (c.opt_text("course")?, c.opt_text("fee_percent")?) {
            (None, None) => None,
            (Some(_), Some(_)) => Some(Pricing {
                course: Course::new(c.decimal("course")?).map_err(|e| corrupt("course", e))?,
                fee_percent: FeePercent::new(c.decimal("fee_percent")?)
                    .map_err(|e| corrupt("fee_percent", e))?,
            }),
            other => return Err(corrupt("pricing", other)),
        };
        let failure = match c.opt_parsed::<PaymentErrorCode>("error_code")? {
            None => None,
            Some(code) => Some(PaymentFailure {
                code,
                comment: c
                    .opt_text("error_comment")?
                    .ok_or_else(|| corrupt("error_comment", "missing"))?,
            }),
        };
        Ok(Payment {
            id: c.parsed("id")?,
            project_id: c.parsed("project_id")?,
            merchant_payment_id: c.with("merchant_payment_id", MerchantPaymentId::parse)?,
            flow: c.parsed("flow")?,
            status: c.parsed("status")?,
            amount: c.amount("amount")?,
            initial_amount: c.amount("initial_amount")?,
            currency: c.with("currency", Currency::parse)?,
            geo_code: c.with("geo_code", CountryCode::parse)?,
            payment_method: c.parsed("payment_method")?,
            is_intrabank: c.flag("is_intrabank")?,
            bank_code: c.opt_text("bank_code")?,
            callback_url: c.opt_url("callback_url")?,
            requisites,
            pricing,
            failure,
            appeal_from: c.opt_parsed("appeal_from")?,
            created_at: c.ts("created_at")?,
            updated_at: c.ts("updated_at")?,
            expires_at: c.ts("expires_at")?,
            version: c.num("version")?,
            fingerprint: c.text("fingerprint")?,
            metadata: match c.opt_text("metadata")? {
                None => Metadata::default(),
                Some(text) => {
                    Metadata::from_json_text(&text).map_err(|e| corrupt("metadata", e))?
                }
            },
            route: match (c.opt_text("provider")?, c.opt_text("route_reason")?) {
                (None, None) => None,
                (Some(provider), Some(reason)) => Some(ProviderRoute {
                    provider: ProviderName::parse(&provider).map_err(|e| corrupt("provider", e))?,
                    reason,
                }),
                other => return Err(corrupt("route", other)),
            },
        })
    }
}

// --- the outbox ------------------------------------------------------------------------------

/// An outbox event read with its schedule in the column `next_attempt_column` (a claim reads
/// the schedule the event had before the claim moved it).
pub fn event_from(c: &Cols<'_>, next_attempt_column: &str) -> Result<OutboxEvent, StoreError> {
    Ok(OutboxEvent {
        event: CallbackEvent {
            event_id: c.parsed("event_id")?,
            payment_id: c.parsed("payment_id")?,
            project_id: c.parsed("project_id")?,
            status: c.parsed("status")?,
            kind: c.with("kind", EventKind::parse)?,
            body: c.blob("body")?,
            created_at: c.ts("created_at")?,
        },
        destination: codec::parse_url(&c.text("destination")?)?,
        state: c.with("state", DeliveryState::parse)?,
        attempts: c.num("attempts")?,
        max_attempts: c.num("max_attempts")?,
        next_attempt_at: c.opt_ts(next_attempt_column)?,
    })
}

impl Record for OutboxEvent {
    const COLUMNS: &'static [&'static str] = &[
        "event_id",
        "payment_id",
        "project_id",
        "status",
        "kind",
        "body",
        "created_at",
        "destination",
        "state",
        "attempts",
        "max_attempts",
        "next_attempt_at",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        event_from(c, "next_attempt_at")
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        let ev = &self.event;
        Ok(vec![
            SqlValue::display(ev.event_id),
            SqlValue::display(ev.payment_id),
            SqlValue::display(ev.project_id),
            SqlValue::text(ev.status.as_str()),
            SqlValue::text(ev.kind.as_str()),
            SqlValue::blob(ev.body.clone()),
            SqlValue::ts(ev.created_at),
            SqlValue::text(self.destination.as_str()),
            SqlValue::text(self.state.as_str()),
            SqlValue::from(self.attempts),
            SqlValue::from(self.max_attempts),
            SqlValue::opt_ts(self.next_attempt_at),
        ])
    }
}

/// A delivery attempt is stored with its event's id, which [`DeliveryAttempt`] does not hold:
/// see [`ATTEMPT_ROW_COLUMNS`].
impl Record for DeliveryAttempt {
    const COLUMNS: &'static [&'static str] = &[
        "attempt",
        "started_at",
        "duration_ms",
        "http_status",
        "error",
        "success",
        "response_excerpt",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(DeliveryAttempt {
            attempt: c.num("attempt")?,
            started_at: c.ts("started_at")?,
            duration_ms: c.num("duration_ms")?,
            http_status: c.opt_num("http_status")?,
            error: c.opt_text("error")?,
            success: c.flag("success")?,
            response_excerpt: c.opt_text("response_excerpt")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::from(self.attempt),
            SqlValue::ts(self.started_at),
            SqlValue::uint(self.duration_ms, "duration_ms")?,
            self.http_status
                .map_or(SqlValue::Null, |s| SqlValue::Int(i64::from(s))),
            SqlValue::opt_text(self.error.as_deref()),
            SqlValue::flag(self.success),
            SqlValue::opt_text(self.response_excerpt.as_deref()),
        ])
    }
}

/// The columns of a stored attempt: its event, then [`DeliveryAttempt::COLUMNS`].
pub const ATTEMPT_ROW_COLUMNS: &[&str] = &[
    "event_id",
    "attempt",
    "started_at",
    "duration_ms",
    "http_status",
    "error",
    "success",
    "response_excerpt",
];

/// An attempt's values for [`ATTEMPT_ROW_COLUMNS`].
pub fn attempt_values(
    event: payments_core::ids::EventId,
    a: &DeliveryAttempt,
) -> Result<Vec<SqlValue>, StoreError> {
    let mut v = vec![SqlValue::display(event)];
    v.extend(a.values()?);
    Ok(v)
}

// --- the web cabinet -------------------------------------------------------------------------

impl Record for UserRecord {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "email",
        "role",
        "merchant_id",
        "password_hash",
        "totp_secret",
        "totp_confirmed_at",
        "disabled",
        "created_at",
        "team_role",
        "projects",
        "time_zone",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let team_role = c.text("team_role")?;
        let role = match c.text("role")?.as_str() {
            "support" => Role::Support,
            "merchant" => Role::Merchant(
                c.opt_parsed("merchant_id")?
                    .ok_or_else(|| corrupt("merchant_id", "missing"))?,
            ),
            other => return Err(corrupt("role", other)),
        };
        Ok(UserRecord {
            id: c.parsed("id")?,
            email: c.text("email")?,
            role,
            password_hash: c.opt_text("password_hash")?,
            totp_secret: c.opt_text("totp_secret")?.map(Into::into),
            totp_confirmed_at: c.opt_ts("totp_confirmed_at")?,
            disabled: c.flag("disabled")?,
            created_at: c.ts("created_at")?,
            team_role: TeamRole::parse(&team_role)
                .ok_or_else(|| corrupt("team_role", &team_role))?,
            projects: c
                .opt_text("projects")?
                .map(|list| codec::parse_projects(&list))
                .transpose()?,
            time_zone: c.opt_text("time_zone")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::text(self.email.as_str()),
            SqlValue::text(self.role.kind()),
            SqlValue::opt_display(self.role.merchant()),
            SqlValue::opt_text(self.password_hash.as_deref()),
            SqlValue::opt_text(self.totp_secret.as_ref().map(|s| s.expose())),
            SqlValue::opt_ts(self.totp_confirmed_at),
            SqlValue::flag(self.disabled),
            SqlValue::ts(self.created_at),
            SqlValue::text(self.team_role.name()),
            SqlValue::opt_text(
                self.projects
                    .as_deref()
                    .map(codec::projects_text)
                    .as_deref(),
            ),
            SqlValue::opt_text(self.time_zone.as_deref()),
        ])
    }
}

impl Record for SessionRecord {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "token_hash",
        "user_id",
        "stage",
        "created_at",
        "signed_in_at",
        "last_seen_at",
        "address",
        "user_agent",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(SessionRecord {
            id: c.parsed("id")?,
            token_hash: c.bytes32("token_hash")?,
            user_id: c.parsed("user_id")?,
            stage: c.with("stage", SessionStage::parse)?,
            created_at: c.ts("created_at")?,
            signed_in_at: c.ts("signed_in_at")?,
            last_seen_at: c.ts("last_seen_at")?,
            address: c.opt_text("address")?,
            user_agent: c.opt_text("user_agent")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::blob(self.token_hash),
            SqlValue::display(self.user_id),
            SqlValue::text(self.stage.as_str()),
            SqlValue::ts(self.created_at),
            SqlValue::ts(self.signed_in_at),
            SqlValue::ts(self.last_seen_at),
            SqlValue::opt_text(self.address.as_deref()),
            SqlValue::opt_text(self.user_agent.as_deref()),
        ])
    }
}

impl Record for InviteRecord {
    const COLUMNS: &'static [&'static str] = &["token_hash", "user_id", "created_at", "expires_at"];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(InviteRecord {
            token_hash: c.bytes32("token_hash")?,
            user_id: c.parsed("user_id")?,
            created_at: c.ts("created_at")?,
            expires_at: c.ts("expires_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::blob(self.token_hash),
            SqlValue::display(self.user_id),
            SqlValue::ts(self.created_at),
            SqlValue::ts(self.expires_at),
        ])
    }
}

impl Record for SlotRecord {
    const COLUMNS: &'static [&'static str] =
        &["id_hash", "owner", "payload", "created_at", "expires_at"];

    /// The owner is stored as text, empty for none, so that one equality finds a slot of
    /// either kind.
    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let owner = c.text("owner")?;
        Ok(SlotRecord {
            id_hash: c.bytes32("id_hash")?,
            owner: if owner.is_empty() {
                None
            } else {
                Some(owner.parse().map_err(|_| corrupt("owner", &owner))?)
            },
            payload: c.text("payload")?.into(),
            created_at: c.ts("created_at")?,
            expires_at: c.ts("expires_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::blob(self.id_hash),
            slot_owner(self.owner),
            SqlValue::text(self.payload.expose()),
            SqlValue::ts(self.created_at),
            SqlValue::ts(self.expires_at),
        ])
    }
}

/// A slot's owner as stored: the session id, or empty text for none.
pub fn slot_owner(owner: Option<payments_core::ids::SessionId>) -> SqlValue {
    SqlValue::text(owner.map_or_else(String::new, |s| s.to_string()))
}

impl Record for CabinetAuditRecord {
    const COLUMNS: &'static [&'static str] = &[
        "at",
        "user_id",
        "email",
        "address",
        "merchant_id",
        "project_id",
        "action",
        "target",
        "success",
        "detail",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(CabinetAuditRecord {
            at: c.ts("at")?,
            user_id: c.opt_parsed("user_id")?,
            email: c.text("email")?,
            address: c.opt_text("address")?,
            merchant_id: c.opt_parsed("merchant_id")?,
            project_id: c.opt_parsed("project_id")?,
            action: c.text("action")?,
            target: c.text("target")?,
            success: c.flag("success")?,
            detail: c.opt_text("detail")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::ts(self.at),
            SqlValue::opt_display(self.user_id),
            SqlValue::text(self.email.as_str()),
            SqlValue::opt_text(self.address.as_deref()),
            SqlValue::opt_display(self.merchant_id),
            SqlValue::opt_display(self.project_id),
            SqlValue::text(self.action.as_str()),
            SqlValue::text(self.target.as_str()),
            SqlValue::flag(self.success),
            SqlValue::opt_text(self.detail.as_deref()),
        ])
    }
}

impl Record for PaymentPageRecord {
    const COLUMNS: &'static [&'static str] = &["payment_id", "token_hash", "token", "created_at"];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        Ok(PaymentPageRecord {
            payment_id: c.parsed("payment_id")?,
            token_hash: c.bytes32("token_hash")?,
            token: c.text("token")?.into(),
            created_at: c.ts("created_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.payment_id),
            SqlValue::blob(self.token_hash),
            SqlValue::text(self.token.expose()),
            SqlValue::ts(self.created_at),
        ])
    }
}

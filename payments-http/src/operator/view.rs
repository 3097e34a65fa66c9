//! The JSON forms of merchants, tokens, keys, audit records and payments: what the operator API answers
//! and what the CLI prints with `--json`, so the two cannot drift apart. Projects use the
//! core's [`payments_directory::project_value`].

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::payment::Payment;
use payments_core::project::{AuditRecord, KeyRecord, Merchant, TokenRecord};
use payments_core::service::OperationResult;
use payments_directory::NewToken;
use serde_json::{json, Value};

/// A merchant.
pub fn merchant(m: &Merchant) -> Value {
    json!({
        "id": m.id,
        "name": m.name,
        "paused": m.paused,
        "callback_url": m.callback_url.as_ref().map(|u| u.as_str()),
        "created_at": m.created_at,
    })
}

/// A token as listed: never the token itself, only its prefix.
pub fn token(t: &TokenRecord) -> Value {
    let scopes: Vec<&str> = t.scopes.iter().map(|s| s.as_str()).collect();
    json!({
        "id": t.id,
        "project_id": t.project_id,
        "token_prefix": t.prefix,
        "scopes": scopes,
        "created_at": t.created_at,
        "revoked_at": t.revoked_at,
        "name": t.name,
        "expires_at": t.expires_at,
    })
}

/// A token at issue: the listed form plus the token, the only time it is shown.
pub fn issued_token(t: &NewToken) -> Value {
    let mut v = token(&t.record);
    v["token"] = Value::String(t.token.expose().clone());
    v
}

/// A registered key (the public key as raw base64).
pub fn key(k: &KeyRecord) -> Value {
    json!({
        "keyid": k.keyid,
        "project_id": k.project_id,
        "public_key": STANDARD.encode(k.public_key),
        "created_at": k.created_at,
        "revoked_at": k.revoked_at,
    })
}

/// An audit record; `before` and `after` are the stored JSON, parsed back when they parse.
pub fn audit(r: &AuditRecord) -> Value {
    let state = |s: &Option<String>| match s {
        None => Value::Null,
        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
    };
    json!({
        "at": r.at,
        "actor": r.actor,
        "action": r.action,
        "target": r.target,
        "before": state(&r.before),
        "after": state(&r.after),
    })
}

/// A payment as the operator sees it (`GET /operator/v1/payments/{id}`, `payment show`): the
/// merchant's Payment resource and `route`, the provider the payment was routed to and why
/// (`null` for payments from before routing, and never shown to merchants or payers).
pub fn payment(p: &Payment) -> Value {
    let mut shown = json!(p.view());
    shown["route"] = match &p.route {
        Some(r) => json!({ "provider": r.provider.as_str(), "reason": r.reason }),
        None => Value::Null,
    };
    shown
}

/// The answer of a payment operation: the payment and the callback event queued, if any.
pub fn operation(r: &OperationResult) -> Value {
    json!({
        "payment": r.payment.view(),
        "event_id": r.event.as_ref().map(|e| e.event.event_id),
    })
}

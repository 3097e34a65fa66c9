//! The operator API (`/operator/v1/...`, `Authorization: Bearer <operator_token>`) and
//! `/metrics`, served on the operator listener (loopback by default): payment operations here,
//! the cabinet's provisioning functions in [`provision`].

pub mod appeals;
pub mod body;
pub mod callbacks;
pub mod ledger;
pub mod lookup;
pub mod provision;
#[cfg(feature = "cabinet")]
pub mod users;
pub mod view;

use payments_directory::DirectoryAccess;
use std::future::Future;
use std::time::Duration;

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use crate::json::Json;
use payments_core::event::EventRecord;
use payments_core::service::{check_content_type, check_single_value_headers, Actor};
use payments_core::transition::Trigger;
use payments_core::{ApiError, ErrorCode};

use self::body::Body;
use crate::error::HttpError;
use crate::providers::{node_entries, NodeReport, REPORTS, REPORT_TIMEOUT};
use crate::state::AppState;

/// The payment operations of the operator API as `(method, path template)`, behind the
/// operator token. [`routes`] is built from this list, [`provision::ROUTES`] and
/// [`PUBLIC_ROUTES`], so [`route_list`] cannot drift from the router;
/// `docs/operator-openapi.yaml` is checked against it by `tests/openapi/`.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/operator/v1/payments/{id}"),
    ("POST", "/operator/v1/payments/{id}/confirm"),
    ("POST", "/operator/v1/payments/{id}/cancel"),
    ("POST", "/operator/v1/payments/{id}/recheck"),
    ("POST", "/operator/v1/payments/{id}/recheck/resolve"),
    ("POST", "/operator/v1/payments/{id}/callbacks/resend"),
    ("GET", "/operator/v1/payments/{id}/events"),
    ("GET", "/operator/v1/providers"),
];

/// The routes of the operator listener served without the operator token.
pub const PUBLIC_ROUTES: &[(&str, &str)] = &[("GET", "/metrics")];

/// Every `(method, path template)` the operator router serves: [`ROUTES`],
/// [`provision::ROUTES`], `users::ROUTES` (feature `cabinet`) and [`PUBLIC_ROUTES`]. (The provider notifications have their own
/// listener and router, in the `payments-server` crate.)
pub fn route_list() -> Vec<(&'static str, &'static str)> {
    let mut list = ROUTES.to_vec();
    list.extend_from_slice(provision::ROUTES);
    list.extend_from_slice(callbacks::ROUTES);
    list.extend_from_slice(ledger::ROUTES);
    list.extend_from_slice(appeals::ROUTES);
    #[cfg(feature = "cabinet")]
    list.extend_from_slice(users::ROUTES);
    list.extend_from_slice(PUBLIC_ROUTES);
    list
}

/// The handler of one route of [`ROUTES`] or [`PUBLIC_ROUTES`]; `None` for a pair that has
/// none.
fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("GET", "/operator/v1/payments/{id}") => get(payment),
        ("POST", "/operator/v1/payments/{id}/confirm") => post(confirm),
        ("POST", "/operator/v1/payments/{id}/cancel") => post(cancel),
        ("POST", "/operator/v1/payments/{id}/recheck") => post(recheck),
        ("POST", "/operator/v1/payments/{id}/recheck/resolve") => post(resolve),
        ("POST", "/operator/v1/payments/{id}/callbacks/resend") => post(resend),
        ("GET", "/operator/v1/payments/{id}/events") => get(events),
        ("GET", "/operator/v1/providers") => get(providers),
        ("GET", "/metrics") => get(metrics),
        _ => return None,
    })
}

/// Adds `list`'s routes to `router`, each with its handler from `handler`.
pub(crate) fn add_routes(
    router: Router<AppState>,
    list: &[(&'static str, &'static str)],
    handler: fn(&str, &str) -> Option<MethodRouter<AppState>>,
) -> Router<AppState> {
    list.iter().fold(router, |router, &(method, path)| {
        let h =
            handler(method, path).expect("every listed operator route has a handler (unit-tested)");
        router.route(path, h)
    })
}

/// The operator routes: exactly [`route_list`]; all but [`PUBLIC_ROUTES`] behind the
/// operator token.
pub fn routes(state: AppState) -> Router<AppState> {
    let api = add_routes(Router::new(), ROUTES, handler)
        .merge(provision::routes())
        .merge(add_routes(
            Router::new(),
            callbacks::ROUTES,
            callbacks::handler,
        ))
        .merge(add_routes(Router::new(), ledger::ROUTES, ledger::handler))
        .merge(add_routes(Router::new(), appeals::ROUTES, appeals::handler));
    #[cfg(feature = "cabinet")]
    let api = api.merge(users::routes());
    let api = api.route_layer(middleware::from_fn_with_state(state, require_operator));
    add_routes(Router::new().merge(api), PUBLIC_ROUTES, handler)
}

#[cfg(test)]
mod route_tests {
    use super::*;

    #[test]
    fn every_listed_route_has_a_handler_once() {
        let list = route_list();
        for (method, path) in ROUTES.iter().chain(PUBLIC_ROUTES) {
            assert!(handler(method, path).is_some(), "{method} {path}");
        }
        for (method, path) in provision::ROUTES {
            assert!(
                provision::handler(method, path).is_some(),
                "{method} {path}"
            );
        }
        for (method, path) in callbacks::ROUTES {
            assert!(
                callbacks::handler(method, path).is_some(),
                "{method} {path}"
            );
        }
        for (method, path) in ledger::ROUTES {
            assert!(ledger::handler(method, path).is_some(), "{method} {path}");
        }
        for (method, path) in appeals::ROUTES {
            let found = appeals::handler(method, path);
            assert!(found.is_some(), "{method} {path}");
        }
        #[cfg(feature = "cabinet")]
        for (method, path) in users::ROUTES {
            assert!(users::handler(method, path).is_some(), "{method} {path}");
        }
        let unique: std::collections::BTreeSet<_> = list.iter().collect();
        assert_eq!(unique.len(), list.len(), "a route is listed twice");
    }
}

/// Who is calling: the operator token holder.
#[derive(Debug, Clone)]
struct OperatorIdentity(Actor);

/// Lets a request through when the core accepts its form (the merchant API's rules:
/// single-valued headers once, a body declared as JSON) and then its operator token.
async fn require_operator(
    State(st): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, HttpError> {
    use axum::body::HttpBody as _;
    let headers: Vec<(&str, &[u8])> = req
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    check_single_value_headers(&headers)?;
    // A body is announced by Content-Length or Transfer-Encoding (HTTP/1.1) or by a stream
    // not ended with the headers (HTTP/2): the body itself is read by the handler.
    check_content_type(&headers, !req.body().is_end_stream())?;
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let actor = st
        .service
        .directory()
        .check_operator_token(authorization)
        .await?;
    if let Some(note) = req
        .extensions()
        .get::<std::sync::Arc<crate::error::AccessNote>>()
    {
        note.set_operator(&actor.0);
    }
    req.extensions_mut().insert(OperatorIdentity(actor));
    Ok(next.run(req).await)
}

/// An authenticated operator request: the actor for the audit trail.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    actor: Actor,
}

impl Op {
    /// Who is calling, for the audit trail.
    pub(crate) fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Runs a handler body; its error is answered by the error middleware.
    pub(crate) async fn answer(
        &self,
        f: impl Future<Output = Result<Response, ApiError>>,
    ) -> OpResult {
        Ok(f.await?)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Op {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<OperatorIdentity>() {
            Some(who) => Ok(Op {
                actor: who.0.clone(),
            }),
            // Only reachable if a route were mounted outside `require_operator`.
            None => Err(ApiError::new(
                ErrorCode::TokenInvalid,
                "missing or invalid operator token",
            )
            .into()),
        }
    }
}

pub(crate) type OpResult = Result<Response, HttpError>;

async fn operate(st: &AppState, op: &Op, id: &str, trigger: Result<Trigger, ApiError>) -> OpResult {
    op.answer(async {
        let id = lookup::payment_id(id)?;
        let result = st
            .service
            .payments()
            .operate(id, trigger?, &op.actor)
            .await?;
        Ok(Json(view::operation(&result)).into_response())
    })
    .await
}

async fn payment(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let id = lookup::payment_id(&id)?;
        let p = st
            .service
            .store()
            .payment(id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::PaymentNotFound, "payment not found"))?;
        Ok(Json(view::payment(&p)).into_response())
    })
    .await
}

async fn confirm(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &["amount"])
        .and_then(|b| b.amount("amount"))
        .map(|amount| Trigger::Confirm { amount });
    operate(&st, &op, &id, trigger).await
}

async fn cancel(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &[]).map(|_| Trigger::Cancel);
    operate(&st, &op, &id, trigger).await
}

async fn recheck(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &[]).map(|_| Trigger::StartRecheck);
    operate(&st, &op, &id, trigger).await
}

async fn resolve(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &["status", "amount"]).and_then(|b| {
        let status = b.required_string("status")?;
        body::resolve_trigger(&status, b.amount("amount")?)
    });
    operate(&st, &op, &id, trigger).await
}

async fn resend(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &[]).map(|_| Trigger::ResendCallback);
    operate(&st, &op, &id, trigger).await
}

/// An event with its attempts as JSON.
pub fn event_json(r: &EventRecord) -> serde_json::Value {
    let attempts: Vec<serde_json::Value> = r
        .attempts
        .iter()
        .map(|a| {
            serde_json::json!({
                "attempt": a.attempt,
                "started_at": a.started_at,
                "duration_ms": a.duration_ms,
                "http_status": a.http_status,
                "error": a.error,
                "success": a.success,
            })
        })
        .collect();
    let o = &r.outbox;
    serde_json::json!({
        "event_id": o.event.event_id,
        "status": o.event.status.as_str(),
        "kind": o.event.kind.as_str(),
        "destination": o.destination.as_str(),
        "state": o.state.as_str(),
        "attempts_made": o.attempts,
        "max_attempts": o.max_attempts,
        "next_attempt_at": o.next_attempt_at,
        "created_at": o.event.created_at,
        "body": String::from_utf8_lossy(&o.event.body),
        "attempts": attempts,
    })
}

async fn events(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let id = lookup::payment_id(&id)?;
        st.service
            .store()
            .payment(id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::PaymentNotFound, "payment not found"))?;
        let records = st.service.store().events_for_payment(id).await?;
        let list: Vec<serde_json::Value> = records.iter().map(event_json).collect();
        Ok(Json(serde_json::json!({ "events": list })).into_response())
    })
    .await
}

async fn metrics(State(st): State<AppState>, headers: axum::http::HeaderMap) -> OpResult {
    crate::scrape::serve(&st, &headers).await
}

/// `GET /operator/v1/providers`: this node's requisite providers (with `[[upstream.providers]]`)
/// as its router sees them now: place in the routing, coverage, breaker and recent health, and
/// under `nodes` what every node of the database reports of each (this node's live values, the
/// others' last reports from the store, with their age). The breakers decide from each node's
/// memory; the reports are for operators. The other nodes' reports are read within
/// [`REPORT_TIMEOUT`]: past it, or when they cannot be read, the answer carries this node's
/// values alone and says why in `reports_error`. An empty list with one provider.
async fn providers(State(st): State<AppState>) -> Response {
    use axum::response::IntoResponse;
    let Some(source) = &st.providers else {
        return Json(serde_json::json!({ "providers": [] })).into_response();
    };
    let now = st.service.ports().clock.now();
    let local = source();
    let (node, stale_after, retention) = match &st.provider_reports {
        Some(r) => (r.node.to_string(), r.stale_after(), r.retention),
        None => ("local".to_string(), Duration::MAX, Duration::MAX),
    };
    let (mut reports, reports_error) = match &st.provider_reports {
        Some(_) => other_reports(&st, &node).await,
        None => (Vec::new(), None),
    };
    reports.push(NodeReport::of(&node, now, &local));
    let list: Vec<serde_json::Value> = local
        .into_iter()
        .map(|p| {
            let c = &p.coverage;
            let nodes = node_entries(&p.name, &reports, now, stale_after, retention);
            serde_json::json!({
                "name": p.name,
                "priority": p.priority,
                "weight": p.weight,
                "coverage": {
                    "methods": c.methods,
                    "currencies": c.currencies,
                    "geo_codes": c.geo_codes,
                    "banks": c.banks,
                    "not_banks": c.not_banks,
                    "intrabank": c.intrabank,
                    "min_amount": c.min_amount,
                    "max_amount": c.max_amount,
                    "hours": c.hours,
                },
                "breaker": p.breaker,
                "open_until": p.open_until.map(|t| t.to_rfc3339()),
                "failures_in_a_row": p.failures_in_a_row,
                "issue_rate": p.issue_rate,
                "latency_ms": p.latency_ms,
                "nodes": nodes,
            })
        })
        .collect();
    Json(serde_json::json!({
        "node": node,
        "providers": list,
        "reports_error": reports_error,
    }))
    .into_response()
}

/// The reports of the nodes other than `node` in the store, and why some or all of them are
/// missing (the store did not answer in time, or failed; a report that does not read).
async fn other_reports(st: &AppState, node: &str) -> (Vec<NodeReport>, Option<String>) {
    let listed = tokio::time::timeout(REPORT_TIMEOUT, REPORTS.list(&**st.service.store())).await;
    let listed = match listed {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => {
            return (
                Vec::new(),
                Some(format!("the other nodes' reports could not be read: {e}")),
            )
        }
        Err(_) => {
            return (
                Vec::new(),
                Some(format!(
                    "the other nodes' reports could not be read: the store did not answer \
                     within {} s",
                    REPORT_TIMEOUT.as_secs()
                )),
            )
        }
    };
    let mut unread = Vec::new();
    let mut reports = Vec::new();
    for (key, report) in listed {
        match report {
            Ok(r) if key != node => reports.push(r),
            Ok(_) => {}
            Err(_) => unread.push(key),
        }
    }
    let error =
        (!unread.is_empty()).then(|| format!("the reports of {} do not read", unread.join(", ")));
    (reports, error)
}

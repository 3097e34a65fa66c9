//! A project's Requests tab (`/projects/{id}/requests`): the merchant API requests the
//! project's tokens made recently (the request log, [`payments_core::request_log`]), newest
//! first in pages, filtered by status (a class such as `4xx`, or one status) and error code;
//! an error's row shows the API's message as the API wrote it, a refused signature's row what
//! the server verified (and, for a key of another project of the merchant, which:
//! [`RequestLog::key_owners`](payments_core::service::RequestLog::key_owners)). A long path
//! keeps to one line, cut with an ellipsis, whole on hover and keyboard focus. Above them the
//! integration health over the whole logged window ([`integration_health`]).
//! Whoever may see the project's payments sees its requests ([`visible_project`]).

use crate::accounts::Permission;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use std::collections::BTreeMap;

use payments_core::project::Project;
use payments_core::request_log::{RequestLogEntry, RequestLogQuery, StatusFilter};

use super::extract::Signed;
use super::health::{integration_health, IntegrationHealth, MIN_POLL_INTERVAL};
use super::i18n::{tr, trf};
use super::page::{error_page, html, ok, PageResult};
use super::projects::{project_view, visible_project};
use super::query::{cursor, encode, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{when, Chrome, Link, ProjectView};

/// The query of the tab: `status` (`4xx`, `401`, ...), `code`, and the page's cursor
/// (`<unix millis>_<id>` of the last request shown).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RequestFilters {
    #[serde(default)]
    status: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    before: String,
}

/// One request as the table shows it.
#[derive(Debug, Clone)]
pub(crate) struct RequestRow {
    pub(crate) at: String,
    pub(crate) at_text: String,
    pub(crate) method: String,
    pub(crate) path: String,
    /// Whether the path is long enough to be cut on screen ([`LONG_PATH`]): it then takes a
    /// tab stop (focus shows it whole) and a title.
    pub(crate) long_path: bool,
    pub(crate) status: u16,
    pub(crate) ok: bool,
    pub(crate) code: String,
    /// The API's message, as the API wrote it.
    pub(crate) message: Option<String>,
    pub(crate) request_id: String,
    pub(crate) latency: String,
    pub(crate) source: String,
    pub(crate) skew: Option<String>,
    pub(crate) diagnosis: Option<DiagnosisView>,
}

/// A refused signature's diagnosis as the row shows it.
#[derive(Debug, Clone)]
pub(crate) struct DiagnosisView {
    pub(crate) reason: String,
    pub(crate) hint: Option<String>,
    pub(crate) covered: String,
    pub(crate) base: Option<String>,
    /// For `unknown keyid`: the merchant's other project whose key the signature named.
    pub(crate) key_owner: Option<KeyOwnerView>,
}

/// The project of the merchant that holds the key a signature named.
#[derive(Debug, Clone)]
pub(crate) struct KeyOwnerView {
    pub(crate) id: String,
    pub(crate) name: String,
}

/// The length (characters of method and path) from which a path may be cut on screen.
const LONG_PATH: usize = 40;

/// One error code's share of the `4xx` answers.
#[derive(Debug, Clone)]
pub(crate) struct CodeLine {
    pub(crate) code: String,
    pub(crate) count: u64,
    pub(crate) share: String,
}

/// The integration health as the page shows it.
#[derive(Debug, Clone)]
pub(crate) struct HealthView {
    pub(crate) requests: u64,
    pub(crate) client_errors: u64,
    pub(crate) codes: Vec<CodeLine>,
    pub(crate) create_retries: u64,
    pub(crate) retried_ids: u64,
    pub(crate) fast_polled: u64,
    pub(crate) shortest_poll: Option<String>,
    pub(crate) skew_samples: u64,
    pub(crate) median_skew: Option<String>,
    pub(crate) max_skew: Option<String>,
}

#[derive(Template)]
#[template(path = "requests.html")]
pub(crate) struct RequestsPage {
    pub(crate) chrome: Chrome,
    pub(crate) tab: &'static str,
    pub(crate) project: ProjectView,
    pub(crate) health: HealthView,
    pub(crate) keep: usize,
    pub(crate) days: u64,
    pub(crate) poll_seconds: u64,
    pub(crate) status: String,
    pub(crate) code: String,
    pub(crate) requests: Vec<RequestRow>,
    pub(crate) next: Option<String>,
}

/// Milliseconds as seconds with one decimal and a sign (`+1.5 s`, `-30.0 s`).
fn seconds(ms: i64) -> String {
    trf("{s} s", &[("s", &format!("{:+.1}", ms as f64 / 1000.0))])
}

/// A refused signature's reason in the page's language, from the failure's stable name and
/// values ([`SignatureFailure::code`](payments_core::auth::SignatureFailure::code)); `None`
/// for a name this build does not know (the row shows the API's English reason).
pub(crate) fn reason_text(code: &str, values: &[String]) -> Option<String> {
    let a = values.first().map_or("", String::as_str);
    let b = values.get(1).map_or("", String::as_str);
    let ab: [(&str, &dyn std::fmt::Display); 2] = [("a", &a), ("b", &b)];
    Some(match code {
        "missing_signature_input" => tr("the Signature-Input header is missing").into(),
        "missing_signature" => tr("the Signature header is missing").into(),
        "malformed_signature_input" => trf("Signature-Input cannot be read: {a}", &ab),
        "malformed_signature" => trf("Signature cannot be read: {a}", &ab),
        "duplicate_label" => trf("the signature label \"{a}\" appears twice", &ab),
        "duplicate_parameter" => trf(
            "the parameter \"{a}\" appears twice in signature \"{b}\"",
            &ab,
        ),
        "ambiguous_label" => tr("several signatures and none labelled \"sig1\"").into(),
        "missing_signature_for_label" => trf("no Signature for the label \"{a}\"", &ab),
        "invalid_signature_length" => trf("an Ed25519 signature is 64 bytes, this one {a}", &ab),
        "invalid_component_identifier" => trf("the component identifier {a} is not valid", &ab),
        "unsupported_component_parameter" => trf(
            "the parameter \";{a}\" on the component \"{b}\" is not supported",
            &ab,
        ),
        "unsupported_derived_component" => {
            trf("the derived component \"{a}\" is not supported", &ab)
        }
        "duplicate_component" => trf("the component \"{a}\" is covered twice", &ab),
        "missing_header" => trf("the covered header \"{a}\" is not in the request", &ab),
        "invalid_component_value" => trf(
            "the value of \"{a}\" holds characters other than visible ASCII",
            &ab,
        ),
        "invalid_parameter" => trf("the signature parameter \"{a}\" has the wrong type", &ab),
        "missing_created" => tr("the signature parameter \"created\" is missing").into(),
        "missing_expires" => tr("the signature parameter \"expires\" is missing").into(),
        "missing_keyid" => tr("the signature parameter \"keyid\" is missing").into(),
        "unsupported_alg" => tr("alg must be \"ed25519\"").into(),
        "created_in_future" => tr("created is in the future: check the client's clock").into(),
        "expires_not_after_created" => tr("expires must be after created").into(),
        "validity_too_long" => tr("expires is more than 300 s after created").into(),
        "expired" => tr("the signature has expired").into(),
        "too_old" => tr("the signature is too old: created more than 300 s ago").into(),
        "missing_covered_component" => trf("the signature does not cover \"{a}\"", &ab),
        "invalid_nonce" => trf("X-Request-Nonce is not valid: {a}", &ab),
        "nonce_mismatch" => tr("the nonce parameter differs from X-Request-Nonce").into(),
        "digest_mismatch" => tr("Content-Digest does not match the body").into(),
        "invalid_digest" => trf("Content-Digest is not valid: {a}", &ab),
        "unknown_keyid" => tr("unknown keyid").into(),
        "verification_failed" => tr("the signature does not verify").into(),
        _ => return None,
    })
}

/// Per mille as a percentage with one decimal.
fn percent(permille: u64) -> String {
    format!("{}.{} %", permille / 10, permille % 10)
}

fn health_view(h: &IntegrationHealth) -> HealthView {
    HealthView {
        requests: h.requests,
        client_errors: h.client_errors,
        codes: h
            .client_errors_by_code
            .iter()
            .map(|c| CodeLine {
                code: c.code.clone(),
                count: c.count,
                share: percent(c.permille),
            })
            .collect(),
        create_retries: h.create_retries,
        retried_ids: h.retried_ids,
        fast_polled: h.fast_polled_payments,
        shortest_poll: h
            .shortest_poll_interval
            .map(|d| format!("{:.1} s", d.as_secs_f64())),
        skew_samples: h.skew_samples,
        median_skew: h.median_skew_ms.map(seconds),
        max_skew: h.max_skew_ms.map(seconds),
    }
}

fn row(e: &RequestLogEntry, owners: &BTreeMap<String, Project>) -> RequestRow {
    let (at, at_text) = when(e.at);
    RequestRow {
        at,
        at_text,
        method: e.method.clone(),
        path: e.path.clone(),
        long_path: e.method.chars().count() + 1 + e.path.chars().count() > LONG_PATH,
        status: e.status,
        ok: e.status < 400,
        code: e.error_code.clone().unwrap_or_default(),
        message: e.message.clone(),
        request_id: e.request_id.clone(),
        latency: trf(
            "{ms} ms",
            &[("ms", &format!("{:.1}", e.latency_us as f64 / 1000.0))],
        ),
        source: e.source.clone(),
        skew: e.clock_skew_ms.map(seconds),
        diagnosis: e.diagnosis.as_ref().map(|d| DiagnosisView {
            reason: d
                .code
                .as_ref()
                .and_then(|(code, values)| reason_text(code, values))
                .unwrap_or_else(|| d.reason.clone()),
            hint: d.hint.as_ref().map(|_| {
                tr("The signature base below is what the server verified (values shown as [redacted] are not kept; compare those with your client's own record). If it equals the base your client signed, the private key is not the one registered under this keyid; else the first line that differs is the component that differed.")
                    .to_string()
            }),
            covered: d.covered.join(" "),
            base: d.signature_base.clone(),
            key_owner: d
                .keyid
                .as_ref()
                .and_then(|k| owners.get(k))
                .map(|p| KeyOwnerView {
                    id: p.id.to_string(),
                    name: p.name.clone(),
                }),
        }),
    }
}

/// `GET /projects/{id}/requests`.
pub(crate) async fn page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<RequestFilters>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let service = st.cabinet.service();
    let failed = |e: payments_core::store::StoreError| error_page(e, &st);
    let health = integration_health(service, project.id)
        .await
        .map_err(failed)?;
    let policy = service.config().request_log;
    let mut chrome = st
        .chrome(
            trf("{project}: requests", &[("project", &project.name)]),
            Some(&signed.current),
        )
        .section("projects")
        .crumbs(vec![Link::new("/projects", tr("Projects and API"))]);
    let mut page = RequestsPage {
        chrome: chrome.clone(),
        tab: "requests",
        project: project_view(&project, &merchant),
        health: health_view(&health),
        keep: policy.keep,
        days: policy.max_age.as_secs() / 86_400,
        poll_seconds: MIN_POLL_INTERVAL.as_secs(),
        status: f.status.clone(),
        code: f.code.clone(),
        requests: Vec::new(),
        next: None,
    };
    let status = match f.status.trim() {
        "" => None,
        s => match status_filter(s) {
            Ok(s) => Some(s),
            Err(message) => {
                chrome = chrome.error("status", message.to_string());
                page.chrome = chrome;
                return Ok(html(StatusCode::BAD_REQUEST, &page));
            }
        },
    };
    let code = f.code.trim();
    let query = RequestLogQuery {
        status,
        error_code: (!code.is_empty()).then(|| code.to_string()),
        before: cursor::<u64>(&f.before),
        ..RequestLogQuery::new(project.id, PAGE_SIZE)
    };
    let found = service
        .requests()
        .request_log(&query)
        .await
        .map_err(failed)?;
    let keyids: Vec<String> = found
        .requests
        .iter()
        .filter_map(|e| e.diagnosis.as_ref()?.keyid.clone())
        .collect();
    let owners = service
        .requests()
        .key_owners(&project, &keyids)
        .await
        .map_err(failed)?;
    page.requests = found.requests.iter().map(|e| row(e, &owners)).collect();
    page.next = found.next.map(|(at, id)| {
        format!(
            "/projects/{}/requests?status={}&code={}&before={}_{id}",
            project.id,
            encode(&f.status),
            encode(&f.code),
            at.unix_millis()
        )
    });
    Ok(ok(&page))
}

/// A `status` filter that is neither a status class nor a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status: {0:?} is neither a status class (2xx, 4xx, 5xx) nor a status (100-599)")]
struct StatusFilterError(String);

/// Reads the tab's `status` filter: `2xx`/`4xx`/`5xx` (any class 1-5) or a status `100`-`599`.
fn status_filter(text: &str) -> Result<StatusFilter, StatusFilterError> {
    let t = text.trim().to_ascii_lowercase();
    if let Some(c) = t.strip_suffix("xx") {
        if let Ok(c @ 1..=5) = c.parse::<u16>() {
            return Ok(StatusFilter::Class(c));
        }
    } else if let Ok(s @ 100..=599) = t.parse::<u16>() {
        return Ok(StatusFilter::Exactly(s));
    }
    Err(StatusFilterError(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{reason_text, status_filter, StatusFilter};

    #[test]
    fn status_filters_read_classes_and_statuses() {
        assert_eq!(status_filter("4xx"), Ok(StatusFilter::Class(4)));
        assert_eq!(status_filter(" 401 "), Ok(StatusFilter::Exactly(401)));
        for bad in ["", "6xx", "xx", "99", "600", "four"] {
            assert!(status_filter(bad).is_err(), "{bad}");
        }
    }

    /// Every refused signature's reason has its words in each language: the core's stable
    /// names all have a text, and the Russian one is Russian.
    #[test]
    fn every_signature_failure_reads_in_russian() {
        use crate::web::i18n::{scope, Lang, Scope};
        use payments_core::auth::digest::DigestError;
        use payments_core::auth::nonce::NonceError;
        use payments_core::auth::SignatureFailure as F;
        let s = || "x".to_string();
        let failures = [
            F::MissingSignatureInput,
            F::MissingSignature,
            F::MalformedSignatureInput(s()),
            F::MalformedSignature(s()),
            F::DuplicateLabel(s()),
            F::DuplicateParameter {
                label: s(),
                parameter: s(),
            },
            F::AmbiguousLabel,
            F::MissingSignatureForLabel(s()),
            F::InvalidSignatureLength(3),
            F::InvalidComponentIdentifier(s()),
            F::UnsupportedComponentParameter {
                component: s(),
                parameter: s(),
            },
            F::UnsupportedDerivedComponent(s()),
            F::DuplicateComponent(s()),
            F::MissingHeader("content-digest".into()),
            F::InvalidComponentValue(s()),
            F::InvalidParameter("created"),
            F::MissingCreated,
            F::MissingExpires,
            F::MissingKeyid,
            F::UnsupportedAlg(s()),
            F::CreatedInFuture,
            F::ExpiresNotAfterCreated,
            F::ValidityTooLong,
            F::Expired,
            F::TooOld,
            F::MissingCoveredComponent("@method"),
            F::InvalidNonce(NonceError::Character),
            F::NonceMismatch,
            F::ContentDigest(DigestError::Mismatch),
            F::ContentDigest(DigestError::MissingSha256),
            F::UnknownKeyid,
            F::VerificationFailed,
        ];
        let mut codes = std::collections::BTreeSet::new();
        for f in &failures {
            let (code, values) = f.code();
            assert!(codes.insert(code), "{code} names one failure");
            let english = reason_text(code, &values).unwrap_or_else(|| panic!("{code}"));
            let russian =
                futures_executor::block_on(scope(Scope::new(Lang::Ru, "/".into()), async {
                    reason_text(code, &values)
                }))
                .expect("a text");
            assert!(
                russian.chars().any(|c| ('а'..='я').contains(&c)) && russian != english,
                "{code}: {russian}"
            );
        }
        assert_eq!(reason_text("a_name_from_a_newer_build", &[]), None);
    }
}

//! The service's rules on top of RFC 9421 ([`SignaturePolicy`]): required components, required
//! parameters, the `created` / `expires` window, the nonce parameter and `Content-Digest`.

use std::time::Duration;

use super::base::Component;
use super::parse::{structured_field, Params};
use super::{HttpRequestParts, SignatureFailure};
use crate::auth::digest::{verify_content_digest, DigestError};
use crate::auth::nonce::Nonce;
use crate::Timestamp;

/// What the service requires of a signature beyond RFC 9421 itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignaturePolicy {
    required_components: Vec<&'static str>,
    require_query_component: bool,
    require_created: bool,
    require_expires: bool,
    require_content_digest: bool,
    skew: Duration,
    max_age: Duration,
    max_validity: Duration,
}

impl SignaturePolicy {
    /// The policy of `decisions.md`: covered `@method`, `@path`, `content-digest`,
    /// `x-request-id`, `x-request-nonce` (and `@query` with a query string); `created`,
    /// `expires`, `keyid` required; `created <= now + 60 s`, `now - created <= 300 s`,
    /// `created < expires <= created + 300 s`, `now <= expires + 60 s`; a correct `sha-256`
    /// `Content-Digest`.
    pub fn strict() -> Self {
        SignaturePolicy {
            required_components: vec![
                "@method",
                "@path",
                "content-digest",
                "x-request-id",
                "x-request-nonce",
            ],
            require_query_component: true,
            require_created: true,
            require_expires: true,
            require_content_digest: true,
            skew: Duration::from_secs(60),
            max_age: Duration::from_secs(300),
            max_validity: Duration::from_secs(300),
        }
    }

    /// A relaxed policy for the RFC 9421 appendix B examples: no required components, no
    /// `expires`, no `Content-Digest` unless covered. `created` and `keyid` are still required
    /// and the time checks still apply to the parameters present, so pass a `now` near the
    /// example's `created`. Never use it for API requests.
    pub fn rfc_vectors() -> Self {
        SignaturePolicy {
            required_components: Vec::new(),
            require_query_component: false,
            require_expires: false,
            require_content_digest: false,
            ..SignaturePolicy::strict()
        }
    }

    /// The allowed clock skew (60 s in the strict policy).
    pub fn skew(&self) -> Duration {
        self.skew
    }

    /// The longest `expires - created` accepted (300 s in the strict policy).
    pub fn max_validity(&self) -> Duration {
        self.max_validity
    }
}

impl Default for SignaturePolicy {
    /// [`SignaturePolicy::strict`].
    fn default() -> Self {
        SignaturePolicy::strict()
    }
}

/// The service's rules on top of RFC 9421; returns the parsed `X-Request-Nonce`, if any.
pub(super) fn check_policy(
    parts: &HttpRequestParts<'_>,
    policy: &SignaturePolicy,
    now: Timestamp,
    components: &[Component],
    params: &Params,
) -> Result<Option<Nonce>, SignatureFailure> {
    if let Some(alg) = &params.alg {
        if alg != "ed25519" {
            return Err(SignatureFailure::UnsupportedAlg(alg.clone()));
        }
    }
    if params.keyid.is_none() {
        return Err(SignatureFailure::MissingKeyid);
    }
    if params.created.is_none() && policy.require_created {
        return Err(SignatureFailure::MissingCreated);
    }
    if params.expires.is_none() && policy.require_expires {
        return Err(SignatureFailure::MissingExpires);
    }
    check_window(policy, now, params.created, params.expires)?;

    let covers = |name: &str| components.iter().any(|c| c.name == name);
    for &required in &policy.required_components {
        if !covers(required) {
            return Err(SignatureFailure::MissingCoveredComponent(required));
        }
    }
    if policy.require_query_component && parts.has_query() && !covers("@query") {
        return Err(SignatureFailure::MissingCoveredComponent("@query"));
    }

    let nonce = parts
        .field_value("x-request-nonce")?
        .map(|v| Nonce::parse(v.as_bytes()))
        .transpose()
        .map_err(SignatureFailure::InvalidNonce)?;
    if let Some(param) = &params.nonce {
        if nonce.as_ref().map(Nonce::as_str) != Some(param.as_str()) {
            return Err(SignatureFailure::NonceMismatch);
        }
    }

    if policy.require_content_digest || covers("content-digest") {
        let digest = structured_field(parts, "content-digest", |e| {
            SignatureFailure::ContentDigest(DigestError::Malformed(e))
        })?
        .ok_or_else(|| SignatureFailure::MissingHeader("content-digest".to_owned()))?;
        verify_content_digest(&digest, parts.body).map_err(SignatureFailure::ContentDigest)?;
    }
    Ok(nonce)
}

/// The `created` / `expires` window, in milliseconds against `now`.
///
/// <https://www.rfc-editor.org/rfc/rfc9421#section-3.2.1>
fn check_window(
    policy: &SignaturePolicy,
    now: Timestamp,
    created: Option<i64>,
    expires: Option<i64>,
) -> Result<(), SignatureFailure> {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let secs_to_ms = |s: i64| s.saturating_mul(1000);
    let now = now.unix_millis();
    if let Some(created) = created.map(secs_to_ms) {
        if created > now.saturating_add(ms(policy.skew)) {
            return Err(SignatureFailure::CreatedInFuture);
        }
        if let Some(expires) = expires.map(secs_to_ms) {
            if expires <= created {
                return Err(SignatureFailure::ExpiresNotAfterCreated);
            }
            if expires > created.saturating_add(ms(policy.max_validity)) {
                return Err(SignatureFailure::ValidityTooLong);
            }
        }
    }
    if let Some(expires) = expires.map(secs_to_ms) {
        if now > expires.saturating_add(ms(policy.skew)) {
            return Err(SignatureFailure::Expired);
        }
    }
    if let Some(created) = created.map(secs_to_ms) {
        if now.saturating_sub(created) > ms(policy.max_age) {
            return Err(SignatureFailure::TooOld);
        }
    }
    Ok(())
}

//! Request authentication over the store, in the order of decisions.md: token (and scope), IP
//! allow-list, rate limit, signature and digest, nonce. Everything here happens before the body
//! is interpreted, so a rejection takes no `merchant_payment_id`.

use std::net::IpAddr;

use ed25519_dalek::VerifyingKey;
use ipnet::IpNet;

use super::PaymentService;
use crate::auth::nonce::nonce_expires_at;
use crate::auth::token::parse_bearer;
use crate::auth::{
    client_ip, Endpoint, Environment, HttpRequestParts, IpAllowList, PreparedSignature,
    SignaturePolicy, TokenHash,
};
use crate::clock::Timestamp;
use crate::ids::{PaymentId, ProjectId};
use crate::payment::Payment;
use crate::project::{Merchant, Project, TokenRecord};
use crate::store::NonceUse;
use crate::{ApiError, ErrorCode};

/// Authentication settings of a deployment.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Sandbox or production: decides the token prefix accepted.
    pub environment: Environment,
    /// Proxies whose `X-Forwarded-For` is trusted.
    pub trusted_proxies: Vec<IpNet>,
    /// The signature policy (decisions.md's strict one).
    pub policy: SignaturePolicy,
    /// Return the server's signature base in `401 signature_invalid` (sandbox only).
    pub signature_debug: bool,
}

impl AuthConfig {
    /// The settings for an environment: the strict policy, and the signature debugging aid
    /// only in the sandbox.
    pub fn for_environment(environment: Environment) -> Self {
        AuthConfig {
            environment,
            trusted_proxies: Vec::new(),
            policy: SignaturePolicy::strict(),
            signature_debug: environment == Environment::Sandbox,
        }
    }
}

/// A request to authenticate.
#[derive(Debug, Clone, Copy)]
pub struct AuthRequest<'a> {
    /// The endpoint called (decides the scope and whether a signature is required).
    pub endpoint: Endpoint,
    /// The request as received.
    pub parts: HttpRequestParts<'a>,
    /// The TCP peer address.
    pub peer: IpAddr,
    /// The payment the request reads (`GET /api/v1/payments/{id}`), if any: read in the same
    /// store round trip as the credentials, and handed back in [`AuthContext::payment`] only
    /// if it belongs to the caller's project.
    pub payment: Option<PaymentId>,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthContext {
    /// The token used.
    pub token: TokenRecord,
    /// Its project.
    pub project: Project,
    /// The project's merchant.
    pub merchant: Merchant,
    /// The client address the allow-list saw.
    pub client_ip: IpAddr,
    /// Whether a signature was verified (and its nonce recorded).
    pub signed: bool,
    /// The payment named by [`AuthRequest::payment`], when it exists and belongs to the
    /// project; `None` otherwise (answer `404 payment_not_found`).
    pub payment: Option<Payment>,
}

/// The nonce of a verified request, not yet recorded: the request is authenticated only once
/// it is, by [`PaymentService::record_nonce`] or in the same write as the payment by
/// [`PaymentService::create_payment_with_nonce`].
#[must_use = "an unrecorded nonce lets the request be replayed"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingNonce {
    project: ProjectId,
    nonce: String,
    now: Timestamp,
}

impl PendingNonce {
    /// The nonce as sent.
    pub fn as_str(&self) -> &str {
        &self.nonce
    }

    pub(crate) fn to_use(&self) -> NonceUse<'_> {
        NonceUse {
            project: self.project,
            nonce: &self.nonce,
            now: self.now,
            expires_at: nonce_expires_at(self.now),
        }
    }
}

/// The answer to a replayed nonce.
pub(crate) fn replayed() -> ApiError {
    ApiError::new(
        ErrorCode::RequestReplayed,
        "this X-Request-Nonce was already used; sign every request with a new nonce",
    )
}

impl PaymentService {
    /// Authenticates a request, recording its nonce. `rate_limit` is called with the project
    /// between the allow-list and the signature check (decisions.md's order); it returns `429`
    /// when the project is over its limit.
    pub async fn authenticate(
        &self,
        req: &AuthRequest<'_>,
        rate_limit: impl FnOnce(&Project) -> Result<(), ApiError>,
    ) -> Result<AuthContext, ApiError> {
        let (ctx, nonce) = self.authenticate_deferring_nonce(req, rate_limit).await?;
        if let Some(nonce) = nonce {
            self.record_nonce(&nonce).await?;
        }
        Ok(ctx)
    }

    /// Records a verified request's nonce: `401 request_replayed` if it was used already.
    pub async fn record_nonce(&self, nonce: &PendingNonce) -> Result<(), ApiError> {
        let n = nonce.to_use();
        if self
            .ports
            .store
            .use_nonce(n.project, n.nonce, n.now, n.expires_at)
            .await?
        {
            Ok(())
        } else {
            Err(replayed())
        }
    }

    /// [`authenticate`](Self::authenticate) up to the signature, leaving the nonce of a signed
    /// request to the caller, who must record it before acting on the request: a create passes
    /// it to [`create_payment_with_nonce`](Self::create_payment_with_nonce), which records it
    /// in the same store write as the payment.
    pub async fn authenticate_deferring_nonce(
        &self,
        req: &AuthRequest<'_>,
        rate_limit: impl FnOnce(&Project) -> Result<(), ApiError>,
    ) -> Result<(AuthContext, Option<PendingNonce>), ApiError> {
        let cfg = &self.auth;
        let store = &self.ports.store;
        let token_invalid = |m: &str| ApiError::new(ErrorCode::TokenInvalid, m);

        // 1. Token, project, merchant, scope.
        let header = req
            .parts
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| *v)
            .ok_or_else(|| token_invalid("missing Authorization: Bearer token"))?;
        let hash = parse_bearer(header, cfg.environment)?;
        // The signature is parsed (pure work, no I/O) before the store is asked, so that the
        // key is read in the same round trip as the token; its errors are reported in their
        // place in the order below, after the token, allow-list and rate-limit checks.
        let now = self.ports.clock.now();
        let always_signed = matches!(req.endpoint, Endpoint::CreatePayment | Endpoint::TestHelper);
        let has_signature = req
            .parts
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("signature-input"));
        let prepared = (always_signed || has_signature)
            .then(|| PreparedSignature::prepare(&req.parts, &cfg.policy, now));
        let keyid = prepared
            .as_ref()
            .and_then(|p| p.as_ref().ok())
            .map(PreparedSignature::keyid);
        let (found, payment) = match req.payment {
            Some(id) => {
                store
                    .auth_lookup_with_payment(hash.as_bytes(), keyid, id)
                    .await?
            }
            None => (store.auth_lookup(hash.as_bytes(), keyid).await?, None),
        };
        let token = found
            .token
            .filter(|t| TokenHash::from_bytes(t.hash).ct_eq(&hash))
            .ok_or_else(|| token_invalid("unknown token"))?;
        if token.revoked_at.is_some() {
            return Err(token_invalid("the token was revoked"));
        }
        let project = found
            .project
            .filter(|p| p.active)
            .ok_or_else(|| token_invalid("the project is not active"))?;
        let merchant = found
            .merchant
            .ok_or_else(|| token_invalid("the project is not active"))?;
        req.endpoint.check_scope(&token.scopes)?;

        // 2. IP allow-list, on the client address (X-Forwarded-For only from trusted proxies).
        let xff: Vec<&str> = req
            .parts
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for"))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .collect();
        let client = client_ip(req.peer, &xff, &cfg.trusted_proxies);
        if !project.ip_allow_list.is_empty() {
            let list = IpAllowList::parse(project.ip_allow_list.iter().map(String::as_str))
                .map_err(|e| ApiError::internal(format!("stored allow-list is invalid: {e}")))?;
            list.check(client)?;
        }

        // 3. Rate limit.
        rate_limit(&project)?;

        // 4. Signature and digest, then 5. the nonce.
        let needs_signature = match req.endpoint {
            Endpoint::CreatePayment | Endpoint::TestHelper => true,
            _ => project.signature_required,
        };
        let mut pending = None;
        if needs_signature {
            let debug = |e: crate::auth::SignatureError| {
                if cfg.signature_debug {
                    e.into_api_error(Environment::Sandbox)
                } else {
                    ApiError::from(e)
                }
            };
            let prepared = match prepared {
                Some(p) => p,
                // A GET of a project that requires signatures, sent without Signature-Input.
                None => PreparedSignature::prepare(&req.parts, &cfg.policy, now),
            }
            .map_err(debug)?;
            let key = found
                .key
                .filter(|k| k.revoked_at.is_none())
                .and_then(|k| VerifyingKey::from_bytes(&k.public_key).ok())
                .ok_or_else(|| debug(prepared.unknown_keyid()))?;
            let verified = prepared.verify(&key).map_err(debug)?;
            let nonce = verified.nonce.ok_or_else(|| {
                ApiError::new(ErrorCode::SignatureInvalid, "missing X-Request-Nonce")
            })?;
            pending = Some(PendingNonce {
                project: project.id,
                nonce: nonce.as_str().to_string(),
                now,
            });
        }
        Ok((
            AuthContext {
                token,
                merchant,
                client_ip: client,
                signed: needs_signature,
                payment: payment.filter(|p| p.project_id == project.id),
                project,
            },
            pending,
        ))
    }
}

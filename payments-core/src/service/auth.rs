//! Request authentication over the store, in the order of decisions.md: the request's form
//! (single-valued headers sent once), token (and scope), IP allow-list, rate limit, signature
//! and digest, nonce. Everything here happens before the body
//! is interpreted, so a rejection takes no `merchant_payment_id`.

use std::net::IpAddr;

use ipnet::IpNet;

use super::Gate;
use crate::auth::nonce::nonce_expires_at;
use crate::auth::token::parse_bearer;
use crate::auth::verifier::{announce, Announcement};
use crate::auth::{
    client_ip, Endpoint, Environment, HttpRequestParts, IpAllowList, IpRefusal, MissingScope,
    PreparedSignature, SignatureError, SignaturePolicy, TokenHash, TokenRefusal,
};
use crate::clock::Timestamp;
use crate::ids::{KeyId, PaymentId, ProjectId};
use crate::payment::Payment;
use crate::project::{KeyRecord, Merchant, Project, TokenRecord};
use crate::ratelimit::{Gcra, RateDecision, RateLimiter};
use crate::store::{AuthLookup, NonceUse, StoreError};
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

impl From<Environment> for AuthConfig {
    /// [`AuthConfig::for_environment`].
    fn from(environment: Environment) -> AuthConfig {
        AuthConfig::for_environment(environment)
    }
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
    /// The TCP peer address; `None` when the adapter does not know it (a router served
    /// without connection info). A project with an IP allow-list then refuses the request
    /// (`403 ip_not_allowed`): an unknown address is never taken as an allowed one. So does
    /// a peer that is a trusted proxy whose `X-Forwarded-For` has a malformed entry where the
    /// client should be ([`client_ip`]).
    pub peer: Option<IpAddr>,
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
    /// The client address the allow-list saw (`None`: unknown, see [`AuthRequest::peer`] and
    /// [`client_ip`]).
    pub client_ip: Option<IpAddr>,
    /// Whether a signature was verified (and its nonce recorded).
    pub signed: bool,
    /// The payment named by [`AuthRequest::payment`], when it exists and belongs to the
    /// project; `None` otherwise (answer `404 payment_not_found`).
    pub payment: Option<Payment>,
}

/// The nonce of a verified request, not yet recorded. It never leaves the core: it travels
/// inside [`Authenticated`] and is recorded by the operation that consumes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingNonce {
    project: ProjectId,
    nonce: String,
    now: Timestamp,
    /// The verified signature's `created`, Unix seconds.
    created: Option<i64>,
}

impl PendingNonce {
    pub(crate) fn to_use(&self) -> NonceUse<'_> {
        NonceUse {
            project: self.project,
            nonce: &self.nonce,
            now: self.now,
            expires_at: nonce_expires_at(self.now),
        }
    }
}

/// A request that passed every authentication check (token, scope, allow-list, rate limit,
/// signature and digest) but whose one-time nonce is not recorded yet.
///
/// Every merchant operation of the services takes it by value and records the nonce
/// before it acts ([`Payments::create_payment`](super::Payments::create_payment) in the same store write as the payment),
/// so an operation cannot run on a request whose nonce was forgotten: the only way to the
/// caller's [`AuthContext`] by value is [`Gate::accept`], which records it.
#[must_use = "the request is authenticated only once an operation consumes it (its nonce is unrecorded)"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    ctx: AuthContext,
    nonce: Option<PendingNonce>,
}

impl Authenticated {
    /// Who is calling (for logs and for choosing the operation); acting on the request needs
    /// the value itself.
    pub fn context(&self) -> &AuthContext {
        &self.ctx
    }

    /// The nonce as sent, for a signed request.
    pub fn nonce(&self) -> Option<&str> {
        self.nonce.as_ref().map(|n| n.nonce.as_str())
    }

    /// The verified signature's `created` (Unix seconds), for a signed request: what the
    /// request log's clock skew reads without parsing the signature's fields again.
    pub fn signature_created(&self) -> Option<i64> {
        self.nonce.as_ref().and_then(|n| n.created)
    }

    pub(crate) fn into_parts(self) -> (AuthContext, Option<PendingNonce>) {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::active(crate::planted::Bug::SkipNonceRecord) {
            return (self.ctx, None);
        }
        (self.ctx, self.nonce)
    }
}

/// The request headers that carry a single value, each allowed once per request (names as
/// they are written in messages). Two lines of one of them are ambiguous: parts of a chain
/// (proxy, framework, this service, the signature base, which joins repeated lines) would each
/// read a different value, e.g. the first `Authorization` for the token and both for a
/// covered `authorization` component.
pub const SINGLE_VALUE_HEADERS: [&str; 5] = [
    "Host",
    "Authorization",
    "Content-Type",
    "X-Request-ID",
    "X-Request-Nonce",
];

/// Why a request's form is refused before its token is looked at.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestFormError {
    /// A header of [`SINGLE_VALUE_HEADERS`] sent more than once: `400 bad_request`.
    #[error("the {name} header must be sent once (got {lines})")]
    RepeatedHeader {
        /// The header, as [`SINGLE_VALUE_HEADERS`] writes it.
        name: &'static str,
        /// How many lines of it came.
        lines: usize,
    },
    /// A body not declared as JSON ([`is_json_content_type`]): `415 unsupported_media_type`.
    #[error("a request body must be sent with Content-Type: application/json")]
    NotJson,
    /// A signed request's `X-Request-ID` that is not [`is_echoable_request_id`]:
    /// `400 bad_request`.
    #[error(
        "X-Request-ID must be 1 to 128 visible ASCII characters (it is signed, so the server \
         cannot replace it)"
    )]
    RequestIdNotEchoable,
}

impl RequestFormError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            RequestFormError::NotJson => ErrorCode::UnsupportedMediaType,
            _ => ErrorCode::BadRequest,
        }
    }
}

impl From<RequestFormError> for ApiError {
    fn from(e: RequestFormError) -> ApiError {
        ApiError::new(e.code(), e.to_string())
    }
}

/// Why [`Gate::authenticate`] refused a request, each with the stable code of its
/// answer ([`AuthError::code`]); the message of that answer is the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The request's form (`400`, `415`).
    #[error(transparent)]
    Form(#[from] RequestFormError),
    /// The token (`401 token_invalid`).
    #[error(transparent)]
    Token(#[from] TokenRefusal),
    /// The token lacks the endpoint's scope (`403 insufficient_scope`).
    #[error(transparent)]
    Scope(#[from] MissingScope),
    /// The project's IP allow-list (`403 ip_not_allowed`).
    #[error(transparent)]
    Ip(#[from] IpRefusal),
    /// Over the project's rate limit (`429 rate_limited`, `Retry-After` in whole seconds).
    #[error("the project's request rate limit is exceeded")]
    RateLimited {
        /// When the next request would be allowed.
        retry_after: std::time::Duration,
    },
    /// The signature or the digest (`401 signature_invalid`); `debug`: the answer carries
    /// the signature base (the sandbox's debugging aid).
    #[error("{error}")]
    Signature {
        /// What failed.
        error: SignatureError,
        /// Whether the answer shows the signature base.
        debug: bool,
    },
    /// A signed request without `X-Request-Nonce` (`401 signature_invalid`).
    #[error("missing X-Request-Nonce")]
    MissingNonce,
    /// The request's nonce was used already (`409 request_replayed`), from
    /// [`Gate::accept`].
    #[error("{REPLAYED}")]
    Replayed,
    /// The store, or the rate limiter's store, failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuthError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Form(e) => e.code(),
            AuthError::Token(_) => ErrorCode::TokenInvalid,
            AuthError::Scope(_) => ErrorCode::InsufficientScope,
            AuthError::Ip(_) => ErrorCode::IpNotAllowed,
            AuthError::RateLimited { .. } => ErrorCode::RateLimited,
            AuthError::Signature { .. } | AuthError::MissingNonce => ErrorCode::SignatureInvalid,
            AuthError::Replayed => ErrorCode::RequestReplayed,
            AuthError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        match e {
            AuthError::Form(e) => e.into(),
            AuthError::Token(e) => e.into(),
            AuthError::Scope(e) => e.into(),
            AuthError::Ip(e) => e.into(),
            AuthError::RateLimited { retry_after } => {
                ApiError::new(ErrorCode::RateLimited, e.to_string())
                    .with_retry_after(crate::ratelimit::retry_after_secs(retry_after))
            }
            AuthError::Signature { error, debug: true } => {
                error.into_api_error(Environment::Sandbox)
            }
            AuthError::Signature {
                error,
                debug: false,
            } => error.into(),
            AuthError::MissingNonce | AuthError::Replayed => ApiError::new(e.code(), e.to_string()),
            AuthError::Store(e) => e.into(),
        }
    }
}

/// A request [`Gate::authenticate`] refused: why, and the project whose token made it. The
/// project is known once the presented token's hash matched a stored token, also a revoked or
/// expired one or one of an inactive project (the token's own project); a token that matches
/// none, a request without one, and a refusal of the request's form before its token is read,
/// name no project: nobody can write into a project's log without its token's hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct Refused {
    /// Why.
    #[source]
    pub error: AuthError,
    /// The project of the token that made the request, when its hash matched one.
    pub project: Option<ProjectId>,
}

impl From<AuthError> for Refused {
    /// A refusal that names no project.
    fn from(error: AuthError) -> Refused {
        Refused {
            error,
            project: None,
        }
    }
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> ApiError {
        r.error.into()
    }
}

/// What [`Gate::authenticate`] read and prepared before the store's answer was judged.
struct Found<'a> {
    lookup: AuthLookup,
    payment: Option<Payment>,
    hash: TokenHash,
    prepared: Option<Result<PreparedSignature, SignatureError>>,
    announced: Option<Announcement<'a>>,
    /// Whether the endpoint is always signed.
    signed: bool,
}

/// The project of the stored token whose hash the presented one matches (compared in constant
/// time), revoked, expired or not; `None` when none matches.
fn token_project(token: Option<&TokenRecord>, hash: &TokenHash) -> Option<ProjectId> {
    token
        .filter(|t| TokenHash::from_bytes(t.hash).ct_eq(hash))
        .map(|t| t.project_id)
}

/// [`RequestFormError::RepeatedHeader`] when a header of [`SINGLE_VALUE_HEADERS`] is sent more
/// than once.
pub fn check_single_value_headers(headers: &[(&str, &[u8])]) -> Result<(), RequestFormError> {
    for name in SINGLE_VALUE_HEADERS {
        let lines = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count();
        if lines > 1 {
            return Err(RequestFormError::RepeatedHeader { name, lines });
        }
    }
    Ok(())
}

/// Whether a `Content-Type` value declares JSON: `application/json` in any case, optionally
/// with the single parameter `charset=utf-8` (any case, quoted or not), spaces around `;`.
pub fn is_json_content_type(value: &[u8]) -> bool {
    let Ok(value) = std::str::from_utf8(value) else {
        return false;
    };
    let mut parts = value.split(';').map(|p| p.trim_matches([' ', '\t']));
    if !parts
        .next()
        .is_some_and(|t| t.eq_ignore_ascii_case("application/json"))
    {
        return false;
    }
    parts.all(|param| {
        param.split_once('=').is_some_and(|(name, v)| {
            name.eq_ignore_ascii_case("charset") && {
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v);
                v.eq_ignore_ascii_case("utf-8")
            }
        })
    })
}

/// [`RequestFormError::NotJson`] when a request with a body (`has_body`) does not declare it
/// as JSON ([`is_json_content_type`]); a request without a body needs no `Content-Type`.
pub fn check_content_type(
    headers: &[(&str, &[u8])],
    has_body: bool,
) -> Result<(), RequestFormError> {
    if !has_body {
        return Ok(());
    }
    let declared = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| *v);
    if declared.is_some_and(is_json_content_type) {
        Ok(())
    } else {
        Err(RequestFormError::NotJson)
    }
}

/// Whether `value` is an `X-Request-ID` the server echoes as sent: 1 to 128 visible ASCII
/// characters (another one, or none, is replaced by a UUID the server makes).
pub fn is_echoable_request_id(value: &[u8]) -> bool {
    (1..=128).contains(&value.len()) && value.iter().all(u8::is_ascii_graphic)
}

/// `400 bad_request` when a signed request's `X-Request-ID` is present but not
/// [`is_echoable_request_id`]: it is a covered component, so the server cannot put its own id
/// in its place, and answering with another id than the one signed would break the link
/// between the merchant's request and the answer.
fn check_signed_request_id(headers: &[(&str, &[u8])]) -> Result<(), RequestFormError> {
    match headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("x-request-id"))
    {
        Some((_, v)) if !is_echoable_request_id(v) => Err(RequestFormError::RequestIdNotEchoable),
        _ => Ok(()),
    }
}

/// The message of `409 request_replayed`.
pub(crate) const REPLAYED: &str =
    "this X-Request-Nonce was already used; sign every request with a new nonce";

impl Gate<'_> {
    /// Records the request's nonce (`409 request_replayed` if it was used already) and hands
    /// over the caller's context: the way to an authenticated caller for operations that read
    /// (`GET` endpoints) or that the embedder carries out itself.
    pub async fn accept(self, auth: Authenticated) -> Result<AuthContext, AuthError> {
        let (ctx, nonce) = auth.into_parts();
        if let Some(nonce) = nonce {
            if !self.use_nonce(&nonce).await? {
                return Err(AuthError::Replayed);
            }
        }
        Ok(ctx)
    }

    /// Records a verified request's nonce: `false` when it was used already (a replay).
    pub(crate) async fn use_nonce(self, nonce: &PendingNonce) -> Result<bool, StoreError> {
        let n = nonce.to_use();
        self.ports
            .store
            .use_nonce(n.project, n.nonce, n.now, n.expires_at)
            .await
    }

    /// Authenticates a request in the order of the decisions record: the request's form
    /// (headers that carry one value sent once, [`check_single_value_headers`], `400`; a body
    /// declared as JSON, [`check_content_type`], `415`; a signed request's `X-Request-ID`,
    /// `400`), token (and scope), IP
    /// allow-list, then the project's rate limit (one request taken from `limiter` under the
    /// project's [`Gcra`] rule at the service clock's `now`: `429 rate_limited` with
    /// `Retry-After` when over it, `503` when the limiter's store fails), then signature and
    /// digest. The nonce of a signed request
    /// travels in the returned [`Authenticated`] and is recorded by the operation that
    /// consumes it. A refusal names the project of the token once the token's hash matched a
    /// stored one ([`Refused::project`]), whichever step refused it.
    pub async fn authenticate(
        self,
        req: &AuthRequest<'_>,
        limiter: &dyn RateLimiter,
    ) -> Result<Authenticated, Refused> {
        // 0. The form of the request.
        let (always_signed, has_signature) = check_form(req)?;
        // 1. Token, project, merchant, scope (the key and the payment read in the same trip).
        let now = self.ports.clock.now();
        let hash = bearer_of(req.parts.headers, self.auth.environment).map_err(AuthError::from)?;
        // The signature is parsed (pure work, no I/O) before the store is asked, so that the
        // key is read in the same round trip as the token; its errors are reported in their
        // place in the order below, after the token, allow-list and rate-limit checks.
        let prepared = (always_signed || has_signature)
            .then(|| PreparedSignature::prepare(&req.parts, &self.auth.policy, now));
        let keyid = prepared
            .as_ref()
            .and_then(|p| p.as_ref().ok())
            .map(PreparedSignature::keyid);
        // A well-formed signature will most likely be verified: a batch started by a
        // concurrent request meanwhile waits for it (dropped, it waits no more).
        let announced = keyid
            .is_some()
            .then(|| announce(self.ports.verifier.as_ref()));
        let (found, payment) = self
            .lookup(req, hash.as_bytes(), keyid)
            .await
            .map_err(AuthError::from)?;
        // From here on the token's hash matched a stored token (revoked, expired or not): each
        // refusal names its project.
        let project = token_project(found.token.as_ref(), &hash);
        let found = Found {
            lookup: found,
            payment,
            hash,
            prepared,
            announced,
            signed: always_signed,
        };
        self.admit(req, limiter, found, now)
            .await
            .map_err(|error| Refused { error, project })
    }

    /// Steps 1 (the token found, and its scope) to 5 of [`Gate::authenticate`], once the store
    /// answered: the caller's context and the nonce to record.
    async fn admit(
        self,
        req: &AuthRequest<'_>,
        limiter: &dyn RateLimiter,
        found: Found<'_>,
        now: Timestamp,
    ) -> Result<Authenticated, AuthError> {
        let Found {
            lookup,
            payment,
            hash,
            prepared,
            announced,
            signed: always_signed,
        } = found;
        let (token, project, merchant) =
            admit_token(lookup.token, lookup.project, lookup.merchant, &hash, now)?;
        req.endpoint.check_scope(&token.scopes)?;
        // 2. IP allow-list, on the client address (X-Forwarded-For only from trusted proxies).
        let client = client_address(req, &self.auth.trusted_proxies);
        check_allow_list(&project, client)?;
        // 3. Rate limit.
        match limiter
            .acquire(project.id, Gcra::new(project.rate_limit), now)
            .await?
        {
            RateDecision::Allowed => {}
            RateDecision::Limited { retry_after } => {
                return Err(AuthError::RateLimited { retry_after });
            }
        }
        // 4. Signature and digest, then 5. the nonce.
        let signed = always_signed || project.signature_required;
        let nonce = if signed {
            let prepared = prepared
                .unwrap_or_else(|| PreparedSignature::prepare(&req.parts, &self.auth.policy, now));
            Some(
                self.verify(prepared, lookup.key, announced, project.id, now)
                    .await?,
            )
        } else {
            None
        };
        Ok(Authenticated {
            ctx: AuthContext {
                token,
                merchant,
                client_ip: client.ok(),
                signed,
                payment: payment.filter(|p| p.project_id == project.id),
                project,
            },
            nonce,
        })
    }

    /// The token's record (with its project and merchant), the signing key's and, for a
    /// request about one payment, that payment: one store round trip.
    async fn lookup(
        self,
        req: &AuthRequest<'_>,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        let store = &self.ports.store;
        match req.payment {
            Some(id) => store.auth_lookup_with_payment(hash, keyid, id).await,
            None => Ok((store.auth_lookup(hash, keyid).await?, None)),
        }
    }

    /// Step 4: the signature (a prepared one, or why it could not be prepared) verified with
    /// the project's key (a revoked or unknown one is `unknown keyid`), in a batch with the
    /// concurrent requests' signatures; answers the nonce to record.
    async fn verify(
        self,
        prepared: Result<PreparedSignature, SignatureError>,
        key: Option<KeyRecord>,
        announced: Option<Announcement<'_>>,
        project: ProjectId,
        now: Timestamp,
    ) -> Result<PendingNonce, AuthError> {
        let debug = |error: SignatureError| AuthError::Signature {
            error,
            debug: self.auth.signature_debug,
        };
        let prepared = prepared.map_err(debug)?;
        // The key record is read (and its revocation checked) on every request; only the
        // decompression of its bytes is cached.
        let key = key
            .filter(|k| k.revoked_at.is_none())
            .and_then(|k| self.ports.verifier.key(&k.public_key))
            .ok_or_else(|| debug(prepared.unknown_keyid()))?;
        let announced = announced.unwrap_or_else(|| announce(self.ports.verifier.as_ref()));
        let valid = self
            .ports
            .verifier
            .verify(
                announced.redeem(),
                key,
                prepared.signature_base().as_bytes(),
                prepared.signature(),
                self.ports.clock.as_ref(),
            )
            .await;
        if !valid {
            return Err(debug(prepared.verification_failed()));
        }
        let nonce = prepared.nonce().ok_or(AuthError::MissingNonce)?;
        Ok(PendingNonce {
            project,
            nonce: nonce.as_str().to_string(),
            now,
            created: prepared.created(),
        })
    }
}

/// Step 0, the form of the request: single-valued headers sent once; a body declared as JSON;
/// the X-Request-ID of a signed request one the server can echo. Answers whether the endpoint
/// is always signed, and whether the request carries a `Signature-Input`.
fn check_form(req: &AuthRequest<'_>) -> Result<(bool, bool), AuthError> {
    let always_signed = matches!(
        req.endpoint,
        Endpoint::CreatePayment | Endpoint::TestHelper | Endpoint::ResendEvents
    );
    let has_signature = check_form_of(&req.parts, always_signed)?;
    Ok((always_signed, has_signature))
}

/// [`check_form`] of a request that is signed when `always_signed` (or when it carries a
/// `Signature-Input`); answers whether it carries one.
pub(super) fn check_form_of(
    parts: &HttpRequestParts<'_>,
    always_signed: bool,
) -> Result<bool, RequestFormError> {
    check_single_value_headers(parts.headers)?;
    check_content_type(parts.headers, !parts.body.is_empty())?;
    let has_signature = parts
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("signature-input"));
    if always_signed || has_signature {
        check_signed_request_id(parts.headers)?;
    }
    Ok(has_signature)
}

/// Step 1's first half: the hash of the `Authorization: Bearer` token of a deployment of
/// `env` ([`parse_bearer`]); `token_invalid` without one.
pub(super) fn bearer_of(
    headers: &[(&str, &[u8])],
    env: Environment,
) -> Result<TokenHash, TokenRefusal> {
    let header = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| *v)
        .ok_or(TokenRefusal::Missing)?;
    parse_bearer(header, env)
}

/// Step 1: the token found by its hash (compared again in constant time), neither revoked nor
/// expired (by the record and the clock, whatever store or cache it came from), of an active
/// project with its merchant.
fn admit_token(
    token: Option<TokenRecord>,
    project: Option<Project>,
    merchant: Option<Merchant>,
    hash: &TokenHash,
    now: Timestamp,
) -> Result<(TokenRecord, Project, Merchant), AuthError> {
    let token = token
        .filter(|t| TokenHash::from_bytes(t.hash).ct_eq(hash))
        .ok_or(TokenRefusal::Unknown)?;
    if token.revoked_at.is_some() {
        return Err(TokenRefusal::Revoked.into());
    }
    if token.expired_at(now) {
        return Err(TokenRefusal::Expired.into());
    }
    let project = project
        .filter(|p| p.active)
        .ok_or(TokenRefusal::ProjectInactive)?;
    let merchant = merchant.ok_or(TokenRefusal::ProjectInactive)?;
    Ok((token, project, merchant))
}

/// The client's address: the peer, or the address trusted proxies forwarded. A line that is
/// not UTF-8 is kept (lossily) so that it reads as a malformed entry.
fn client_address(req: &AuthRequest<'_>, trusted: &[IpNet]) -> Result<IpAddr, &'static str> {
    let xff: Vec<std::borrow::Cow<'_, str>> = req
        .parts
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for"))
        .map(|(_, v)| String::from_utf8_lossy(v))
        .collect();
    let xff: Vec<&str> = xff.iter().map(|l| l.as_ref()).collect();
    match req.peer {
        None => Err("the server does not know the client address"),
        Some(peer) => client_ip(peer, &xff, trusted).map_err(|_| {
            "an X-Forwarded-For entry from a trusted proxy is not an IP address, so the \
             client address is unknown"
        }),
    }
}

/// Step 2: a project with an allow-list admits only a known client address on it.
fn check_allow_list(
    project: &Project,
    client: Result<IpAddr, &'static str>,
) -> Result<(), AuthError> {
    if project.ip_allow_list.is_empty() {
        return Ok(());
    }
    let list = IpAllowList::parse(project.ip_allow_list.iter().map(String::as_str))
        .map_err(|e| StoreError::Corrupt(format!("project {}'s allow-list: {e}", project.id)))?;
    let client = client.map_err(IpRefusal::ClientUnknown)?;
    list.check(client)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::auth::{Scope, SignatureFailure};

    /// Every refusal of `authenticate`, one of each kind.
    fn every_refusal() -> Vec<AuthError> {
        let signature = SignatureError {
            failure: SignatureFailure::MissingSignature,
            signature_base: Some("\"@method\": POST".into()),
        };
        vec![
            RequestFormError::RepeatedHeader {
                name: "Host",
                lines: 2,
            }
            .into(),
            RequestFormError::NotJson.into(),
            RequestFormError::RequestIdNotEchoable.into(),
            TokenRefusal::Missing.into(),
            TokenRefusal::OtherEnvironment(Environment::Production).into(),
            TokenRefusal::Revoked.into(),
            TokenRefusal::Expired.into(),
            MissingScope(Scope::PaymentsCreate).into(),
            IpRefusal::NotListed(IpAddr::from([192, 0, 2, 9])).into(),
            IpRefusal::ClientUnknown("the server does not know the client address").into(),
            AuthError::RateLimited {
                retry_after: Duration::from_millis(1500),
            },
            AuthError::Signature {
                error: signature.clone(),
                debug: true,
            },
            AuthError::Signature {
                error: signature,
                debug: false,
            },
            AuthError::MissingNonce,
            StoreError::Corrupt("a row".into()).into(),
        ]
    }

    #[test]
    fn each_refusal_answers_its_code_with_its_text() {
        for e in every_refusal() {
            let api = ApiError::from(e.clone());
            assert_eq!(api.code, e.code(), "{e:?}");
            if !matches!(e, AuthError::Store(_)) {
                assert_eq!(api.message, e.to_string(), "{e:?}");
            }
        }
    }

    #[test]
    fn the_wire_of_the_refusals_is_that_of_the_spec() {
        let wire: Vec<(&str, String, Option<u64>, bool)> = every_refusal()
            .into_iter()
            .map(ApiError::from)
            .map(|a| {
                let base = a.signature_base.is_some();
                (a.code.as_str(), a.message, a.retry_after, base)
            })
            .collect();
        let expect = |code, message: &str, retry, base| (code, message.to_string(), retry, base);
        assert_eq!(
            wire,
            vec![
                expect(
                    "bad_request",
                    "the Host header must be sent once (got 2)",
                    None,
                    false
                ),
                expect(
                    "unsupported_media_type",
                    "a request body must be sent with Content-Type: application/json",
                    None,
                    false
                ),
                expect(
                    "bad_request",
                    "X-Request-ID must be 1 to 128 visible ASCII characters (it is signed, so \
                     the server cannot replace it)",
                    None,
                    false
                ),
                expect(
                    "token_invalid",
                    "missing Authorization: Bearer token",
                    None,
                    false
                ),
                expect(
                    "token_invalid",
                    "token is not a production token (expected prefix nl_live_)",
                    None,
                    false
                ),
                expect("token_invalid", "the token was revoked", None, false),
                expect("token_invalid", "the token has expired", None, false),
                expect(
                    "insufficient_scope",
                    "token lacks the scope payments:create",
                    None,
                    false
                ),
                expect(
                    "ip_not_allowed",
                    "source address 192.0.2.9 is not in the project's IP allow-list",
                    None,
                    false
                ),
                expect(
                    "ip_not_allowed",
                    "the server does not know the client address, and the project has an IP \
                     allow-list",
                    None,
                    false
                ),
                expect(
                    "rate_limited",
                    "the project's request rate limit is exceeded",
                    Some(2),
                    false
                ),
                expect("signature_invalid", "missing Signature header", None, true),
                expect("signature_invalid", "missing Signature header", None, false),
                expect("signature_invalid", "missing X-Request-Nonce", None, false),
                expect(
                    "internal_error",
                    &ApiError::from(StoreError::Corrupt("a row".into())).message,
                    None,
                    false
                ),
            ]
        );
    }
}

//! Project tokens (`Authorization: Bearer nl_test_...`), their hash at rest, and scopes.
//!
//! A token is `nl_test_` (sandbox) or `nl_live_` (production) followed by 32 random bytes in
//! base64url without padding (43 characters). The server stores only [`TokenHash`] (SHA-256)
//! and the display prefix ([`token_prefix`]).

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::RandomSource;

/// Random bytes in a token.
pub const TOKEN_RANDOM_BYTES: usize = 32;
/// Length of the random part in base64url without padding.
const TOKEN_RANDOM_CHARS: usize = 43;
/// Characters of the random part shown in `token_prefix`.
const PREFIX_RANDOM_CHARS: usize = 6;

/// The deployment's environment; tokens of one are refused by the other.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Environment {
    /// The sandbox: tokens start with `nl_test_`.
    Sandbox,
    /// Production: tokens start with `nl_live_`.
    Production,
}

impl Environment {
    /// The token prefix of this environment.
    pub const fn token_prefix(self) -> &'static str {
        match self {
            Environment::Sandbox => "nl_test_",
            Environment::Production => "nl_live_",
        }
    }

    /// `sandbox` or `production`, as in the server setting.
    pub const fn as_str(self) -> &'static str {
        match self {
            Environment::Sandbox => "sandbox",
            Environment::Production => "production",
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not `sandbox` or `production`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown environment \"{0}\": expected sandbox or production")]
pub struct ParseEnvironmentError(String);

impl FromStr for Environment {
    type Err = ParseEnvironmentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sandbox" => Ok(Environment::Sandbox),
            "production" => Ok(Environment::Production),
            other => Err(ParseEnvironmentError(other.to_owned())),
        }
    }
}

/// The SHA-256 of a token, the only form stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// The hash of a token string.
    pub fn of(token: &str) -> TokenHash {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// Wraps stored hash bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> TokenHash {
        TokenHash(bytes)
    }

    /// The hash bytes, for storage.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Constant-time equality: use this, not `==`, when comparing a presented token's hash with
    /// a stored one outside an indexed lookup.
    pub fn ct_eq(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({})", hex::encode(self.0))
    }
}

/// A newly issued token: the secret (shown once), its hash and display prefix (stored).
pub struct IssuedToken {
    secret: String,
    /// What the server stores.
    pub hash: TokenHash,
    /// What the cabinet and `GET /api/v1/project` show: environment prefix plus 6 characters.
    pub token_prefix: String,
}

impl IssuedToken {
    /// Generates a token for `env`: prefix plus 32 random bytes in base64url.
    pub fn generate(env: Environment, rng: &dyn RandomSource) -> IssuedToken {
        let random: [u8; TOKEN_RANDOM_BYTES] = crate::random::bytes(rng);
        let secret = format!("{}{}", env.token_prefix(), URL_SAFE_NO_PAD.encode(random));
        IssuedToken {
            hash: TokenHash::of(&secret),
            token_prefix: token_prefix(&secret).to_owned(),
            secret,
        }
    }

    /// The token itself, to be shown once and never stored or logged.
    pub fn secret(&self) -> &str {
        &self.secret
    }
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("secret", &"<redacted>")
            .field("hash", &self.hash)
            .field("token_prefix", &self.token_prefix)
            .finish()
    }
}

/// The displayable leading part of a token: everything up to and including the 6 characters
/// after the 8-character environment prefix (less if the token is shorter).
pub fn token_prefix(token: &str) -> &str {
    let end = token
        .char_indices()
        .nth(Environment::Sandbox.token_prefix().len() + PREFIX_RANDOM_CHARS)
        .map_or(token.len(), |(i, _)| i);
    &token[..end]
}

/// Parses `Authorization: Bearer <token>` for a deployment of `env` and returns the token's hash
/// for the store lookup. The scheme is case-insensitive (RFC 9110 section 11.1).
///
/// Missing scheme, a token of the other environment, a wrong length (a truncated copy) or a
/// character outside base64url: `401 token_invalid`. The message never repeats the token.
///
/// <https://www.rfc-editor.org/rfc/rfc6750#section-2.1>
pub fn parse_bearer(header_value: &[u8], env: Environment) -> Result<TokenHash, TokenRefusal> {
    let value = std::str::from_utf8(header_value).map_err(|_| TokenRefusal::NotAscii)?;
    let (scheme, token) = value.split_once(' ').ok_or(TokenRefusal::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(TokenRefusal::NotBearer);
    }
    let token = token.trim_matches(' ');
    let Some(random) = token.strip_prefix(env.token_prefix()) else {
        return Err(TokenRefusal::OtherEnvironment(env));
    };
    if random.len() != TOKEN_RANDOM_CHARS
        || URL_SAFE_NO_PAD
            .decode(random)
            .map_or(true, |b| b.len() != TOKEN_RANDOM_BYTES)
    {
        return Err(TokenRefusal::Malformed);
    }
    Ok(TokenHash::of(token))
}

/// Why a request's token is refused: `401 token_invalid`, with the reason as the message. No
/// reason repeats the token.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// No `Authorization` header.
    #[error("missing Authorization: Bearer token")]
    Missing,
    /// The header's value is not ASCII.
    #[error("Authorization header is not ASCII")]
    NotAscii,
    /// Another scheme than `Bearer`, or no token after it.
    #[error("expected Authorization: Bearer <token>")]
    NotBearer,
    /// A token of the other environment: this deployment is the one named.
    #[error("token is not a {0} token (expected prefix {prefix})", prefix = .0.token_prefix())]
    OtherEnvironment(Environment),
    /// A wrong length (a truncated copy) or a character outside base64url.
    #[error("token is malformed or truncated")]
    Malformed,
    /// No such token.
    #[error("unknown token")]
    Unknown,
    /// The token was revoked.
    #[error("the token was revoked")]
    Revoked,
    /// The token was issued with a lifetime, and it has ended: refused as a revoked token
    /// is (the same code), with its own reason.
    #[error("the token has expired")]
    Expired,
    /// The token's project is inactive (or gone).
    #[error("the project is not active")]
    ProjectInactive,
}

/// A token without the scope its endpoint requires: `403 insufficient_scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("token lacks the scope {0}")]
pub struct MissingScope(pub Scope);

/// A permission granted to a token.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// `payments:create`: create payments.
    PaymentsCreate,
    /// `payments:read`: read payments.
    PaymentsRead,
    /// `payments:test`: sandbox test-helper endpoints.
    PaymentsTest,
    /// `events:read`: list and read the project's callback events with their attempts.
    EventsRead,
    /// `events:resend`: resend callbacks (one event, every undelivered event since a time,
    /// or a closed payment's callback).
    EventsResend,
    /// `balance:read`: the project's balance, its ledger entries and statements.
    BalanceRead,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 6] = [
        Scope::PaymentsCreate,
        Scope::PaymentsRead,
        Scope::PaymentsTest,
        Scope::EventsRead,
        Scope::EventsResend,
        Scope::BalanceRead,
    ];

    /// The scopes a new token starts with where a person chooses them (the cabinet's form):
    /// what a shop's backend needs to take payments, creating and reading them, and nothing
    /// it does not; the others are chosen on purpose.
    pub const SUGGESTED: [Scope; 2] = [Scope::PaymentsCreate, Scope::PaymentsRead];

    /// The scope string.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::PaymentsCreate => "payments:create",
            Scope::PaymentsRead => "payments:read",
            Scope::PaymentsTest => "payments:test",
            Scope::EventsRead => "events:read",
            Scope::EventsResend => "events:resend",
            Scope::BalanceRead => "balance:read",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a known scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope \"{0}\"")]
pub struct ParseScopeError(String);

impl FromStr for Scope {
    type Err = ParseScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| ParseScopeError(s.to_owned()))
    }
}

/// The token-authenticated endpoints, for the scope check.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `POST /api/v1/payments`.
    CreatePayment,
    /// `GET /api/v1/payments/{id}` and `GET /api/v1/payments/{id}/history`.
    GetPayment,
    /// `GET /api/v1/payments` (the list).
    ListPayments,
    /// `GET /api/v1/project`.
    GetProject,
    /// `POST /api/v1/test/payments/{id}/complete` and `.../cancel`.
    TestHelper,
    /// `GET /api/v1/events` and `GET /api/v1/events/{id}`.
    ReadEvents,
    /// `POST /api/v1/events/{id}/resend`, `POST /api/v1/events/recover` and
    /// `POST /api/v1/payments/{id}/resend_callback`.
    ResendEvents,
    /// `GET /api/v1/balance`, `GET /api/v1/balance/entries` and
    /// `GET /api/v1/balance/statement`.
    ReadBalance,
    /// `POST /api/v1/payments/{id}/appeals`.
    OpenAppeal,
    /// `GET /api/v1/payments/{id}/appeals`, `GET /api/v1/appeals`, `GET /api/v1/appeals/{id}`
    /// and its receipts.
    ReadAppeals,
}

impl Endpoint {
    /// The scope the endpoint needs; `None` means any valid token.
    pub const fn required_scope(self) -> Option<Scope> {
        match self {
            Endpoint::CreatePayment => Some(Scope::PaymentsCreate),
            Endpoint::GetPayment | Endpoint::ListPayments => Some(Scope::PaymentsRead),
            Endpoint::GetProject => None,
            Endpoint::TestHelper => Some(Scope::PaymentsTest),
            Endpoint::ReadEvents => Some(Scope::EventsRead),
            Endpoint::ResendEvents => Some(Scope::EventsResend),
            Endpoint::ReadBalance => Some(Scope::BalanceRead),
            Endpoint::OpenAppeal => Some(Scope::PaymentsCreate),
            Endpoint::ReadAppeals => Some(Scope::PaymentsRead),
        }
    }

    /// Checks that a token with `granted` scopes may call this endpoint: the scope it lacks
    /// otherwise (`403 insufficient_scope`).
    pub fn check_scope(self, granted: &[Scope]) -> Result<(), MissingScope> {
        match self.required_scope() {
            Some(needed) if !granted.contains(&needed) => Err(MissingScope(needed)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Fixed;
    use crate::{ApiError, ErrorCode};

    #[test]
    fn generated_tokens_carry_the_environment_prefix() {
        let t = IssuedToken::generate(Environment::Sandbox, &Fixed(0xfb));
        assert_eq!(t.secret(), format!("nl_test_{}", "-_v7".repeat(10) + "-_s"));
        assert_eq!(t.token_prefix, "nl_test_-_v7-_");
        let t = IssuedToken::generate(Environment::Production, &Fixed(0));
        assert_eq!(t.secret(), format!("nl_live_{}", "A".repeat(43)));
        assert_eq!(t.token_prefix, "nl_live_AAAAAA");
        assert_eq!(t.hash, TokenHash::of(t.secret()));
        assert!(!format!("{t:?}").contains(t.secret()));
    }

    #[test]
    fn hash_is_sha256_of_the_whole_token() {
        let token = format!("nl_test_{}", "A".repeat(43));
        // python3 -c 'import hashlib;print(hashlib.sha256(b"nl_test_"+b"A"*43).hexdigest())'
        assert_eq!(
            hex::encode(TokenHash::of(&token).as_bytes()),
            "1d3007f5cccd76a08865b80966a36c44bf8a507a5c62830c7a3fbdf1e9ccc40c"
        );
        assert_eq!(TokenHash::of(&token), TokenHash::of(&token.clone()));
        assert!(TokenHash::of(&token).ct_eq(&TokenHash::of(&token)));
        assert!(!TokenHash::of(&token).ct_eq(&TokenHash::of("nl_test_x")));
    }

    #[test]
    fn bearer_parsing() {
        let t = IssuedToken::generate(Environment::Sandbox, &Fixed(7));
        let header = format!("Bearer {}", t.secret());
        assert_eq!(
            parse_bearer(header.as_bytes(), Environment::Sandbox),
            Ok(t.hash)
        );
        let lower = format!("bearer {}", t.secret());
        assert_eq!(
            parse_bearer(lower.as_bytes(), Environment::Sandbox),
            Ok(t.hash)
        );
        let upper = format!("BEARER {}", t.secret());
        assert_eq!(
            parse_bearer(upper.as_bytes(), Environment::Sandbox),
            Ok(t.hash)
        );

        let reject = |v: &str, env| {
            let e = ApiError::from(parse_bearer(v.as_bytes(), env).unwrap_err());
            assert_eq!(e.code, ErrorCode::TokenInvalid, "{v}");
            assert!(
                !e.message.contains(&t.secret()[8..]),
                "message leaks the token"
            );
            e.message
        };
        assert_eq!(
            reject(&header, Environment::Production),
            "token is not a production token (expected prefix nl_live_)"
        );
        let truncated = &header[..header.len() - 1];
        assert_eq!(
            reject(truncated, Environment::Sandbox),
            "token is malformed or truncated"
        );
        let longer = format!("{header}A");
        assert_eq!(
            reject(&longer, Environment::Sandbox),
            "token is malformed or truncated"
        );
        let bad_char = format!("Bearer nl_test_{}*", "A".repeat(42));
        assert_eq!(
            reject(&bad_char, Environment::Sandbox),
            "token is malformed or truncated"
        );
        assert_eq!(
            reject(&format!("Basic {}", t.secret()), Environment::Sandbox),
            "expected Authorization: Bearer <token>"
        );
        assert_eq!(
            reject(t.secret(), Environment::Sandbox),
            "expected Authorization: Bearer <token>"
        );
        assert_eq!(
            reject("Bearer ", Environment::Sandbox),
            "token is not a sandbox token (expected prefix nl_test_)"
        );
    }

    #[test]
    fn token_prefix_is_env_prefix_plus_six() {
        assert_eq!(token_prefix("nl_live_abcdefghij"), "nl_live_abcdef");
        assert_eq!(token_prefix("nl_live_abc"), "nl_live_abc");
    }

    #[test]
    fn scopes_round_trip_and_endpoints_need_theirs() {
        for s in Scope::ALL {
            assert_eq!(s.as_str().parse::<Scope>(), Ok(s));
        }
        assert_eq!("payments:create".parse(), Ok(Scope::PaymentsCreate));
        assert_eq!("payments:read".parse(), Ok(Scope::PaymentsRead));
        assert_eq!("payments:test".parse(), Ok(Scope::PaymentsTest));
        assert_eq!("events:read".parse(), Ok(Scope::EventsRead));
        assert_eq!("events:resend".parse(), Ok(Scope::EventsResend));
        assert!("payments:*".parse::<Scope>().is_err());
        assert_eq!(
            Endpoint::ReadEvents.check_scope(&[Scope::PaymentsRead]),
            Err(MissingScope(Scope::EventsRead)),
            "reading payments does not read events"
        );
        assert_eq!(
            Endpoint::ResendEvents.check_scope(&[Scope::EventsRead]),
            Err(MissingScope(Scope::EventsResend)),
            "reading events does not resend them"
        );
        assert!("Payments:read".parse::<Scope>().is_err());

        assert_eq!(
            Endpoint::CreatePayment.required_scope(),
            Some(Scope::PaymentsCreate)
        );
        assert_eq!(
            Endpoint::GetPayment.required_scope(),
            Some(Scope::PaymentsRead)
        );
        assert_eq!(Endpoint::GetProject.required_scope(), None);
        assert_eq!(
            Endpoint::TestHelper.required_scope(),
            Some(Scope::PaymentsTest)
        );

        assert_eq!(Endpoint::GetProject.check_scope(&[]), Ok(()));
        assert_eq!(
            Endpoint::GetPayment.check_scope(&[Scope::PaymentsRead]),
            Ok(())
        );
        let e = ApiError::from(
            Endpoint::CreatePayment
                .check_scope(&[Scope::PaymentsRead])
                .unwrap_err(),
        );
        assert_eq!(e.code, ErrorCode::InsufficientScope);
        assert_eq!(e.message, "token lacks the scope payments:create");
        assert!(Endpoint::TestHelper
            .check_scope(&[Scope::PaymentsCreate, Scope::PaymentsRead])
            .is_err());
    }

    #[test]
    fn environments() {
        assert_eq!(Environment::Sandbox.token_prefix(), "nl_test_");
        assert_eq!(Environment::Production.token_prefix(), "nl_live_");
        assert_eq!("sandbox".parse(), Ok(Environment::Sandbox));
        assert_eq!("production".parse(), Ok(Environment::Production));
        assert!("prod".parse::<Environment>().is_err());
    }
}

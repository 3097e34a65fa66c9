//! What the cabinet's integration tests share: the payment service over the in-memory store
//! and a manual clock, with a provider and a rate source that answer nothing.

use std::sync::Arc;

use async_trait::async_trait;
use payments_cabinet::accounts::{Cabinet, Client};
use payments_cabinet::secrets;
use payments_core::auth::Environment;
use payments_core::payment::Currency;
use payments_core::provider::{ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest};
use payments_core::sealing::SealingKeys;
use payments_core::service::{AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
use payments_core::Clock;

/// Issues no requisites (and, by default, takes no appeals: support decides them).
pub struct NoProvider;

#[async_trait]
impl RequisiteProvider for NoProvider {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        ProviderOutcome::NoRequisites("none in these tests".into())
    }
}

/// Knows no course.
pub struct NoRates;

#[async_trait]
impl RateSource for NoRates {
    async fn course(&self, _: Currency) -> Option<rust_decimal::Decimal> {
        None
    }
}

/// The sandbox's payment service over `store` on `clock`, sealing with `sealing`, its random
/// source seeded with `seed` (another service over the same stores takes another seed).
pub fn service(
    store: Arc<MemoryStore>,
    clock: &ManualClock,
    sealing: SealingKeys,
    seed: u64,
) -> PaymentService {
    PaymentService::new(
        Ports::new(
            store,
            Arc::new(NoProvider),
            Arc::new(NoRates),
            Arc::new(clock.clone()),
            Arc::new(SeededRandom::new(seed)),
        ),
        ServiceConfig {
            sealing,
            ..ServiceConfig::default()
        },
        AuthConfig::for_environment(Environment::Sandbox),
    )
}

/// `email` signs in with `password` from `client` and sets up the authenticator with its first
/// code (on `clock`): the full session's cookie value, the TOTP key and the recovery codes.
pub async fn enrolled(
    cabinet: &Cabinet,
    clock: &ManualClock,
    email: &str,
    password: &str,
    client: &Client,
) -> (String, Vec<u8>, Vec<String>) {
    let (half, _) = cabinet
        .sign_in()
        .password(email, password, client, None)
        .await
        .expect("the password");
    let cookie = half.cookie.expose().to_string();
    let current = cabinet
        .sessions()
        .current(&cookie)
        .await
        .expect("store")
        .expect("a live session");
    let enrolment = cabinet
        .two_factor()
        .enrolment(&current)
        .await
        .expect("enrolment");
    let key = secrets::totp_key_from_base32(&enrolment.key_base32).expect("base32");
    let code = secrets::totp_code(&key, secrets::totp_step(clock.now().unix_secs()));
    let (full, codes) = cabinet
        .two_factor()
        .confirm_enrolment(&current, &cookie, &code, client)
        .await
        .expect("confirmed");
    (full.cookie.expose().to_string(), key, codes)
}

//! Shared support of the integration tests: the fixture payment, a deterministic
//! requisite provider, a settable rate source, and a service harness over the in-memory store.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rust_decimal::Decimal;
use uuid::Uuid;

use payments_core::amount::Amount;
use payments_core::auth::Environment;
use payments_core::bank::BankCatalog;
use payments_core::callback::address::AddressPolicy;
use payments_core::callback::destination::CallbackUrl;
use payments_core::payment::{Currency, Flow, Payment, PaymentMethod, Requisites};
use payments_core::project::{Contract, Merchant, MethodTerms, Project, RateLimit};
use payments_core::provider::{
    IssuedRequisites, ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest,
};
use payments_core::service::{AuthConfig, CreateOutcome, PaymentService, Ports, ServiceConfig};
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::store::{MerchantStore, Store};
use payments_core::testing::{fixtures, ManualClock, MemoryStore, SeededRandom, TestCaller};
use payments_core::{ApiError, MerchantId, PaymentId, ProjectId, Timestamp};

/// 2026-10-01T12:00:00.000Z.
pub const T_CREATED: i64 = 1_790_856_000_000;

pub fn ts(millis: i64) -> Timestamp {
    Timestamp::from_unix_millis(millis)
}

pub fn amount(s: &str) -> Amount {
    Amount::parse(s).expect("test amounts are valid")
}

pub fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).expect("test decimals are valid")
}

pub fn url(s: &str) -> CallbackUrl {
    CallbackUrl::parse(s, AddressPolicy::default()).expect("test URLs are valid")
}

pub fn payment_id(n: u128) -> PaymentId {
    PaymentId::from_uuid(Uuid::from_u128(n))
}

pub fn project_id(n: u128) -> ProjectId {
    ProjectId::from_uuid(Uuid::from_u128(n))
}

pub fn merchant_id(n: u128) -> MerchantId {
    MerchantId::from_uuid(Uuid::from_u128(n))
}

/// Course 100, fee 11 %: the spec's worked example.
pub fn pricing_100_11() -> Pricing {
    Pricing {
        course: Course::new(dec("100")).unwrap(),
        fee_percent: FeePercent::new(dec("11")).unwrap(),
    }
}

/// Requisites with a QR code link and no deeplink.
pub fn requisites() -> Requisites {
    Requisites {
        requisite: "79001234567".into(),
        holder_name: "IVAN I.".into(),
        bank: Some("Сбербанк".into()),
        qrcode_link: Some("https://qr.example.com/q/1".into()),
        deeplink_url: None,
    }
}

/// The fixture payment, status `created`: id `5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f`, project
/// `0e1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b`, `order-1001`, 3400 RUB by `sbp`, created
/// 2026-10-01T12:00:00Z with a 15-minute lifetime, live.
pub fn fixture() -> Payment {
    fixtures::payment(
        "5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f".parse().unwrap(),
        "0e1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b".parse().unwrap(),
        &fixtures::request("order-1001", "3400", PaymentMethod::Sbp),
        Flow::RuntimeLive,
        ts(T_CREATED),
        Duration::from_secs(15 * 60),
    )
}

/// A deterministic requisite provider. The amount's fraction picks the outcome, like the
/// sandbox provider's magic amounts: `.13` no requisites, `.14` ambiguous, `.15` not routable,
/// `.16` never answers; anything else gets fresh requisites (never reused).
#[derive(Debug, Default)]
pub struct TestProvider {
    pub calls: AtomicUsize,
    next: AtomicU64,
    /// Declares itself local ([`RequisiteProvider::issues_locally`]).
    pub local: AtomicBool,
    /// Numbers the requisite by the payment id instead of a counter, so that asking for a
    /// payment that is never stored changes no later payment's requisite.
    pub keyed: AtomicBool,
    /// Takes the appeals sent to it (else it answers that it takes none).
    pub takes_appeals: AtomicBool,
    /// The appeals it took, in order.
    pub appeals: Mutex<Vec<payments_core::provider::AppealInquiry>>,
}

#[async_trait]
impl RequisiteProvider for TestProvider {
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match request.amount.micros() % 1_000_000 {
            130_000 => {
                return ProviderOutcome::NoRequisites("no requisites for this amount".into())
            }
            140_000 => return ProviderOutcome::Ambiguous("the provider lost the request".into()),
            150_000 => return ProviderOutcome::NotRoutable("no route for this amount".into()),
            160_000 => std::future::pending::<()>().await,
            _ => {}
        }
        let n = if self.keyed.load(Ordering::SeqCst) {
            (request.payment_id.as_uuid().as_u128() % 1_000_000_000) as u64
        } else {
            self.next.fetch_add(1, Ordering::SeqCst)
        };
        let (requisite, qrcode_link, deeplink_url) = match request.payment_method {
            PaymentMethod::Sbp => (
                format!("79{n:09}"),
                Some(format!("https://qr.example.com/{}", request.payment_id)),
                None,
            ),
            _ => (
                format!("2200{n:012}"),
                None,
                Some(format!("https://bank.example.com/open/{n}")),
            ),
        };
        let mut issued = IssuedRequisites::new(requisite, "TEST HOLDER").with_bank_name("сбербанк");
        issued.qrcode_link = qrcode_link;
        issued.deeplink_url = deeplink_url;
        ProviderOutcome::Issued(issued)
    }

    fn issues_locally(&self) -> bool {
        self.local.load(Ordering::SeqCst)
    }

    async fn submit_appeal(
        &self,
        _name: &payments_core::provider::ProviderName,
        inquiry: &payments_core::provider::AppealInquiry,
    ) -> payments_core::provider::AppealSubmission {
        if !self.takes_appeals.load(Ordering::SeqCst) {
            return payments_core::provider::AppealSubmission::NotSupported;
        }
        self.appeals.lock().unwrap().push(inquiry.clone());
        payments_core::provider::AppealSubmission::Taken
    }
}

/// Fixed courses per currency, changeable between requests.
#[derive(Debug, Default)]
pub struct TestRates {
    pub courses: Mutex<HashMap<Currency, Decimal>>,
    /// When set, the rate source never answers (a rate API that hangs).
    pub hang: AtomicBool,
}

impl TestRates {
    pub fn with(currency: Currency, course: &str) -> TestRates {
        let rates = TestRates::default();
        rates.set(currency, course);
        rates
    }

    pub fn set(&self, currency: Currency, course: &str) {
        self.courses.lock().unwrap().insert(currency, dec(course));
    }
}

#[async_trait]
impl RateSource for TestRates {
    async fn course(&self, currency: Currency) -> Option<Decimal> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.courses.lock().unwrap().get(&currency).copied()
    }
}

/// sbp (10 to 1 000 000, fee 11 %) and card_transfer (100 to 500 000, fee 2.5 %), in RUB and USD.
pub fn contract() -> Contract {
    Contract {
        currencies: vec![Currency::RUB, Currency::parse("USD").unwrap()],
        methods: vec![
            MethodTerms {
                method: PaymentMethod::Sbp,
                min_amount: Some(dec("10")),
                max_amount: Some(dec("1000000")),
                fee_percent: FeePercent::new(dec("11")).unwrap(),
            },
            MethodTerms {
                method: PaymentMethod::CardTransfer,
                min_amount: Some(dec("100")),
                max_amount: Some(dec("500000")),
                fee_percent: FeePercent::new(dec("2.5")).unwrap(),
            },
        ],
    }
}

pub fn merchant(n: u128, callback: Option<&str>) -> Merchant {
    Merchant {
        id: merchant_id(n),
        name: format!("merchant {n}"),
        paused: false,
        callback_url: callback.map(url),
        created_at: ts(T_CREATED - 86_400_000),
    }
}

pub fn project(n: u128, merchant: &Merchant, test_mode: bool, callback: Option<&str>) -> Project {
    Project {
        id: project_id(n),
        merchant_id: merchant.id,
        name: format!("project {n}"),
        active: true,
        test_mode,
        lifetime: Duration::from_secs(15 * 60),
        contract: contract(),
        callback_url: callback.map(url),
        ip_allow_list: Vec::new(),
        signature_required: false,
        paused: false,
        rate_limit: RateLimit::default(),
        payer_page: false,
        payer_language: payments_core::payer::PageLanguage::Ru,
        return_url: None,
        created_at: ts(T_CREATED - 86_400_000),
    }
}

/// The service over a memory store, a manual clock at [`T_CREATED`], a seeded random source,
/// [`TestProvider`], [`TestRates`] (RUB at 100) and the embedded bank catalog.
pub struct Harness {
    pub store: Arc<MemoryStore>,
    pub clock: ManualClock,
    pub provider: Arc<TestProvider>,
    pub rates: Arc<TestRates>,
    pub catalog: Arc<BankCatalog>,
    pub service: PaymentService,
    /// The authentication settings the service was built with.
    pub auth: AuthConfig,
    /// Each added project's credentials: every request of these tests is signed and goes
    /// through `Gate::authenticate`, as over HTTP.
    pub callers: Mutex<HashMap<ProjectId, Arc<TestCaller>>>,
}

impl Harness {
    pub fn new(seed: u64) -> Harness {
        Self::with_auth(seed, AuthConfig::for_environment(Environment::Sandbox))
    }

    /// [`Harness::new`] with other authentication settings (trusted proxies, ...).
    pub fn with_auth(seed: u64, auth: AuthConfig) -> Harness {
        Self::with_ports(seed, auth, |_, provider| provider)
    }

    /// A harness whose service asks the provider `wrap` makes of the test provider (a router
    /// over several, say), given the harness's clock.
    pub fn with_ports(
        seed: u64,
        auth: AuthConfig,
        wrap: impl FnOnce(&ManualClock, Arc<dyn RequisiteProvider>) -> Arc<dyn RequisiteProvider>,
    ) -> Harness {
        let store = Arc::new(MemoryStore::new());
        let clock = ManualClock::new(ts(T_CREATED));
        let provider = Arc::new(TestProvider::default());
        let rates = Arc::new(TestRates::with(Currency::RUB, "100"));
        let catalog = Arc::new(BankCatalog::embedded());
        let asked = wrap(&clock, provider.clone());
        let service = Self::build(&store, &clock, &asked, &rates, &catalog, &auth, seed);
        Harness {
            store,
            clock,
            provider,
            rates,
            catalog,
            service,
            auth,
            callers: Mutex::new(HashMap::new()),
        }
    }

    fn build(
        store: &Arc<MemoryStore>,
        clock: &ManualClock,
        provider: &Arc<dyn RequisiteProvider>,
        rates: &Arc<TestRates>,
        catalog: &Arc<BankCatalog>,
        auth: &AuthConfig,
        seed: u64,
    ) -> PaymentService {
        let store: Arc<dyn Store> = store.clone();
        PaymentService::new(
            Ports::new(
                store,
                provider.clone(),
                rates.clone(),
                Arc::new(clock.clone()),
                Arc::new(SeededRandom::new(seed)),
            )
            .with_catalog(catalog.clone()),
            ServiceConfig::default(),
            auth.clone(),
        )
    }

    /// Drops the service and builds a new one over the same store, clock and ports ("restart").
    pub fn restart(&mut self, seed: u64) {
        let provider: Arc<dyn RequisiteProvider> = self.provider.clone();
        self.service = Self::build(
            &self.store,
            &self.clock,
            &provider,
            &self.rates,
            &self.catalog,
            &self.auth,
            seed,
        );
    }

    /// Stores a merchant and a project, with a token and a key for the project.
    pub fn add(&self, merchant: &Merchant, project: &Project) {
        futures_executor::block_on(async {
            self.store.upsert_merchant(merchant).await.unwrap();
            self.store.upsert_project(project).await.unwrap();
        });
        let mut callers = self.callers.lock().unwrap();
        if !callers.contains_key(&project.id) {
            let seed = callers.len() as u64 + 1;
            let caller =
                futures_executor::block_on(TestCaller::provision(&self.service, project.id, seed));
            callers.insert(project.id, Arc::new(caller));
        }
    }

    /// The credentials of a project stored with [`Harness::add`].
    pub fn caller(&self, project: ProjectId) -> Arc<TestCaller> {
        self.callers
            .lock()
            .unwrap()
            .get(&project)
            .cloned()
            .expect("the project was added with Harness::add")
    }

    /// A signed create for `project`, authenticated and then created.
    pub async fn create(&self, project: ProjectId, body: &[u8]) -> Result<CreateOutcome, ApiError> {
        self.caller(project).create(&self.service, body).await
    }

    /// The sandbox test helper `complete` for payment `id`, signed by `project`'s caller.
    pub async fn test_complete(
        &self,
        project: ProjectId,
        id: &str,
        amount: Option<Amount>,
    ) -> Result<Payment, ApiError> {
        let auth = self
            .caller(project)
            .test_helper(&self.service, id, "complete")
            .await?;
        self.service
            .payments()
            .test_complete(auth, id, amount)
            .await
            .map_err(ApiError::from)
    }

    /// The sandbox test helper `cancel` for payment `id`, signed by `project`'s caller.
    pub async fn test_cancel(&self, project: ProjectId, id: &str) -> Result<Payment, ApiError> {
        let auth = self
            .caller(project)
            .test_helper(&self.service, id, "cancel")
            .await?;
        self.service
            .payments()
            .test_cancel(auth, id)
            .await
            .map_err(ApiError::from)
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}

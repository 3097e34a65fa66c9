//! The live rate source (`rate_source = "http"`): the upstream's rates endpoint, fetched with a
//! signed `GET` at start and every `rates_refresh`, kept in memory, and not used once the last
//! good answer is older than `rates_max_age`: then every course is "no rate" and creates answer
//! `422 payment_rate_unavailable` instead of pricing at an old course. A failed or malformed
//! fetch keeps the previous rates (until they are too old) and is tried again sooner.
//!
//! A fetch is stamped, and its age measured, on the service's clock (the one that also decides
//! expiries), so that a test steps past `rates_max_age` instead of sleeping. Rates stamped
//! later than the clock's now (the clock was set back) count as too old until the next fetch.
//!
//! The answer (docs/providers.md, "Rates"): `{"rates": {"RUB": "95.50", "KZT": 480}}`, courses
//! in units of the currency per 1 USDT, as decimal strings or JSON numbers, all positive.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use payments_core::payment::Currency;
use payments_core::provider::RateSource;
use payments_core::{Clock, Timestamp};
use rust_decimal::Decimal;
use serde::Deserialize;
use tokio::task::AbortHandle;

use crate::upstream::client::{client, read_limited, ReadError, UpstreamSigner, MAX_ANSWER_BYTES};
use crate::upstream::config::{check_url, UpstreamConfig, UpstreamError};

/// The longest pause after a failed fetch, whatever `rates_refresh` says.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRates {
    rates: BTreeMap<String, serde_json::Value>,
}

/// Why a fetch of the rates was refused; the rates in use stay.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RatesError {
    /// The request failed.
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    /// An answer with another status than `200`.
    #[error("the upstream answered {0}")]
    Status(reqwest::StatusCode),
    /// The answer's body was not read whole.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Not the answer's JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A key that is not a currency code.
    #[error("{0}: not a currency code")]
    Currency(String),
    /// A course that is neither a number nor a decimal string.
    #[error("{0}: a course is a number or a decimal string")]
    CourseType(String),
    /// A course that is not a decimal.
    #[error("{currency}: {text:?} is not a decimal")]
    CourseText {
        /// The currency.
        currency: String,
        /// The course as given.
        text: String,
    },
    /// A course of zero or less.
    #[error("{0}: a course is positive")]
    NotPositive(String),
}

/// The rate source of `rate_source = "http"`. Dropping it stops the background refresh.
#[derive(Debug)]
pub struct HttpRates {
    cache: Arc<Cache>,
    refresher: AbortHandle,
}

struct Cache {
    client: reqwest::Client,
    url: reqwest::Url,
    signer: UpstreamSigner,
    max_age: Duration,
    /// The clock a fetch is stamped with and its age measured on.
    clock: Arc<dyn Clock>,
    /// The last good answer and when it was fetched.
    rates: RwLock<Option<(Timestamp, BTreeMap<String, Decimal>)>>,
    /// When each currency was last in a good answer (a currency that leaves the answers keeps
    /// ageing), for `payments_rate_age_seconds`.
    seen: RwLock<BTreeMap<String, Timestamp>>,
    /// When the source started: the age reported before the first good answer.
    started: Timestamp,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("url", &self.url.as_str())
            .field("max_age", &self.max_age)
            .field("rates", &self.rates)
            .finish_non_exhaustive()
    }
}

impl HttpRates {
    /// Fetches the rates of `config.rates_url` once (a failure is logged: creates answer
    /// `422` until a fetch succeeds) and starts the background refresh every
    /// `config.rates_refresh`.
    pub async fn start(
        config: &UpstreamConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<HttpRates, UpstreamError> {
        let url = config.rates_url.as_deref().ok_or(UpstreamError::Missing {
            adapter: "rate_source = \"http\"",
            needs: "upstream_rates_url",
        })?;
        let url = check_url(url)?;
        let started = clock.now();
        let cache = Arc::new(Cache {
            client: client(config)?,
            url,
            signer: UpstreamSigner::new(config.secrets.clone(), clock.clone()),
            max_age: config.rates_max_age,
            clock,
            rates: RwLock::new(None),
            seen: RwLock::new(BTreeMap::new()),
            started,
        });
        let first_ok = cache.refresh().await;
        let refresh = config.rates_refresh;
        let refresher = tokio::spawn(run(Arc::downgrade(&cache), refresh, first_ok)).abort_handle();
        Ok(HttpRates { cache, refresher })
    }

    /// The courses now in use (empty when none, or too old).
    pub fn current(&self) -> BTreeMap<String, Decimal> {
        self.cache.fresh().unwrap_or_default()
    }

    /// How old each currency's last good rate is, in seconds, by the service clock; before
    /// the first good answer, `*` with the time since the start. For
    /// `payments_rate_age_seconds`: creates in a currency answer `422 payment_rate_unavailable`
    /// once its age passes `rates_max_age`.
    pub fn ages(&self) -> Vec<(String, f64)> {
        self.cache.ages()
    }
}

impl Drop for HttpRates {
    fn drop(&mut self) {
        self.refresher.abort();
    }
}

/// The refresh loop; ends when the rate source is dropped.
async fn run(cache: Weak<Cache>, every: Duration, mut last_ok: bool) {
    loop {
        let pause = if last_ok {
            every
        } else {
            every.min(RETRY_AFTER_FAILURE)
        };
        tokio::time::sleep(pause).await;
        let Some(cache) = cache.upgrade() else { return };
        last_ok = cache.refresh().await;
    }
}

impl Cache {
    /// One fetch; `true` when it replaced the rates.
    async fn refresh(&self) -> bool {
        match self.fetch().await {
            Ok(rates) => {
                tracing::debug!(currencies = rates.len(), "live rates refreshed");
                self.keep(rates);
                true
            }
            Err(e) => {
                tracing::warn!(url = %self.url, error = %e, "live rates: fetch failed; the previous rates stay in use until they are too old");
                false
            }
        }
    }

    async fn fetch(&self) -> Result<BTreeMap<String, Decimal>, RatesError> {
        let request = self.signer.sign(self.client.get(self.url.clone()), b"");
        let response = request.send().await?;
        if response.status().as_u16() != 200 {
            return Err(RatesError::Status(response.status()));
        }
        let body = read_limited(response, MAX_ANSWER_BYTES).await?;
        parse_rates(&body)
    }

    /// Keeps a good answer, stamped now.
    fn keep(&self, rates: BTreeMap<String, Decimal>) {
        let now = self.clock.now();
        {
            let mut seen = self
                .seen
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for currency in rates.keys() {
                seen.insert(currency.clone(), now);
            }
        }
        *self
            .rates
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((now, rates));
    }

    /// See [`HttpRates::ages`].
    fn ages(&self) -> Vec<(String, f64)> {
        let now = self.clock.now();
        let age = |at: Timestamp| {
            if at <= now {
                now.duration_since(at).as_secs_f64()
            } else {
                0.0
            }
        };
        let seen = self
            .seen
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.is_empty() {
            return vec![("*".to_string(), age(self.started))];
        }
        seen.iter().map(|(c, at)| (c.clone(), age(*at))).collect()
    }

    /// The rates if fetched within the staleness limit.
    fn fresh(&self) -> Option<BTreeMap<String, Decimal>> {
        self.with_fresh(BTreeMap::clone)
    }

    /// `f` of the rates if they were fetched within the staleness limit, by the clock's now.
    fn with_fresh<T>(&self, f: impl FnOnce(&BTreeMap<String, Decimal>) -> T) -> Option<T> {
        let now = self.clock.now();
        let guard = self
            .rates
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*guard {
            Some((at, rates)) if *at <= now && now.duration_since(*at) <= self.max_age => {
                Some(f(rates))
            }
            _ => None,
        }
    }
}

/// The courses of a rates answer; one bad course refuses the whole answer.
fn parse_rates(body: &[u8]) -> Result<BTreeMap<String, Decimal>, RatesError> {
    let wire: WireRates = serde_json::from_slice(body)?;
    let mut rates = BTreeMap::new();
    for (currency, value) in wire.rates {
        if Currency::parse(&currency).is_none() {
            return Err(RatesError::Currency(currency));
        }
        let text = match &value {
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(s) => s.clone(),
            _ => return Err(RatesError::CourseType(currency)),
        };
        let Ok(course) = Decimal::from_str(&text) else {
            return Err(RatesError::CourseText { currency, text });
        };
        if course <= Decimal::ZERO {
            return Err(RatesError::NotPositive(currency));
        }
        rates.insert(currency, course);
    }
    Ok(rates)
}

#[async_trait]
impl RateSource for HttpRates {
    async fn course(&self, currency: Currency) -> Option<Decimal> {
        self.cache
            .with_fresh(|rates| rates.get(currency.as_str()).copied())
            .flatten()
    }

    /// A good answer no older than `rates_max_age` with at least one course.
    fn has_rates(&self) -> bool {
        self.cache
            .with_fresh(|rates| !rates.is_empty())
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_courses_as_numbers_or_strings() {
        let rates = parse_rates(br#"{"rates":{"RUB":"95.50","KZT":480}}"#).unwrap();
        assert_eq!(rates["RUB"], Decimal::new(9550, 2));
        assert_eq!(rates["KZT"], Decimal::from(480));
        for bad in [
            &br#"{"rates":{"RUB":"0"}}"#[..],
            br#"{"rates":{"RUB":"-1"}}"#,
            br#"{"rates":{"RUB":"abc"}}"#,
            br#"{"rates":{"RUB":true}}"#,
            br#"{"rates":{"rub1":"1"}}"#,
            br#"{"courses":{}}"#,
            b"[]",
        ] {
            assert!(
                parse_rates(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A cache with a 300 s `rates_max_age` on `clock` that fetches nothing.
    fn cache_on(clock: &payments_core::testing::ManualClock) -> Cache {
        Cache {
            client: reqwest::Client::new(),
            url: reqwest::Url::parse("http://127.0.0.1:9/rates").unwrap(),
            signer: UpstreamSigner::new(Vec::new(), Arc::new(clock.clone())),
            max_age: Duration::from_secs(300),
            clock: Arc::new(clock.clone()),
            rates: RwLock::new(None),
            seen: RwLock::new(BTreeMap::new()),
            started: clock.now(),
        }
    }

    /// Fresh up to `rates_max_age` after the fetch on the service clock; stale after it, and
    /// stale when the clock was set back before the fetch.
    #[test]
    fn the_rates_age_on_the_service_clock() {
        use payments_core::testing::ManualClock;
        let clock = ManualClock::new(Timestamp::from_unix_millis(1_800_000_000_000));
        let cache = cache_on(&clock);
        assert_eq!(cache.fresh(), None, "nothing fetched yet");
        let rates = BTreeMap::from([("RUB".to_string(), Decimal::new(9550, 2))]);
        *cache.rates.write().unwrap() = Some((clock.now(), rates.clone()));
        assert_eq!(cache.fresh(), Some(rates.clone()));
        clock.advance(Duration::from_secs(300));
        assert_eq!(
            cache.fresh(),
            Some(rates.clone()),
            "300 s old is still in use"
        );
        clock.advance(Duration::from_millis(1));
        assert_eq!(cache.fresh(), None, "older than rates_max_age");
        clock.set(Timestamp::from_unix_millis(1_800_000_000_000 - 1));
        assert_eq!(cache.fresh(), None, "fetched after the clock's now");
    }

    /// `payments_rate_age_seconds`: the time since the start before any good answer; then per
    /// currency since its last good answer, a currency that left the answers ageing on.
    #[test]
    fn each_currency_ages_from_its_last_good_answer() {
        use payments_core::testing::ManualClock;
        let clock = ManualClock::new(Timestamp::from_unix_millis(1_800_000_000_000));
        let cache = cache_on(&clock);
        clock.advance(Duration::from_secs(42));
        assert_eq!(cache.ages(), vec![("*".to_string(), 42.0)]);
        let both = BTreeMap::from([
            ("KZT".to_string(), Decimal::from(480)),
            ("RUB".to_string(), Decimal::new(9550, 2)),
        ]);
        cache.keep(both);
        clock.advance(Duration::from_secs(10));
        cache.keep(BTreeMap::from([("RUB".to_string(), Decimal::new(9600, 2))]));
        clock.advance(Duration::from_millis(2500));
        assert_eq!(
            cache.ages(),
            vec![("KZT".to_string(), 12.5), ("RUB".to_string(), 2.5)]
        );
    }
}

//! Server settings: one [`Settings`] struct. Its serde form is the settings file's (the field
//! names are the TOML keys, unknown keys are refused) and [`Settings::default`] holds every
//! default. [`Settings::load`] layers it with figment, each layer overriding the one before:
//! the defaults, a TOML file (`--config`), `PAYMENTS_*` environment variables, then the flags
//! that were given.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};
use ipnet::IpNet;
use payments_core::auth::Environment;
use payments_core::callback::{CallbackSecret, RetrySchedule};
use payments_core::SecretString;
use payments_http::dispatcher::{DispatcherConfig, DispatcherError};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// SQLite durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: durable across power loss (default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: durable across process crashes; the last commits may be lost on
    /// power loss.
    Normal,
}

/// Which requisite provider the server runs (`provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderKind {
    /// The bundled sandbox provider: fake requisites, refused in production.
    #[default]
    Sandbox,
    /// The upstream's requisite endpoint over HTTPS (`upstream_url`, docs/providers.md).
    Http,
}

/// Which exchange-rate source the server runs (`rate_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateSourceKind {
    /// The `[rates]` table: fixed courses, refused in production.
    #[default]
    Fixed,
    /// The upstream's rates endpoint (`upstream_rates_url`), cached and refreshed.
    Http,
}

/// Every setting, in sections. The serde names are the TOML keys (`[callbacks]` then
/// `concurrency = 8`) and, upper-cased after `PAYMENTS_` with `__` between a section and its
/// key, the environment variables (`PAYMENTS_CALLBACKS__CONCURRENCY`); docs/operations.md
/// lists them. Durations are written with their unit: `"30s"`, `"250ms"`, `"90d"`. The flat
/// names of earlier releases (`callback_concurrency`, `sweep_interval_ms`, ...) are still
/// read, each with a deprecation warning ([`Settings::deprecated`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `sandbox` (default) or `production`.
    #[serde(with = "text")]
    pub environment: Environment,
    /// Where the database and the sandbox credentials live (`./data`).
    pub data_dir: PathBuf,
    /// This node's name among the nodes of one database: the providers' health reports
    /// (`GET /operator/v1/providers`, `payments-server providers`) name their node with it.
    /// Letters, digits, `.`, `_`, `:` and `-`, at most 100. Default: the host's name and the
    /// merchant listener's port ([`Settings::node_name`]).
    pub node_name: Option<String>,
    /// A bank catalog file replacing the embedded one.
    pub bank_catalog: Option<PathBuf>,
    /// Fixed exchange rates (currency -> units per 1 USDT), as decimal strings: the `[rates]`
    /// table (with `rate_source = "fixed"`).
    #[serde(with = "text_map")]
    pub rates: BTreeMap<String, Decimal>,
    /// `[listen]`: the merchant and operator listeners and who the clients are.
    pub listen: Listen,
    /// `[tls]`: the certificate of the merchant (and cabinet) listener.
    pub tls: Tls,
    /// `[store]`: SQLite in the data dir or PostgreSQL.
    pub store: StoreSettings,
    /// `[callbacks]`: the callback dispatcher.
    pub callbacks: Callbacks,
    /// `[upstream]`: the payment company's requisite provider, rates and notifications.
    pub upstream: Upstream,
    /// `[retention]`: how long finished records are kept.
    pub retention: RetentionSettings,
    /// `[cabinet]`: the merchant web cabinet's listener.
    pub cabinet: CabinetSettings,
    /// `[metrics]`: where `/metrics` is served and what it requires.
    pub metrics: MetricsSettings,
    /// `[secrets]`: the key files sealing callback secrets at rest.
    pub secrets: SecretsSettings,
    /// `[telemetry]`: OpenTelemetry traces (off unless an endpoint is set).
    pub telemetry: TelemetrySettings,
    /// `[log]`: the log's format and filter.
    pub log: LogSettings,
    /// `[tuning]`: the knobs a deployment rarely turns.
    pub tuning: Tuning,
    /// `[testing]`: for test harnesses only, each refused with `environment = "production"`.
    pub testing: TestingSettings,
    /// The flat names of earlier releases these settings were read with, one warning each
    /// ("`callback_concurrency` is `callbacks.concurrency` now"): the server logs them at
    /// start. Not a setting.
    #[serde(skip)]
    pub deprecated: Vec<String>,
}

/// `[listen]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Listen {
    /// The merchant API (`127.0.0.1:8080`).
    #[serde(with = "text")]
    pub merchant: SocketAddr,
    /// The operator API (`127.0.0.1:8081`).
    #[serde(with = "text")]
    pub operator: SocketAddr,
    /// The merchant API's public base URL (scheme and host merchants sign for `@target-uri`);
    /// default `http(s)://<merchant>`.
    pub public_url: Option<String>,
    /// Proxies whose `X-Forwarded-For` is trusted: CIDR networks or addresses, a list in the
    /// file, comma-separated in the environment.
    #[serde(with = "text_list")]
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for Listen {
    fn default() -> Listen {
        Listen {
            merchant: SocketAddr::from(([127, 0, 0, 1], 8080)),
            operator: SocketAddr::from(([127, 0, 0, 1], 8081)),
            public_url: None,
            trusted_proxies: Vec::new(),
        }
    }
}

/// `[tls]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tls {
    /// Certificate chain (PEM) of the merchant listener (and the cabinet's).
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of the merchant listener.
    pub key: Option<PathBuf>,
    /// Serve the operator listener over TLS too (default off: keep the operator listener on
    /// loopback or a private network).
    pub operator: bool,
    /// How often the certificate and key files are checked for a change (they are also
    /// reloaded on SIGHUP); default `10s`, at least `100ms`.
    #[serde(with = "duration")]
    pub watch_interval: Duration,
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            cert: None,
            key: None,
            operator: false,
            watch_interval: Duration::from_secs(10),
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSettings {
    /// PostgreSQL instead of the data dir's SQLite: `postgres://user:password@host:port/db`
    /// (`PAYMENTS_STORE__DATABASE_URL`, `--database-url`). Several nodes may serve over one
    /// database; every command of `payments-server` acts on it.
    pub database_url: Option<SecretString>,
    /// Connections in this node's PostgreSQL pool (default 16). Keep nodes x pool size well
    /// under the database's `max_connections`.
    pub pool_size: usize,
    /// SQLite durability: `full` (default) or `normal`.
    #[serde(with = "text")]
    pub synchronous: Durability,
    /// SQLite: MiB kept free for a full disk in `<data-dir>/payments.db-reserve` (default 32;
    /// 0 keeps none). When a write finds the disk full, the file is deleted and only purges
    /// run until they freed room (or the disk has room again), so a full disk recovers by
    /// itself once what filled it expires.
    pub reserve_mib: u64,
    /// SQLite: read-only connections for lists, counts and the background work's reads
    /// (default 4, at least 1).
    pub readers: usize,
    /// SQLite: read-only connections kept for the short reads that every request makes (the
    /// token check, a payment by its id), which no list takes (default: the cores the node
    /// may run on, at least 2; at least 1). Each runs on the tokio worker that asks, so more
    /// than the node's cores gain nothing.
    pub short_readers: usize,
}

impl Default for StoreSettings {
    fn default() -> StoreSettings {
        StoreSettings {
            database_url: None,
            pool_size: 16,
            synchronous: Durability::Full,
            reserve_mib: 32,
            readers: 4,
            short_readers: payments_store_sqlite::default_short_readers(),
        }
    }
}

/// `[callbacks]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Callbacks {
    /// Whether this server runs the callback dispatcher (default `true`). When `false`, closed
    /// payments still commit their callback events to the outbox in the same transaction as
    /// always; they are only not sent until a server with dispatch on runs over the same
    /// database: for holding callbacks during maintenance and for measuring delivery alone.
    pub dispatch: bool,
    /// Deliveries in flight at once (default 256).
    pub concurrency: usize,
    /// Deliveries in flight at once to one host (default 64).
    pub per_host: usize,
    /// Deliveries in flight at once for one project, whatever its hosts (default: half of
    /// `concurrency`, at least 1): the other slots stay free for other projects' callbacks
    /// however slow one project's receivers are.
    pub per_project: Option<usize>,
    /// Each project's budget of resends its merchant asks for (resend, "send callback",
    /// recovery): at most this many at once (default 1,000)...
    pub resend_burst: u32,
    /// ... then this many a second (default 5). Over it a resend is `429 rate_limited`.
    pub resend_per_second: u32,
    /// How long a claimed event stays leased to the node that claimed it (default `60s`; more
    /// than the 10 s attempt timeout). After a node dies mid-attempt, its events are attempted
    /// again by another node once this ends.
    #[serde(with = "duration")]
    pub lease: Duration,
    /// Delays between attempts: seconds, comma-separated (`"30,60"`).
    #[serde(with = "text")]
    pub retry_delays: RetrySchedule,
    /// Extra CA certificates (PEM) the callback client trusts, besides the public roots.
    pub ca_file: Option<PathBuf>,
    /// Development: allow `http://` and loopback callback URLs.
    pub allow_local: bool,
}

impl Default for Callbacks {
    fn default() -> Callbacks {
        Callbacks {
            dispatch: true,
            concurrency: 256,
            per_host: 64,
            per_project: None,
            resend_burst: payments_core::ratelimit::RESEND_BUDGET.burst,
            resend_per_second: payments_core::ratelimit::RESEND_BUDGET.per_second,
            lease: Duration::from_secs(60),
            retry_delays: RetrySchedule::default(),
            ca_file: None,
            allow_local: false,
        }
    }
}

impl Callbacks {
    /// The resend budget of each project (`resend_burst`, `resend_per_second`).
    pub fn resend_budget(&self) -> payments_core::project::RateLimit {
        payments_core::project::RateLimit {
            per_second: self.resend_per_second,
            burst: self.resend_burst,
        }
    }

    /// `per_project`, or its default: half of `concurrency` (at least 1).
    pub fn per_project(&self) -> usize {
        self.per_project
            .unwrap_or(self.concurrency / 2)
            .clamp(1, self.concurrency.max(1))
    }
}

/// `[upstream]`: the HTTP requisite provider, the live rate source and provider notifications
/// (docs/providers.md is the wire contract).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Upstream {
    /// Requisite provider: `sandbox` (default; refused in production) or `http`.
    #[serde(with = "text")]
    pub provider: ProviderKind,
    /// Exchange rates: `fixed` (the `[rates]` table, default; refused in production) or `http`.
    #[serde(with = "text")]
    pub rate_source: RateSourceKind,
    /// The upstream's requisite endpoint (`provider = "http"`): `https://...`, or `http://` to a
    /// loopback address (a sidecar on the same host).
    pub url: Option<String>,
    /// The upstream's rates endpoint (`rate_source = "http"`), same rule.
    pub rates_url: Option<String>,
    /// HMAC secrets shared with the upstream (`whsec_...`, at least 32 characters after the
    /// prefix): requests to it are signed with each, notifications from it verify with any
    /// (two during a rotation). A list in the file, comma-separated in the environment.
    #[serde(with = "text_list")]
    pub secrets: Vec<CallbackSecret>,
    /// Extra CA certificates (PEM) trusted for the upstream, besides the public roots.
    pub ca_file: Option<PathBuf>,
    /// Trust only `ca_file` for the upstream, not the public web roots.
    pub ca_only: bool,
    /// One upstream request's time limit (connect, send, answer); default `15s` (the provider
    /// budget bounds a create whatever this says).
    #[serde(with = "duration")]
    pub timeout: Duration,
    /// Connect (TCP and TLS) time limit; default `5s`.
    #[serde(with = "duration")]
    pub connect_timeout: Duration,
    /// Idle connections to the upstream kept open for reuse (default 32).
    pub pool_idle: usize,
    /// How long an idle upstream connection is kept; default `90s`.
    #[serde(with = "duration")]
    pub pool_idle_timeout: Duration,
    /// The requisite provider's budget per create; default `15s`, the spec's. No answer in
    /// time is `provider_result_ambiguous`.
    #[serde(with = "duration")]
    pub provider_budget: Duration,
    /// How long after its create a payment left in `created` (its create never recorded the
    /// provider's answer) is asked about again when the provider cannot say, before it is
    /// closed as `provider_result_ambiguous`; default `1h` (at least the provider budget).
    #[serde(with = "duration")]
    pub recovery_window: Duration,
    /// How often the live rates are fetched; default `30s`.
    #[serde(with = "duration")]
    pub rates_refresh: Duration,
    /// The staleness limit of the live rates; default `5m`. Rates fetched longer ago are not
    /// used: creates answer `422 payment_rate_unavailable`.
    #[serde(with = "duration")]
    pub rates_max_age: Duration,
    /// The provider-notification listener (off by default): the upstream's signed reports of
    /// confirmed and failed transfers, at `POST /upstream/v1/notifications` (verified with
    /// `secrets`) and, for each of `providers`, `POST /upstream/v1/notifications/<name>`
    /// (verified with that provider's secrets).
    #[serde(with = "opt_text")]
    pub listen: Option<SocketAddr>,
    /// Failures in a row (not reached, ambiguous) that take one of `providers` out of routing
    /// (its circuit breaker opens); default 5.
    pub breaker_failures: u32,
    /// How long an open breaker keeps its provider out before one probe; default `30s`.
    #[serde(with = "duration")]
    pub breaker_open: Duration,
    /// With `providers`: how often this node writes its providers' health (breakers, recent
    /// failures) into the store, for the other nodes' operator API and the CLI; a breaker's
    /// change of state is written at once. Default `5s`, at least `100ms`.
    #[serde(with = "duration")]
    pub health_report_interval: Duration,
    /// How long a node's health report is shown after its last write (a node that stopped
    /// without saying so); older ones are deleted. Default `1h`, at least three intervals.
    #[serde(with = "duration")]
    pub health_report_retention: Duration,
    /// Several HTTP requisite providers by name (`[[upstream.providers]]`), routed by their
    /// coverage, priority, weight and health (docs/providers.md, "Several providers"). Empty
    /// (the default): the one provider of `url` and `secrets`.
    pub providers: Vec<ProviderSettings>,
}

/// One requisite provider of `[[upstream.providers]]`: its endpoint and credentials, what it
/// covers, and its place in the routing. A coverage list left empty covers everything.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// Its name (1-40 of `a-z0-9_-`): in metrics, the route recorded on payments, and the
    /// notification path `/upstream/v1/notifications/<name>`.
    pub name: String,
    /// Its requisite endpoint (`https://`, or `http://` to loopback).
    pub url: String,
    /// Its HMAC secrets (`whsec_...`): requests to it are signed with them, its notifications
    /// verify with them and no other provider's.
    #[serde(with = "text_list")]
    pub secrets: Vec<CallbackSecret>,
    /// Lower is asked first (default 0).
    #[serde(default)]
    pub priority: u32,
    /// Share among the providers of one priority (default 1).
    #[serde(default = "one")]
    pub weight: u32,
    /// One request's time limit (default: `upstream.timeout`).
    #[serde(default, with = "opt_duration")]
    pub timeout: Option<Duration>,
    /// Methods served (`sbp`, `card_transfer`).
    #[serde(default)]
    pub methods: Vec<String>,
    /// Currencies served (`RUB`, ...).
    #[serde(default)]
    pub currencies: Vec<String>,
    /// Payers' countries served (`ru`, ...).
    #[serde(default)]
    pub geo_codes: Vec<String>,
    /// Payers' banks served (catalog names); a payment without a bank is served.
    #[serde(default)]
    pub banks: Vec<String>,
    /// Payers' banks not served.
    #[serde(default)]
    pub not_banks: Vec<String>,
    /// `true`: intrabank payments only; `false`: none.
    #[serde(default)]
    pub intrabank: Option<bool>,
    /// Smallest amount served (inclusive), as a decimal string.
    #[serde(default)]
    pub min_amount: Option<String>,
    /// Largest amount served (inclusive).
    #[serde(default)]
    pub max_amount: Option<String>,
    /// Hours served, `HH:MM-HH:MM` UTC (wrapping past midnight allowed).
    #[serde(default)]
    pub hours: Option<String>,
}

fn one() -> u32 {
    1
}

impl ProviderSettings {
    /// Its name, checked.
    pub fn provider_name(
        &self,
    ) -> Result<payments_core::provider::ProviderName, ProviderSettingError> {
        payments_core::provider::ProviderName::parse(&self.name)
            .map_err(|e| ProviderSettingError::Name(e.to_string()))
    }

    /// Its coverage, every value checked.
    pub fn coverage(&self) -> Result<payments_providers::Coverage, ProviderSettingError> {
        use payments_core::bank::CountryCode;
        use payments_core::payment::{Currency, PaymentMethod};
        use payments_providers::{Coverage, Hours};
        let at = |what, reason: String| ProviderSettingError::Coverage {
            name: self.name.clone(),
            what,
            reason,
        };
        let amount = |v: &Option<String>, what| {
            v.as_deref()
                .map(|a| {
                    a.parse::<Decimal>()
                        .map_err(|source| ProviderSettingError::Amount {
                            name: self.name.clone(),
                            what,
                            source,
                        })
                })
                .transpose()
        };
        Ok(Coverage {
            methods: self
                .methods
                .iter()
                .map(|m| {
                    m.parse::<PaymentMethod>()
                        .map_err(|_| at("methods", m.clone()))
                })
                .collect::<Result<_, _>>()?,
            currencies: self
                .currencies
                .iter()
                .map(|c| Currency::parse(c).ok_or_else(|| at("currencies", c.clone())))
                .collect::<Result<_, _>>()?,
            geo_codes: self
                .geo_codes
                .iter()
                .map(|g| CountryCode::parse(g).ok_or_else(|| at("geo_codes", g.clone())))
                .collect::<Result<_, _>>()?,
            banks: self.banks.clone(),
            not_banks: self.not_banks.clone(),
            intrabank: self.intrabank,
            min_amount: amount(&self.min_amount, "min_amount")?,
            max_amount: amount(&self.max_amount, "max_amount")?,
            hours: self
                .hours
                .as_deref()
                .map(|h| Hours::parse(h).map_err(|e| at("hours", e.to_string())))
                .transpose()?,
        })
    }
}

/// Why one of `[[upstream.providers]]` is not usable.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ProviderSettingError {
    /// Its name is not a provider name (the core's reason).
    #[error("{0}")]
    Name(String),
    /// Two providers have one name.
    #[error("upstream.providers: {0} is configured twice")]
    Twice(String),
    /// A provider without secrets.
    #[error("upstream.providers {0}: secrets are needed")]
    NoSecrets(String),
    /// Its URL is refused.
    #[error("upstream.providers {name}: url: {source}")]
    Url {
        /// The provider.
        name: String,
        /// Why.
        #[source]
        source: UpstreamUrlError,
    },
    /// A value of its coverage is not one: the value, or the reason.
    #[error("upstream.providers {name}: {what}: {reason}")]
    Coverage {
        /// The provider.
        name: String,
        /// The coverage setting.
        what: &'static str,
        /// The value refused, or why.
        reason: String,
    },
    /// An amount of its coverage is not a decimal.
    #[error("upstream.providers {name}: {what}: {source}")]
    Amount {
        /// The provider.
        name: String,
        /// `min_amount` or `max_amount`.
        what: &'static str,
        /// The parser's complaint.
        #[source]
        source: rust_decimal::Error,
    },
}

impl Default for Upstream {
    fn default() -> Upstream {
        Upstream {
            provider: ProviderKind::Sandbox,
            rate_source: RateSourceKind::Fixed,
            url: None,
            rates_url: None,
            secrets: Vec::new(),
            ca_file: None,
            ca_only: false,
            timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            pool_idle: 32,
            pool_idle_timeout: Duration::from_secs(90),
            provider_budget: Duration::from_secs(15),
            recovery_window: Duration::from_secs(3600),
            rates_refresh: Duration::from_secs(30),
            rates_max_age: Duration::from_secs(300),
            listen: None,
            breaker_failures: 5,
            breaker_open: Duration::from_secs(30),
            health_report_interval: Duration::from_secs(5),
            health_report_retention: Duration::from_secs(3600),
            providers: Vec::new(),
        }
    }
}

/// `[retention]`: how long finished records are kept; `0s` keeps them forever.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Finished callback events (delivered or failed, with their attempts); default `90d`.
    #[serde(with = "duration")]
    pub events: Duration,
    /// Audit records (the core's and the cabinet's); default `400d`, the longest.
    #[serde(with = "duration")]
    pub audit: Duration,
    /// The most cabinet audit records kept, the oldest deleted first; `0` sets no bound;
    /// default `1000000`. Sign-in attempts from anyone write there: this bounds its size
    /// whatever the rate.
    pub cabinet_audit_records: u64,
}

impl Default for RetentionSettings {
    fn default() -> RetentionSettings {
        RetentionSettings {
            events: Duration::from_secs(90 * 86_400),
            audit: Duration::from_secs(400 * 86_400),
            cabinet_audit_records: 1_000_000,
        }
    }
}

/// `[cabinet]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CabinetSettings {
    /// The web cabinet's listener (`127.0.0.1:8082`); TLS like the merchant listener.
    #[serde(with = "text")]
    pub listen: SocketAddr,
    /// The cabinet's public URL (scheme and host browsers use, for invitation links and the
    /// cross-site check behind a proxy); default `http(s)://<listen>`.
    pub public_url: Option<String>,
}

impl Default for CabinetSettings {
    fn default() -> CabinetSettings {
        CabinetSettings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8082)),
            public_url: None,
        }
    }
}

/// `[telemetry]`: OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when an endpoint is
/// set (needs the feature `otlp`, on by default).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The collector's traces URL, e.g. `http://otel-collector:4318/v1/traces`. None (the
    /// default): no traces are made or sent.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the spans. `payments-server` by default.
    pub service_name: String,
    /// The fraction of traces started here that are kept (0 to 1; 1 by default). A request
    /// whose `traceparent` says sampled or not keeps its caller's decision.
    pub sample_ratio: f64,
}

impl Default for TelemetrySettings {
    fn default() -> TelemetrySettings {
        TelemetrySettings {
            otlp_endpoint: None,
            service_name: "payments-server".into(),
            sample_ratio: 1.0,
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// A listener of its own for `GET /metrics` (off by default: `/metrics` is on the operator
    /// listener), e.g. for a Prometheus on another network than the operators'.
    #[serde(with = "opt_text")]
    pub listen: Option<SocketAddr>,
    /// A bearer token `/metrics` requires wherever it is served (none by default). Better from
    /// the environment (`PAYMENTS_METRICS__TOKEN`) than in the file.
    pub token: Option<SecretString>,
}

/// `[secrets]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsSettings {
    /// The key file sealing callback secrets at rest (default `<data_dir>/secrets.key`;
    /// created, 0600, only by `serve` or a command given `--create-key`). Keep it outside the
    /// data dir so that a copy of the database alone reveals nothing.
    pub key_file: Option<PathBuf>,
    /// Previous key files: secrets sealed with them still open, until
    /// `payments-server callback-secret reseal` seals them with the current key.
    pub previous_key_files: Vec<PathBuf>,
    /// Seal the requisites of payments (card or phone number, holder name, QR and bank-app
    /// links) in the database with the same key (on by default). Turn it off only while
    /// nodes of a build before sealing still serve the database (a rolling upgrade), then
    /// on, and run `payments-server callback-secret reseal`.
    pub seal_requisites: bool,
}

impl Default for SecretsSettings {
    fn default() -> SecretsSettings {
        SecretsSettings {
            key_file: None,
            previous_key_files: Vec::new(),
            seal_requisites: true,
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `text` (default) or `json`.
    #[serde(with = "text")]
    pub format: LogFormat,
    /// The filter (`info`, `payments_http=debug`, ...); also `PAYMENTS_LOG`.
    pub level: String,
    /// KiB of log lines the server holds in memory while standard error does not take them
    /// (default 8192; under 64 counts as 64): further lines are dropped and counted.
    pub queue_kib: usize,
}

impl Default for LogSettings {
    fn default() -> LogSettings {
        LogSettings {
            format: LogFormat::Text,
            level: "info".to_string(),
            queue_kib: 8192,
        }
    }
}

/// `[tuning]`: limits and timings with defaults that suit most deployments.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// How often the lifecycle sweeper runs; default `1s`, at least `10ms`.
    #[serde(with = "duration")]
    pub sweep_interval: Duration,
    /// How long shutdown waits for requests in flight; default `30s`.
    #[serde(with = "duration")]
    pub shutdown_grace: Duration,
    /// Connections each listener holds open at once (default 10,000); a connection over the
    /// cap is answered `503` and closed at once. Keep it below the process's file-descriptor
    /// limit.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, and how long a kept-alive
    /// connection may sit idle before its next request; default `10s`. Slow or silent
    /// connections are closed after it.
    #[serde(with = "duration")]
    pub header_timeout: Duration,
    /// How long an HTTP/2 connection (TLS listeners only) may go without a request before it
    /// is closed, whatever keep-alive pings it answers; default `60s`, longer than any request
    /// takes (at least `1s`).
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived; default
    /// `10s`. Later is `408 request_timeout`.
    #[serde(with = "duration")]
    pub body_timeout: Duration,
    /// Most signatures of concurrent requests verified in one Ed25519 batch (default 64; 1
    /// verifies each request's alone). See `payments_http::batch::SignatureBatcher`.
    pub signature_batch: usize,
    /// Longest a request waits for the other signatures of its batch; default `1ms` (the
    /// runtime's timer rounds up to whole milliseconds). A request alone does not wait.
    /// Under a steady stream a batch also waits for the signatures expected, at the recent
    /// rate, in a quarter of this time (`0s`: for none).
    #[serde(with = "duration")]
    pub signature_batch_wait: Duration,
    /// Signatures a batch waits for at least, within `signature_batch_wait`, once batches
    /// form (default 1: none beyond the requests already under way and those the recent rate
    /// brings in a quarter of the wait). 8 cut CPU per create by about a tenth at saturation
    /// and added about 1 ms to the median at 5,000 creates/s (docs/performance.md).
    pub signature_batch_min: usize,
    /// How often one node of the deployment reconciles the project balances
    /// (`payments-server ledger reconcile` without `--repair`) and sets
    /// `payments_ledger_differences`; default `24h`, the first run a minute after start;
    /// `0s` turns it off. It reads every payment and entry: on a large database choose a
    /// quiet hour's interval or run it from a timer through the operator API.
    #[serde(with = "duration")]
    pub ledger_reconcile_interval: Duration,
    /// Whether the merchant API's requests are logged per project for the cabinet's Requests
    /// page (default `true`): written off the request's path through a bounded queue.
    pub request_log: bool,
    /// The logged requests that wait for the log's writer at most (default 4,096, at least
    /// 1); when it is full a request is left out of the log and counted in
    /// `payments_request_log_dropped_total`, never slowed.
    pub request_log_queue: usize,
    /// The requests each project's log keeps at most, the newest (default 1,000, at least
    /// 1); none older than 7 days either way.
    pub request_log_keep: usize,
    /// The list reads (payment list and search, events list and long poll, the cabinet's
    /// list pages) one project runs at once on this node (default 2, at least 1); another
    /// waits up to a second for a place, then is answered `429 rate_limited`. See
    /// `payments_core::service::ScanBudget`.
    pub scans_per_project: usize,
    /// The longest one list read may run in the database before it is stopped and answered
    /// `503 service_unavailable` ("narrow the filters"); default `5s`, at least `100ms`.
    #[serde(with = "duration")]
    pub scan_timeout: Duration,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            sweep_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(30),
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(10),
            signature_batch: payments_http::batch::DEFAULT_MAX_BATCH,
            signature_batch_wait: Duration::from_millis(1),
            signature_batch_min: 1,
            ledger_reconcile_interval: Duration::from_secs(24 * 3600),
            request_log: true,
            request_log_queue: 4_096,
            request_log_keep: 1_000,
            scans_per_project: payments_core::service::ScanBudget::default().per_project,
            scan_timeout: Duration::from_secs(5),
        }
    }
}

/// `[testing]`: settings for test harnesses (a history checker that runs real nodes), none of
/// them allowed with `environment = "production"`: the server refuses to start.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestingSettings {
    /// A file holding a signed whole number of milliseconds (`-90000`, `45000`): the service's
    /// clock is the system time plus that offset, the file read again at least every 100 ms
    /// (`crate::testing_clock`). A missing or unparsable file is an offset of 0.
    pub clock_offset_file: Option<PathBuf>,
    /// The name of one planted bug to switch on (`payments_core::planted`); only in a build
    /// with the `planted-bugs` feature, and refused by any other.
    pub planted_bug: Option<String>,
}

impl Default for Settings {
    /// Sandbox on 127.0.0.1:8080 (operator 8081, cabinet 8082) with `./data`.
    fn default() -> Settings {
        Settings {
            environment: Environment::Sandbox,
            data_dir: PathBuf::from("./data"),
            node_name: None,
            bank_catalog: None,
            rates: payments_providers::sandbox::FixedRates::sandbox_defaults().0,
            listen: Listen::default(),
            tls: Tls::default(),
            store: StoreSettings::default(),
            callbacks: Callbacks::default(),
            upstream: Upstream::default(),
            retention: RetentionSettings::default(),
            cabinet: CabinetSettings::default(),
            metrics: MetricsSettings::default(),
            secrets: SecretsSettings::default(),
            telemetry: TelemetrySettings::default(),
            log: LogSettings::default(),
            tuning: Tuning::default(),
            testing: TestingSettings::default(),
            deprecated: Vec::new(),
        }
    }
}

/// A setting that could not be used; the text names the setting (or the variable) and, for
/// one read from a file, the file.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer could not be read, or a value is not of its setting's type: each of figment's
    /// errors on one line, joined by `; `.
    #[error("{}", describe(.0))]
    Layers(#[source] Box<figment::Error>),
    /// Settings that go together, or a value out of its range (the text names the setting).
    #[error("{0}")]
    Invalid(&'static str),
    /// `telemetry.otlp_endpoint` is not a URL.
    #[error("telemetry.otlp_endpoint: {0}")]
    OtlpEndpoint(#[source] url::ParseError),
    /// A setting needs another one.
    #[error("{what} needs {setting} (docs/providers.md)")]
    Needs {
        /// The setting (with its value) that needs another.
        what: &'static str,
        /// The setting it needs.
        setting: &'static str,
    },
    /// One of `[[upstream.providers]]` is not usable.
    #[error(transparent)]
    Provider(#[from] ProviderSettingError),
    /// `testing.planted_bug` names no planted bug.
    #[cfg(feature = "planted-bugs")]
    #[error("testing.planted_bug: {0}")]
    PlantedBug(#[source] payments_core::planted::UnknownBug),
    /// An upstream URL (`upstream.url`, `upstream.rates_url`) is refused.
    #[error("{setting}: {source}")]
    UpstreamUrl {
        /// The setting.
        setting: &'static str,
        /// Why.
        #[source]
        source: UpstreamUrlError,
    },
}

/// A value that is not one of the booleans [`parse_bool`] accepts.
#[derive(Debug, thiserror::Error)]
#[error("expected a boolean, got {0:?}")]
pub struct NotABoolean(pub String);

/// A boolean in the forms the environment variables accept: `1`/`true`/`yes`/`on` and
/// `0`/`false`/`no`/`off` (any case), and the empty string as `false`.
pub fn parse_bool(v: &str) -> Result<bool, NotABoolean> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(NotABoolean(other.to_string())),
    }
}

impl Settings {
    /// The dispatcher's part of the settings; reads `callbacks.ca_file` if one is set.
    ///
    /// # Errors
    /// [`DispatcherError::CaFile`] when the CA file cannot be read or holds no certificate.
    pub fn dispatcher(&self) -> Result<DispatcherConfig, DispatcherError> {
        let extra_roots = match &self.callbacks.ca_file {
            Some(path) => crate::files::read_pem_roots(path)?,
            None => Vec::new(),
        };
        Ok(DispatcherConfig {
            concurrency: self.callbacks.concurrency,
            per_host: self.callbacks.per_host,
            per_project: self.callbacks.per_project(),
            lease: self.callbacks.lease,
            extra_roots,
            ..DispatcherConfig::default()
        })
    }

    /// Defaults only (sandbox on 127.0.0.1:8080 with `./data`).
    pub fn defaults() -> Settings {
        Settings::default()
    }

    /// The layers, lowest first: the TOML `file` (if any), the `PAYMENTS_*` environment
    /// variables ([`EnvLayer`]), then `flags`: a value that serializes to the settings given on
    /// the command line only (skip the `None`s), with the names of the settings file (a flat
    /// name of earlier releases is read too). A setting no layer gives keeps its default
    /// (`#[serde(default)]`); the defaults are not a layer of their own so that a `rates` table
    /// replaces the default table instead of adding to it.
    pub fn figment(file: Option<&Path>, flags: impl Serialize) -> Figment {
        let mut layers = Figment::new();
        if let Some(path) = file {
            layers = layers.merge(Renamed(TomlFile(path.to_path_buf())));
        }
        layers
            .merge(EnvLayer::process())
            .merge(Renamed(Serialized::defaults(flags)))
    }

    /// The settings of [`Settings::figment`]: file < `PAYMENTS_*` < `flags`; the flat names of
    /// earlier releases the file and the environment use are in [`Settings::deprecated`].
    pub fn load(file: Option<&Path>, flags: impl Serialize) -> Result<Settings, ConfigError> {
        let mut settings = Settings::from_figment(&Settings::figment(file, flags))?;
        if let Some(path) = file {
            if let Ok(data) = TomlFile(path.to_path_buf()).data() {
                settings
                    .deprecated
                    .extend(data.values().flat_map(flat_names));
            }
        }
        settings.deprecated.extend(EnvLayer::process().flat_names());
        Ok(settings)
    }

    /// Extracts and checks the settings of `layers`; an error names the setting (the
    /// variable for one from the environment) and the file it came from.
    pub fn from_figment(layers: &Figment) -> Result<Settings, ConfigError> {
        layers
            .extract::<Settings>()
            .map_err(|e| ConfigError::Layers(Box::new(e)))?
            .checked()
    }

    /// Checks what one value alone cannot show and normalises: the TLS certificate and key
    /// come together, public URLs lose a trailing `/`, counts are at least 1, timings have a
    /// floor.
    pub fn checked(mut self) -> Result<Settings, ConfigError> {
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return Err(ConfigError::Invalid(
                "tls.cert and tls.key must be given together",
            ));
        }
        if !(0.0..=1.0).contains(&self.telemetry.sample_ratio) {
            return Err(ConfigError::Invalid(
                "telemetry.sample_ratio: a fraction from 0 to 1",
            ));
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            let url = reqwest::Url::parse(endpoint).map_err(ConfigError::OtlpEndpoint)?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ConfigError::Invalid(
                    "telemetry.otlp_endpoint: an http:// or https:// URL (OTLP/HTTP)",
                ));
            }
        }
        let trimmed = |u: Option<String>| u.map(|u| u.trim_end_matches('/').to_string());
        self.listen.public_url = trimmed(self.listen.public_url);
        self.cabinet.public_url = trimmed(self.cabinet.public_url);
        self.callbacks.concurrency = self.callbacks.concurrency.max(1);
        self.callbacks.per_host = self.callbacks.per_host.max(1);
        self.callbacks.per_project = self.callbacks.per_project.map(|n| n.max(1));
        self.callbacks.resend_burst = self.callbacks.resend_burst.max(1);
        self.callbacks.resend_per_second = self.callbacks.resend_per_second.max(1);
        let t = &mut self.tuning;
        t.sweep_interval = t.sweep_interval.max(Duration::from_millis(10));
        t.max_connections = t.max_connections.max(1);
        t.signature_batch = t.signature_batch.max(1);
        t.signature_batch_min = t.signature_batch_min.clamp(1, t.signature_batch);
        t.header_timeout = t.header_timeout.max(Duration::from_millis(100));
        t.idle_timeout = t.idle_timeout.max(Duration::from_secs(1));
        t.body_timeout = t.body_timeout.max(Duration::from_millis(100));
        t.request_log_queue = t.request_log_queue.max(1);
        t.request_log_keep = t.request_log_keep.max(1);
        t.scans_per_project = t.scans_per_project.max(1);
        t.scan_timeout = t.scan_timeout.max(Duration::from_millis(100));
        self.tls.watch_interval = self.tls.watch_interval.max(Duration::from_millis(100));
        if self.tls.operator && self.tls.cert.is_none() {
            return Err(ConfigError::Invalid(
                "tls.operator needs tls.cert and tls.key",
            ));
        }
        if self
            .metrics
            .token
            .as_ref()
            .is_some_and(|t| t.expose().trim().len() < 16)
        {
            return Err(ConfigError::Invalid(
                "metrics.token: at least 16 characters (e.g. openssl rand -hex 24)",
            ));
        }
        self.check_upstream()?;
        if let Some(url) = &self.store.database_url {
            let url = url.expose();
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(ConfigError::Invalid(
                    "store.database_url: expected postgres://user:password@host:port/database",
                ));
            }
        }
        self.store.pool_size = self.store.pool_size.max(1);
        self.store.readers = self.store.readers.max(1);
        self.store.short_readers = self.store.short_readers.max(1);
        self.node_name = self.node_name.take().map(|n| n.trim().to_string());
        if let Some(name) = &self.node_name {
            if name.is_empty() || name.chars().count() > 100 || !name.chars().all(node_name_char) {
                return Err(ConfigError::Invalid(
                    "node_name: 1 to 100 letters, digits, '.', '_', ':' or '-'",
                ));
            }
        }
        self.check_testing()?;
        Ok(self)
    }

    /// The `[testing]` settings: refused in production; a planted bug only in a build with
    /// the `planted-bugs` feature, and by one of its names. An empty value is no value.
    fn check_testing(&mut self) -> Result<(), ConfigError> {
        let t = &mut self.testing;
        t.clock_offset_file = t
            .clock_offset_file
            .take()
            .filter(|f| !f.as_os_str().is_empty());
        t.planted_bug = t
            .planted_bug
            .take()
            .map(|b| b.trim().to_string())
            .filter(|b| !b.is_empty());
        if self.environment == Environment::Production {
            if t.clock_offset_file.is_some() {
                return Err(ConfigError::Invalid(
                    "testing.clock_offset_file is for tests only: refused with environment = \
                     production",
                ));
            }
            if t.planted_bug.is_some() {
                return Err(ConfigError::Invalid(
                    "testing.planted_bug is for tests only: refused with environment = production",
                ));
            }
        }
        if let Some(name) = &t.planted_bug {
            #[cfg(feature = "planted-bugs")]
            name.parse::<payments_core::planted::Bug>()
                .map_err(ConfigError::PlantedBug)?;
            #[cfg(not(feature = "planted-bugs"))]
            {
                let _ = name;
                return Err(ConfigError::Invalid(
                    "testing.planted_bug: this payments-server was built without the \
                     planted-bugs feature",
                ));
            }
        }
        Ok(())
    }

    /// The service's retention periods (`0s`: forever).
    pub fn retention(&self) -> payments_core::service::Retention {
        let kept = |d: Duration| (!d.is_zero()).then_some(d);
        payments_core::service::Retention {
            events: kept(self.retention.events),
            audit: kept(self.retention.audit),
        }
    }

    /// The upstream settings that go together: an `http` provider needs `url` and secrets,
    /// `http` rates need `rates_url`, the notification listener needs secrets; the URLs are
    /// `https://` (or `http://` to loopback); the CA file is readable later, at start.
    fn check_upstream(&mut self) -> Result<(), ConfigError> {
        let needs = |what, setting| ConfigError::Needs { what, setting };
        let u = &mut self.upstream;
        if !u.providers.is_empty() {
            if u.provider != ProviderKind::Http {
                return Err(needs("upstream.providers", "upstream.provider = \"http\""));
            }
            let mut names = std::collections::HashSet::new();
            for p in &u.providers {
                let name = p.provider_name()?;
                if !names.insert(name) {
                    return Err(ProviderSettingError::Twice(p.name.clone()).into());
                }
                if p.secrets.is_empty() {
                    return Err(ProviderSettingError::NoSecrets(p.name.clone()).into());
                }
                check_upstream_url(&p.url).map_err(|source| ProviderSettingError::Url {
                    name: p.name.clone(),
                    source,
                })?;
                p.coverage()?;
            }
        } else if u.provider == ProviderKind::Http {
            if u.url.is_none() {
                return Err(needs("upstream.provider = \"http\"", "upstream.url"));
            }
            if u.secrets.is_empty() {
                return Err(needs("upstream.provider = \"http\"", "upstream.secrets"));
            }
        }
        if u.rate_source == RateSourceKind::Http && u.rates_url.is_none() {
            return Err(needs(
                "upstream.rate_source = \"http\"",
                "upstream.rates_url",
            ));
        }
        // The rates requests are signed with `upstream.secrets`, whatever the providers have:
        // without them every fetch would be refused (401) and every create 422.
        if u.rate_source == RateSourceKind::Http && u.secrets.is_empty() {
            return Err(needs("upstream.rate_source = \"http\"", "upstream.secrets"));
        }
        if u.listen.is_some() && u.secrets.is_empty() && u.providers.is_empty() {
            return Err(needs("upstream.listen", "upstream.secrets"));
        }
        for (name, url) in [
            ("upstream.url", &u.url),
            ("upstream.rates_url", &u.rates_url),
        ] {
            if let Some(url) = url {
                check_upstream_url(url).map_err(|source| ConfigError::UpstreamUrl {
                    setting: name,
                    source,
                })?;
            }
        }
        if u.ca_only && u.ca_file.is_none() {
            return Err(needs("upstream.ca_only", "upstream.ca_file"));
        }
        let floor = Duration::from_millis(100);
        u.timeout = u.timeout.max(floor);
        u.connect_timeout = u.connect_timeout.max(floor);
        u.provider_budget = u.provider_budget.max(floor);
        u.recovery_window = u.recovery_window.max(u.provider_budget);
        u.rates_refresh = u.rates_refresh.max(floor);
        u.rates_max_age = u.rates_max_age.max(floor);
        u.health_report_interval = u.health_report_interval.max(floor);
        u.health_report_retention = u.health_report_retention.max(u.health_report_interval * 3);
        Ok(())
    }

    /// This node's name: `node_name`, or the host's name and the merchant listener's port
    /// (`merchant_port`: the bound one, which differs from the settings' with port 0), e.g.
    /// `web-1:8080`. The host's name is the kernel's (`/proc/sys/kernel/hostname`), else
    /// `HOSTNAME`, else `localhost`, with any character a name may not hold made `-`.
    pub fn node_name(&self, merchant_port: u16) -> String {
        if let Some(name) = &self.node_name {
            return name.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string());
        let host: String = host
            .chars()
            .take(90)
            .map(|c| if node_name_char(c) { c } else { '-' })
            .collect();
        format!("{host}:{merchant_port}")
    }

    /// Logs a warning for each flat name of earlier releases these settings were read with
    /// ([`Settings::deprecated`]); call it once logging is set up.
    pub fn warn_deprecated(&self) {
        for note in &self.deprecated {
            tracing::warn!("deprecated setting: {note}");
        }
    }

    /// The scheme merchants sign for: from the public URL, else `https` with TLS, else `http`.
    pub fn public_scheme(&self) -> &str {
        match &self.listen.public_url {
            Some(u) if u.starts_with("https://") => "https",
            Some(_) => "http",
            None if self.tls.cert.is_some() => "https",
            None => "http",
        }
    }
}

/// Whether `c` may be part of a node's name.
fn node_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// The settings file as a figment layer: `Toml::file_exact`, read with the
/// [`crate::files::CONFIG`] limit (1 MiB) instead of whole.
struct TomlFile(PathBuf);

impl Provider for TomlFile {
    fn metadata(&self) -> Metadata {
        Metadata::from("TOML file", self.0.as_path())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        use crate::files::FileError;
        let text = crate::files::read_limited_string(&self.0, crate::files::CONFIG).map_err(
            |e| match e {
                // The file is named by the metadata already.
                FileError::Read { source, .. } => source.to_string(),
                FileError::TooLarge { limit, .. } => {
                    format!("larger than {limit}, the limit for {}", limit.what)
                }
                FileError::NotText { .. } => "not UTF-8 text".to_string(),
            },
        )?;
        Toml::string(&text).data()
    }
}

/// An upstream URL: `https://`, or `http://` to a loopback host (`localhost`, 127.0.0.0/8,
/// `[::1]`): the request and the shared secret's signatures never cross a network in clear.
pub fn check_upstream_url(url: &str) -> Result<reqwest::Url, UpstreamUrlError> {
    payments_providers::upstream::check_url(url)
}

/// Why an upstream URL is refused ([`check_upstream_url`]).
pub use payments_providers::upstream::UrlError as UpstreamUrlError;

/// What [`EnvLayer`] calls itself in figment's metadata.
const ENV_LAYER: &str = "PAYMENTS_* environment variables";

/// The unit a flat name of earlier releases gave its number in.
#[derive(Debug, Clone, Copy)]
enum Unit {
    /// Not a duration: the value as it is.
    Same,
    /// Milliseconds (`_ms`).
    Millis,
    /// Microseconds (`_us`).
    Micros,
    /// Seconds (`_seconds`).
    Seconds,
    /// Days (`_days`).
    Days,
}

/// Each flat name of earlier releases, its place now and the unit of its number. Read for
/// one more release, with a deprecation warning each.
const RENAMED: &[(&str, &str, Unit)] = &[
    ("listen", "listen.merchant", Unit::Same),
    ("operator_listen", "listen.operator", Unit::Same),
    ("public_url", "listen.public_url", Unit::Same),
    ("trusted_proxies", "listen.trusted_proxies", Unit::Same),
    ("tls_cert", "tls.cert", Unit::Same),
    ("tls_key", "tls.key", Unit::Same),
    ("operator_tls", "tls.operator", Unit::Same),
    ("tls_watch_interval_ms", "tls.watch_interval", Unit::Millis),
    ("database_url", "store.database_url", Unit::Same),
    ("database_pool_size", "store.pool_size", Unit::Same),
    ("synchronous", "store.synchronous", Unit::Same),
    ("callback_dispatch", "callbacks.dispatch", Unit::Same),
    ("callback_concurrency", "callbacks.concurrency", Unit::Same),
    ("callback_per_host", "callbacks.per_host", Unit::Same),
    ("callback_lease_ms", "callbacks.lease", Unit::Millis),
    (
        "callback_retry_delays",
        "callbacks.retry_delays",
        Unit::Same,
    ),
    ("callback_ca_file", "callbacks.ca_file", Unit::Same),
    ("allow_local_callbacks", "callbacks.allow_local", Unit::Same),
    ("provider", "upstream.provider", Unit::Same),
    ("rate_source", "upstream.rate_source", Unit::Same),
    ("upstream_url", "upstream.url", Unit::Same),
    ("upstream_rates_url", "upstream.rates_url", Unit::Same),
    ("upstream_secrets", "upstream.secrets", Unit::Same),
    ("upstream_ca_file", "upstream.ca_file", Unit::Same),
    ("upstream_ca_only", "upstream.ca_only", Unit::Same),
    ("upstream_timeout_ms", "upstream.timeout", Unit::Millis),
    (
        "upstream_connect_timeout_ms",
        "upstream.connect_timeout",
        Unit::Millis,
    ),
    ("upstream_pool_idle", "upstream.pool_idle", Unit::Same),
    (
        "upstream_pool_idle_timeout_ms",
        "upstream.pool_idle_timeout",
        Unit::Millis,
    ),
    (
        "provider_budget_ms",
        "upstream.provider_budget",
        Unit::Millis,
    ),
    ("rates_refresh_ms", "upstream.rates_refresh", Unit::Millis),
    ("rates_max_age_ms", "upstream.rates_max_age", Unit::Millis),
    ("upstream_listen", "upstream.listen", Unit::Same),
    ("retention_events_days", "retention.events", Unit::Days),
    ("retention_audit_days", "retention.audit", Unit::Days),
    ("cabinet_listen", "cabinet.listen", Unit::Same),
    ("cabinet_public_url", "cabinet.public_url", Unit::Same),
    ("metrics_listen", "metrics.listen", Unit::Same),
    ("metrics_token", "metrics.token", Unit::Same),
    ("secrets_key_file", "secrets.key_file", Unit::Same),
    (
        "secrets_previous_key_files",
        "secrets.previous_key_files",
        Unit::Same,
    ),
    ("log_format", "log.format", Unit::Same),
    ("log_level", "log.level", Unit::Same),
    ("sweep_interval_ms", "tuning.sweep_interval", Unit::Millis),
    (
        "shutdown_grace_seconds",
        "tuning.shutdown_grace",
        Unit::Seconds,
    ),
    ("max_connections", "tuning.max_connections", Unit::Same),
    ("header_timeout_ms", "tuning.header_timeout", Unit::Millis),
    ("body_timeout_ms", "tuning.body_timeout", Unit::Millis),
    ("signature_batch", "tuning.signature_batch", Unit::Same),
    (
        "signature_batch_wait_us",
        "tuning.signature_batch_wait",
        Unit::Micros,
    ),
    (
        "signature_batch_min",
        "tuning.signature_batch_min",
        Unit::Same,
    ),
];

/// The place of flat name `key` now, if it is one of [`RENAMED`]; `listen` only when its
/// value is not the `[listen]` section.
fn renamed(key: &str, value: &Value) -> Option<(&'static str, Unit)> {
    if key == "listen" && matches!(value, Value::Dict(..)) {
        return None;
    }
    RENAMED
        .iter()
        .find(|(old, _, _)| *old == key)
        .map(|(_, new, unit)| (*new, *unit))
}

/// A flat name's number in its unit, as a duration setting (`"60000ms"`).
fn in_unit(value: Value, unit: Unit, name: &str) -> Result<Value, LayerError> {
    let suffix = match unit {
        Unit::Same => return Ok(value),
        Unit::Millis => "ms",
        Unit::Micros => "us",
        Unit::Seconds => "s",
        Unit::Days => "d",
    };
    let number = match &value {
        Value::Num(_, n) => n
            .to_u128()
            .or_else(|| n.to_i128().and_then(|i| u128::try_from(i).ok()))
            .map(|n| n.to_string()),
        Value::String(_, s) => s.trim().parse::<u64>().ok().map(|n| n.to_string()),
        _ => None,
    };
    number
        .map(|n| Value::from(format!("{n}{suffix}")))
        .ok_or_else(|| LayerError::NotWholeNumber {
            name: name.to_string(),
            value,
        })
}

/// Why a layer's value could not be read as its setting, before figment sees it; figment
/// takes it as a message (`figment::Error::from(String)`).
#[derive(Debug, thiserror::Error)]
enum LayerError {
    /// A flat name's number (`_ms`, `_seconds`, ...) that is not a whole number.
    #[error("{name}: expected a whole number, got {value:?}")]
    NotWholeNumber { name: String, value: Value },
    /// A variable of a boolean setting.
    #[error("{var}: {source}")]
    Boolean {
        var: String,
        #[source]
        source: NotABoolean,
    },
    /// A variable of a numeric setting.
    #[error("{var}: expected a number, got {raw:?}")]
    NotNumber { var: String, raw: String },
}

impl From<LayerError> for figment::Error {
    fn from(e: LayerError) -> figment::Error {
        figment::Error::from(e.to_string())
    }
}

/// Sets `value` at the dotted `path` of `dict`, making the sections on the way. A value
/// already there stays (the new name wins over the old one in the same layer): `false` then.
fn insert_at(dict: &mut Dict, path: &str, value: Value) -> bool {
    match path.split_once('.') {
        None => {
            if dict.contains_key(path) {
                return false;
            }
            dict.insert(path.to_string(), value);
            true
        }
        Some((section, rest)) => {
            let mut inner = match dict.remove(section) {
                Some(Value::Dict(_, d)) => d,
                // A section given as something else: left for the extraction to refuse.
                Some(other) => {
                    dict.insert(section.to_string(), other);
                    return false;
                }
                None => Dict::new(),
            };
            let inserted = insert_at(&mut inner, rest, value);
            dict.insert(section.to_string(), Value::from(inner));
            inserted
        }
    }
}

/// Moves the flat names of earlier releases in `dict` to their places now, converting the
/// numbers of `_ms`, `_us`, `_seconds` and `_days` names to durations.
fn move_renamed(dict: &mut Dict) -> Result<(), LayerError> {
    let keys: Vec<String> = dict.keys().cloned().collect();
    for key in keys {
        let Some(value) = dict.get(&key) else {
            continue;
        };
        let Some((new, unit)) = renamed(&key, value) else {
            continue;
        };
        let value = dict.remove(&key).expect("the key was just read");
        insert_at(dict, new, in_unit(value, unit, &key)?);
    }
    Ok(())
}

/// The deprecation note of a flat name of earlier releases, `old` (spelled as the layer
/// spells it), now `new`.
fn deprecation(old: &str, new: &str) -> String {
    format!(
        "{old} is {new} now: the flat names of earlier releases are read this release only \
         (docs/operations.md, \"Settings\")"
    )
}

/// The deprecation notes of the flat names in a layer's `dict`.
fn flat_names(dict: &Dict) -> Vec<String> {
    dict.iter()
        .filter_map(|(key, value)| renamed(key, value).map(|(new, _)| deprecation(key, new)))
        .collect()
}

/// A settings layer (the file, the flags) with the flat names of earlier releases moved to
/// their sections ([`RENAMED`]).
struct Renamed<P>(P);

impl<P: Provider> Provider for Renamed<P> {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = self.0.data()?;
        for dict in data.values_mut() {
            move_renamed(dict)?;
        }
        Ok(data)
    }
}

/// The `PAYMENTS_*` environment variables as a figment layer: `__` between a section and its
/// key (`PAYMENTS_CALLBACKS__CONCURRENCY`), and the flat names of earlier releases
/// (`PAYMENTS_CALLBACK_CONCURRENCY`, each a deprecation note). A variable is read as the type
/// of the setting it names (the shape of [`Settings::default`]): booleans as [`parse_bool`],
/// numbers, lists comma-separated, everything else (durations: `30s`) as the string given.
/// `PAYMENTS_LOG` is `PAYMENTS_LOG__LEVEL`; variables that name no setting
/// (`PAYMENTS_CONFIG`, ...) are skipped.
#[derive(Clone)]
pub struct EnvLayer(Env);

impl std::fmt::Debug for EnvLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvLayer(PAYMENTS_*)")
    }
}

impl EnvLayer {
    /// The variables of this process.
    pub fn process() -> EnvLayer {
        EnvLayer(Env::prefixed("PAYMENTS_"))
    }

    /// The deprecation notes of the variables that use a flat name of earlier releases.
    fn flat_names(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|(key, raw)| {
                let key = key.as_str().to_ascii_lowercase();
                let (new, _) = renamed(&key, &Value::from(raw))?;
                Some(deprecation(
                    &format!("PAYMENTS_{}", key.to_ascii_uppercase()),
                    &variable(new),
                ))
            })
            .collect()
    }
}

/// The value at the dotted `path` of `dict`.
fn value_at<'a>(dict: &'a Dict, path: &str) -> Option<&'a Value> {
    match path.split_once('.') {
        None => dict.get(path),
        Some((section, rest)) => match dict.get(section)? {
            Value::Dict(_, inner) => value_at(inner, rest),
            _ => None,
        },
    }
}

/// A variable's name for the setting at the dotted `path`.
fn variable(path: &str) -> String {
    format!("PAYMENTS_{}", path.replace('.', "__").to_ascii_uppercase())
}

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_LAYER).interpolater(|_: &Profile, keys: &[&str]| {
            format!("PAYMENTS_{}", keys.join("__").to_ascii_uppercase())
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let defaults = Serialized::defaults(Settings::default())
            .data()?
            .remove(&Profile::Default)
            .unwrap_or_default();
        let mut dict = Dict::new();
        for (key, raw) in self.0.iter() {
            let key = key.as_str().to_ascii_lowercase();
            let var = format!("PAYMENTS_{}", key.to_ascii_uppercase());
            let (path, unit) = if key == "log" {
                ("log.level".to_string(), Unit::Same)
            } else if let Some((new, unit)) = renamed(&key, &Value::from(raw.clone())) {
                (new.to_string(), unit)
            } else {
                (key.replace("__", "."), Unit::Same)
            };
            let Some(default) = value_at(&defaults, &path) else {
                continue;
            };
            let value = match (unit, default) {
                (Unit::Same, Value::Bool(..)) => {
                    let parsed = parse_bool(&raw).map_err(|source| LayerError::Boolean {
                        var: var.clone(),
                        source,
                    });
                    Value::from(parsed?)
                }
                (Unit::Same, Value::Num(..)) => Value::from(raw.trim().parse::<u64>().map_err(
                    |_| LayerError::NotNumber {
                        var: var.clone(),
                        raw: raw.to_string(),
                    },
                )?),
                (Unit::Same, Value::Array(..)) => Value::from(
                    raw.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>(),
                ),
                // A table (`rates`) in figment's inline syntax: `{RUB="92.5"}`.
                (Unit::Same, Value::Dict(..)) => {
                    raw.parse().expect("parsing a figment value is infallible")
                }
                (Unit::Same, _) => Value::from(raw),
                (unit, _) => in_unit(Value::from(raw), unit, &var)?,
            };
            insert_at(&mut dict, &path, value);
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// figment's errors as one line each, named by setting (or variable) and file.
fn describe(error: &figment::Error) -> String {
    let lines: Vec<String> = error
        .clone()
        .into_iter()
        .map(|e| {
            let from_env = e.metadata.as_ref().is_some_and(|m| m.name == ENV_LAYER);
            let name = match (&e.metadata, &e.profile) {
                (Some(md), Some(profile)) if from_env && !e.path.is_empty() => {
                    md.interpolate(profile, &e.path)
                }
                _ => e.path.join("."),
            };
            let kind = match &e.kind {
                figment::error::Kind::UnknownField(..) => {
                    "not a setting (docs/operations.md lists them)".to_string()
                }
                kind => kind.to_string().trim_end().to_string(),
            };
            let file = match e.metadata.as_ref().and_then(|m| m.source.as_ref()) {
                Some(Source::File(path)) => Some(path.display().to_string()),
                _ => None,
            };
            match (name.is_empty(), file) {
                (true, Some(file)) => format!("{file}: {kind}"),
                (true, None) => kind,
                (false, Some(file)) => format!("{name}: {kind} (in {file})"),
                (false, None) => format!("{name}: {kind}"),
            }
        })
        .collect();
    lines.join("; ")
}

/// A setting written as one string; `parse` says what is wrong with a bad one.
trait Text: Sized {
    type Err: std::fmt::Display;
    fn parse(s: &str) -> Result<Self, Self::Err>;
    fn text(&self) -> String;
}

/// Why a [`Text`] setting of this crate's own spelling was refused.
#[derive(Debug, thiserror::Error)]
enum TextError {
    #[error("{0:?} is not an address like 127.0.0.1:8080")]
    Address(String),
    #[error("{0:?} is not an address or CIDR network")]
    Network(String),
    #[error("{0:?} is not a decimal")]
    Decimal(String),
    /// One of a few words, `expected` naming them.
    #[error("expected {expected}, got {got:?}")]
    Choice { expected: &'static str, got: String },
}

fn choice(expected: &'static str, got: &str) -> TextError {
    TextError::Choice {
        expected,
        got: got.to_string(),
    }
}

impl Text for Environment {
    type Err = <Environment as FromStr>::Err;
    fn parse(s: &str) -> Result<Self, Self::Err> {
        Environment::from_str(s)
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for SocketAddr {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        s.parse().map_err(|_| TextError::Address(s.to_string()))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for Durability {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            _ => Err(choice("full or normal", s)),
        }
    }
    fn text(&self) -> String {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
        .to_string()
    }
}

impl Text for LogFormat {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(choice("text or json", s)),
        }
    }
    fn text(&self) -> String {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
        .to_string()
    }
}

impl Text for RetrySchedule {
    type Err = payments_core::callback::RetryDelaysError;
    fn parse(s: &str) -> Result<Self, Self::Err> {
        RetrySchedule::parse_delays(s)
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for IpNet {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        s.parse::<IpNet>()
            .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| TextError::Network(s.to_string()))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for ProviderKind {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        match s {
            "sandbox" => Ok(ProviderKind::Sandbox),
            "http" => Ok(ProviderKind::Http),
            _ => Err(choice("sandbox or http", s)),
        }
    }
    fn text(&self) -> String {
        match self {
            ProviderKind::Sandbox => "sandbox",
            ProviderKind::Http => "http",
        }
        .to_string()
    }
}

impl Text for RateSourceKind {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        match s {
            "fixed" => Ok(RateSourceKind::Fixed),
            "http" => Ok(RateSourceKind::Http),
            _ => Err(choice("fixed or http", s)),
        }
    }
    fn text(&self) -> String {
        match self {
            RateSourceKind::Fixed => "fixed",
            RateSourceKind::Http => "http",
        }
        .to_string()
    }
}

impl Text for CallbackSecret {
    /// The error never repeats the value (it may be a secret with a typo).
    type Err = payments_core::callback::CallbackSecretError;
    fn parse(s: &str) -> Result<Self, Self::Err> {
        CallbackSecret::parse(s)
    }
    fn text(&self) -> String {
        self.expose().to_string()
    }
}

impl Text for Decimal {
    type Err = TextError;
    fn parse(s: &str) -> Result<Self, TextError> {
        Decimal::from_str(s).map_err(|_| TextError::Decimal(s.to_string()))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

/// A [`Text`] setting.
mod text {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<T: super::Text, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.text())
    }

    pub(super) fn deserialize<'de, T: super::Text, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        T::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// An optional [`Text`] setting; absent is `None`.
mod opt_text {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<T: super::Text, S: Serializer>(
        v: &Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&v.text()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, T: super::Text, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(s) => T::parse(&s).map(Some).map_err(D::Error::custom),
        }
    }
}

/// A list of [`Text`] settings: a list, or one comma-separated string.
mod text_list {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a list of strings or a comma-separated string")]
    enum Raw {
        One(String),
        Many(Vec<String>),
    }

    pub(super) fn serialize<T: super::Text, S: Serializer>(
        v: &[T],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(super::Text::text))
    }

    pub(super) fn deserialize<'de, T: super::Text, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        let items = match Raw::deserialize(d)? {
            Raw::One(s) => s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            Raw::Many(v) => v,
        };
        items
            .iter()
            .map(|s| T::parse(s.trim()).map_err(D::Error::custom))
            .collect()
    }
}

/// A table of [`Text`] settings.
mod text_map {
    use std::collections::BTreeMap;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<T: super::Text, S: Serializer>(
        v: &BTreeMap<String, T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(v.iter().map(|(k, v)| (k, v.text())))
    }

    pub(super) fn deserialize<'de, T: super::Text, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, T>, D::Error> {
        BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                let parsed = T::parse(&v).map_err(|e| D::Error::custom(format!("{k}: {e}")))?;
                Ok((k, parsed))
            })
            .collect()
    }
}

/// A duration written with its unit: `"30s"`, `"250ms"`, `"1m 30s"`, `"90d"` (humantime's
/// syntax), written back in the largest unit that is exact.
/// An optional duration; absent is `None`.
mod opt_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::duration::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super::duration")] Duration);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|w| w.0))
    }
}

mod duration {
    use std::time::Duration;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(text.trim()).map_err(|e| {
            D::Error::custom(format!(
                "{text:?} is not a duration like \"30s\", \"250ms\" or \"90d\": {e}"
            ))
        })
    }

    /// `v` in the largest of d, h, m, s, ms, us and ns that writes it exactly.
    pub(super) fn text(v: Duration) -> String {
        let nanos = v.as_nanos();
        const UNITS: [(u128, &str); 7] = [
            (86_400_000_000_000, "d"),
            (3_600_000_000_000, "h"),
            (60_000_000_000, "m"),
            (1_000_000_000, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        if nanos == 0 {
            return "0s".to_string();
        }
        let (size, unit) = UNITS
            .iter()
            .find(|(size, _)| nanos.is_multiple_of(*size))
            .copied()
            .unwrap_or((1, "ns"));
        format!("{}{unit}", nanos / size)
    }
}

#[cfg(test)]
mod tests;

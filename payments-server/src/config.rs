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

/// Every setting. The serde names are the TOML keys and, upper-cased after `PAYMENTS_`, the
/// environment variables (docs/operations.md lists them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `sandbox` (default) or `production`.
    #[serde(with = "text")]
    pub environment: Environment,
    /// Where the database and the sandbox credentials live (`./data`).
    pub data_dir: PathBuf,
    /// Merchant API listener (`127.0.0.1:8080`).
    #[serde(with = "text")]
    pub listen: SocketAddr,
    /// Operator API listener (`127.0.0.1:8081`).
    #[serde(with = "text")]
    pub operator_listen: SocketAddr,
    /// The web cabinet's listener (`127.0.0.1:8082`); TLS like the merchant listener.
    #[serde(with = "text")]
    pub cabinet_listen: SocketAddr,
    /// The cabinet's public URL (scheme and host browsers use, for invitation links and the
    /// cross-site check behind a proxy); default `http(s)://<cabinet_listen>`.
    pub cabinet_public_url: Option<String>,
    /// The merchant API's public base URL (scheme and host merchants sign for `@target-uri`);
    /// default `http(s)://<listen>`.
    pub public_url: Option<String>,
    /// TLS certificate chain (PEM) for the merchant listener.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for the merchant listener.
    pub tls_key: Option<PathBuf>,
    /// PostgreSQL instead of the data dir's SQLite: `postgres://user:password@host:port/db`
    /// (key `database_url`, `PAYMENTS_DATABASE_URL`, `--database-url`). Several nodes may
    /// serve over one database; every command of `payments-server` acts on it.
    pub database_url: Option<SecretString>,
    /// Connections in this node's PostgreSQL pool (default 16). Keep nodes x pool size well
    /// under the database's `max_connections`.
    pub database_pool_size: usize,
    /// SQLite durability: key `synchronous`, `full` or `normal`.
    #[serde(rename = "synchronous", with = "text")]
    pub durability: Durability,
    /// Proxies whose `X-Forwarded-For` is trusted: CIDR networks or addresses, a list in the
    /// file, comma-separated in the environment.
    #[serde(with = "text_list")]
    pub trusted_proxies: Vec<IpNet>,
    /// Development: allow `http://` and loopback callback URLs.
    pub allow_local_callbacks: bool,
    /// Delays between callback attempts: seconds, comma-separated (`"30,60"`).
    #[serde(with = "text")]
    pub callback_retry_delays: RetrySchedule,
    /// Extra CA certificates (PEM) the callback client trusts, besides the public roots.
    pub callback_ca_file: Option<PathBuf>,
    /// Deliveries in flight at once.
    pub callback_concurrency: usize,
    /// Deliveries in flight at once to one host.
    pub callback_per_host: usize,
    /// How long a claimed callback event stays leased to the node that claimed it: key
    /// `callback_lease_ms` (default 60,000; more than the 10 s attempt timeout). After a node
    /// dies mid-attempt, its events are attempted again by another node once this ends.
    #[serde(rename = "callback_lease_ms", with = "millis")]
    pub callback_lease: Duration,
    /// Whether this server runs the callback dispatcher (default `true`). When `false`, closed
    /// payments still commit their callback events to the outbox in the same transaction as
    /// always; they are only not sent until a server with dispatch on runs over the same data
    /// dir. For holding callbacks during maintenance and for measuring delivery alone
    /// (queue first, deliver later).
    pub callback_dispatch: bool,
    /// Log format: `text` or `json`.
    #[serde(with = "text")]
    pub log_format: LogFormat,
    /// Log filter (`info`, `payments_http=debug`, ...); also `PAYMENTS_LOG`.
    pub log_level: String,
    /// A bank catalog file replacing the embedded one.
    pub bank_catalog: Option<PathBuf>,
    /// The key file sealing callback secrets at rest (default `<data_dir>/secrets.key`;
    /// created, 0600, when missing). Keep it outside the data dir so that a copy of the
    /// database alone reveals nothing.
    pub secrets_key_file: Option<PathBuf>,
    /// Previous key files: secrets sealed with them still open, until
    /// `payments-server callback-secret reseal` seals them with the current key.
    pub secrets_previous_key_files: Vec<PathBuf>,
    /// Fixed exchange rates (currency -> units per 1 USDT), as decimal strings.
    #[serde(with = "text_map")]
    pub rates: BTreeMap<String, Decimal>,
    /// How often the lifecycle sweeper runs: key `sweep_interval_ms` (at least 10).
    #[serde(rename = "sweep_interval_ms", with = "millis")]
    pub sweep_interval: Duration,
    /// How long shutdown waits for in-flight requests: key `shutdown_grace_seconds`.
    #[serde(rename = "shutdown_grace_seconds", with = "seconds")]
    pub shutdown_grace: Duration,
    /// Connections each listener holds open at once (default 10,000); a connection over the
    /// cap is answered `503` and closed at once. Keep it below the process's file-descriptor
    /// limit.
    pub max_connections: usize,
    /// Most signatures of concurrent requests verified in one Ed25519 batch (default 64; 1
    /// verifies each request's alone). See `payments_core::service::SignatureBatcher`.
    pub signature_batch: usize,
    /// Longest a request waits for the other signatures of its batch, in microseconds
    /// (default 1,000; the runtime's timer rounds it up to whole milliseconds). A request
    /// alone does not wait. Under a steady stream a batch also waits for the signatures
    /// expected, at the recent rate, in a quarter of this time (0: for none).
    pub signature_batch_wait_us: u64,
    /// Signatures a batch waits for at least, within `signature_batch_wait_us`, once batches
    /// form (default 1: none beyond the requests already under way and those the recent rate
    /// brings in a quarter of the wait). 8 cut CPU per create by about a tenth at saturation
    /// and added about 1 ms to the median at 5,000 creates/s (docs/performance.md).
    pub signature_batch_min: usize,
    /// How long a client may take to send a request's headers, and how long a kept-alive
    /// connection may sit idle before its next request: key `header_timeout_ms` (default
    /// 10,000). Slow or silent connections are closed after it.
    #[serde(rename = "header_timeout_ms", with = "millis")]
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived: key
    /// `body_timeout_ms` (default 10,000); later is `408 request_timeout`.
    #[serde(rename = "body_timeout_ms", with = "millis")]
    pub body_timeout: Duration,

    // Upstream: the HTTP requisite provider, the live rate source and provider notifications
    // (docs/providers.md is the wire contract).
    /// Requisite provider: `sandbox` (default; refused in production) or `http`.
    #[serde(with = "text")]
    pub provider: ProviderKind,
    /// Exchange rates: `fixed` (the `[rates]` table, default; refused in production) or `http`.
    #[serde(with = "text")]
    pub rate_source: RateSourceKind,
    /// The upstream's requisite endpoint (`provider = "http"`): `https://...`, or `http://` to a
    /// loopback address (a sidecar on the same host).
    pub upstream_url: Option<String>,
    /// The upstream's rates endpoint (`rate_source = "http"`), same rule.
    pub upstream_rates_url: Option<String>,
    /// HMAC secrets shared with the upstream (`whsec_...`, at least 32 characters after the
    /// prefix): requests to it are signed with each, notifications from it verify with any
    /// (two during a rotation). A list in the file, comma-separated in the environment.
    #[serde(with = "text_list")]
    pub upstream_secrets: Vec<CallbackSecret>,
    /// Extra CA certificates (PEM) trusted for the upstream, besides the public roots.
    pub upstream_ca_file: Option<PathBuf>,
    /// Trust only `upstream_ca_file` for the upstream, not the public web roots.
    pub upstream_ca_only: bool,
    /// One upstream request's time limit (connect, send, answer): key `upstream_timeout_ms`
    /// (default 15,000; the provider budget bounds a create whatever this says).
    #[serde(rename = "upstream_timeout_ms", with = "millis")]
    pub upstream_timeout: Duration,
    /// Connect (TCP and TLS) time limit: key `upstream_connect_timeout_ms` (default 5,000).
    #[serde(rename = "upstream_connect_timeout_ms", with = "millis")]
    pub upstream_connect_timeout: Duration,
    /// Idle connections to the upstream kept open for reuse (default 32).
    pub upstream_pool_idle: usize,
    /// How long an idle upstream connection is kept: key `upstream_pool_idle_timeout_ms`
    /// (default 90,000).
    #[serde(rename = "upstream_pool_idle_timeout_ms", with = "millis")]
    pub upstream_pool_idle_timeout: Duration,
    /// The requisite provider's budget per create: key `provider_budget_ms` (default 15,000,
    /// the spec's); no answer in time is `provider_result_ambiguous`.
    #[serde(rename = "provider_budget_ms", with = "millis")]
    pub provider_budget: Duration,
    /// How often the live rates are fetched: key `rates_refresh_ms` (default 30,000).
    #[serde(rename = "rates_refresh_ms", with = "millis")]
    pub rates_refresh: Duration,
    /// The staleness limit of the live rates: key `rates_max_age_ms` (default 300,000). Rates
    /// fetched longer ago are not used: creates answer `422 payment_rate_unavailable`.
    #[serde(rename = "rates_max_age_ms", with = "millis")]
    pub rates_max_age: Duration,
    /// The provider-notification listener (off by default): the upstream's signed reports of
    /// confirmed and failed transfers, at `POST /upstream/v1/notifications`.
    #[serde(with = "opt_text")]
    pub upstream_listen: Option<SocketAddr>,

    // Operations (docs/operations.md).
    /// A listener of its own for `GET /metrics` (off by default: `/metrics` is on the operator
    /// listener), e.g. for a Prometheus on another network than the operators'.
    #[serde(with = "opt_text")]
    pub metrics_listen: Option<SocketAddr>,
    /// A bearer token `/metrics` requires wherever it is served (none by default). Better from
    /// the environment (`PAYMENTS_METRICS_TOKEN`) than in the file.
    pub metrics_token: Option<SecretString>,
    /// Days finished callback events (delivered or failed, with their attempts) are kept:
    /// key `retention_events_days` (default 90; 0 keeps them forever).
    pub retention_events_days: u64,
    /// Days audit records are kept: key `retention_audit_days` (default 400, the longest;
    /// 0 keeps them forever).
    pub retention_audit_days: u64,
    /// How often the TLS certificate and key files are checked for a change (they are also
    /// reloaded on SIGHUP): key `tls_watch_interval_ms` (default 10,000, at least 100).
    #[serde(rename = "tls_watch_interval_ms", with = "millis")]
    pub tls_watch_interval: Duration,
    /// Serve the operator listener over TLS too, with `tls_cert` and `tls_key` (default off:
    /// keep the operator listener on loopback or a private network).
    pub operator_tls: bool,
}

impl Default for Settings {
    /// Sandbox on 127.0.0.1:8080 (operator 8081, cabinet 8082) with `./data`.
    fn default() -> Settings {
        Settings {
            environment: Environment::Sandbox,
            data_dir: PathBuf::from("./data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            operator_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            cabinet_listen: SocketAddr::from(([127, 0, 0, 1], 8082)),
            cabinet_public_url: None,
            public_url: None,
            tls_cert: None,
            tls_key: None,
            database_url: None,
            database_pool_size: 16,
            durability: Durability::Full,
            trusted_proxies: Vec::new(),
            allow_local_callbacks: false,
            callback_retry_delays: RetrySchedule::default(),
            callback_ca_file: None,
            callback_concurrency: 256,
            callback_per_host: 64,
            callback_lease: Duration::from_secs(60),
            callback_dispatch: true,
            log_format: LogFormat::Text,
            log_level: "info".to_string(),
            bank_catalog: None,
            secrets_key_file: None,
            secrets_previous_key_files: Vec::new(),
            rates: payments_http::sandbox::FixedRates::sandbox_defaults().0,
            sweep_interval: Duration::from_millis(1000),
            shutdown_grace: Duration::from_secs(30),
            max_connections: 10_000,
            signature_batch: payments_core::service::DEFAULT_MAX_BATCH,
            signature_batch_wait_us: 1_000,
            signature_batch_min: 1,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            provider: ProviderKind::Sandbox,
            rate_source: RateSourceKind::Fixed,
            upstream_url: None,
            upstream_rates_url: None,
            upstream_secrets: Vec::new(),
            upstream_ca_file: None,
            upstream_ca_only: false,
            upstream_timeout: Duration::from_secs(15),
            upstream_connect_timeout: Duration::from_secs(5),
            upstream_pool_idle: 32,
            upstream_pool_idle_timeout: Duration::from_secs(90),
            provider_budget: Duration::from_secs(15),
            rates_refresh: Duration::from_secs(30),
            rates_max_age: Duration::from_secs(300),
            upstream_listen: None,
            metrics_listen: None,
            metrics_token: None,
            retention_events_days: 90,
            retention_audit_days: 400,
            tls_watch_interval: Duration::from_secs(10),
            operator_tls: false,
        }
    }
}

/// A setting that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// A boolean in the forms the environment variables accept: `1`/`true`/`yes`/`on` and
/// `0`/`false`/`no`/`off` (any case), and the empty string as `false`.
pub fn parse_bool(v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(ConfigError(format!("expected a boolean, got {other:?}"))),
    }
}

impl Settings {
    /// The dispatcher's part of the settings; reads `callback_ca_file` if one is set.
    ///
    /// # Errors
    /// [`DispatcherError::CaFile`] when the CA file cannot be read or holds no certificate.
    pub fn dispatcher(&self) -> Result<DispatcherConfig, DispatcherError> {
        let extra_roots = match &self.callback_ca_file {
            Some(path) => crate::files::read_pem_roots(path)?,
            None => Vec::new(),
        };
        Ok(DispatcherConfig {
            concurrency: self.callback_concurrency,
            per_host: self.callback_per_host,
            lease: self.callback_lease,
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
    /// the command line only (skip the `None`s). A setting no layer gives keeps its default
    /// (`#[serde(default)]`); the defaults are not a layer of their own so that a `rates` table
    /// replaces the default table instead of adding to it.
    pub fn figment(file: Option<&Path>, flags: impl Serialize) -> Figment {
        let mut layers = Figment::new();
        if let Some(path) = file {
            layers = layers.merge(TomlFile(path.to_path_buf()));
        }
        layers
            .merge(EnvLayer::process())
            .merge(Serialized::defaults(flags))
    }

    /// The settings of [`Settings::figment`]: file < `PAYMENTS_*` < `flags`.
    pub fn load(file: Option<&Path>, flags: impl Serialize) -> Result<Settings, ConfigError> {
        Settings::from_figment(&Settings::figment(file, flags))
    }

    /// Extracts and checks the settings of `layers`; an error names the setting (the
    /// variable for one from the environment) and the file it came from.
    pub fn from_figment(layers: &Figment) -> Result<Settings, ConfigError> {
        layers.extract::<Settings>().map_err(describe)?.checked()
    }

    /// Checks what one value alone cannot show and normalises: `tls_cert` and `tls_key` come
    /// together, `public_url` loses a trailing `/`, concurrency is at least 1, the sweep
    /// interval at least 10 ms.
    pub fn checked(mut self) -> Result<Settings, ConfigError> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(ConfigError(
                "tls_cert and tls_key must be given together".into(),
            ));
        }
        self.public_url = self.public_url.map(|u| u.trim_end_matches('/').to_string());
        self.cabinet_public_url = self
            .cabinet_public_url
            .map(|u| u.trim_end_matches('/').to_string());
        self.callback_concurrency = self.callback_concurrency.max(1);
        self.callback_per_host = self.callback_per_host.max(1);
        self.sweep_interval = self.sweep_interval.max(Duration::from_millis(10));
        self.max_connections = self.max_connections.max(1);
        self.signature_batch = self.signature_batch.max(1);
        self.signature_batch_min = self.signature_batch_min.clamp(1, self.signature_batch);
        self.header_timeout = self.header_timeout.max(Duration::from_millis(100));
        self.body_timeout = self.body_timeout.max(Duration::from_millis(100));
        self.tls_watch_interval = self.tls_watch_interval.max(Duration::from_millis(100));
        if self.operator_tls && self.tls_cert.is_none() {
            return Err(ConfigError(
                "operator_tls needs tls_cert and tls_key".into(),
            ));
        }
        if self
            .metrics_token
            .as_ref()
            .is_some_and(|t| t.expose().trim().len() < 16)
        {
            return Err(ConfigError(
                "metrics_token: at least 16 characters (e.g. openssl rand -hex 24)".into(),
            ));
        }
        self.check_upstream()?;
        if let Some(url) = &self.database_url {
            let url = url.expose();
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(ConfigError(
                    "database_url: expected postgres://user:password@host:port/database".into(),
                ));
            }
        }
        self.database_pool_size = self.database_pool_size.max(1);
        Ok(self)
    }

    /// The service's retention periods from `retention_events_days` and
    /// `retention_audit_days` (0: forever).
    pub fn retention(&self) -> payments_core::service::Retention {
        let days = |d: u64| (d > 0).then(|| Duration::from_secs(d.saturating_mul(86_400)));
        payments_core::service::Retention {
            events: days(self.retention_events_days),
            audit: days(self.retention_audit_days),
        }
    }

    /// The upstream settings that go together: an `http` provider needs `upstream_url` and
    /// secrets, `http` rates need `upstream_rates_url`, the notification listener needs
    /// secrets; the URLs are `https://` (or `http://` to loopback); the CA file is readable
    /// later, at start.
    fn check_upstream(&mut self) -> Result<(), ConfigError> {
        let needs = |what: &str, setting: &str| {
            ConfigError(format!("{what} needs {setting} (docs/providers.md)"))
        };
        if self.provider == ProviderKind::Http {
            if self.upstream_url.is_none() {
                return Err(needs("provider = \"http\"", "upstream_url"));
            }
            if self.upstream_secrets.is_empty() {
                return Err(needs("provider = \"http\"", "upstream_secrets"));
            }
        }
        if self.rate_source == RateSourceKind::Http && self.upstream_rates_url.is_none() {
            return Err(needs("rate_source = \"http\"", "upstream_rates_url"));
        }
        if self.upstream_listen.is_some() && self.upstream_secrets.is_empty() {
            return Err(needs("upstream_listen", "upstream_secrets"));
        }
        for (name, url) in [
            ("upstream_url", &self.upstream_url),
            ("upstream_rates_url", &self.upstream_rates_url),
        ] {
            if let Some(url) = url {
                check_upstream_url(url).map_err(|e| ConfigError(format!("{name}: {e}")))?;
            }
        }
        if self.upstream_ca_only && self.upstream_ca_file.is_none() {
            return Err(needs("upstream_ca_only", "upstream_ca_file"));
        }
        self.upstream_timeout = self.upstream_timeout.max(Duration::from_millis(100));
        self.upstream_connect_timeout = self
            .upstream_connect_timeout
            .max(Duration::from_millis(100));
        self.provider_budget = self.provider_budget.max(Duration::from_millis(100));
        self.rates_refresh = self.rates_refresh.max(Duration::from_millis(100));
        self.rates_max_age = self.rates_max_age.max(Duration::from_millis(100));
        Ok(())
    }

    /// The scheme merchants sign for: from the public URL, else `https` with TLS, else `http`.
    pub fn public_scheme(&self) -> &str {
        match &self.public_url {
            Some(u) if u.starts_with("https://") => "https",
            Some(_) => "http",
            None if self.tls_cert.is_some() => "https",
            None => "http",
        }
    }
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
pub fn check_upstream_url(url: &str) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(format!("{url:?} has no host")),
    };
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if loopback => Ok(parsed),
        "http" => Err(format!(
            "{url:?}: http:// only to a loopback address; use https://"
        )),
        other => Err(format!("{url:?}: scheme {other} is not http(s)")),
    }
}

/// What [`EnvLayer`] calls itself in figment's metadata.
const ENV_LAYER: &str = "PAYMENTS_* environment variables";

/// The `PAYMENTS_*` environment variables as a figment layer. A variable is read as the type of
/// the setting it names (the shape of [`Settings::default`]): booleans as [`parse_bool`], numbers,
/// lists comma-separated, everything else as the string given. `PAYMENTS_LOG` is
/// `PAYMENTS_LOG_LEVEL`; variables that name no setting (`PAYMENTS_CONFIG`, ...) are skipped.
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
        EnvLayer(Env::prefixed("PAYMENTS_").map(|k| {
            if k == "log" {
                "log_level".into()
            } else {
                k.into()
            }
        }))
    }
}

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_LAYER).interpolater(|_: &Profile, keys: &[&str]| {
            format!("PAYMENTS_{}", keys.join("_").to_ascii_uppercase())
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let defaults = Serialized::defaults(Settings::default())
            .data()?
            .remove(&Profile::Default)
            .unwrap_or_default();
        let mut dict = Dict::new();
        for (key, raw) in self.0.iter() {
            let key = key.as_str();
            let Some(default) = defaults.get(key) else {
                continue;
            };
            let var = format!("PAYMENTS_{}", key.to_ascii_uppercase());
            let value = match default {
                Value::Bool(..) => {
                    Value::from(parse_bool(&raw).map_err(|e| format!("{var}: {}", e.0))?)
                }
                Value::Num(..) => Value::from(
                    raw.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{var}: expected a number, got {raw:?}"))?,
                ),
                Value::Array(..) => Value::from(
                    raw.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>(),
                ),
                // A table (`rates`) in figment's inline syntax: `{RUB="92.5"}`.
                Value::Dict(..) => raw.parse().expect("parsing a figment value is infallible"),
                _ => Value::from(raw),
            };
            dict.insert(key.to_string(), value);
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// figment's errors as one line each, named by setting (or variable) and file.
fn describe(error: figment::Error) -> ConfigError {
    let lines: Vec<String> = error
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
    ConfigError(lines.join("; "))
}

/// A setting written as one string; `parse` says what is wrong with a bad one.
trait Text: Sized {
    fn parse(s: &str) -> Result<Self, String>;
    fn text(&self) -> String;
}

impl Text for Environment {
    fn parse(s: &str) -> Result<Self, String> {
        Environment::from_str(s).map_err(|e| e.to_string())
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for SocketAddr {
    fn parse(s: &str) -> Result<Self, String> {
        s.parse()
            .map_err(|_| format!("{s:?} is not an address like 127.0.0.1:8080"))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for Durability {
    fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            _ => Err(format!("expected full or normal, got {s:?}")),
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
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("expected text or json, got {s:?}")),
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
    fn parse(s: &str) -> Result<Self, String> {
        RetrySchedule::parse_delays(s).map_err(|e| e.to_string())
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for IpNet {
    fn parse(s: &str) -> Result<Self, String> {
        s.parse::<IpNet>()
            .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| format!("{s:?} is not an address or CIDR network"))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for ProviderKind {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "sandbox" => Ok(ProviderKind::Sandbox),
            "http" => Ok(ProviderKind::Http),
            _ => Err(format!("expected sandbox or http, got {s:?}")),
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
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(RateSourceKind::Fixed),
            "http" => Ok(RateSourceKind::Http),
            _ => Err(format!("expected fixed or http, got {s:?}")),
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
    fn parse(s: &str) -> Result<Self, String> {
        CallbackSecret::parse(s).map_err(|e| e.to_string())
    }
    fn text(&self) -> String {
        self.expose().to_string()
    }
}

impl Text for Decimal {
    fn parse(s: &str) -> Result<Self, String> {
        Decimal::from_str(s).map_err(|_| format!("{s:?} is not a decimal"))
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

/// A duration in whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(v.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// A duration in whole seconds.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.as_secs())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

#[cfg(test)]
mod tests;

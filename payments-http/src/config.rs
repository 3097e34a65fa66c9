//! Server settings: a TOML file (`--config`), overridden by `PAYMENTS_*` environment variables,
//! overridden by flags. Every layer is a [`PartialSettings`]; [`PartialSettings::finish`] applies
//! the defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use ipnet::IpNet;
use payments_core::auth::Environment;
use payments_core::callback::RetrySchedule;
use rust_decimal::Decimal;
use serde::Deserialize;

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

/// Complete settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `sandbox` (default) or `production`.
    pub environment: Environment,
    /// Where the database and the sandbox credentials live (`./data`).
    pub data_dir: PathBuf,
    /// Merchant API listener (`127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// Operator API listener (`127.0.0.1:8081`).
    pub operator_listen: SocketAddr,
    /// The merchant API's public base URL (scheme and host merchants sign for `@target-uri`);
    /// default `http(s)://<listen>`.
    pub public_url: Option<String>,
    /// TLS certificate chain (PEM) for the merchant listener.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for the merchant listener.
    pub tls_key: Option<PathBuf>,
    /// SQLite durability.
    pub durability: Durability,
    /// Proxies whose `X-Forwarded-For` is trusted.
    pub trusted_proxies: Vec<IpNet>,
    /// Development: allow `http://` and loopback callback URLs.
    pub allow_local_callbacks: bool,
    /// Delays between callback attempts.
    pub callback_retry_delays: RetrySchedule,
    /// Extra CA certificates (PEM) the callback client trusts, besides the public roots.
    pub callback_ca_file: Option<PathBuf>,
    /// Deliveries in flight at once.
    pub callback_concurrency: usize,
    /// Deliveries in flight at once to one host.
    pub callback_per_host: usize,
    /// Whether this server runs the callback dispatcher (default `true`). When `false`, closed
    /// payments still commit their callback events to the outbox in the same transaction as
    /// always; they are only not sent until a server with dispatch on runs over the same data
    /// dir. For holding callbacks during maintenance and for measuring delivery alone
    /// (queue first, deliver later).
    pub callback_dispatch: bool,
    /// Log format.
    pub log_format: LogFormat,
    /// Log filter (`info`, `payments_http=debug`, ...).
    pub log_level: String,
    /// A bank catalog file replacing the embedded one.
    pub bank_catalog: Option<PathBuf>,
    /// Fixed exchange rates (currency -> units per 1 USDT).
    pub rates: BTreeMap<String, Decimal>,
    /// How often the lifecycle sweeper runs.
    pub sweep_interval: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
}

/// One layer of settings; `None` leaves the setting to a lower layer or the default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialSettings {
    /// See [`Settings::environment`].
    pub environment: Option<String>,
    /// See [`Settings::data_dir`].
    pub data_dir: Option<PathBuf>,
    /// See [`Settings::listen`].
    pub listen: Option<String>,
    /// See [`Settings::operator_listen`].
    pub operator_listen: Option<String>,
    /// See [`Settings::public_url`].
    pub public_url: Option<String>,
    /// See [`Settings::tls_cert`].
    pub tls_cert: Option<PathBuf>,
    /// See [`Settings::tls_key`].
    pub tls_key: Option<PathBuf>,
    /// `full` or `normal`.
    pub synchronous: Option<String>,
    /// CIDR networks or addresses.
    pub trusted_proxies: Option<Vec<String>>,
    /// See [`Settings::allow_local_callbacks`].
    pub allow_local_callbacks: Option<bool>,
    /// Seconds between attempts, e.g. `"30,60"`.
    pub callback_retry_delays: Option<String>,
    /// See [`Settings::callback_ca_file`].
    pub callback_ca_file: Option<PathBuf>,
    /// See [`Settings::callback_concurrency`].
    pub callback_concurrency: Option<usize>,
    /// See [`Settings::callback_per_host`].
    pub callback_per_host: Option<usize>,
    /// See [`Settings::callback_dispatch`].
    pub callback_dispatch: Option<bool>,
    /// `text` or `json`.
    pub log_format: Option<String>,
    /// See [`Settings::log_level`].
    pub log_level: Option<String>,
    /// See [`Settings::bank_catalog`].
    pub bank_catalog: Option<PathBuf>,
    /// Currency -> course, as decimal strings.
    pub rates: Option<BTreeMap<String, String>>,
    /// Milliseconds.
    pub sweep_interval_ms: Option<u64>,
    /// Seconds.
    pub shutdown_grace_seconds: Option<u64>,
}

/// A setting that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err(m: impl Into<String>) -> ConfigError {
    ConfigError(m.into())
}

/// A boolean in the forms the environment variables accept: `1`/`true`/`yes`/`on` and
/// `0`/`false`/`no`/`off` (any case), and the empty string as `false`.
pub fn parse_bool(v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(err(format!("expected a boolean, got {other:?}"))),
    }
}

impl PartialSettings {
    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| err(format!("{}: {e}", path.display())))
    }

    /// Reads `PAYMENTS_*` variables from `vars` (the process environment in production).
    pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let mut p = PartialSettings::default();
        for (k, v) in vars {
            let Some(name) = k.strip_prefix("PAYMENTS_") else {
                continue;
            };
            let ctx = |e: ConfigError| err(format!("{k}: {}", e.0));
            match name {
                "ENVIRONMENT" => p.environment = Some(v),
                "DATA_DIR" => p.data_dir = Some(v.into()),
                "LISTEN" => p.listen = Some(v),
                "OPERATOR_LISTEN" => p.operator_listen = Some(v),
                "PUBLIC_URL" => p.public_url = Some(v),
                "TLS_CERT" => p.tls_cert = Some(v.into()),
                "TLS_KEY" => p.tls_key = Some(v.into()),
                "SYNCHRONOUS" => p.synchronous = Some(v),
                "TRUSTED_PROXIES" => {
                    p.trusted_proxies = Some(
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(String::from)
                            .collect(),
                    )
                }
                "ALLOW_LOCAL_CALLBACKS" => {
                    p.allow_local_callbacks = Some(parse_bool(&v).map_err(ctx)?)
                }
                "CALLBACK_RETRY_DELAYS" => p.callback_retry_delays = Some(v),
                "CALLBACK_CA_FILE" => p.callback_ca_file = Some(v.into()),
                "CALLBACK_CONCURRENCY" => {
                    p.callback_concurrency = Some(
                        v.parse()
                            .map_err(|_| err(format!("{k}: expected a number")))?,
                    )
                }
                "CALLBACK_DISPATCH" => p.callback_dispatch = Some(parse_bool(&v).map_err(ctx)?),
                "CALLBACK_PER_HOST" => {
                    p.callback_per_host = Some(
                        v.parse()
                            .map_err(|_| err(format!("{k}: expected a number")))?,
                    )
                }
                "LOG_FORMAT" => p.log_format = Some(v),
                "LOG" | "LOG_LEVEL" => p.log_level = Some(v),
                "BANK_CATALOG" => p.bank_catalog = Some(v.into()),
                "SWEEP_INTERVAL_MS" => {
                    p.sweep_interval_ms = Some(
                        v.parse()
                            .map_err(|_| err(format!("{k}: expected milliseconds")))?,
                    )
                }
                "SHUTDOWN_GRACE_SECONDS" => {
                    p.shutdown_grace_seconds = Some(
                        v.parse()
                            .map_err(|_| err(format!("{k}: expected seconds")))?,
                    )
                }
                // Other PAYMENTS_* variables (e.g. PAYMENTS_CONFIG) are not settings.
                _ => {}
            }
        }
        Ok(p)
    }

    /// `self` with every setting `over` has replaced.
    pub fn overridden_by(self, over: PartialSettings) -> PartialSettings {
        macro_rules! pick {
            ($($f:ident),*) => { PartialSettings { $($f: over.$f.or(self.$f)),* } };
        }
        pick!(
            environment,
            data_dir,
            listen,
            operator_listen,
            public_url,
            tls_cert,
            tls_key,
            synchronous,
            trusted_proxies,
            allow_local_callbacks,
            callback_retry_delays,
            callback_ca_file,
            callback_concurrency,
            callback_per_host,
            callback_dispatch,
            log_format,
            log_level,
            bank_catalog,
            rates,
            sweep_interval_ms,
            shutdown_grace_seconds
        )
    }

    /// Applies defaults and checks every value.
    pub fn finish(self) -> Result<Settings, ConfigError> {
        let addr =
            |v: Option<String>, default: &str, name: &str| -> Result<SocketAddr, ConfigError> {
                let v = v.unwrap_or_else(|| default.to_string());
                v.parse().map_err(|_| {
                    err(format!(
                        "{name}: {v:?} is not an address like 127.0.0.1:8080"
                    ))
                })
            };
        let environment = match self.environment.as_deref() {
            None => Environment::Sandbox,
            Some(e) => Environment::from_str(e).map_err(|e| err(e.to_string()))?,
        };
        let durability = match self
            .synchronous
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("full") => Durability::Full,
            Some("normal") => Durability::Normal,
            Some(o) => {
                return Err(err(format!(
                    "synchronous: expected full or normal, got {o:?}"
                )))
            }
        };
        let trusted_proxies = self
            .trusted_proxies
            .unwrap_or_default()
            .iter()
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        err(format!(
                            "trusted_proxies: {s:?} is not an address or CIDR network"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let callback_retry_delays = match self.callback_retry_delays {
            None => RetrySchedule::default(),
            Some(s) => RetrySchedule::parse_delays(&s)
                .map_err(|e| err(format!("callback_retry_delays: {e}")))?,
        };
        let log_format = match self.log_format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(o) => return Err(err(format!("log_format: expected text or json, got {o:?}"))),
        };
        let rates = match self.rates {
            None => crate::sandbox::FixedRates::sandbox_defaults().0,
            Some(m) => m
                .into_iter()
                .map(|(k, v)| {
                    let d = Decimal::from_str(&v)
                        .map_err(|_| err(format!("rates.{k}: {v:?} is not a decimal")))?;
                    Ok((k, d))
                })
                .collect::<Result<_, ConfigError>>()?,
        };
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(err("tls_cert and tls_key must be given together"));
        }
        Ok(Settings {
            environment,
            data_dir: self.data_dir.unwrap_or_else(|| PathBuf::from("./data")),
            listen: addr(self.listen, "127.0.0.1:8080", "listen")?,
            operator_listen: addr(self.operator_listen, "127.0.0.1:8081", "operator_listen")?,
            public_url: self.public_url.map(|u| u.trim_end_matches('/').to_string()),
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            durability,
            trusted_proxies,
            allow_local_callbacks: self.allow_local_callbacks.unwrap_or(false),
            callback_retry_delays,
            callback_ca_file: self.callback_ca_file,
            callback_concurrency: self.callback_concurrency.unwrap_or(256).max(1),
            callback_per_host: self.callback_per_host.unwrap_or(64).max(1),
            callback_dispatch: self.callback_dispatch.unwrap_or(true),
            log_format,
            log_level: self.log_level.unwrap_or_else(|| "info".to_string()),
            bank_catalog: self.bank_catalog,
            rates,
            sweep_interval: Duration::from_millis(self.sweep_interval_ms.unwrap_or(1000).max(10)),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_seconds.unwrap_or(30)),
        })
    }
}

impl Settings {
    /// Defaults only (sandbox on 127.0.0.1:8080 with `./data`).
    pub fn defaults() -> Settings {
        PartialSettings::default()
            .finish()
            .expect("the defaults are valid")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_override_in_order() {
        let file: PartialSettings = toml::from_str(
            "environment = \"production\"\nlisten = \"0.0.0.0:9000\"\ndata_dir = \"/var/lib/p\"\n[rates]\nRUB = \"92.5\"\n",
        )
        .unwrap();
        let env = PartialSettings::from_env([
            ("PAYMENTS_LISTEN".to_string(), "127.0.0.1:9100".to_string()),
            (
                "PAYMENTS_ALLOW_LOCAL_CALLBACKS".to_string(),
                "1".to_string(),
            ),
            ("HOME".to_string(), "/root".to_string()),
        ])
        .unwrap();
        let flags = PartialSettings {
            data_dir: Some("/tmp/x".into()),
            ..Default::default()
        };
        let s = file
            .overridden_by(env)
            .overridden_by(flags)
            .finish()
            .unwrap();
        assert_eq!(s.environment, Environment::Production);
        assert_eq!(s.listen.to_string(), "127.0.0.1:9100");
        assert_eq!(s.data_dir, PathBuf::from("/tmp/x"));
        assert!(s.allow_local_callbacks);
        assert_eq!(s.rates["RUB"], Decimal::new(925, 1));
        assert_eq!(s.operator_listen.to_string(), "127.0.0.1:8081");
    }

    #[test]
    fn bad_values_are_named() {
        let e = PartialSettings {
            synchronous: Some("off".into()),
            ..Default::default()
        }
        .finish()
        .unwrap_err();
        assert!(e.0.starts_with("synchronous"), "{}", e.0);
        let e = PartialSettings {
            listen: Some("nowhere".into()),
            ..Default::default()
        }
        .finish()
        .unwrap_err();
        assert!(e.0.starts_with("listen"), "{}", e.0);
        assert!(toml::from_str::<PartialSettings>("lissten = 1").is_err());
        let d = Settings::defaults();
        assert_eq!(d.environment, Environment::Sandbox);
        assert_eq!(d.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(d.data_dir, PathBuf::from("./data"));
        assert!(!d.allow_local_callbacks);
    }

    #[test]
    fn callback_dispatch_is_on_by_default_and_layers_like_the_other_booleans() {
        assert!(Settings::defaults().callback_dispatch);
        let env = |v: &str| {
            PartialSettings::from_env([("PAYMENTS_CALLBACK_DISPATCH".to_string(), v.to_string())])
        };
        for off in ["0", "false", "no", "off", "OFF", " False ", ""] {
            let p = env(off).unwrap();
            assert_eq!(p.callback_dispatch, Some(false), "{off:?}");
            assert!(!p.finish().unwrap().callback_dispatch);
        }
        for on in ["1", "true", "yes", "on", "TRUE"] {
            assert_eq!(env(on).unwrap().callback_dispatch, Some(true), "{on:?}");
        }
        let e = env("later").unwrap_err();
        assert!(e.0.starts_with("PAYMENTS_CALLBACK_DISPATCH"), "{}", e.0);

        let file: PartialSettings = toml::from_str("callback_dispatch = false\n").unwrap();
        assert_eq!(file.callback_dispatch, Some(false));
        assert!(toml::from_str::<PartialSettings>("callback_dispatch = \"off\"").is_err());
        // The file says off, the environment on, a flag off again: the last layer wins.
        let s = file
            .clone()
            .overridden_by(env("on").unwrap())
            .finish()
            .unwrap();
        assert!(s.callback_dispatch);
        let flags = PartialSettings {
            callback_dispatch: Some(false),
            ..Default::default()
        };
        let s = file
            .overridden_by(env("on").unwrap())
            .overridden_by(flags)
            .finish()
            .unwrap();
        assert!(!s.callback_dispatch);
        // A layer that does not mention it leaves the lower one's value.
        let s = env("0")
            .unwrap()
            .overridden_by(PartialSettings::default())
            .finish()
            .unwrap();
        assert!(!s.callback_dispatch);
    }
}

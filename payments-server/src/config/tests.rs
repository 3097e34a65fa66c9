//! Every test runs in a figment `Jail`: its environment variables and files are its own, and
//! jails run one at a time, so no test sees another's `PAYMENTS_*`.

use figment::Jail;
use serde::Serialize;

use super::*;

/// A flag layer like the command line's: only the flags given.
#[derive(Debug, Default, Serialize)]
struct Flags {
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    synchronous: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    callback_dispatch: Option<bool>,
}

/// Runs `f` in a jail with `payments.toml` holding `file` (if any) and the variables `env`.
// figment's `Jail` API returns its (large) error type; a test has no use for boxing it.
#[allow(clippy::result_large_err)]
fn jailed(file: Option<&str>, env: &[(&str, &str)], f: impl FnOnce(Option<&Path>)) {
    Jail::expect_with(|jail| {
        let path = match file {
            Some(text) => {
                jail.create_file("payments.toml", text)?;
                Some(jail.directory().join("payments.toml"))
            }
            None => None,
        };
        for (k, v) in env {
            jail.set_env(k, v);
        }
        f(path.as_deref());
        Ok(())
    });
}

fn load(file: Option<&Path>, flags: Flags) -> Result<Settings, ConfigError> {
    Settings::load(file, flags)
}

#[test]
fn layers_override_in_order() {
    let file = "environment = \"production\"\nlisten = \"0.0.0.0:9000\"\ndata_dir = \"/var/lib/p\"\n[rates]\nRUB = \"92.5\"\n";
    let env = [
        ("PAYMENTS_LISTEN", "127.0.0.1:9100"),
        ("PAYMENTS_ALLOW_LOCAL_CALLBACKS", "1"),
        ("HOME", "/root"),
    ];
    jailed(Some(file), &env, |file| {
        let flags = Flags {
            data_dir: Some("/tmp/x".into()),
            ..Flags::default()
        };
        let s = load(file, flags).unwrap();
        assert_eq!(s.environment, Environment::Production);
        assert_eq!(s.listen.to_string(), "127.0.0.1:9100");
        assert_eq!(s.data_dir, PathBuf::from("/tmp/x"));
        assert!(s.allow_local_callbacks);
        assert_eq!(s.rates["RUB"], Decimal::new(925, 1));
        assert!(
            !s.rates.contains_key("KZT"),
            "the file's table replaces the default one"
        );
        assert_eq!(s.operator_listen.to_string(), "127.0.0.1:8081");
    });
}

#[test]
fn a_file_overrides_the_defaults_and_leaves_the_rest() {
    let file = "synchronous = \"NORMAL\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.1\"]\nsweep_interval_ms = 250\nshutdown_grace_seconds = 5\ncallback_retry_delays = \"1,2\"\npublic_url = \"https://api.example.com/\"\n";
    jailed(Some(file), &[], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.durability, Durability::Normal);
        assert_eq!(
            s.trusted_proxies,
            vec![
                "10.0.0.0/8".parse::<IpNet>().unwrap(),
                "192.0.2.1/32".parse().unwrap()
            ]
        );
        assert_eq!(s.sweep_interval, Duration::from_millis(250));
        assert_eq!(s.shutdown_grace, Duration::from_secs(5));
        assert_eq!(s.callback_retry_delays.to_string(), "1,2");
        assert_eq!(s.public_url.as_deref(), Some("https://api.example.com"));
        let d = Settings::defaults();
        assert_eq!(s.listen, d.listen);
        assert_eq!(s.rates, d.rates);
        assert_eq!(s.callback_concurrency, 256);
        assert_eq!(s.log_level, "info");
    });
}

#[test]
fn the_environment_overrides_the_file() {
    let file = "listen = \"0.0.0.0:9000\"\ntrusted_proxies = [\"10.0.0.0/8\"]\nlog_level = \"debug\"\ncallback_concurrency = 8\n";
    let env = [
        ("PAYMENTS_LISTEN", "127.0.0.1:9100"),
        ("PAYMENTS_TRUSTED_PROXIES", "127.0.0.0/8, 192.0.2.1"),
        ("PAYMENTS_CALLBACK_RETRY_DELAYS", "1,1"),
        ("PAYMENTS_LOG", "warn"),
        ("PAYMENTS_CALLBACK_CONCURRENCY", "16"),
        ("PAYMENTS_RATES", "{RUB=\"92.5\"}"),
        // Not a setting: the file's path is read by the command line.
        ("PAYMENTS_CONFIG", "/nowhere.toml"),
        ("PAYMENTS_NOT_A_SETTING", "x"),
    ];
    jailed(Some(file), &env, |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:9100");
        assert_eq!(
            s.trusted_proxies,
            vec![
                "127.0.0.0/8".parse::<IpNet>().unwrap(),
                "192.0.2.1/32".parse().unwrap()
            ]
        );
        assert_eq!(s.callback_retry_delays.to_string(), "1,1");
        assert_eq!(s.log_level, "warn");
        assert_eq!(s.callback_concurrency, 16);
        assert_eq!(s.rates["RUB"], Decimal::new(925, 1));
        assert!(
            !s.rates.contains_key("KZT"),
            "the variable replaces the table"
        );
    });
    jailed(None, &[("PAYMENTS_LOG_LEVEL", "error")], |file| {
        assert_eq!(load(file, Flags::default()).unwrap().log_level, "error");
    });
}

#[test]
fn flags_override_the_environment_and_only_the_flags_given() {
    let env = [
        ("PAYMENTS_LISTEN", "127.0.0.1:9100"),
        ("PAYMENTS_DATA_DIR", "/var/lib/env"),
        ("PAYMENTS_SYNCHRONOUS", "normal"),
    ];
    jailed(Some("listen = \"0.0.0.0:9000\"\n"), &env, |file| {
        let flags = Flags {
            listen: Some("127.0.0.1:9200".into()),
            ..Flags::default()
        };
        let s = load(file, flags).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:9200");
        // Flags not given leave the environment's values.
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/env"));
        assert_eq!(s.durability, Durability::Normal);
    });
}

#[test]
fn bad_values_are_named() {
    jailed(Some("synchronous = \"off\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("synchronous"), "{}", e.0);
        assert!(e.0.contains("payments.toml"), "{}", e.0);
    });
    jailed(None, &[], |file| {
        let flags = Flags {
            listen: Some("nowhere".into()),
            ..Flags::default()
        };
        let e = load(file, flags).unwrap_err();
        assert!(e.0.starts_with("listen"), "{}", e.0);
    });
    jailed(Some("lissten = 1\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("lissten: not a setting"), "{}", e.0);
    });
    jailed(None, &[("PAYMENTS_LISTEN", "nowhere")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("PAYMENTS_LISTEN:"), "{}", e.0);
    });
    jailed(None, &[("PAYMENTS_SWEEP_INTERVAL_MS", "soon")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("PAYMENTS_SWEEP_INTERVAL_MS"), "{}", e.0);
    });
    jailed(Some("[rates]\nRUB = \"many\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("rates: RUB"), "{}", e.0);
    });
    jailed(Some("tls_cert = \"/etc/cert.pem\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.contains("tls_cert and tls_key"), "{}", e.0);
    });
    jailed(None, &[], |_| {
        let missing = Path::new("/nonexistent/payments.toml");
        let e = load(Some(missing), Flags::default()).unwrap_err();
        assert!(e.0.starts_with("/nonexistent/payments.toml: "), "{}", e.0);
    });
    // A settings file is read up to 1 MiB, never whole: `--config /dev/zero` is refused at once.
    #[cfg(unix)]
    jailed(None, &[], |_| {
        let e = load(Some(Path::new("/dev/zero")), Flags::default()).unwrap_err();
        assert_eq!(
            e.0,
            "/dev/zero: larger than 1 MiB, the limit for a settings file (TOML)"
        );
    });
    let d = Settings::defaults();
    assert_eq!(d.environment, Environment::Sandbox);
    assert_eq!(d.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(d.data_dir, PathBuf::from("./data"));
    assert!(!d.allow_local_callbacks);
}

#[test]
fn callback_dispatch_is_on_by_default_and_layers_like_the_other_booleans() {
    assert!(Settings::defaults().callback_dispatch);
    let file_off = Some("callback_dispatch = false\n");
    for off in ["0", "false", "no", "off", "OFF", " False ", ""] {
        jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", off)], |file| {
            assert!(
                !load(file, Flags::default()).unwrap().callback_dispatch,
                "{off:?}"
            );
        });
    }
    for on in ["1", "true", "yes", "on", "TRUE"] {
        // Over a file that says off, so the variable is what turns it on.
        jailed(file_off, &[("PAYMENTS_CALLBACK_DISPATCH", on)], |file| {
            assert!(
                load(file, Flags::default()).unwrap().callback_dispatch,
                "{on:?}"
            );
        });
    }
    jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", "later")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.0.starts_with("PAYMENTS_CALLBACK_DISPATCH"), "{}", e.0);
    });

    jailed(file_off, &[], |file| {
        assert!(!load(file, Flags::default()).unwrap().callback_dispatch);
    });
    // The file takes TOML booleans only; the words are for the environment.
    jailed(Some("callback_dispatch = \"off\"\n"), &[], |file| {
        assert!(load(file, Flags::default()).is_err());
    });
    // The file says off, the environment on, a flag off again: the last layer wins.
    jailed(file_off, &[("PAYMENTS_CALLBACK_DISPATCH", "on")], |file| {
        assert!(load(file, Flags::default()).unwrap().callback_dispatch);
        let flags = Flags {
            callback_dispatch: Some(false),
            ..Flags::default()
        };
        assert!(!load(file, flags).unwrap().callback_dispatch);
    });
    // A layer that does not mention it leaves the lower one's value.
    jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", "0")], |file| {
        let flags = Flags {
            synchronous: Some("full".into()),
            ..Flags::default()
        };
        assert!(!load(file, flags).unwrap().callback_dispatch);
    });
}

#[test]
fn the_defaults_round_trip_through_the_file_format() {
    let d = Settings::defaults();
    let text = toml::to_string(&d).unwrap();
    jailed(Some(&text), &[], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(format!("{s:?}"), format!("{d:?}"));
    });
}

const UPSTREAM_SECRET: &str = "whsec_dGVzdC11cHN0cmVhbS1zaGFyZWQtc2VjcmV0LTAwMQ==";

#[test]
fn upstream_settings_from_the_file_and_the_environment() {
    let d = Settings::defaults();
    assert_eq!(
        (d.provider, d.rate_source),
        (ProviderKind::Sandbox, RateSourceKind::Fixed)
    );
    assert_eq!(d.provider_budget, Duration::from_secs(15));
    assert_eq!(d.upstream_timeout, Duration::from_secs(15));
    assert_eq!(d.rates_max_age, Duration::from_secs(300));
    assert!(d.upstream_listen.is_none() && d.upstream_secrets.is_empty());

    let file = format!(
        "provider = \"http\"\nrate_source = \"http\"\nupstream_url = \"https://bank.example/requisites\"\n\
         upstream_rates_url = \"http://127.0.0.1:9300/rates\"\nupstream_secrets = [\"{UPSTREAM_SECRET}\"]\n\
         provider_budget_ms = 5000\nrates_max_age_ms = 60000\n"
    );
    jailed(
        Some(&file),
        &[("PAYMENTS_UPSTREAM_LISTEN", "127.0.0.1:8082")],
        |file| {
            let s = load(file, Flags::default()).unwrap();
            assert_eq!(
                (s.provider, s.rate_source),
                (ProviderKind::Http, RateSourceKind::Http)
            );
            assert_eq!(s.upstream_secrets[0].expose(), UPSTREAM_SECRET);
            assert_eq!(s.upstream_listen, Some("127.0.0.1:8082".parse().unwrap()));
            assert_eq!(s.provider_budget, Duration::from_secs(5));
            assert_eq!(s.rates_max_age, Duration::from_secs(60));
            // The secret never shows in `Debug`.
            assert!(!format!("{s:?}").contains(UPSTREAM_SECRET));
        },
    );
    let env = [
        ("PAYMENTS_PROVIDER", "http"),
        ("PAYMENTS_UPSTREAM_URL", "http://localhost:9300/requisites"),
        ("PAYMENTS_UPSTREAM_SECRETS", UPSTREAM_SECRET),
    ];
    jailed(None, &env, |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.provider, ProviderKind::Http);
        assert_eq!(s.upstream_secrets.len(), 1);
    });
}

#[test]
fn upstream_settings_that_do_not_go_together_are_refused() {
    let refused = |file: &str, expect: &str| {
        jailed(Some(file), &[], |f| {
            let e = load(f, Flags::default()).unwrap_err();
            assert!(e.0.contains(expect), "{file}: {}", e.0);
        });
    };
    refused("provider = \"http\"\n", "needs upstream_url");
    refused(
        "provider = \"http\"\nupstream_url = \"https://bank.example/r\"\n",
        "needs upstream_secrets",
    );
    refused("rate_source = \"http\"\n", "needs upstream_rates_url");
    refused(
        "upstream_listen = \"127.0.0.1:8082\"\n",
        "needs upstream_secrets",
    );
    refused("provider = \"bank\"\n", "expected sandbox or http");
    refused("upstream_secrets = [\"short\"]\n", "whsec_");
    refused(
        "upstream_url = \"http://bank.example/requisites\"\n",
        "http:// only to a loopback address",
    );
    refused("upstream_ca_only = true\n", "needs upstream_ca_file");
}

#[test]
fn takes_its_part_of_the_server_settings() {
    let key = rcgen::KeyPair::generate().expect("key generation works");
    let cert = rcgen::CertificateParams::new(vec!["ca.test".to_string()])
        .expect("valid name")
        .self_signed(&key)
        .expect("self-signs");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, cert.pem()).expect("written");
    let settings = Settings {
        allow_local_callbacks: true,
        callback_ca_file: Some(ca_file),
        callback_concurrency: 8,
        callback_per_host: 2,
        ..Settings::defaults()
    };
    let c = settings.dispatcher().expect("usable settings");
    assert_eq!((c.concurrency, c.per_host), (8, 2));
    assert_eq!(c.extra_roots, vec![cert.der().clone()]);
    assert_eq!(c.attempt_timeout, payments_core::callback::ATTEMPT_TIMEOUT);

    let d = Settings::defaults().dispatcher().expect("defaults");
    assert!(d.extra_roots.is_empty());
}

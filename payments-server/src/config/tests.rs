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
        assert_eq!(s.listen.merchant.to_string(), "127.0.0.1:9100");
        assert_eq!(s.data_dir, PathBuf::from("/tmp/x"));
        assert!(s.callbacks.allow_local);
        assert_eq!(s.rates["RUB"], Decimal::new(925, 1));
        assert!(
            !s.rates.contains_key("KZT"),
            "the file's table replaces the default one"
        );
        assert_eq!(s.listen.operator.to_string(), "127.0.0.1:8081");
    });
}

#[test]
fn a_file_overrides_the_defaults_and_leaves_the_rest() {
    let file = "synchronous = \"NORMAL\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.1\"]\nsweep_interval_ms = 250\nshutdown_grace_seconds = 5\ncallback_retry_delays = \"1,2\"\npublic_url = \"https://api.example.com/\"\n";
    jailed(Some(file), &[], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.store.synchronous, Durability::Normal);
        assert_eq!(
            s.listen.trusted_proxies,
            vec![
                "10.0.0.0/8".parse::<IpNet>().unwrap(),
                "192.0.2.1/32".parse().unwrap()
            ]
        );
        assert_eq!(s.tuning.sweep_interval, Duration::from_millis(250));
        assert_eq!(s.tuning.shutdown_grace, Duration::from_secs(5));
        assert_eq!(s.callbacks.retry_delays.to_string(), "1,2");
        assert_eq!(
            s.listen.public_url.as_deref(),
            Some("https://api.example.com")
        );
        let d = Settings::defaults();
        assert_eq!(s.listen.merchant, d.listen.merchant);
        assert_eq!(s.rates, d.rates);
        assert_eq!(s.callbacks.concurrency, 256);
        assert_eq!(s.log.level, "info");
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
        assert_eq!(s.listen.merchant.to_string(), "127.0.0.1:9100");
        assert_eq!(
            s.listen.trusted_proxies,
            vec![
                "127.0.0.0/8".parse::<IpNet>().unwrap(),
                "192.0.2.1/32".parse().unwrap()
            ]
        );
        assert_eq!(s.callbacks.retry_delays.to_string(), "1,1");
        assert_eq!(s.log.level, "warn");
        assert_eq!(s.callbacks.concurrency, 16);
        assert_eq!(s.rates["RUB"], Decimal::new(925, 1));
        assert!(
            !s.rates.contains_key("KZT"),
            "the variable replaces the table"
        );
    });
    jailed(None, &[("PAYMENTS_LOG_LEVEL", "error")], |file| {
        assert_eq!(load(file, Flags::default()).unwrap().log.level, "error");
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
        assert_eq!(s.listen.merchant.to_string(), "127.0.0.1:9200");
        // Flags not given leave the environment's values.
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/env"));
        assert_eq!(s.store.synchronous, Durability::Normal);
    });
}

#[test]
fn bad_values_are_named() {
    jailed(Some("synchronous = \"off\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().starts_with("store.synchronous"), "{}", e);
        assert!(e.to_string().contains("payments.toml"), "{}", e);
    });
    jailed(None, &[], |file| {
        let flags = Flags {
            listen: Some("nowhere".into()),
            ..Flags::default()
        };
        let e = load(file, flags).unwrap_err();
        assert!(e.to_string().starts_with("listen.merchant"), "{}", e);
    });
    jailed(Some("lissten = 1\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().starts_with("lissten: not a setting"), "{}", e);
    });
    jailed(None, &[("PAYMENTS_LISTEN", "nowhere")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("PAYMENTS_LISTEN__MERCHANT:"),
            "{}",
            e
        );
    });
    jailed(None, &[("PAYMENTS_SWEEP_INTERVAL_MS", "soon")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("PAYMENTS_SWEEP_INTERVAL_MS"),
            "{}",
            e
        );
    });
    jailed(Some("[rates]\nRUB = \"many\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().starts_with("rates: RUB"), "{}", e);
    });
    jailed(Some("tls_cert = \"/etc/cert.pem\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().contains("tls.cert and tls.key"), "{}", e);
    });
    jailed(None, &[], |_| {
        let missing = Path::new("/nonexistent/payments.toml");
        let e = load(Some(missing), Flags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent/payments.toml: "),
            "{}",
            e
        );
    });
    // A settings file is read up to 1 MiB, never whole: `--config /dev/zero` is refused at once.
    #[cfg(unix)]
    jailed(None, &[], |_| {
        let e = load(Some(Path::new("/dev/zero")), Flags::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: larger than 1 MiB, the limit for a settings file (TOML)"
        );
    });
    let d = Settings::defaults();
    assert_eq!(d.environment, Environment::Sandbox);
    assert_eq!(d.listen.merchant.to_string(), "127.0.0.1:8080");
    assert_eq!(d.data_dir, PathBuf::from("./data"));
    assert!(!d.callbacks.allow_local);
}

#[test]
fn callback_dispatch_is_on_by_default_and_layers_like_the_other_booleans() {
    assert!(Settings::defaults().callbacks.dispatch);
    let file_off = Some("callback_dispatch = false\n");
    for off in ["0", "false", "no", "off", "OFF", " False ", ""] {
        jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", off)], |file| {
            assert!(
                !load(file, Flags::default()).unwrap().callbacks.dispatch,
                "{off:?}"
            );
        });
    }
    for on in ["1", "true", "yes", "on", "TRUE"] {
        // Over a file that says off, so the variable is what turns it on.
        jailed(file_off, &[("PAYMENTS_CALLBACK_DISPATCH", on)], |file| {
            assert!(
                load(file, Flags::default()).unwrap().callbacks.dispatch,
                "{on:?}"
            );
        });
    }
    jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", "later")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("PAYMENTS_CALLBACK_DISPATCH"),
            "{}",
            e
        );
    });

    jailed(file_off, &[], |file| {
        assert!(!load(file, Flags::default()).unwrap().callbacks.dispatch);
    });
    // The file takes TOML booleans only; the words are for the environment.
    jailed(Some("callback_dispatch = \"off\"\n"), &[], |file| {
        assert!(load(file, Flags::default()).is_err());
    });
    // The file says off, the environment on, a flag off again: the last layer wins.
    jailed(file_off, &[("PAYMENTS_CALLBACK_DISPATCH", "on")], |file| {
        assert!(load(file, Flags::default()).unwrap().callbacks.dispatch);
        let flags = Flags {
            callback_dispatch: Some(false),
            ..Flags::default()
        };
        assert!(!load(file, flags).unwrap().callbacks.dispatch);
    });
    // A layer that does not mention it leaves the lower one's value.
    jailed(None, &[("PAYMENTS_CALLBACK_DISPATCH", "0")], |file| {
        let flags = Flags {
            synchronous: Some("full".into()),
            ..Flags::default()
        };
        assert!(!load(file, flags).unwrap().callbacks.dispatch);
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
        (d.upstream.provider, d.upstream.rate_source),
        (ProviderKind::Sandbox, RateSourceKind::Fixed)
    );
    assert_eq!(d.upstream.provider_budget, Duration::from_secs(15));
    assert_eq!(d.upstream.timeout, Duration::from_secs(15));
    assert_eq!(d.upstream.rates_max_age, Duration::from_secs(300));
    assert!(d.upstream.listen.is_none() && d.upstream.secrets.is_empty());

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
                (s.upstream.provider, s.upstream.rate_source),
                (ProviderKind::Http, RateSourceKind::Http)
            );
            assert_eq!(s.upstream.secrets[0].expose(), UPSTREAM_SECRET);
            assert_eq!(s.upstream.listen, Some("127.0.0.1:8082".parse().unwrap()));
            assert_eq!(s.upstream.provider_budget, Duration::from_secs(5));
            assert_eq!(s.upstream.rates_max_age, Duration::from_secs(60));
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
        assert_eq!(s.upstream.provider, ProviderKind::Http);
        assert_eq!(s.upstream.secrets.len(), 1);
    });
}

#[test]
fn upstream_settings_that_do_not_go_together_are_refused() {
    let refused = |file: &str, expect: &str| {
        jailed(Some(file), &[], |f| {
            let e = load(f, Flags::default()).unwrap_err();
            assert!(e.to_string().contains(expect), "{file}: {}", e);
        });
    };
    refused("provider = \"http\"\n", "needs upstream.url");
    refused(
        "provider = \"http\"\nupstream_url = \"https://bank.example/r\"\n",
        "needs upstream.secrets",
    );
    refused("rate_source = \"http\"\n", "needs upstream.rates_url");
    // Several providers with secrets of their own: the rates requests still need
    // upstream.secrets (they were sent unsigned and refused, 401, every time).
    refused(
        "[upstream]\nprovider = \"http\"\nrate_source = \"http\"\n\
         rates_url = \"https://bank.example/rates\"\n[[upstream.providers]]\nname = \"a\"\n\
         url = \"https://a.example/r\"\nsecrets = [\"whsec_Y2hhb3MtYmFuay1hLXVwc3RyZWFtLXNlY3JldC0wMTIz\"]\n",
        "upstream.rate_source = \"http\" needs upstream.secrets",
    );
    refused(
        "upstream_listen = \"127.0.0.1:8082\"\n",
        "needs upstream.secrets",
    );
    refused("provider = \"bank\"\n", "expected sandbox or http");
    refused("upstream_secrets = [\"short\"]\n", "whsec_");
    refused(
        "upstream_url = \"http://bank.example/requisites\"\n",
        "http:// only to a loopback address",
    );
    refused("upstream_ca_only = true\n", "needs upstream.ca_file");
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
    let mut settings = Settings::defaults();
    settings.callbacks.allow_local = true;
    settings.callbacks.ca_file = Some(ca_file);
    settings.callbacks.concurrency = 8;
    settings.callbacks.per_host = 2;
    let c = settings.dispatcher().expect("usable settings");
    assert_eq!((c.concurrency, c.per_host), (8, 2));
    assert_eq!(c.per_project, 4, "half of concurrency by default");
    settings.callbacks.per_project = Some(6);
    assert_eq!(settings.dispatcher().expect("usable").per_project, 6);
    settings.callbacks.per_project = Some(100);
    assert_eq!(
        settings.dispatcher().expect("usable").per_project,
        8,
        "never more than concurrency"
    );
    assert_eq!(c.extra_roots, vec![cert.der().clone()]);
    assert_eq!(c.attempt_timeout, payments_core::callback::ATTEMPT_TIMEOUT);

    let d = Settings::defaults().dispatcher().expect("defaults");
    assert!(d.extra_roots.is_empty());
    assert_eq!((d.concurrency, d.per_host, d.per_project), (256, 64, 128));
}

#[test]
fn sections_durations_and_section_variables() {
    let file = "[listen]\nmerchant = \"0.0.0.0:9000\"\n[callbacks]\nconcurrency = 8\nlease = \"90s\"\n\
                [tuning]\nsweep_interval = \"250ms\"\nsignature_batch_wait = \"2ms\"\n\
                [retention]\nevents = \"30d\"\naudit = \"0s\"\n[upstream]\nrates_max_age = \"1m 30s\"\n";
    let env = [
        ("PAYMENTS_CALLBACKS__PER_HOST", "3"),
        ("PAYMENTS_TUNING__HEADER_TIMEOUT", "5s"),
        ("PAYMENTS_LISTEN__OPERATOR", "127.0.0.1:9101"),
    ];
    jailed(Some(file), &env, |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.listen.merchant.to_string(), "0.0.0.0:9000");
        assert_eq!(s.listen.operator.to_string(), "127.0.0.1:9101");
        assert_eq!((s.callbacks.concurrency, s.callbacks.per_host), (8, 3));
        assert_eq!(s.callbacks.lease, Duration::from_secs(90));
        assert_eq!(s.tuning.sweep_interval, Duration::from_millis(250));
        assert_eq!(s.tuning.signature_batch_wait, Duration::from_millis(2));
        assert_eq!(s.tuning.header_timeout, Duration::from_secs(5));
        assert_eq!(s.upstream.rates_max_age, Duration::from_secs(90));
        let retention = s.retention();
        assert_eq!(retention.events, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(retention.audit, None, "0s keeps audit records forever");
        assert!(s.deprecated.is_empty(), "{:?}", s.deprecated);
    });
    jailed(Some("[callbacks]\nlease = 60000\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().starts_with("callbacks.lease"), "{}", e);
    });
    jailed(Some("[callbacks]\nlease = \"soon\"\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(e.to_string().contains("not a duration like"), "{}", e);
    });
    jailed(None, &[("PAYMENTS_TUNING__BODY_TIMEOUT", "10")], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("PAYMENTS_TUNING__BODY_TIMEOUT"),
            "{}",
            e
        );
    });
    jailed(Some("[callbacks]\nconcurency = 8\n"), &[], |file| {
        let e = load(file, Flags::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("callbacks.concurency: not a setting"),
            "{}",
            e
        );
    });
}

#[test]
fn flat_names_of_earlier_releases_are_read_with_a_warning_each() {
    let file = "callback_concurrency = 8\nsweep_interval_ms = 250\nretention_events_days = 30\n\
                signature_batch_wait_us = 1500\nshutdown_grace_seconds = 5\n";
    let env = [("PAYMENTS_CALLBACK_LEASE_MS", "90000")];
    jailed(Some(file), &env, |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.callbacks.concurrency, 8);
        assert_eq!(s.tuning.sweep_interval, Duration::from_millis(250));
        assert_eq!(s.retention.events, Duration::from_secs(30 * 86_400));
        assert_eq!(s.tuning.signature_batch_wait, Duration::from_micros(1500));
        assert_eq!(s.tuning.shutdown_grace, Duration::from_secs(5));
        assert_eq!(s.callbacks.lease, Duration::from_secs(90));
        assert_eq!(s.deprecated.len(), 6, "{:#?}", s.deprecated);
        assert!(s
            .deprecated
            .iter()
            .any(|n| n.starts_with("callback_concurrency is callbacks.concurrency now")));
        assert!(s
            .deprecated
            .iter()
            .any(|n| n.starts_with("PAYMENTS_CALLBACK_LEASE_MS is PAYMENTS_CALLBACKS__LEASE now")));
    });
    // The new name wins over the old one in the same layer; a later layer's old name wins
    // over an earlier layer's new one.
    let both = "callback_concurrency = 8\n[callbacks]\nconcurrency = 9\n";
    jailed(Some(both), &[("PAYMENTS_CALLBACK_PER_HOST", "2")], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.callbacks.concurrency, 9);
        assert_eq!(s.callbacks.per_host, 2);
    });
    jailed(
        Some("[callbacks]\nconcurrency = 9\n"),
        &[("PAYMENTS_CALLBACK_CONCURRENCY", "4")],
        |file| {
            assert_eq!(
                load(file, Flags::default()).unwrap().callbacks.concurrency,
                4
            )
        },
    );
}

#[test]
fn durations_are_written_in_their_largest_exact_unit() {
    for (d, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_secs(90), "90s"),
        (Duration::from_secs(300), "5m"),
        (Duration::from_secs(400 * 86_400), "400d"),
        (Duration::from_micros(1500), "1500us"),
    ] {
        assert_eq!(duration::text(d), text);
        assert_eq!(humantime::parse_duration(text).unwrap(), d, "{text}");
    }
}

#[test]
fn testing_settings_are_read_and_refused_in_production() {
    let env = [("PAYMENTS_TESTING__CLOCK_OFFSET_FILE", "/tmp/offset")];
    jailed(None, &env, |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(
            s.testing.clock_offset_file.as_deref(),
            Some(Path::new("/tmp/offset"))
        );
        assert_eq!(s.testing.planted_bug, None);
    });
    jailed(
        Some("[testing]\nclock_offset_file = \"offset.txt\"\n"),
        &[("PAYMENTS_ENVIRONMENT", "production")],
        |file| {
            let e = load(file, Flags::default()).unwrap_err();
            assert_eq!(
                e.to_string(),
                "testing.clock_offset_file is for tests only: refused with environment = production"
            );
        },
    );
    jailed(
        Some("environment = \"production\"\n"),
        &[("PAYMENTS_TESTING__PLANTED_BUG", "skip-nonce-record")],
        |file| {
            let e = load(file, Flags::default()).unwrap_err();
            assert_eq!(
                e.to_string(),
                "testing.planted_bug is for tests only: refused with environment = production"
            );
        },
    );
    jailed(None, &[("PAYMENTS_TESTING__PLANTED_BUG", " ")], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(s.testing.planted_bug, None, "an empty value is no value");
    });
}

#[cfg(not(feature = "planted-bugs"))]
#[test]
fn a_planted_bug_is_refused_without_the_feature() {
    jailed(
        None,
        &[("PAYMENTS_TESTING__PLANTED_BUG", "skip-nonce-record")],
        |file| {
            let e = load(file, Flags::default()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("built without the planted-bugs feature"),
                "{e}"
            );
        },
    );
}

#[cfg(feature = "planted-bugs")]
#[test]
fn a_planted_bug_is_named_with_the_feature() {
    jailed(
        None,
        &[("PAYMENTS_TESTING__PLANTED_BUG", "skip-nonce-record")],
        |file| {
            let s = load(file, Flags::default()).unwrap();
            assert_eq!(s.testing.planted_bug.as_deref(), Some("skip-nonce-record"));
        },
    );
    jailed(
        Some("[testing]\nplanted_bug = \"skip-everything\"\n"),
        &[],
        |file| {
            let e = load(file, Flags::default()).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("testing.planted_bug: \"skip-everything\" is not a planted bug"),
                "{e}"
            );
        },
    );
}

#[test]
fn the_node_name_is_set_or_the_hosts_with_the_merchant_port_and_a_bad_one_is_refused() {
    jailed(Some("node_name = \" web-1.eu:8080 \"\n"), &[], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(
            s.node_name(9999),
            "web-1.eu:8080",
            "trimmed, the port not added"
        );
    });
    jailed(None, &[("PAYMENTS_NODE_NAME", "node_b")], |file| {
        assert_eq!(load(file, Flags::default()).unwrap().node_name(1), "node_b");
    });
    jailed(None, &[], |file| {
        let name = load(file, Flags::default()).unwrap().node_name(8080);
        let (host, port) = name.rsplit_once(':').expect("host:port");
        assert_eq!(port, "8080");
        assert!(
            !host.is_empty() && host.chars().all(node_name_char),
            "{name}"
        );
    });
    for bad in [
        "\"\"",
        "\"a b\"",
        "\"ж\"",
        &format!("\"{}\"", "n".repeat(101)),
    ] {
        jailed(Some(&format!("node_name = {bad}\n")), &[], |file| {
            let e = load(file, Flags::default()).unwrap_err();
            assert!(e.to_string().contains("node_name"), "{bad}: {e}");
        });
    }
}

#[test]
fn health_reports_default_to_every_5s_kept_an_hour_with_floors() {
    let d = Settings::defaults();
    assert_eq!(
        (
            d.upstream.health_report_interval,
            d.upstream.health_report_retention
        ),
        (Duration::from_secs(5), Duration::from_secs(3600))
    );
    let file = "[upstream]\nhealth_report_interval = \"10ms\"\nhealth_report_retention = \"1s\"\n";
    jailed(Some(file), &[], |file| {
        let s = load(file, Flags::default()).unwrap();
        assert_eq!(
            s.upstream.health_report_interval,
            Duration::from_millis(100)
        );
        assert_eq!(s.upstream.health_report_retention, Duration::from_secs(1));
    });
    jailed(
        None,
        &[
            ("PAYMENTS_UPSTREAM__HEALTH_REPORT_INTERVAL", "20s"),
            ("PAYMENTS_UPSTREAM__HEALTH_REPORT_RETENTION", "30s"),
        ],
        |file| {
            let s = load(file, Flags::default()).unwrap();
            assert_eq!(s.upstream.health_report_interval, Duration::from_secs(20));
            assert_eq!(
                s.upstream.health_report_retention,
                Duration::from_secs(60),
                "at least three intervals"
            );
        },
    );
}

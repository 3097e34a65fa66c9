//! Unit tests of the dispatcher's settings and CA roots.
use super::*;

#[test]
fn defaults_are_the_spec_values() {
    let c = DispatcherConfig::default();
    assert_eq!(c.attempt_timeout, Duration::from_secs(10));
    assert_eq!(c.read_limit, 4096);
    assert!(c.extra_roots.is_empty());
    assert!(c.validate().is_ok());
}

#[test]
fn refuses_settings_it_cannot_work_with() {
    let zero = DispatcherConfig {
        per_host: 0,
        ..DispatcherConfig::default()
    };
    assert!(matches!(zero.validate(), Err(DispatcherError::Config(_))));
    let short_lease = DispatcherConfig {
        lease: Duration::from_secs(10),
        ..DispatcherConfig::default()
    };
    assert_eq!(
        short_lease.validate().map_err(|e| e.to_string()),
        Err(
            "callback dispatcher: the lease (10s) must be longer than the attempt timeout \
             (10s)"
                .to_string()
        )
    );
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
    let c = DispatcherConfig::from_settings(&settings).expect("usable settings");
    assert_eq!((c.concurrency, c.per_host), (8, 2));
    assert_eq!(c.extra_roots, vec![cert.der().clone()]);
    assert_eq!(c.attempt_timeout, ATTEMPT_TIMEOUT);

    let d = DispatcherConfig::from_settings(&Settings::defaults()).expect("defaults");
    assert!(d.extra_roots.is_empty());
}

#[test]
fn reads_extra_roots_from_pem() {
    let key = rcgen::KeyPair::generate().expect("key generation works");
    let cert = rcgen::CertificateParams::new(vec!["ca.test".to_string()])
        .expect("valid name")
        .self_signed(&key)
        .expect("self-signs");
    let pem = format!("{}\n{}", cert.pem(), cert.pem());
    let roots = pem_roots(pem.as_bytes()).expect("two certificates");
    assert_eq!(roots, vec![cert.der().clone(), cert.der().clone()]);
    assert!(pem_roots(b"not a certificate").is_err());
    assert!(pem_roots(key.serialize_pem().as_bytes()).is_err());
    let missing = read_pem_roots(Path::new("/nonexistent/ca.pem"));
    assert!(matches!(missing, Err(DispatcherError::CaFile { .. })));
}

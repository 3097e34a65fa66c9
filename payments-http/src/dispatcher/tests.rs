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
fn trusts_pem_certificates_besides_the_web_roots() {
    let key = rcgen::KeyPair::generate().expect("key generation works");
    let cert = rcgen::CertificateParams::new(vec!["ca.test".to_string()])
        .expect("valid name")
        .self_signed(&key)
        .expect("self-signs");
    let c = DispatcherConfig::default()
        .trusting_pem(cert.pem().as_bytes())
        .expect("a certificate");
    assert_eq!(c.extra_roots, vec![cert.der().clone()]);
    assert_eq!(c.attempt_timeout, ATTEMPT_TIMEOUT);
    let none = DispatcherConfig::default().trusting_pem(b"no certificate here");
    assert!(matches!(none, Err(DispatcherError::Certificates(_))));
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
}

#[test]
fn claimed_events_held_are_bounded_per_project_and_host_and_given_back() {
    let config = DispatcherConfig {
        per_host: 2,
        per_project: 3,
        ..DispatcherConfig::default()
    };
    let held = Arc::new(Mutex::new(Held::default()));
    let a: ProjectId = "00000000-0000-4000-8000-000000000001"
        .parse()
        .expect("an id");
    let b: ProjectId = "00000000-0000-4000-8000-000000000002"
        .parse()
        .expect("an id");
    // One host of A: its 2 slots and 2 waiting, no more.
    let mut places: Vec<Place> = (0..4)
        .map(|_| Held::admit(&held, &config, a, "slow.test").expect("room"))
        .collect();
    assert!(Held::admit(&held, &config, a, "slow.test").is_none());
    // A's other hosts: up to 2 x per_project for the project in all.
    places.extend((0..2).map(|_| Held::admit(&held, &config, a, "other.test").expect("room")));
    assert!(Held::admit(&held, &config, a, "third.test").is_none());
    // Another project is not affected, even on the same host.
    let b_place = Held::admit(&held, &config, b, "slow.test").expect("B has room");
    // Every place is given back: the tables forget what is not held.
    drop(places);
    drop(b_place);
    let table = held.lock().expect("not poisoned");
    assert!(
        table.projects.is_empty() && table.pairs.is_empty(),
        "{table:?}"
    );
}

#[test]
fn per_project_zero_is_refused() {
    let zero = DispatcherConfig {
        per_project: 0,
        ..DispatcherConfig::default()
    };
    assert!(matches!(zero.validate(), Err(DispatcherError::Config(_))));
    assert_eq!(DispatcherConfig::default().per_project, 128);
}

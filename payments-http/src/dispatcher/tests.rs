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
fn a_project_holding_its_slots_is_busy_and_its_places_are_bounded_and_given_back() {
    let config = DispatcherConfig {
        concurrency: 4,
        per_project: 2,
        ..DispatcherConfig::default()
    };
    let held = Arc::new(Mutex::new(Held::new(&config)));
    let freed = held.lock().expect("not poisoned").freed.clone();
    let a: ProjectId = "00000000-0000-4000-8000-000000000001"
        .parse()
        .expect("an id");
    let b: ProjectId = "00000000-0000-4000-8000-000000000002"
        .parse()
        .expect("an id");
    let busy = |held: &Arc<Mutex<Held>>| held.lock().expect("not poisoned").busy();
    let mut places = vec![Held::admit(&held, a).expect("room")];
    assert!(busy(&held).is_empty());
    places.push(Held::admit(&held, a).expect("room"));
    assert_eq!(busy(&held), vec![a], "per_project held: the claims skip A");
    // What a claim made before A was busy may still bring: up to per_project + concurrency.
    places.extend((0..4).map(|_| Held::admit(&held, a).expect("room")));
    assert!(Held::admit(&held, a).is_none(), "A holds all it may");
    // Another project is not affected.
    let b_place = Held::admit(&held, b).expect("B has room");
    assert_eq!(busy(&held), vec![a]);
    // Back under per_project, A is claimed again, and the run loop is told.
    places.truncate(2);
    assert!(futures_util::FutureExt::now_or_never(freed.notified()).is_none());
    places.truncate(1);
    assert!(
        futures_util::FutureExt::now_or_never(freed.notified()).is_some(),
        "told when A stopped being busy"
    );
    assert!(busy(&held).is_empty());
    // Every place is given back: the table forgets what is not held.
    drop(places);
    drop(b_place);
    assert!(held.lock().expect("not poisoned").projects.is_empty());
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

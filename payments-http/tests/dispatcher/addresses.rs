//! The address policy at connect time: resolved addresses, literals and plain-HTTP URLs.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use payments_core::callback::AddressPolicy;
use payments_core::event::{DeliveryState, EventKind, EventRecord};
use payments_http::dispatcher::DispatcherConfig;
use payments_http::resolver::StaticLookup;
use tokio::net::TcpListener;

use crate::support::{local_config, pki, receiver, world, Reply, HOST};

/// Whether nobody connects to `listener` for a while.
async fn no_connection(listener: &TcpListener) -> bool {
    tokio::time::timeout(Duration::from_millis(100), listener.accept())
        .await
        .is_err()
}

#[tokio::test]
async fn forbidden_resolved_addresses_are_refused_at_connect_time() {
    // A listener where a refused loopback name would connect; it must get nothing.
    let trap = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind 127.0.0.1:0");
    let port = trap.local_addr().expect("bound").port();
    let trap6 = TcpListener::bind(("::1", port)).await.ok();

    // (address, policy allows local, what the refusal says)
    let table: &[(&str, bool, &str)] = &[
        ("10.0.0.1", false, "private"),
        ("10.255.255.254", true, "private"),
        ("172.16.0.1", false, "private"),
        ("172.31.255.255", true, "private"),
        ("192.168.1.1", false, "private"),
        ("127.0.0.1", false, "loopback"),
        ("127.255.255.254", false, "loopback"),
        ("169.254.169.254", true, "link-local"),
        ("169.254.0.1", false, "link-local"),
        ("100.64.0.1", true, "carrier-grade NAT"),
        ("100.127.255.254", false, "carrier-grade NAT"),
        ("0.0.0.0", true, "unspecified"),
        ("0.1.2.3", false, "this network"),
        ("224.0.0.1", false, "multicast"),
        ("239.255.255.250", true, "multicast"),
        ("255.255.255.255", false, "broadcast"),
        ("240.0.0.1", false, "reserved"),
        ("192.0.0.8", false, "IETF protocol assignments"),
        ("192.0.2.1", false, "documentation"),
        ("198.51.100.7", false, "documentation"),
        ("203.0.113.9", false, "documentation"),
        ("198.18.0.1", false, "benchmarking"),
        ("::1", false, "loopback"),
        ("::", true, "unspecified"),
        ("fc00::1", true, "unique local"),
        ("fd12:3456::1", false, "unique local"),
        ("fe80::1", true, "link-local"),
        ("fec0::1", false, "site-local"),
        ("ff02::1", false, "multicast"),
        ("2001:db8::1", false, "documentation"),
        ("3fff::1", false, "documentation"),
        ("100::1", false, "discard-only"),
        ("2001::1", false, "Teredo"),
        ("2001:2::1", false, "benchmarking"),
        ("4000::1", false, "global unicast"),
        ("::a00:1", false, "IPv4-compatible"),
        ("::ffff:127.0.0.1", false, "loopback"),
        ("::ffff:10.0.0.1", true, "private"),
        ("::ffff:169.254.169.254", true, "link-local"),
        ("::ffff:100.64.0.1", false, "carrier-grade NAT"),
        ("64:ff9b::a00:1", false, "NAT64 form of 10.0.0.1"),
        ("64:ff9b::7f00:1", true, "NAT64 form of 127.0.0.1"),
        ("64:ff9b:1::1", false, "local-use NAT64"),
        ("2002:a00:1::1", false, "6to4 form of 10.0.0.1"),
        ("2002:7f00:1::1", true, "6to4 form of 127.0.0.1"),
    ];
    assert!(table.len() >= 30);

    let pki = pki();
    for allow_local in [false, true] {
        let w = world().await;
        let mut names = StaticLookup::new();
        let mut events = Vec::new();
        let rows: Vec<_> = table.iter().filter(|row| row.1 == allow_local).collect();
        for (i, &&(address, _, says)) in rows.iter().enumerate() {
            let name = format!("blocked-{i}.test");
            names = names.with(&name, [address.parse().expect("table addresses are valid")]);
            let url = format!("https://{name}:{port}/cb");
            let (payment, _) = w.event(&url, EventKind::Automatic, 3).await;
            events.push((payment, name, address, says));
        }
        // A name with a public and a refused address is refused as a whole.
        let mixed: [IpAddr; 2] = [
            "93.184.216.34".parse().expect("valid"),
            "10.0.0.1".parse().expect("valid"),
        ];
        names = names.with("mixed.test", mixed);
        let (mixed_payment, _) = w
            .event(
                &format!("https://mixed.test:{port}/cb"),
                EventKind::Automatic,
                3,
            )
            .await;
        let d = w.dispatcher_with(
            |c| c.callback_policy = AddressPolicy { allow_local },
            DispatcherConfig {
                lookup: Arc::new(names),
                ..local_config(&pki)
            },
        );
        assert_eq!(d.deliver_due_once().await, rows.len() + 1);

        for (payment, name, address, says) in events {
            let rec = w.record(payment).await;
            let a = &rec.attempts[0];
            let error = a.error.as_deref().unwrap_or("");
            assert!(!a.success, "{address}");
            assert_eq!(a.http_status, None, "{address}");
            assert!(
                error.starts_with("forbidden address: ")
                    && error.ends_with(&format!(", resolved from {name}"))
                    && error.contains(says),
                "{address} (allow_local {allow_local}): {error}"
            );
            assert_eq!(rec.outbox.state, DeliveryState::Pending, "a failed attempt");
        }
        let mixed = w.record(mixed_payment).await.attempts.remove(0);
        assert_eq!(
            mixed.error.as_deref(),
            Some(
                "forbidden address: 10.0.0.1 is a private address (10.0.0.0/8), resolved from \
                 mixed.test"
            )
        );
    }

    assert!(no_connection(&trap).await, "nothing connected to 127.0.0.1");
    if let Some(trap6) = &trap6 {
        assert!(no_connection(trap6).await, "nothing connected to ::1");
    }
}

#[tokio::test]
async fn literals_and_local_urls_are_refused_once_the_setting_is_off() {
    let pki = pki();
    let w = world().await;
    let rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (literal, _) = w
        .event(
            &format!("https://127.0.0.1:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let (mapped, _) = w
        .event(
            &format!("https://[::ffff:127.0.0.1]:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let (plain, _) = w
        .event(
            &format!("http://{HOST}:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let d = w.dispatcher_with(
        |c| c.callback_policy = AddressPolicy::STRICT,
        local_config(&pki),
    );
    assert_eq!(d.deliver_due_once().await, 3);
    let error = |rec: EventRecord| rec.attempts[0].error.clone().unwrap_or_default();
    assert_eq!(
        error(w.record(literal).await),
        "forbidden address: 127.0.0.1 is a loopback address (127.0.0.0/8)"
    );
    assert_eq!(
        error(w.record(mapped).await),
        "forbidden address: ::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback \
         address (127.0.0.0/8)"
    );
    assert_eq!(
        error(w.record(plain).await),
        "destination refused: callback_url must use https (got http://)"
    );
    assert_eq!(rx.connections.load(Ordering::SeqCst), 0);
}

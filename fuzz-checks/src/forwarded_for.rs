//! `X-Forwarded-For` through [`client_ip`].
//!
//! Input: `trusted 0xFF peer 0xFF x-forwarded-for 0xFF prefix`, all UTF-8: the trusted proxy
//! networks one per line (lines that are not networks or addresses are dropped), the TCP peer
//! (`10.0.0.1` if it does not parse), the header lines, and lines a client puts in front.
//!
//! Properties:
//! - a known result is canonical (never IPv4-mapped IPv6), and is the peer or one of the
//!   entries; an unknown one (an entry that does not parse where the client should be) comes
//!   only from a trusted peer;
//! - an untrusted peer is the client, whatever the header says;
//! - what a client writes in front of the header (to the left of what the trusted proxies
//!   appended) does not change an untrusted result: a client cannot choose its address;
//! - one more trusted proxy in front of the server, appending the address it received from,
//!   does not change the result (trusted networks written IPv4-mapped are trusted as IPv4,
//!   like allow-list rules);
//! - the answer is deterministic.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use payments_core::auth::{canonical_network, client_ip};

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let [trusted, peer, xff, prefix] = crate::split::<4>(data);
    let (Ok(trusted), Ok(peer), Ok(xff), Ok(prefix)) = (
        std::str::from_utf8(trusted),
        std::str::from_utf8(peer),
        std::str::from_utf8(xff),
        std::str::from_utf8(prefix),
    ) else {
        return;
    };
    let trusted: Vec<IpNet> = trusted
        .lines()
        .filter_map(|l| {
            IpNet::from_str(l.trim())
                .ok()
                .or_else(|| IpAddr::from_str(l.trim()).ok().map(IpNet::from))
        })
        .collect();
    let peer = IpAddr::from_str(peer.trim()).unwrap_or(IpAddr::from([10, 0, 0, 1]));
    let lines: Vec<&str> = if xff.is_empty() {
        Vec::new()
    } else {
        xff.split('\n').collect()
    };
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| canonical_network(*n).contains(ip));

    let outcome = client_ip(peer, &lines, &trusted);
    assert_eq!(outcome, client_ip(peer, &lines, &trusted), "deterministic");
    let Ok(result) = outcome else {
        assert!(
            is_trusted(&peer.to_canonical()),
            "an untrusted peer made the client unknown"
        );
        check_hops(peer, &lines, &trusted, &outcome, prefix);
        return;
    };
    assert_eq!(result, result.to_canonical(), "not canonical: {result}");
    let entries: Vec<IpAddr> = lines
        .iter()
        .flat_map(|l| l.split(','))
        .filter_map(|e| {
            let e = e.trim();
            let e = e
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .unwrap_or(e);
            IpAddr::from_str(e).ok().map(|ip| ip.to_canonical())
        })
        .collect();
    assert!(
        result == peer.to_canonical() || entries.contains(&result),
        "{result} is neither the peer nor an entry"
    );
    if !is_trusted(&peer.to_canonical()) {
        assert_eq!(
            result,
            peer.to_canonical(),
            "an untrusted peer is not the client"
        );
    }

    if !is_trusted(&result) {
        check_hops(peer, &lines, &trusted, &outcome, prefix);
    } else {
        check_hops(peer, &lines, &trusted, &outcome, "");
    }
}

/// What a client writes in front (`prefix`, unless empty) does not change `outcome`, and one
/// more trusted hop appending the address it received from does not either.
fn check_hops(
    peer: IpAddr,
    lines: &[&str],
    trusted: &[IpNet],
    outcome: &Result<IpAddr, payments_core::auth::allowlist::UnknownClient>,
    prefix: &str,
) {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| canonical_network(*n).contains(ip));
    if !prefix.is_empty() {
        let mut spoofed: Vec<&str> = prefix.split('\n').collect();
        spoofed.extend(lines);
        assert_eq!(
            &client_ip(peer, &spoofed, trusted),
            outcome,
            "the client chose its address with {prefix:?}"
        );
    }
    let next_hop = trusted
        .iter()
        .flat_map(|n| [n.network(), n.broadcast()])
        .find(|ip| is_trusted(&ip.to_canonical()));
    if let Some(next_hop) = next_hop {
        let received_from = peer.to_string();
        let mut appended = lines.to_vec();
        appended.push(&received_from);
        assert_eq!(
            &client_ip(next_hop, &appended, trusted),
            outcome,
            "one more trusted hop ({next_hop}) changes the client"
        );
    }
}

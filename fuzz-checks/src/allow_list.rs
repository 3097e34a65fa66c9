//! The project IP allow-list through [`IpAllowList::parse`], [`IpAllowList::allows`] and
//! [`IpAllowList::check`].
//!
//! Input: `rules 0xFF probes`: the rules one per line (UTF-8); the probe addresses are the
//! probe bytes taken 4 at a time as IPv4 and 16 at a time as IPv6, plus, for every accepted
//! rule, its first and last address and the addresses just outside it.
//!
//! Properties:
//! - the list parses exactly when every rule parses alone, and is the rules' networks in order;
//!   the first refused rule is the one named;
//! - a refusal for host bits names a network without host bits that parses;
//! - every stored network has no host bits, and its text parses back to the same list;
//! - a single address is allowed, also in IPv4-mapped IPv6 form; a network allows its first
//!   and last address, unless that address is IPv4-mapped IPv6 (`allows` compares every address
//!   in canonical form, so an IPv6 network never matches its IPv4-mapped part; see
//!   docs/security.md);
//! - `allows` answers as the networks' `contains` on the canonical address (an empty list
//!   allows all), the same for an IPv4 address and its IPv4-mapped form, and `check` agrees.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use payments_core::auth::{AllowListError, IpAllowList};

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let [rules, probe_bytes] = crate::split::<2>(data);
    let Ok(rules) = std::str::from_utf8(rules) else {
        return;
    };
    let rules: Vec<&str> = if rules.is_empty() {
        Vec::new()
    } else {
        rules.split('\n').collect()
    };
    let result = IpAllowList::parse(rules.iter().copied());
    assert_eq!(
        result,
        IpAllowList::parse(rules.iter().copied()),
        "deterministic"
    );
    let Some(list) = parsed_list(&rules, &result) else {
        return;
    };

    let texts: Vec<String> = list.networks().iter().map(IpNet::to_string).collect();
    assert_eq!(
        IpAllowList::parse(texts.iter().map(String::as_str)).as_ref(),
        Ok(list),
        "the stored networks do not parse back: {texts:?}"
    );

    let mut probes = rule_probes(&rules, list);
    probes.extend(
        probe_bytes
            .chunks_exact(4)
            .map(|c| IpAddr::from(<[u8; 4]>::try_from(c).expect("4 bytes"))),
    );
    probes.extend(
        probe_bytes
            .chunks_exact(16)
            .map(|c| IpAddr::from(<[u8; 16]>::try_from(c).expect("16 bytes"))),
    );
    for ip in probes {
        check_probe(list, ip, &texts);
    }
}

/// Checks the list against its rules parsed one by one; returns the list when it parsed.
fn parsed_list<'a>(
    rules: &[&str],
    result: &'a Result<IpAllowList, AllowListError>,
) -> Option<&'a IpAllowList> {
    let alone: Vec<Result<IpAllowList, AllowListError>> =
        rules.iter().map(|r| IpAllowList::parse([*r])).collect();
    match (result, alone.iter().position(Result::is_err)) {
        (Ok(list), None) => {
            let networks: Vec<IpNet> = alone
                .iter()
                .flat_map(|l| {
                    l.as_ref()
                        .map(|l| l.networks().to_vec())
                        .unwrap_or_default()
                })
                .collect();
            assert_eq!(list.networks(), networks, "the list is not its rules");
            Some(list)
        }
        (Err(e), Some(first)) => {
            assert_eq!(
                Err(e),
                alone[first].as_ref(),
                "another rule than the first refused is named"
            );
            if let AllowListError::HostBitsSet { network, .. } = e {
                assert_eq!(network.trunc(), *network);
                assert!(IpAllowList::parse([network.to_string().as_str()]).is_ok());
            }
            None
        }
        (Ok(_), Some(i)) => panic!("the list parses although rule {:?} does not", rules[i]),
        (Err(e), None) => panic!("every rule parses but the list does not: {e}"),
    }
}

/// Checks each rule's network and its ends; returns the ends and the addresses just outside.
fn rule_probes(rules: &[&str], list: &IpAllowList) -> Vec<IpAddr> {
    let mut probes = Vec::new();
    for (rule, net) in rules.iter().zip(list.networks()) {
        assert_eq!(net.trunc(), *net, "host bits stored: {rule:?}");
        if !rule.contains('/') {
            let ip = net.addr();
            assert!(list.allows(ip), "a single address is refused: {rule:?}");
            if let IpAddr::V4(v4) = ip {
                assert!(
                    list.allows(IpAddr::V6(v4.to_ipv6_mapped())),
                    "a single address is refused in mapped form: {rule:?}"
                );
            }
        } else {
            for end in [net.network(), net.broadcast()] {
                // An IPv4-mapped address is matched as IPv4, never against an IPv6 network.
                if end.to_canonical() == end {
                    assert!(list.allows(end), "{rule:?} refuses {end}");
                }
            }
        }
        probes.extend([net.network(), net.broadcast()]);
        probes.extend(neighbours(net.network()));
        probes.extend(neighbours(net.broadcast()));
    }
    probes
}

/// `allows` and `check` on one address agree with the networks' `contains`.
fn check_probe(list: &IpAllowList, ip: IpAddr, texts: &[String]) {
    let canonical = ip.to_canonical();
    let expected = list.is_empty() || list.networks().iter().any(|n| n.contains(&canonical));
    let allowed = list.allows(ip);
    assert_eq!(allowed, expected, "allows({ip}) for {texts:?}");
    assert_eq!(list.allows(canonical), allowed, "{ip} and {canonical}");
    if let IpAddr::V4(v4) = ip {
        assert_eq!(
            list.allows(IpAddr::V6(v4.to_ipv6_mapped())),
            allowed,
            "{ip} mapped"
        );
    }
    assert_eq!(list.check(ip).is_ok(), allowed, "check({ip})");
}

fn neighbours(ip: IpAddr) -> [IpAddr; 2] {
    match ip {
        IpAddr::V4(v4) => {
            let n = u32::from(v4);
            [
                IpAddr::V4(Ipv4Addr::from(n.wrapping_sub(1))),
                IpAddr::V4(Ipv4Addr::from(n.wrapping_add(1))),
            ]
        }
        IpAddr::V6(v6) => {
            let n = u128::from(v6);
            [
                IpAddr::V6(Ipv6Addr::from(n.wrapping_sub(1))),
                IpAddr::V6(Ipv6Addr::from(n.wrapping_add(1))),
            ]
        }
    }
}

//! The project IP allow-list and the client address behind trusted proxies.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use crate::{ApiError, ErrorCode};

/// Why an allow-list rule was not accepted.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    /// Neither an IP address nor a CIDR network.
    #[error(
        "\"{0}\" is not an IP address or a CIDR network (such as 203.0.113.0/24 or 2001:db8::/32)"
    )]
    Invalid(String),
    /// A network written with host bits set (`10.1.2.3/8`): ambiguous, so refused.
    #[error("\"{rule}\" has host bits set; did you mean {network}?")]
    HostBitsSet {
        /// The rule as given.
        rule: String,
        /// The network it most likely means.
        network: IpNet,
    },
}

/// A project's IP allow-list: single addresses and CIDR networks, IPv4 and IPv6. An empty list
/// allows every address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpAllowList {
    networks: Vec<IpNet>,
}

impl IpAllowList {
    /// The most rules a project's list may hold (checked when the list is set): the list is
    /// read with every request of the project, and a list that needs more entries wants
    /// wider networks.
    pub const MAX_RULES: usize = 100;

    /// Parses rules such as `203.0.113.7`, `198.51.100.0/24`, `2001:db8::/32`. Whitespace around
    /// a rule is ignored; an IPv4-mapped IPv6 address is stored as the IPv4 address, and an
    /// IPv4-mapped network (`::ffff:127.0.0.0/104`, prefix 96 or longer) as the IPv4 network
    /// (`127.0.0.0/8`), so that it matches the addresses the single mapped address would.
    pub fn parse<'a>(rules: impl IntoIterator<Item = &'a str>) -> Result<Self, AllowListError> {
        let networks = rules
            .into_iter()
            .map(parse_rule)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(IpAllowList { networks })
    }

    /// The rules, as networks (a single address is a /32 or /128).
    pub fn networks(&self) -> &[IpNet] {
        &self.networks
    }

    /// Whether the list has no rules (and so allows every address).
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty()
    }

    /// Whether `ip` may call: always when the list is empty; an IPv4-mapped IPv6 address is
    /// matched as the IPv4 address.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.is_empty() || self.networks.iter().any(|n| n.contains(&ip))
    }

    /// [`IpAllowList::allows`] as a refusal: `403 ip_not_allowed` when not allowed.
    pub fn check(&self, ip: IpAddr) -> Result<(), IpRefusal> {
        if self.allows(ip) {
            Ok(())
        } else {
            Err(IpRefusal::NotListed(ip.to_canonical()))
        }
    }
}

/// Why a client is refused by its project's IP allow-list: `403 ip_not_allowed`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IpRefusal {
    /// The client's address is not in the list.
    #[error("source address {0} is not in the project's IP allow-list")]
    NotListed(IpAddr),
    /// The client's address is unknown (the server was not given it, or a trusted proxy's
    /// `X-Forwarded-For` entry is not an address), and the project has a list: never taken
    /// as allowed.
    #[error("{0}, and the project has an IP allow-list")]
    ClientUnknown(&'static str),
}

impl From<IpRefusal> for ApiError {
    fn from(e: IpRefusal) -> ApiError {
        ApiError::new(ErrorCode::IpNotAllowed, e.to_string())
    }
}

fn parse_rule(rule: &str) -> Result<IpNet, AllowListError> {
    let trimmed = rule.trim();
    if trimmed.contains('/') {
        let net = IpNet::from_str(trimmed).map_err(|_| AllowListError::Invalid(rule.to_owned()))?;
        if net.trunc() != net {
            return Err(AllowListError::HostBitsSet {
                rule: trimmed.to_owned(),
                network: net.trunc(),
            });
        }
        Ok(canonical_network(net))
    } else {
        let ip = IpAddr::from_str(trimmed).map_err(|_| AllowListError::Invalid(rule.to_owned()))?;
        Ok(IpNet::from(ip.to_canonical()))
    }
}

/// The client address behind trusted proxies is unknown: an `X-Forwarded-For` entry the walk
/// reached is not an IP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an X-Forwarded-For entry from a trusted proxy is not an IP address")]
pub struct UnknownClient;

/// The client address for the allow-list.
///
/// If the TCP `peer` is not in `trusted_proxies`, it is the client and `X-Forwarded-For` is
/// ignored (anyone can send that header). Otherwise the `X-Forwarded-For` entries (all header
/// lines, in wire order, each a comma-separated list) are walked from the right: the first entry
/// that is not a trusted proxy is the client. If every entry is a trusted proxy (or there is no
/// header), the left-most one (the peer) is used.
///
/// If the walk reaches an entry that does not parse as an IP address (`unknown`, an address
/// with a port, an empty entry, bytes that are not UTF-8 passed in lossily), the client is
/// unknown: [`UnknownClient`], which an allow-list refuses like an unknown peer. It is not
/// the last trusted hop: that is a proxy, and an allow-list holding the proxy's network would
/// then admit anyone who can make the proxy forward a malformed entry.
pub fn client_ip(
    peer: IpAddr,
    x_forwarded_for: &[&str],
    trusted_proxies: &[IpNet],
) -> Result<IpAddr, UnknownClient> {
    // A trusted network written IPv4-mapped (`::ffff:10.0.0.0/104`) is the IPv4 network: the
    // addresses it is compared with are canonical.
    let is_trusted = |ip: &IpAddr| {
        trusted_proxies
            .iter()
            .any(|n| canonical_network(*n).contains(ip))
    };
    let mut candidate = peer.to_canonical();
    if !is_trusted(&candidate) {
        return Ok(candidate);
    }
    let entries = x_forwarded_for
        .iter()
        .flat_map(|line| line.split(','))
        .collect::<Vec<_>>();
    for entry in entries.iter().rev() {
        candidate = parse_forwarded_entry(entry).ok_or(UnknownClient)?;
        if !is_trusted(&candidate) {
            return Ok(candidate);
        }
    }
    Ok(candidate)
}

/// An `X-Forwarded-For` entry: an IP address, IPv6 optionally in brackets. Empty entries and
/// anything else (`unknown`, ports, obfuscated identifiers) do not parse.
fn parse_forwarded_entry(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    let entry = entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or(entry);
    IpAddr::from_str(entry).ok().map(|ip| ip.to_canonical())
}

/// An IPv4-mapped IPv6 network of prefix 96 or longer as the IPv4 network it maps
/// (`::ffff:10.0.0.0/104` -> `10.0.0.0/8`); any other network as it is. Clients are matched in
/// their canonical form (a mapped address as IPv4), so a mapped network left as IPv6 would
/// match nothing. Allow-list rules and trusted proxies both go through it.
pub fn canonical_network(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trusted_proxy_written_ipv4_mapped_is_trusted() {
        let client: IpAddr = "203.0.113.9".parse().unwrap();
        for trusted in ["::ffff:10.0.0.0/104", "::ffff:10.0.0.1/128", "10.0.0.0/8"] {
            let trusted = [IpNet::from_str(trusted).unwrap()];
            for peer in ["10.0.0.1", "::ffff:10.0.0.1"] {
                let peer: IpAddr = peer.parse().unwrap();
                assert_eq!(
                    client_ip(peer, &["203.0.113.9"], &trusted),
                    Ok(client),
                    "{trusted:?} {peer}"
                );
            }
        }
        // Not a mapped network: the peer is the client.
        let v6 = [IpNet::from_str("::/96").unwrap()];
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(client_ip(peer, &["203.0.113.9"], &v6), Ok(peer));
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn empty_list_allows_all() {
        let list = IpAllowList::parse([]).unwrap();
        assert!(list.is_empty());
        assert!(list.allows(ip("192.0.2.1")));
        assert!(list.allows(ip("2001:db8::1")));
        assert_eq!(list.check(ip("192.0.2.1")), Ok(()));
    }

    #[test]
    fn single_addresses_and_networks() {
        let list =
            IpAllowList::parse([" 203.0.113.7 ", "198.51.100.0/24", "2001:db8:1::/48", "::1"])
                .unwrap();
        assert_eq!(
            list.networks(),
            nets(&[
                "203.0.113.7/32",
                "198.51.100.0/24",
                "2001:db8:1::/48",
                "::1/128"
            ])
        );
        assert!(list.allows(ip("203.0.113.7")));
        assert!(!list.allows(ip("203.0.113.8")));
        assert!(list.allows(ip("198.51.100.0")));
        assert!(list.allows(ip("198.51.100.255")));
        assert!(!list.allows(ip("198.51.101.0")));
        assert!(list.allows(ip("2001:db8:1:ffff::5")));
        assert!(!list.allows(ip("2001:db8:2::5")));
        assert!(list.allows(ip("::1")));
        assert!(!list.allows(ip("127.0.0.1")));
        let err = ApiError::from(list.check(ip("192.0.2.9")).unwrap_err());
        assert_eq!(err.code, ErrorCode::IpNotAllowed);
        assert_eq!(
            err.message,
            "source address 192.0.2.9 is not in the project's IP allow-list"
        );
    }

    #[test]
    fn ipv4_mapped_peers_match_ipv4_rules() {
        let list = IpAllowList::parse(["198.51.100.0/24", "::ffff:203.0.113.7"]).unwrap();
        assert_eq!(
            list.networks(),
            nets(&["198.51.100.0/24", "203.0.113.7/32"])
        );
        assert!(list.allows(ip("::ffff:198.51.100.20")));
        assert!(list.allows(ip("203.0.113.7")));
        assert!(list.allows(ip("::ffff:203.0.113.7")));
        assert!(!list.allows(ip("::ffff:198.51.101.20")));
    }

    #[test]
    fn ipv4_mapped_networks_match_like_their_ipv4_networks() {
        let list = IpAllowList::parse(["::ffff:127.0.0.0/104", "::FFFF:192.0.2.0/120"]).unwrap();
        assert_eq!(list.networks(), nets(&["127.0.0.0/8", "192.0.2.0/24"]));
        for client in [
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "127.255.0.9",
            "192.0.2.200",
        ] {
            assert!(list.allows(ip(client)), "{client}");
        }
        assert!(!list.allows(ip("128.0.0.1")));
        // The whole mapped range is every IPv4 address; a shorter prefix stays IPv6.
        let all = IpAllowList::parse(["::ffff:0.0.0.0/96"]).unwrap();
        assert_eq!(all.networks(), nets(&["0.0.0.0/0"]));
        let v6 = IpAllowList::parse(["::/64"]).unwrap();
        assert_eq!(v6.networks(), nets(&["::/64"]));
    }

    #[test]
    fn bad_rules_are_named() {
        assert_eq!(
            IpAllowList::parse(["10.0.0.1", "not-an-ip"]),
            Err(AllowListError::Invalid("not-an-ip".to_owned()))
        );
        assert_eq!(
            IpAllowList::parse(["10.0.0.0/33"]),
            Err(AllowListError::Invalid("10.0.0.0/33".to_owned()))
        );
        assert_eq!(
            IpAllowList::parse(["300.1.1.1"]),
            Err(AllowListError::Invalid("300.1.1.1".to_owned()))
        );
        let err = IpAllowList::parse(["10.1.2.3/8"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"10.1.2.3/8\" has host bits set; did you mean 10.0.0.0/8?"
        );
    }

    #[test]
    fn untrusted_peer_ignores_forwarded_for() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_ip(ip("192.0.2.1"), &["203.0.113.9"], &trusted),
            Ok(ip("192.0.2.1"))
        );
        assert_eq!(
            client_ip(ip("192.0.2.1"), &["203.0.113.9"], &[]),
            Ok(ip("192.0.2.1"))
        );
        assert_eq!(
            client_ip(ip("::ffff:192.0.2.1"), &[], &trusted),
            Ok(ip("192.0.2.1")),
            "mapped peers are reported as IPv4"
        );
    }

    #[test]
    fn trusted_proxy_chain_yields_rightmost_untrusted() {
        let trusted = nets(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
        // client spoofed "1.1.1.1", real client 203.0.113.9, then two trusted proxies.
        let xff = ["1.1.1.1, 203.0.113.9", "10.0.0.5"];
        assert_eq!(
            client_ip(ip("10.0.0.1"), &xff, &trusted),
            Ok(ip("203.0.113.9"))
        );
        assert_eq!(
            client_ip(
                ip("2001:db8:ffff::1"),
                &["2001:db8::42, 2001:db8:ffff::2"],
                &trusted
            ),
            Ok(ip("2001:db8::42"))
        );
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.1"), &["[2001:db8::7]"], &trusted),
            Ok(ip("2001:db8::7"))
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), &["::ffff:203.0.113.9"], &trusted),
            Ok(ip("203.0.113.9"))
        );
    }

    #[test]
    fn all_trusted_or_missing_header() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.1"), &[], &trusted), Ok(ip("10.0.0.1")));
        assert_eq!(
            client_ip(ip("10.0.0.1"), &["10.0.0.3, 10.0.0.2"], &trusted),
            Ok(ip("10.0.0.3"))
        );
    }

    #[test]
    fn a_malformed_entry_reached_by_the_walk_makes_the_client_unknown() {
        let trusted = nets(&["10.0.0.0/8"]);
        for xff in [
            &["unknown"][..],
            &["6.6.6.6:1234"],
            &["203.0.113.9:443"],
            &[""],
            &["203.0.113.9,"],
            &["203.0.113.9, garbage, 10.0.0.7"],
            &["203.0.113.9", "\u{fffd}"],
        ] {
            assert_eq!(
                client_ip(ip("10.0.0.1"), xff, &trusted),
                Err(UnknownClient),
                "{xff:?}"
            );
        }
        // Left of the client, nothing is read: a malformed entry there does not matter.
        assert_eq!(
            client_ip(
                ip("10.0.0.1"),
                &["garbage, 203.0.113.9, 10.0.0.7"],
                &trusted
            ),
            Ok(ip("203.0.113.9"))
        );
        // An untrusted peer is the client whatever it sends.
        assert_eq!(
            client_ip(ip("192.0.2.1"), &["unknown"], &trusted),
            Ok(ip("192.0.2.1"))
        );
    }
}

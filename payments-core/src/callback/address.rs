//! The destination address policy: which IP addresses a callback may be delivered to.
//!
//! [`check_ip`] is applied twice: to an IP-literal host when a callback URL is accepted
//! ([`super::CallbackUrl::parse`]), and by the HTTP adapter's resolver to every resolved address
//! at connect time, so that the address connected to is the address that was checked.
//!
//! Embedded IPv4 forms are judged by the IPv4 address inside:
//! - IPv4-mapped `::ffff:0:0/96` is treated exactly as its IPv4 address (as
//!   [`std::net::Ipv6Addr::to_canonical`] does).
//! - NAT64 well-known prefix `64:ff9b::/96` (RFC 6052): refused when the embedded IPv4 address is
//!   refused, so that an IPv6-only network can still reach a public IPv4 receiver. Loopback is
//!   never allowed through NAT64, even with [`AddressPolicy::allow_local`].
//! - NAT64 local-use prefix `64:ff9b:1::/48` (RFC 8215): refused entirely; the position of the
//!   IPv4 address inside depends on the operator's prefix length, and the translator is local
//!   by definition.
//! - 6to4 `2002::/16` (RFC 3056): refused when the embedded IPv4 address is refused.
//! - IPv4-compatible `::/96` (deprecated by RFC 4291) and Teredo `2001::/32`: refused entirely.
//!
//! Besides the ranges named in `decisions.md`, all of `2001::/23` (IETF protocol assignments),
//! the documentation prefix `3fff::/20` (RFC 9637) and every IPv6 address outside the global
//! unicast range `2000::/3` are refused: no receiver is expected there.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// Which destinations are allowed beyond public addresses.
///
/// The default refuses everything that is not public. `allow_local` is the development setting
/// `PAYMENTS_ALLOW_LOCAL_CALLBACKS=1`: it additionally allows loopback addresses (and, in
/// [`super::CallbackUrl::parse`], `http://` and `localhost`); it is off by default and the
/// server logs a warning when it is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Allows loopback destinations (`127.0.0.0/8`, `::1`, `::ffff:127.0.0.0/104`) and `http://`.
    pub allow_local: bool,
}

impl AddressPolicy {
    /// The production policy: public addresses only, `https://` only.
    pub const STRICT: AddressPolicy = AddressPolicy { allow_local: false };

    /// The development policy: additionally loopback and `http://`.
    pub const LOCAL_DEVELOPMENT: AddressPolicy = AddressPolicy { allow_local: true };
}

/// The kind of a refused address range, with why no callback goes there.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeKind {
    /// `0.0.0.0/8`, "this network" (RFC 791).
    ThisNetwork,
    /// `0.0.0.0` or `::`, the unspecified address.
    Unspecified,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918).
    Private,
    /// `127.0.0.0/8` or `::1`.
    Loopback,
    /// `169.254.0.0/16` or `fe80::/10`.
    LinkLocal,
    /// `100.64.0.0/10`, shared address space of carrier-grade NAT (RFC 6598).
    SharedAddressSpace,
    /// `192.0.0.0/24` or `2001::/23`, IETF protocol assignments.
    IetfProtocolAssignments,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15` or `2001:2::/48`.
    Benchmarking,
    /// `240.0.0.0/4`, reserved for future use.
    Reserved,
    /// `255.255.255.255`, limited broadcast.
    Broadcast,
    /// `224.0.0.0/4` or `ff00::/8`.
    Multicast,
    /// `fc00::/7`, IPv6 unique local addresses (RFC 4193).
    UniqueLocal,
    /// `fec0::/10`, deprecated IPv6 site-local addresses.
    SiteLocal,
    /// `::/96`, deprecated IPv4-compatible IPv6 addresses.
    Ipv4Compatible,
    /// `64:ff9b:1::/48`, the NAT64 local-use prefix (RFC 8215).
    Nat64LocalUse,
    /// `100::/64`, the IPv6 discard-only prefix (RFC 6666).
    DiscardOnly,
    /// `2001::/32`, Teredo tunnelling.
    Teredo,
    /// Outside `2000::/3`, the only IPv6 range allocated for global unicast.
    NotGlobalUnicast,
}

impl RangeKind {
    /// What the range is, as a phrase completing "the address is ...".
    pub const fn description(self) -> &'static str {
        match self {
            RangeKind::ThisNetwork => "a \"this network\" address",
            RangeKind::Unspecified => "the unspecified address",
            RangeKind::Private => "a private address",
            RangeKind::Loopback => "a loopback address",
            RangeKind::LinkLocal => "a link-local address",
            RangeKind::SharedAddressSpace => "a carrier-grade NAT shared address",
            RangeKind::IetfProtocolAssignments => "reserved for IETF protocol assignments",
            RangeKind::Documentation => "a documentation address",
            RangeKind::Benchmarking => "a benchmarking address",
            RangeKind::Reserved => "a reserved address",
            RangeKind::Broadcast => "the broadcast address",
            RangeKind::Multicast => "a multicast address",
            RangeKind::UniqueLocal => "a unique local address",
            RangeKind::SiteLocal => "a site-local address",
            RangeKind::Ipv4Compatible => "a deprecated IPv4-compatible address",
            RangeKind::Nat64LocalUse => "a local-use NAT64 address",
            RangeKind::DiscardOnly => "a discard-only address",
            RangeKind::Teredo => "a Teredo tunnel address",
            RangeKind::NotGlobalUnicast => "not in the IPv6 global unicast range",
        }
    }
}

/// How an IPv6 address carries the IPv4 address that was judged.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Embedding {
    /// `::ffff:0:0/96`.
    Ipv4Mapped,
    /// `64:ff9b::/96`, the NAT64 well-known prefix.
    Nat64,
    /// `2002::/16`, 6to4.
    SixToFour,
}

impl Embedding {
    /// The form's name, e.g. "an IPv4-mapped form".
    pub const fn description(self) -> &'static str {
        match self {
            Embedding::Ipv4Mapped => "an IPv4-mapped form",
            Embedding::Nat64 => "a NAT64 form",
            Embedding::SixToFour => "a 6to4 form",
        }
    }
}

/// A refused destination address: the address, the range it falls in and why it is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ForbiddenAddress {
    address: IpAddr,
    embedded: Option<(Embedding, Ipv4Addr)>,
    network: IpNet,
    kind: RangeKind,
}

impl ForbiddenAddress {
    /// The address as it was checked.
    pub fn address(&self) -> IpAddr {
        self.address
    }

    /// For an IPv6 form carrying an IPv4 address: the form and the IPv4 address that was refused.
    pub fn embedded(&self) -> Option<(Embedding, Ipv4Addr)> {
        self.embedded
    }

    /// The refused range the address (or its embedded IPv4 address) falls in.
    pub fn network(&self) -> IpNet {
        self.network
    }

    /// The kind of the refused range.
    pub fn kind(&self) -> RangeKind {
        self.kind
    }
}

impl fmt::Display for ForbiddenAddress {
    /// E.g. `10.0.0.1 is a private address (10.0.0.0/8)`, or
    /// `::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1, a private address (10.0.0.0/8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is ", self.address)?;
        if let Some((embedding, v4)) = self.embedded {
            write!(f, "{} of {v4}, ", embedding.description())?;
        }
        write!(f, "{} ({})", self.kind.description(), self.network)
    }
}

/// Refused IPv4 ranges as (network, prefix length, kind); the first match wins, so more specific
/// entries come before the ranges containing them.
const IPV4_FORBIDDEN: [(u32, u8, RangeKind); 16] = [
    (0x0000_0000, 32, RangeKind::Unspecified),
    (0x0000_0000, 8, RangeKind::ThisNetwork),
    (0x0a00_0000, 8, RangeKind::Private),
    (0x6440_0000, 10, RangeKind::SharedAddressSpace),
    (0x7f00_0000, 8, RangeKind::Loopback),
    (0xa9fe_0000, 16, RangeKind::LinkLocal),
    (0xac10_0000, 12, RangeKind::Private),
    (0xc000_0000, 24, RangeKind::IetfProtocolAssignments),
    (0xc000_0200, 24, RangeKind::Documentation),
    (0xc0a8_0000, 16, RangeKind::Private),
    (0xc612_0000, 15, RangeKind::Benchmarking),
    (0xc633_6400, 24, RangeKind::Documentation),
    (0xcb00_7100, 24, RangeKind::Documentation),
    (0xe000_0000, 4, RangeKind::Multicast),
    (0xffff_ffff, 32, RangeKind::Broadcast),
    (0xf000_0000, 4, RangeKind::Reserved),
];

/// Refused IPv6 ranges (after IPv4-mapped addresses and the embedding prefixes are handled);
/// the first match wins.
const IPV6_FORBIDDEN: [(u128, u8, RangeKind); 15] = [
    (0, 128, RangeKind::Unspecified),
    (1, 128, RangeKind::Loopback),
    (0, 96, RangeKind::Ipv4Compatible),
    (0x0064_ff9b_0001 << 80, 48, RangeKind::Nat64LocalUse),
    (0x0100 << 112, 64, RangeKind::DiscardOnly),
    (0x2001 << 112, 32, RangeKind::Teredo),
    (0x2001_0002 << 96, 48, RangeKind::Benchmarking),
    (0x2001 << 112, 23, RangeKind::IetfProtocolAssignments),
    (0x2001_0db8 << 96, 32, RangeKind::Documentation),
    (0x3fff << 112, 20, RangeKind::Documentation),
    (0xfc00 << 112, 7, RangeKind::UniqueLocal),
    (0xfe80 << 112, 10, RangeKind::LinkLocal),
    (0xfec0 << 112, 10, RangeKind::SiteLocal),
    (0xff00 << 112, 8, RangeKind::Multicast),
    (0x2000 << 112, 3, RangeKind::NotGlobalUnicast),
];

/// `64:ff9b::/96`, the NAT64 well-known prefix.
const NAT64_WELL_KNOWN: (u128, u8) = (0x0064_ff9b << 96, 96);
/// `2002::/16`, 6to4.
const SIX_TO_FOUR: (u128, u8) = (0x2002 << 112, 16);

const fn v4_in(addr: u32, network: u32, prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    addr & mask == network
}

const fn v6_in(addr: u128, network: u128, prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    addr & mask == network
}

fn v4_net(network: u32, prefix: u8) -> IpNet {
    IpNet::V4(
        Ipv4Net::new(Ipv4Addr::from(network), prefix)
            .expect("the IPv4 table holds prefix lengths of at most 32"),
    )
}

fn v6_net(network: u128, prefix: u8) -> IpNet {
    IpNet::V6(
        Ipv6Net::new(Ipv6Addr::from(network), prefix)
            .expect("the IPv6 table holds prefix lengths of at most 128"),
    )
}

/// The refused range `v4` falls in, if any; loopback is allowed when `allow_loopback`.
fn forbidden_v4(v4: Ipv4Addr, allow_loopback: bool) -> Option<(IpNet, RangeKind)> {
    let bits = u32::from(v4);
    IPV4_FORBIDDEN
        .iter()
        .find(|(network, prefix, _)| v4_in(bits, *network, *prefix))
        .filter(|(_, _, kind)| !(allow_loopback && *kind == RangeKind::Loopback))
        .map(|&(network, prefix, kind)| (v4_net(network, prefix), kind))
}

/// Checks that a callback may be delivered to `ip` under `policy`.
///
/// IPv4-mapped IPv6 addresses are judged as their IPv4 address (see the module documentation
/// for NAT64, 6to4 and the other embedded forms). With [`AddressPolicy::allow_local`] loopback
/// addresses pass; everything else refused stays refused.
pub fn check_ip(ip: IpAddr, policy: AddressPolicy) -> Result<(), ForbiddenAddress> {
    let refuse = |embedded, (network, kind)| ForbiddenAddress {
        address: ip,
        embedded,
        network,
        kind,
    };
    match ip {
        IpAddr::V4(v4) => match forbidden_v4(v4, policy.allow_local) {
            Some(found) => Err(refuse(None, found)),
            None => Ok(()),
        },
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return match forbidden_v4(v4, policy.allow_local) {
                    Some(found) => Err(refuse(Some((Embedding::Ipv4Mapped, v4)), found)),
                    None => Ok(()),
                };
            }
            let bits = u128::from(v6);
            let embedded = if v6_in(bits, NAT64_WELL_KNOWN.0, NAT64_WELL_KNOWN.1) {
                // The IPv4 address is the last 32 bits (RFC 6052, /96 prefix).
                Some((Embedding::Nat64, Ipv4Addr::from(bits as u32)))
            } else if v6_in(bits, SIX_TO_FOUR.0, SIX_TO_FOUR.1) {
                // The IPv4 address follows the 16-bit prefix (RFC 3056).
                Some((Embedding::SixToFour, Ipv4Addr::from((bits >> 80) as u32)))
            } else {
                None
            };
            if let Some((embedding, v4)) = embedded {
                // Through a translator or a tunnel, loopback is not this host's loopback.
                return match forbidden_v4(v4, false) {
                    Some(found) => Err(refuse(Some((embedding, v4)), found)),
                    None => Ok(()),
                };
            }
            let found = IPV6_FORBIDDEN.iter().find(|(network, prefix, kind)| {
                let inside = v6_in(bits, *network, *prefix);
                // The last entry lists the one range that is allowed: refuse what is outside it.
                if *kind == RangeKind::NotGlobalUnicast {
                    !inside
                } else {
                    inside
                }
            });
            match found {
                Some(&(_, _, RangeKind::Loopback)) if policy.allow_local => Ok(()),
                Some(&(network, prefix, kind)) => {
                    Err(refuse(None, (v6_net(network, prefix), kind)))
                }
                None => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str, policy: AddressPolicy) -> ForbiddenAddress {
        let addr: IpAddr = ip.parse().expect("test addresses are valid");
        match check_ip(addr, policy) {
            Err(e) => e,
            Ok(()) => panic!("{ip} was accepted"),
        }
    }

    #[test]
    fn refuses_every_listed_range_with_its_network() {
        let table: &[(&str, RangeKind, &str)] = &[
            ("0.0.0.0", RangeKind::Unspecified, "0.0.0.0/32"),
            ("0.1.2.3", RangeKind::ThisNetwork, "0.0.0.0/8"),
            ("10.0.0.1", RangeKind::Private, "10.0.0.0/8"),
            ("10.255.255.255", RangeKind::Private, "10.0.0.0/8"),
            ("172.16.0.1", RangeKind::Private, "172.16.0.0/12"),
            ("172.31.255.254", RangeKind::Private, "172.16.0.0/12"),
            ("192.168.1.1", RangeKind::Private, "192.168.0.0/16"),
            ("127.0.0.1", RangeKind::Loopback, "127.0.0.0/8"),
            ("127.255.0.9", RangeKind::Loopback, "127.0.0.0/8"),
            ("169.254.169.254", RangeKind::LinkLocal, "169.254.0.0/16"),
            ("100.64.0.1", RangeKind::SharedAddressSpace, "100.64.0.0/10"),
            (
                "100.127.255.255",
                RangeKind::SharedAddressSpace,
                "100.64.0.0/10",
            ),
            (
                "192.0.0.8",
                RangeKind::IetfProtocolAssignments,
                "192.0.0.0/24",
            ),
            ("192.0.2.1", RangeKind::Documentation, "192.0.2.0/24"),
            ("198.51.100.7", RangeKind::Documentation, "198.51.100.0/24"),
            ("203.0.113.9", RangeKind::Documentation, "203.0.113.0/24"),
            ("198.18.0.1", RangeKind::Benchmarking, "198.18.0.0/15"),
            ("198.19.255.255", RangeKind::Benchmarking, "198.18.0.0/15"),
            ("224.0.0.1", RangeKind::Multicast, "224.0.0.0/4"),
            ("239.255.255.250", RangeKind::Multicast, "224.0.0.0/4"),
            ("240.0.0.1", RangeKind::Reserved, "240.0.0.0/4"),
            ("255.255.255.254", RangeKind::Reserved, "240.0.0.0/4"),
            (
                "255.255.255.255",
                RangeKind::Broadcast,
                "255.255.255.255/32",
            ),
            ("::", RangeKind::Unspecified, "::/128"),
            ("::1", RangeKind::Loopback, "::1/128"),
            ("::a00:1", RangeKind::Ipv4Compatible, "::/96"),
            (
                "64:ff9b:1::a00:1",
                RangeKind::Nat64LocalUse,
                "64:ff9b:1::/48",
            ),
            ("100::1", RangeKind::DiscardOnly, "100::/64"),
            ("2001:0:4136:e378::1", RangeKind::Teredo, "2001::/32"),
            ("2001:2::1", RangeKind::Benchmarking, "2001:2::/48"),
            (
                "2001:10::1",
                RangeKind::IetfProtocolAssignments,
                "2001::/23",
            ),
            ("2001:db8::1", RangeKind::Documentation, "2001:db8::/32"),
            ("3fff::1", RangeKind::Documentation, "3fff::/20"),
            ("fc00::1", RangeKind::UniqueLocal, "fc00::/7"),
            ("fd12:3456::1", RangeKind::UniqueLocal, "fc00::/7"),
            ("fe80::1", RangeKind::LinkLocal, "fe80::/10"),
            ("febf::1", RangeKind::LinkLocal, "fe80::/10"),
            ("fec0::1", RangeKind::SiteLocal, "fec0::/10"),
            ("ff02::1", RangeKind::Multicast, "ff00::/8"),
            ("::ffff:0:0:1", RangeKind::NotGlobalUnicast, "2000::/3"),
            ("4000::1", RangeKind::NotGlobalUnicast, "2000::/3"),
        ];
        for &(ip, kind, network) in table {
            let e = refused(ip, AddressPolicy::STRICT);
            assert_eq!(
                (e.kind(), e.network().to_string().as_str()),
                (kind, network),
                "{ip}"
            );
            assert_eq!(e.embedded(), None, "{ip}");
        }
    }

    #[test]
    fn judges_embedded_ipv4_by_the_address_inside() {
        let table: &[(&str, Embedding, &str, RangeKind, &str)] = &[
            (
                "::ffff:10.0.0.1",
                Embedding::Ipv4Mapped,
                "10.0.0.1",
                RangeKind::Private,
                "10.0.0.0/8",
            ),
            (
                "::ffff:7f00:1",
                Embedding::Ipv4Mapped,
                "127.0.0.1",
                RangeKind::Loopback,
                "127.0.0.0/8",
            ),
            (
                "::ffff:169.254.169.254",
                Embedding::Ipv4Mapped,
                "169.254.169.254",
                RangeKind::LinkLocal,
                "169.254.0.0/16",
            ),
            (
                "64:ff9b::a00:1",
                Embedding::Nat64,
                "10.0.0.1",
                RangeKind::Private,
                "10.0.0.0/8",
            ),
            (
                "64:ff9b::7f00:1",
                Embedding::Nat64,
                "127.0.0.1",
                RangeKind::Loopback,
                "127.0.0.0/8",
            ),
            (
                "64:ff9b::100.64.0.1",
                Embedding::Nat64,
                "100.64.0.1",
                RangeKind::SharedAddressSpace,
                "100.64.0.0/10",
            ),
            (
                "2002:c0a8:101::1",
                Embedding::SixToFour,
                "192.168.1.1",
                RangeKind::Private,
                "192.168.0.0/16",
            ),
            (
                "2002:7f00:1::",
                Embedding::SixToFour,
                "127.0.0.1",
                RangeKind::Loopback,
                "127.0.0.0/8",
            ),
        ];
        for &(ip, embedding, v4, kind, network) in table {
            let e = refused(ip, AddressPolicy::STRICT);
            let v4: Ipv4Addr = v4.parse().expect("test addresses are valid");
            assert_eq!(e.embedded(), Some((embedding, v4)), "{ip}");
            assert_eq!(
                (e.kind(), e.network().to_string().as_str()),
                (kind, network),
                "{ip}"
            );
        }
    }

    #[test]
    fn accepts_public_addresses_and_their_embedded_forms() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.255",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            let addr: IpAddr = ip.parse().expect("test addresses are valid");
            assert_eq!(check_ip(addr, AddressPolicy::STRICT), Ok(()), "{ip}");
        }
    }

    #[test]
    fn local_development_allows_loopback_only() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            let addr: IpAddr = ip.parse().expect("test addresses are valid");
            assert_eq!(
                check_ip(addr, AddressPolicy::LOCAL_DEVELOPMENT),
                Ok(()),
                "{ip}"
            );
            assert!(check_ip(addr, AddressPolicy::STRICT).is_err(), "{ip}");
        }
        for (ip, kind) in [
            ("10.0.0.1", RangeKind::Private),
            ("169.254.169.254", RangeKind::LinkLocal),
            ("0.0.0.0", RangeKind::Unspecified),
            ("fd00::1", RangeKind::UniqueLocal),
            ("64:ff9b::7f00:1", RangeKind::Loopback),
            ("2002:7f00:1::", RangeKind::Loopback),
        ] {
            assert_eq!(
                refused(ip, AddressPolicy::LOCAL_DEVELOPMENT).kind(),
                kind,
                "{ip}"
            );
        }
    }

    #[test]
    fn messages_name_the_address_range_and_reason() {
        assert_eq!(
            refused("10.0.0.1", AddressPolicy::STRICT).to_string(),
            "10.0.0.1 is a private address (10.0.0.0/8)"
        );
        assert_eq!(
            refused("::ffff:10.0.0.1", AddressPolicy::STRICT).to_string(),
            "::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1, a private address (10.0.0.0/8)"
        );
        assert_eq!(
            refused("64:ff9b::a9fe:a9fe", AddressPolicy::STRICT).to_string(),
            "64:ff9b::a9fe:a9fe is a NAT64 form of 169.254.169.254, \
             a link-local address (169.254.0.0/16)"
        );
        assert_eq!(
            refused("4000::1", AddressPolicy::STRICT).to_string(),
            "4000::1 is not in the IPv6 global unicast range (2000::/3)"
        );
    }

    #[test]
    fn tables_are_well_formed() {
        // Every network is its own masked form, so that `v4_in`/`v6_in` can match it at all.
        for (network, prefix, kind) in IPV4_FORBIDDEN {
            assert!(v4_in(network, network, prefix), "{kind:?}");
            assert!(prefix <= 32);
        }
        for (network, prefix, kind) in IPV6_FORBIDDEN {
            assert!(v6_in(network, network, prefix), "{kind:?}");
            assert!(prefix <= 128);
        }
    }
}

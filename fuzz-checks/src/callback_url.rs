//! `callback_url` through [`CallbackUrl::parse`], under the production address policy and the
//! local-development one.
//!
//! Properties of an accepted URL:
//! - its normalised form parses again to the same URL (what is stored loads again);
//! - it has at most 2048 characters, no whitespace or control character, no credentials, no
//!   fragment, no port 0, scheme `https` (or `http` in local development), a non-empty host;
//! - a DNS host is lower-case ASCII (IDNA applied), not `localhost` in production, and is not
//!   an IPv4 or IPv6 literal in disguise;
//! - an IP host passes `check_ip`, and in production is none of what the standard library
//!   calls private, loopback, link-local, unspecified, multicast, broadcast, documentation,
//!   unique-local (IPv4-mapped addresses judged as IPv4);
//! - it serialises to the JSON string of its normalised form;
//! - what production accepts, local development accepts identically.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use payments_core::callback::{check_ip, AddressPolicy, CallbackHost, CallbackUrl, MAX_URL_LENGTH};

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let strict = CallbackUrl::parse(input, AddressPolicy::STRICT);
    let local = CallbackUrl::parse(input, AddressPolicy::LOCAL_DEVELOPMENT);
    assert_eq!(
        strict,
        CallbackUrl::parse(input, AddressPolicy::STRICT),
        "deterministic"
    );
    if let Ok(url) = &strict {
        assert_eq!(
            local.as_ref(),
            Ok(url),
            "production accepts what local development does not"
        );
        accepted(url, AddressPolicy::STRICT);
    }
    if let Ok(url) = &local {
        accepted(url, AddressPolicy::LOCAL_DEVELOPMENT);
    }
}

fn accepted(url: &CallbackUrl, policy: AddressPolicy) {
    let s = url.as_str();
    assert_eq!(
        CallbackUrl::parse(s, policy).as_ref(),
        Ok(url),
        "the normalised form does not load again: {s}"
    );
    assert!(s.chars().count() <= MAX_URL_LENGTH, "{s}");
    assert!(
        !s.chars().any(|c| c.is_whitespace() || c.is_control()),
        "{s}"
    );
    let parsed = url::Url::parse(s).expect("the normalised form is a URL");
    assert!(
        parsed.username().is_empty() && parsed.password().is_none(),
        "credentials: {s}"
    );
    assert!(parsed.fragment().is_none(), "fragment: {s}");
    assert_ne!(parsed.port(), Some(0), "{s}");
    assert_ne!(url.port_or_default(), 0, "{s}");
    match parsed.scheme() {
        "https" => assert!(url.is_https()),
        "http" => assert!(policy.allow_local && !url.is_https(), "http: {s}"),
        other => panic!("scheme {other}: {s}"),
    }
    match url.host() {
        CallbackHost::Domain(domain) => {
            let name = domain.strip_suffix('.').unwrap_or(domain);
            assert!(!name.is_empty(), "empty host: {s}");
            assert!(
                domain
                    .bytes()
                    .all(|b| b.is_ascii() && !b.is_ascii_uppercase()),
                "host not lower-case ASCII: {s}"
            );
            if !policy.allow_local {
                assert!(
                    name != "localhost" && !name.ends_with(".localhost"),
                    "local name: {s}"
                );
            }
            assert!(
                name.parse::<Ipv4Addr>().is_err()
                    && name
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<Ipv6Addr>()
                        .is_err(),
                "an IP literal taken for a name: {s}"
            );
        }
        CallbackHost::Ip(ip) => {
            assert_eq!(check_ip(ip, policy), Ok(()), "{s}");
            if !policy.allow_local {
                assert!(!std_says_local(ip), "a non-public address accepted: {s}");
            }
        }
        _ => {}
    }
    assert_eq!(
        serde_json::to_string(url).expect("a URL serialises"),
        serde_json::to_string(s).expect("a string serialises")
    );
}

/// The standard library's own view of addresses no callback should go to.
fn std_says_local(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || first & 0xfe00 == 0xfc00
                || first & 0xffc0 == 0xfe80
        }
    }
}

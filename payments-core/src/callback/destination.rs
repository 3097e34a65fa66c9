//! The callback destination: a validated [`CallbackUrl`] and the precedence of the payment,
//! project and merchant URLs.
//!
//! Rules (spec "Destination URL" and the `callback_url` field; `decisions.md` "Callbacks"):
//! absolute `https://`, at most [`MAX_URL_LENGTH`] characters, no credentials, a host that is
//! not `localhost`, and an IP-literal host that passes [`check_ip`]. A DNS name cannot be judged
//! without resolving it, so it is accepted here; the HTTP adapter's resolver checks every
//! resolved address with [`check_ip`] at connect time.
//!
//! Decisions taken where the spec is silent:
//! - A fragment (`#...`) is refused: it is never sent to the receiver, so it can only be a
//!   mistake, and refusing it keeps the stored URL equal to the URL requested.
//! - Whitespace and control characters anywhere are refused, although the WHATWG parser would
//!   silently strip or drop some of them: what is stored is what the merchant sent.
//! - Port 0 is refused: nothing can be connected to on it.
//! - The length limit applies both to the input and to its normalised form (IDNA and
//!   percent-encoding can make the normalised form longer), which is what is stored and used.
//! - IPv4 hosts written in decimal, hexadecimal or octal (`https://2130706433/`,
//!   `https://0x7f.1/`) are normalised by the WHATWG parser to dotted IPv4 and checked as such;
//!   one in a refused range is refused as that address, any other is refused as ambiguous
//!   (below).
//! - A URL that parsers read differently is refused ([`CallbackUrlError::Ambiguous`],
//!   [`CallbackUrlError::NotAbsolute`], [`CallbackUrlError::MissingHost`],
//!   [`CallbackUrlError::Credentials`]), so that the stored URL is the one sent, up to the
//!   harmless normalisation of every parser (scheme and host case, IDNA, an empty path as `/`,
//!   the default port dropped, percent-encoding of the path): no `//` right after the scheme
//!   (`https:example.com`), an empty authority (`https:///cb`, which the WHATWG parser reads
//!   as host `cb`), a backslash anywhere (read as `/` by the WHATWG parser only), an `@` in
//!   the authority even with empty credentials (`https://:@example.com/`, whose `:@` the
//!   WHATWG parser drops), a percent-encoded host, and an IPv4 host not written as four
//!   decimal numbers.

use std::fmt;
use std::net::IpAddr;

use serde::{Serialize, Serializer};
use url::{Host, Url};

use super::address::{check_ip, AddressPolicy, ForbiddenAddress};

/// The maximum length of a callback URL, in characters.
pub const MAX_URL_LENGTH: usize = 2048;

/// Why a callback URL was refused. The message is returned in a `400 bad_request`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackUrlError {
    /// Longer than [`MAX_URL_LENGTH`] characters.
    #[error("callback_url must be at most {max} characters (got {length})", max = MAX_URL_LENGTH)]
    TooLong {
        /// The length found, in characters.
        length: usize,
    },
    /// Contains whitespace or a control character.
    #[error("callback_url must not contain whitespace or control characters")]
    Whitespace,
    /// Not an absolute URL.
    #[error("callback_url must be an absolute https:// URL")]
    NotAbsolute,
    /// Not a URL at all.
    #[error("callback_url is not a valid URL: {reason}")]
    Invalid {
        /// The parser's reason.
        reason: String,
    },
    /// A scheme other than `https` (or `http` under the development setting).
    #[error("callback_url must use https (got {scheme}://)")]
    SchemeNotAllowed {
        /// The scheme found, lower-case.
        scheme: String,
    },
    /// Userinfo (`user:password@`) present.
    #[error("callback_url must not contain credentials")]
    Credentials,
    /// No host.
    #[error("callback_url must have a host")]
    MissingHost,
    /// `localhost` or a name under `.localhost`.
    #[error("callback_url host {host} is a local name")]
    Localhost {
        /// The host found.
        host: String,
    },
    /// A fragment (`#...`) present.
    #[error("callback_url must not contain a fragment (#...)")]
    Fragment,
    /// Port 0.
    #[error("callback_url port must not be 0")]
    PortZero,
    /// An IP-literal host in a refused range.
    #[error("callback_url host {0}")]
    ForbiddenAddress(ForbiddenAddress),
    /// A spelling that URL parsers read differently (a backslash, a percent-encoded host, an
    /// IPv4 host not written as `a.b.c.d`).
    #[error("callback_url is read differently by different URL parsers: {0}")]
    Ambiguous(&'static str),
}

/// The host of a [`CallbackUrl`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackHost<'a> {
    /// A DNS name, lower-case ASCII (IDNA applied); every address it resolves to must pass
    /// [`check_ip`] at connect time.
    Domain(&'a str),
    /// An IP literal, already checked with [`check_ip`].
    Ip(IpAddr),
}

/// A callback URL that passed [`CallbackUrl::parse`], in its normalised form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallbackUrl(Url);

/// The host a callback may go to under `policy`: a name (not `localhost` unless local
/// addresses are allowed) or an address [`check_ip`] accepts.
fn check_host(url: &Url, policy: AddressPolicy) -> Result<(), CallbackUrlError> {
    match url.host() {
        None => return Err(CallbackUrlError::MissingHost),
        Some(Host::Domain(domain)) => {
            // A trailing dot names the same host ("localhost." is localhost).
            let name = domain.strip_suffix('.').unwrap_or(domain);
            if name.is_empty() {
                return Err(CallbackUrlError::MissingHost);
            }
            let local = name == "localhost" || name.ends_with(".localhost");
            if local && !policy.allow_local {
                return Err(CallbackUrlError::Localhost {
                    host: domain.to_owned(),
                });
            }
        }
        Some(Host::Ipv4(v4)) => {
            check_ip(IpAddr::V4(v4), policy).map_err(CallbackUrlError::ForbiddenAddress)?
        }
        Some(Host::Ipv6(v6)) => {
            check_ip(IpAddr::V6(v6), policy).map_err(CallbackUrlError::ForbiddenAddress)?
        }
    }
    Ok(())
}

/// The host as written: not percent-encoded, and an IPv4 address as four decimal numbers.
fn check_written_host(url: &Url, authority: &str) -> Result<(), CallbackUrlError> {
    if authority.contains('%') {
        return Err(CallbackUrlError::Ambiguous("a percent-encoded host"));
    }
    if let Some(Host::Ipv4(v4)) = url.host() {
        let written = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _port)| host);
        if written != v4.to_string() {
            return Err(CallbackUrlError::Ambiguous(
                "an IPv4 host must be written as four decimal numbers (a.b.c.d)",
            ));
        }
    }
    Ok(())
}

impl CallbackUrl {
    /// Validates `s` as a callback destination under `policy`.
    ///
    /// A stored URL is loaded through this function again, with the policy in force, so a
    /// loopback URL accepted under the development setting is refused once it is off.
    pub fn parse(s: &str, policy: AddressPolicy) -> Result<CallbackUrl, CallbackUrlError> {
        let length = s.chars().count();
        if length > MAX_URL_LENGTH {
            return Err(CallbackUrlError::TooLong { length });
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(CallbackUrlError::Whitespace);
        }
        let url = Url::parse(s).map_err(|e| match e {
            url::ParseError::RelativeUrlWithoutBase => CallbackUrlError::NotAbsolute,
            other => CallbackUrlError::Invalid {
                reason: other.to_string(),
            },
        })?;
        match url.scheme() {
            "https" => {}
            "http" if policy.allow_local => {}
            other => {
                return Err(CallbackUrlError::SchemeNotAllowed {
                    scheme: other.to_owned(),
                })
            }
        }
        // The URL as written, before the WHATWG parser's repairs: `//`, a non-empty authority
        // without `@`, no backslash.
        if s.contains('\\') {
            return Err(CallbackUrlError::Ambiguous("a backslash"));
        }
        let after_scheme = s.split_once(':').map_or("", |(_, rest)| rest);
        let Some(after_slashes) = after_scheme.strip_prefix("//") else {
            return Err(CallbackUrlError::NotAbsolute);
        };
        let authority = after_slashes
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        if authority.is_empty() {
            return Err(CallbackUrlError::MissingHost);
        }
        if authority.contains('@') || !url.username().is_empty() || url.password().is_some() {
            return Err(CallbackUrlError::Credentials);
        }
        if url.fragment().is_some() {
            return Err(CallbackUrlError::Fragment);
        }
        if url.port() == Some(0) {
            return Err(CallbackUrlError::PortZero);
        }
        check_host(&url, policy)?;
        // After the address check, so that a refused address is named as such whatever its
        // spelling.
        check_written_host(&url, authority)?;
        let length = url.as_str().chars().count();
        if length > MAX_URL_LENGTH {
            return Err(CallbackUrlError::TooLong { length });
        }
        Ok(CallbackUrl(url))
    }

    /// The normalised URL, as stored and as requested.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The host: a DNS name to resolve (and check each address of), or a checked IP literal.
    pub fn host(&self) -> CallbackHost<'_> {
        match self.0.host() {
            Some(Host::Domain(domain)) => CallbackHost::Domain(domain),
            Some(Host::Ipv4(v4)) => CallbackHost::Ip(IpAddr::V4(v4)),
            Some(Host::Ipv6(v6)) => CallbackHost::Ip(IpAddr::V6(v6)),
            None => unreachable!("CallbackUrl::parse refuses URLs without a host"),
        }
    }

    /// The port to connect to: the explicit port, else 443 for `https` and 80 for `http`.
    pub fn port_or_default(&self) -> u16 {
        self.0
            .port_or_known_default()
            .expect("CallbackUrl::parse admits only http and https, which have default ports")
    }

    /// Whether the scheme is `https` (only the development setting admits `http`).
    pub fn is_https(&self) -> bool {
        self.0.scheme() == "https"
    }
}

impl fmt::Display for CallbackUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CallbackUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The destination of a payment's callbacks: the first defined of the payment's `callback_url`,
/// the project's callback URL and the merchant's common callback URL. `None` means no callback
/// is sent.
pub fn resolve_destination<'a>(
    payment: Option<&'a CallbackUrl>,
    project: Option<&'a CallbackUrl>,
    merchant: Option<&'a CallbackUrl>,
) -> Option<&'a CallbackUrl> {
    payment.or(project).or(merchant)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use crate::ApiError;

    use super::super::address::RangeKind;
    use super::*;

    const STRICT: AddressPolicy = AddressPolicy::STRICT;
    const LOCAL: AddressPolicy = AddressPolicy::LOCAL_DEVELOPMENT;

    fn refused(s: &str, policy: AddressPolicy) -> CallbackUrlError {
        match CallbackUrl::parse(s, policy) {
            Err(e) => e,
            Ok(url) => panic!("{s} was accepted as {url}"),
        }
    }

    /// The kind of the refused range, or `None` for a refusal of another sort.
    fn range_of(e: &CallbackUrlError) -> Option<RangeKind> {
        match e {
            CallbackUrlError::ForbiddenAddress(f) => Some(f.kind()),
            _ => None,
        }
    }

    #[test]
    fn refuses_forbidden_ip_literals_in_every_spelling() {
        let table: &[(&str, RangeKind, &str)] = &[
            ("https://10.0.0.1/", RangeKind::Private, "10.0.0.1"),
            ("https://172.16.5.4/cb", RangeKind::Private, "172.16.5.4"),
            (
                "https://192.168.0.10:8443/",
                RangeKind::Private,
                "192.168.0.10",
            ),
            ("https://127.0.0.1/", RangeKind::Loopback, "127.0.0.1"),
            ("https://127.0.0.1./", RangeKind::Loopback, "127.0.0.1"),
            (
                "https://169.254.169.254/latest/meta-data",
                RangeKind::LinkLocal,
                "169.254.169.254",
            ),
            (
                "https://100.64.0.1/",
                RangeKind::SharedAddressSpace,
                "100.64.0.1",
            ),
            ("https://0.0.0.0/", RangeKind::Unspecified, "0.0.0.0"),
            ("https://224.0.0.1/", RangeKind::Multicast, "224.0.0.1"),
            (
                "https://255.255.255.255/",
                RangeKind::Broadcast,
                "255.255.255.255",
            ),
            ("https://192.0.2.1/", RangeKind::Documentation, "192.0.2.1"),
            ("https://198.18.0.1/", RangeKind::Benchmarking, "198.18.0.1"),
            ("https://[::1]/", RangeKind::Loopback, "::1"),
            ("https://[::]/", RangeKind::Unspecified, "::"),
            ("https://[fd00::1]/", RangeKind::UniqueLocal, "fd00::1"),
            ("https://[fe80::1]/", RangeKind::LinkLocal, "fe80::1"),
            ("https://[fec0::1]/", RangeKind::SiteLocal, "fec0::1"),
            ("https://[ff02::1]/", RangeKind::Multicast, "ff02::1"),
            (
                "https://[2001:db8::1]/",
                RangeKind::Documentation,
                "2001:db8::1",
            ),
            (
                "https://[::ffff:10.0.0.1]/",
                RangeKind::Private,
                "::ffff:10.0.0.1",
            ),
            (
                "https://[::ffff:7f00:1]/",
                RangeKind::Loopback,
                "::ffff:127.0.0.1",
            ),
            (
                "https://[64:ff9b::a00:1]/",
                RangeKind::Private,
                "64:ff9b::a00:1",
            ),
            (
                "https://[2002:a00:1::1]/",
                RangeKind::Private,
                "2002:a00:1::1",
            ),
            ("https://[2001::1]/", RangeKind::Teredo, "2001::1"),
            // Decimal, hexadecimal and octal IPv4 spellings, normalised by the WHATWG parser.
            ("https://2130706433/", RangeKind::Loopback, "127.0.0.1"),
            ("https://0x7f000001/", RangeKind::Loopback, "127.0.0.1"),
            ("https://0x7f.1/", RangeKind::Loopback, "127.0.0.1"),
            ("https://0177.0.0.1/", RangeKind::Loopback, "127.0.0.1"),
            ("https://017700000001/", RangeKind::Loopback, "127.0.0.1"),
            ("https://167772161/", RangeKind::Private, "10.0.0.1"),
            (
                "https://0xa9.0xfe.0xa9.0xfe/",
                RangeKind::LinkLocal,
                "169.254.169.254",
            ),
            ("https://127.1/", RangeKind::Loopback, "127.0.0.1"),
            ("https://%31%32%37.0.0.1/", RangeKind::Loopback, "127.0.0.1"),
            (
                "https://[0:0:0:0:0:ffff:a9fe:a9fe]/",
                RangeKind::LinkLocal,
                "::ffff:169.254.169.254",
            ),
        ];
        for &(url, kind, address) in table {
            let e = refused(url, STRICT);
            let CallbackUrlError::ForbiddenAddress(f) = &e else {
                panic!("{url}: refused for another reason: {e}");
            };
            assert_eq!(f.kind(), kind, "{url}");
            assert_eq!(f.address().to_string(), address, "{url}");
            // The same address is refused by check_ip directly.
            assert_eq!(
                check_ip(f.address(), STRICT).map_err(|e| e.kind()),
                Err(kind),
                "{url}"
            );
        }
    }

    #[test]
    fn refuses_urls_that_break_the_other_rules() {
        let long = format!("https://merchant.example.com/{}", "a".repeat(2020));
        assert_eq!(long.len(), 2049);
        let table: &[(&str, CallbackUrlError)] = &[
            (
                "https://user:pw@example.com/",
                CallbackUrlError::Credentials,
            ),
            ("https://user@example.com/", CallbackUrlError::Credentials),
            ("https://:pw@example.com/", CallbackUrlError::Credentials),
            // Empty credentials, which the WHATWG parser drops ("stored without the :@").
            ("https://:@example.com/", CallbackUrlError::Credentials),
            ("https://@example.com/", CallbackUrlError::Credentials),
            // No authority: the WHATWG parser would take the path as the host.
            ("https:///cb", CallbackUrlError::MissingHost),
            ("https:////example.com/", CallbackUrlError::MissingHost),
            ("https:example.com/cb", CallbackUrlError::NotAbsolute),
            ("https:/example.com/cb", CallbackUrlError::NotAbsolute),
            (
                "https:\\\\example.com\\cb",
                CallbackUrlError::Ambiguous("a backslash"),
            ),
            (
                "https://example.com\\@evil.example/",
                CallbackUrlError::Ambiguous("a backslash"),
            ),
            (
                "https://ex%61mple.com/",
                CallbackUrlError::Ambiguous("a percent-encoded host"),
            ),
            (
                "https://134744072/",
                CallbackUrlError::Ambiguous(
                    "an IPv4 host must be written as four decimal numbers (a.b.c.d)",
                ),
            ),
            (
                "https://8.8.8.8./",
                CallbackUrlError::Ambiguous(
                    "an IPv4 host must be written as four decimal numbers (a.b.c.d)",
                ),
            ),
            (
                "https://0x8.8.8.8:8443/",
                CallbackUrlError::Ambiguous(
                    "an IPv4 host must be written as four decimal numbers (a.b.c.d)",
                ),
            ),
            (
                "http://example.com/",
                CallbackUrlError::SchemeNotAllowed {
                    scheme: "http".into(),
                },
            ),
            (
                "ftp://example.com/cb",
                CallbackUrlError::SchemeNotAllowed {
                    scheme: "ftp".into(),
                },
            ),
            (
                "ws://example.com/cb",
                CallbackUrlError::SchemeNotAllowed {
                    scheme: "ws".into(),
                },
            ),
            (
                "https://localhost/",
                CallbackUrlError::Localhost {
                    host: "localhost".into(),
                },
            ),
            (
                "https://LOCALHOST./",
                CallbackUrlError::Localhost {
                    host: "localhost.".into(),
                },
            ),
            (
                "https://api.localhost:8443/cb",
                CallbackUrlError::Localhost {
                    host: "api.localhost".into(),
                },
            ),
            ("/callbacks/payments", CallbackUrlError::NotAbsolute),
            ("merchant.example.com/cb", CallbackUrlError::NotAbsolute),
            ("https://example.com/cb#frag", CallbackUrlError::Fragment),
            ("https://example.com/cb#", CallbackUrlError::Fragment),
            ("https://example.com:0/cb", CallbackUrlError::PortZero),
            (" https://example.com/", CallbackUrlError::Whitespace),
            ("https://exa\tmple.com/", CallbackUrlError::Whitespace),
            ("https://example.com/\n", CallbackUrlError::Whitespace),
            (long.as_str(), CallbackUrlError::TooLong { length: 2049 }),
        ];
        for (url, expected) in table {
            assert_eq!(&refused(url, STRICT), expected, "{url}");
        }
        assert!(matches!(
            refused("https://[::1/", STRICT),
            CallbackUrlError::Invalid { .. }
        ));
        assert!(matches!(
            refused("https://256.0.0.1/", STRICT),
            CallbackUrlError::Invalid { .. }
        ));
    }

    #[test]
    fn length_limit_is_inclusive_and_counts_the_normalised_form() {
        let exactly = format!("https://merchant.example.com/{}", "a".repeat(2019));
        assert_eq!(exactly.len(), 2048);
        assert_eq!(
            CallbackUrl::parse(&exactly, STRICT).map(|u| u.as_str().len()),
            Ok(2048)
        );
        // 700 characters in, but each becomes %C3%A9 (6 characters) when normalised.
        let grows = format!("https://merchant.example.com/{}", "é".repeat(700));
        assert_eq!(
            refused(&grows, STRICT),
            CallbackUrlError::TooLong {
                length: 29 + 700 * 6
            }
        );
    }

    #[test]
    fn accepts_public_destinations() {
        let table: &[(&str, &str, CallbackHost<'_>, u16)] = &[
            (
                "https://merchant.example.com/cb",
                "https://merchant.example.com/cb",
                CallbackHost::Domain("merchant.example.com"),
                443,
            ),
            (
                "https://8.8.8.8/hook",
                "https://8.8.8.8/hook",
                CallbackHost::Ip(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8))),
                443,
            ),
            (
                "https://[2606:4700::1111]/x",
                "https://[2606:4700::1111]/x",
                CallbackHost::Ip(IpAddr::V6("2606:4700::1111".parse().expect("valid"))),
                443,
            ),
            (
                "HTTPS://Merchant.Example.COM:8443/a?b=c",
                "https://merchant.example.com:8443/a?b=c",
                CallbackHost::Domain("merchant.example.com"),
                8443,
            ),
            (
                "https://[::ffff:8.8.8.8]/",
                "https://[::ffff:808:808]/",
                CallbackHost::Ip(IpAddr::V6("::ffff:8.8.8.8".parse().expect("valid"))),
                443,
            ),
            // A DNS name cannot be judged here; the resolver checks its addresses.
            (
                "https://127.0.0.1.nip.io/",
                "https://127.0.0.1.nip.io/",
                CallbackHost::Domain("127.0.0.1.nip.io"),
                443,
            ),
            (
                "https://bücher.example/cb",
                "https://xn--bcher-kva.example/cb",
                CallbackHost::Domain("xn--bcher-kva.example"),
                443,
            ),
        ];
        for &(input, normalised, host, port) in table {
            let url = match CallbackUrl::parse(input, STRICT) {
                Ok(url) => url,
                Err(e) => panic!("{input} refused: {e}"),
            };
            assert_eq!(url.as_str(), normalised);
            assert_eq!(url.host(), host, "{input}");
            assert_eq!(url.port_or_default(), port, "{input}");
            assert!(url.is_https());
        }
    }

    #[test]
    fn local_development_allows_http_and_loopback_only() {
        let url = CallbackUrl::parse("http://127.0.0.1:9000/cb", LOCAL).expect("allowed locally");
        assert_eq!(url.as_str(), "http://127.0.0.1:9000/cb");
        assert_eq!(url.port_or_default(), 9000);
        assert!(!url.is_https());
        let url = CallbackUrl::parse("http://localhost/cb", LOCAL).expect("allowed locally");
        assert_eq!(url.port_or_default(), 80);
        assert!(CallbackUrl::parse("http://[::1]:8080/", LOCAL).is_ok());
        // The setting allows http:// to public hosts too; it never opens other local ranges.
        assert!(CallbackUrl::parse("http://merchant.example.com/cb", LOCAL).is_ok());

        assert_eq!(
            range_of(&refused("http://10.0.0.1/", LOCAL)),
            Some(RangeKind::Private)
        );
        assert_eq!(
            range_of(&refused("https://169.254.169.254/", LOCAL)),
            Some(RangeKind::LinkLocal)
        );
        assert_eq!(
            refused("ftp://127.0.0.1/", LOCAL),
            CallbackUrlError::SchemeNotAllowed {
                scheme: "ftp".into()
            }
        );
        assert_eq!(
            refused("http://u:p@127.0.0.1/", LOCAL),
            CallbackUrlError::Credentials
        );
        // Off by default.
        assert_eq!(AddressPolicy::default(), STRICT);
        assert_eq!(
            range_of(&refused(
                "https://127.0.0.1:9000/cb",
                AddressPolicy::default()
            )),
            Some(RangeKind::Loopback)
        );
    }

    #[test]
    fn messages_are_fit_for_a_bad_request_answer() {
        assert_eq!(
            refused("https://10.0.0.1/", STRICT).to_string(),
            "callback_url host 10.0.0.1 is a private address (10.0.0.0/8)"
        );
        assert_eq!(
            refused("http://example.com/", STRICT).to_string(),
            "callback_url must use https (got http://)"
        );
        assert_eq!(
            refused("https://user:pw@example.com/", STRICT).to_string(),
            "callback_url must not contain credentials"
        );
        assert_eq!(
            refused("https://localhost/", STRICT).to_string(),
            "callback_url host localhost is a local name"
        );
        assert_eq!(
            refused("https://2130706433/", STRICT).to_string(),
            "callback_url host 127.0.0.1 is a loopback address (127.0.0.0/8)"
        );
        let api = ApiError::from(refused("ftp://example.com/", STRICT));
        assert_eq!(
            (api.code.as_str(), api.message.as_str()),
            ("bad_request", "callback_url must use https (got ftp://)")
        );
    }

    #[test]
    fn serialises_as_the_normalised_string() {
        let url = CallbackUrl::parse("https://Merchant.example.com/cb?x=1", STRICT)
            .expect("a public URL");
        assert_eq!(
            serde_json::to_string(&url).expect("a string serialises"),
            "\"https://merchant.example.com/cb?x=1\""
        );
        assert_eq!(url.to_string(), "https://merchant.example.com/cb?x=1");
    }

    #[test]
    fn first_defined_destination_wins() {
        let parse = |s| CallbackUrl::parse(s, STRICT).expect("a public URL");
        let (payment, project, merchant) = (
            parse("https://payment.example.com/"),
            parse("https://project.example.com/"),
            parse("https://merchant.example.com/"),
        );
        let cases = [
            ((true, true, true), Some(&payment)),
            ((false, true, true), Some(&project)),
            ((true, false, true), Some(&payment)),
            ((false, false, true), Some(&merchant)),
            ((false, true, false), Some(&project)),
            ((false, false, false), None),
        ];
        for ((a, b, c), expected) in cases {
            let got = resolve_destination(
                a.then_some(&payment),
                b.then_some(&project),
                c.then_some(&merchant),
            );
            assert_eq!(got, expected, "{a} {b} {c}");
        }
    }
}

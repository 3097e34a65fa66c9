//! The callback HTTP client and its address-checking DNS resolver.
//!
//! The SSRF filter lives inside the resolver the HTTP connector uses: every address a name
//! resolves to is judged by [`check_ip`] (after [`IpAddr::to_canonical`]), and if any one of
//! them is refused the whole name is refused, so the address connected to is always an address
//! that was checked (spec "Destination URL": "if any address is private, loopback, link-local or
//! in 100.64.0.0/10, no connection is made"). The connector skips the resolver for IP-literal
//! hosts; the dispatcher checks those itself before sending.
//!
//! The client never follows redirects, never uses a proxy (a proxy would connect to an address
//! nobody checked), accepts only `https://` unless the development setting allows local
//! callbacks, and trusts the bundled public web roots plus any extra roots configured.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use payments_core::callback::{check_ip, AddressPolicy, ForbiddenAddress};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use rustls::pki_types::CertificateDer;

/// A boxed lookup future.
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// Turns a host name into addresses. The production lookup is [`SystemLookup`]; tests inject
/// [`StaticLookup`] to make a name resolve to any address they like.
pub trait HostLookup: Send + Sync + fmt::Debug {
    /// Every address `host` resolves to.
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The operating system's resolver, through [`tokio::net::lookup_host`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl HostLookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A fixed table of names and their addresses; any other name does not resolve.
#[derive(Debug, Clone, Default)]
pub struct StaticLookup {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticLookup {
    /// An empty table.
    pub fn new() -> StaticLookup {
        StaticLookup::default()
    }

    /// Makes `name` (compared case-insensitively) resolve to `addrs`.
    #[must_use]
    pub fn with(mut self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) -> StaticLookup {
        self.names
            .insert(name.to_ascii_lowercase(), addrs.into_iter().collect());
        self
    }
}

impl HostLookup for StaticLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let found = self.names.get(&host.to_ascii_lowercase()).cloned();
        let host = host.to_owned();
        Box::pin(async move {
            found.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host} does not resolve"))
            })
        })
    }
}

/// Why the resolver refused a name: one of its addresses is in a refused range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{forbidden}, resolved from {host}")]
pub struct ForbiddenDestination {
    /// The name that was resolved.
    pub host: String,
    /// The first refused address found.
    pub forbidden: ForbiddenAddress,
}

/// A [`reqwest::dns::Resolve`] that looks names up with a [`HostLookup`] and refuses every name
/// with an address that [`check_ip`] refuses under its policy.
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    lookup: Arc<dyn HostLookup>,
    policy: AddressPolicy,
}

impl CheckedResolver {
    /// A resolver over `lookup` applying `policy`.
    pub fn new(lookup: Arc<dyn HostLookup>, policy: AddressPolicy) -> CheckedResolver {
        CheckedResolver { lookup, policy }
    }

    /// The addresses of `host` to connect to, canonical (an IPv4-mapped address becomes its
    /// IPv4 address), or the refusal of the whole name.
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let found = self
            .lookup
            .lookup(host)
            .await
            .map_err(ResolveError::Lookup)?;
        if found.is_empty() {
            return Err(ResolveError::NoAddress(host.to_owned()));
        }
        let mut checked = Vec::with_capacity(found.len());
        for ip in found {
            let ip = ip.to_canonical();
            check_ip(ip, self.policy).map_err(|forbidden| {
                ResolveError::Forbidden(ForbiddenDestination {
                    host: host.to_owned(),
                    forbidden,
                })
            })?;
            checked.push(ip);
        }
        Ok(checked)
    }
}

/// Why [`CheckedResolver::resolve_checked`] gave no address.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The lookup failed.
    #[error("lookup: {0}")]
    Lookup(io::Error),
    /// The lookup succeeded with an empty list.
    #[error("{0} resolves to no address")]
    NoAddress(String),
    /// An address is in a refused range.
    #[error(transparent)]
    Forbidden(ForbiddenDestination),
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        Box::pin(async move {
            let host = name.as_str();
            match resolver.resolve_checked(host).await {
                // Port 0 is replaced by the URL's port (or the scheme's default) by the connector.
                Ok(ips) => {
                    let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
                    Ok(addrs)
                }
                // The error travels as itself, so the dispatcher can find a refusal in the
                // error chain of the request.
                Err(e) => Err(Box::new(e) as _),
            }
        })
    }
}

/// What the callback client is built from.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Which destinations are allowed; `allow_local` also allows `http://`.
    pub policy: AddressPolicy,
    /// How names are looked up before the check.
    pub lookup: Arc<dyn HostLookup>,
    /// CA certificates trusted besides the public web roots.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Connect (TCP and TLS) time limit; the dispatcher also bounds the whole attempt.
    pub connect_timeout: Duration,
}

/// Why the callback client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("callback HTTP client: {0}")]
pub struct ClientBuildError(#[from] reqwest::Error);

/// The callback client: rustls with the public web roots and `extra_roots`, no redirects, no
/// proxy, `https://` only unless the policy allows local callbacks, and [`CheckedResolver`] as
/// its only resolver.
pub fn callback_client(settings: &ClientSettings) -> Result<reqwest::Client, ClientBuildError> {
    let resolver = CheckedResolver::new(settings.lookup.clone(), settings.policy);
    let builder = rustls_client_builder(&settings.extra_roots, true, settings.connect_timeout)?
        .https_only(!settings.policy.allow_local)
        .dns_resolver(Arc::new(resolver))
        .user_agent(concat!("payments-callbacks/", env!("CARGO_PKG_VERSION")));
    Ok(builder.build()?)
}

/// What every outbound client of the server starts from: rustls, the bundled public web roots
/// (unless `public_roots` is off) plus `extra_roots`, no redirects, no proxy, and a connect
/// (TCP and TLS) time limit. The callback client adds its address-checking resolver; the
/// upstream client (`payments_server::upstream`) its pool and request timeouts.
pub fn rustls_client_builder(
    extra_roots: &[CertificateDer<'static>],
    public_roots: bool,
    connect_timeout: Duration,
) -> Result<reqwest::ClientBuilder, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(public_roots)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(connect_timeout);
    for root in extra_roots {
        builder = builder.add_root_certificate(reqwest::Certificate::from_der(root.as_ref())?);
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(lookup: StaticLookup, policy: AddressPolicy) -> CheckedResolver {
        CheckedResolver::new(Arc::new(lookup), policy)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test addresses are valid")
    }

    #[tokio::test]
    async fn one_forbidden_address_refuses_the_whole_name() {
        let lookup = StaticLookup::new().with("mixed.test", [ip("8.8.8.8"), ip("10.1.2.3")]);
        let r = resolver(lookup, AddressPolicy::STRICT);
        match r.resolve_checked("mixed.test").await {
            Err(ResolveError::Forbidden(f)) => {
                assert_eq!(f.forbidden.address(), ip("10.1.2.3"));
                assert_eq!(
                    f.to_string(),
                    "10.1.2.3 is a private address (10.0.0.0/8), resolved from mixed.test"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn mapped_addresses_are_checked_and_connected_in_canonical_form() {
        let lookup = StaticLookup::new()
            .with("mapped.test", [ip("::ffff:127.0.0.1")])
            .with("public.test", [ip("::ffff:8.8.8.8"), ip("2606:4700::1111")]);
        let strict = resolver(lookup.clone(), AddressPolicy::STRICT);
        assert!(matches!(
            strict.resolve_checked("mapped.test").await,
            Err(ResolveError::Forbidden(_))
        ));
        assert_eq!(
            strict.resolve_checked("PUBLIC.test").await.ok(),
            Some(vec![ip("8.8.8.8"), ip("2606:4700::1111")])
        );
        let local = resolver(lookup, AddressPolicy::LOCAL_DEVELOPMENT);
        assert_eq!(
            local.resolve_checked("mapped.test").await.ok(),
            Some(vec![ip("127.0.0.1")])
        );
    }

    #[tokio::test]
    async fn unknown_and_empty_names_give_no_address() {
        let lookup = StaticLookup::new().with("empty.test", []);
        let r = resolver(lookup, AddressPolicy::STRICT);
        assert!(matches!(
            r.resolve_checked("empty.test").await,
            Err(ResolveError::NoAddress(_))
        ));
        assert!(matches!(
            r.resolve_checked("unknown.test").await,
            Err(ResolveError::Lookup(_))
        ));
    }
}
